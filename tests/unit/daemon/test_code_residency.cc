// Locking the process's code in memory (daemon/code_residency.h).
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "daemon/code_residency.h"

namespace {

// The "Locked:" KiB of the mapping of /proc/self/smaps that holds `addr`.
long locked_kib_of_mapping(const void* addr) {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("Locked:", 0) == 0) return std::stol(line.substr(7));
  }
  return -1;
}

}  // namespace

TEST_CASE("lock_code_in_memory locks the executable segments of the loaded objects", "[code_residency]") {
  const void* own_code = reinterpret_cast<const void*>(&locked_kib_of_mapping);
  [[maybe_unused]] const void* libc_code = reinterpret_cast<const void*>(&::getpid);
  REQUIRE(locked_kib_of_mapping(own_code) == 0);

  mmfs::daemon::CodeLock lock = mmfs::daemon::lock_code_in_memory();
  CHECK(lock.locked_bytes + lock.unlocked_bytes >= (1u << 20));  // this binary alone has megabytes of code
  if (::geteuid() == 0) {  // CAP_IPC_LOCK: no limit
    CHECK(lock.unlocked_bytes == 0);
    CHECK(lock.first_error == 0);
#ifndef __SANITIZE_ADDRESS__  // ASan's mlock does nothing and says it succeeded
    CHECK(locked_kib_of_mapping(own_code) > 0);
    CHECK(locked_kib_of_mapping(libc_code) > 0);  // libraries too
#endif
  } else if (lock.unlocked_bytes != 0) {  // RLIMIT_MEMLOCK: what fits, and why the rest did not
    CHECK((lock.first_error == ENOMEM || lock.first_error == EPERM));
  }
  // Data is not code: the stack stays evictable.
  int on_stack = 0;
  CHECK(locked_kib_of_mapping(&on_stack) == 0);

  REQUIRE(::munlockall() == 0);  // the other tests run unlocked
  CHECK(locked_kib_of_mapping(own_code) == 0);
}

#include "daemon/code_residency.h"

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string_view>

namespace mmfs::daemon {
namespace {

int lock_segments(dl_phdr_info* info, std::size_t, void* data) {
  auto* lock = static_cast<CodeLock*>(data);
  // The vDSO is the kernel's own mapping, not a file page.
  if (info->dlpi_name != nullptr && std::string_view(info->dlpi_name).starts_with("linux-vdso")) return 0;
  const auto page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0) continue;
    std::uintptr_t begin = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
    std::uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz + page - 1) & ~(page - 1);
    if (::mlock(reinterpret_cast<void*>(begin), end - begin) == 0) {
      lock->locked_bytes += end - begin;
    } else {
      lock->unlocked_bytes += end - begin;
      if (lock->first_error == 0) lock->first_error = errno;
    }
  }
  return 0;
}

}  // namespace

CodeLock lock_code_in_memory() {
  CodeLock lock;
  ::dl_iterate_phdr(&lock_segments, &lock);
  return lock;
}

}  // namespace mmfs::daemon

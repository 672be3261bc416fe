// Returning free heap memory beyond a reserve (daemon/heap_trim.h).
#include <catch2/catch.hpp>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "daemon/heap_trim.h"

namespace {

std::size_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return std::size_t(resident) * std::size_t(sysconf(_SC_PAGESIZE));
}

// In a child with the daemon's malloc policy (main.cc): frees 320 MiB of
// touched buffers behind a live block, so they stay in the heap. Exit
// status: 0 when a reserve above the free memory left it alone and one
// below returned it; otherwise which check failed.
int child() {
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_ARENA_MAX, 1);
  constexpr std::size_t kBlock = 8u << 20, kBlocks = 40;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(std::malloc(kBlock));
    if (blocks.back() == nullptr) return 10;
    std::memset(blocks.back(), 1, kBlock);
  }
  void* guard = std::malloc(4096);  // keeps the freed blocks off the top of the heap
  for (void* b : blocks) std::free(b);
  const std::size_t before = resident_bytes();
  if (mmfs::daemon::trim_free_heap(1u << 30)) return 11;  // 320 MiB free, under a 1 GiB reserve
  if (resident_bytes() + (64u << 20) < before) return 12;
  if (!mmfs::daemon::trim_free_heap(256u << 20)) return 13;
  if (resident_bytes() + (256u << 20) > before) return 14;  // most of the 320 MiB went back
  std::free(guard);
  return 0;
}

}  // namespace

TEST_CASE("trim_free_heap returns free heap memory beyond the reserve, and only then", "[heap]") {
#if defined(__SANITIZE_ADDRESS__)
  // ASan replaces malloc: glibc's arena, its statistics and malloc_trim are not in play.
  WARN("skipped under AddressSanitizer (its allocator is not glibc's)");
  return;
#endif
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(child());
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

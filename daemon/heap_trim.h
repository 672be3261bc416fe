// Giving back heap memory that stayed free.
//
// The daemon keeps freed memory in its one malloc arena (daemon/main.cc), so
// chunk buffers of tens of MiB are reused without the kernel zeroing fresh
// pages. But buffers of every size from bytes to 32 MiB come and go (views of
// any shape), and the arena fragments: in the concurrency soak
// (tests/integration/test_soak.py) the memory in use stayed at 200-240 MB
// while the arena grew from 470 to 660 MB in five minutes, and the resident
// size to 900 MB in ten, all of it touched once and kept. So every few
// seconds the free memory beyond a reserve — room for the chunks a streaming
// reader cycles through — is returned (malloc_trim releases the whole pages
// inside free chunks, not only the top of the heap).
#pragma once

#include <cstddef>

namespace mmfs::daemon {

// Returns the arena's free memory to the kernel when more than `reserve`
// bytes of it are free; true when it trimmed.
bool trim_free_heap(std::size_t reserve);

}  // namespace mmfs::daemon

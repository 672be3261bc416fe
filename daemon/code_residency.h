// Keeping the daemon's code in memory.
//
// Every request a mount serves runs the daemon's code, and that code is file
// pages like any other: memory pressure or `drop_caches` evicts the pages a
// request has not touched lately, and the next request waits for them to be
// read back from the disk holding the binary. After a drop_caches, the first
// view of an array took 1 ms more than with its code resident (1-4 major
// faults while the array was opened, a few more in the read), as much as the
// device time of a small view. A filesystem's latency should be its device's,
// so the daemon locks the executable segments of itself and of every library
// it has loaded (about 11 MiB, shared with every other process mapping the
// same libraries) at start; `-o nolock_code` leaves them evictable.
//
// Locking is best effort: without CAP_IPC_LOCK the RLIMIT_MEMLOCK (8 MiB by
// default) bounds it, and the segments are locked in load order (the daemon
// first, then the libraries it needs), so what fits is what runs most.
#pragma once

#include <cstddef>

namespace mmfs::daemon {

struct CodeLock {
  std::size_t locked_bytes = 0;
  std::size_t unlocked_bytes = 0;  // segments mlock refused
  int first_error = 0;             // its errno (ENOMEM/EPERM: the limit)
};

// Locks the executable segments of the process's loaded objects. Call after
// fork (locks are not inherited) and after the libraries are loaded.
CodeLock lock_code_in_memory();

}  // namespace mmfs::daemon

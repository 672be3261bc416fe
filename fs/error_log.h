// The explanations behind errnos (SPEC §1): every failed call records one line
// — path, what was wrong, what is accepted — and `/.mmfs/errors` shows the
// most recent ones. Bounded, so a client looping on a bad call cannot grow
// the daemon's memory.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

namespace mmfs::fs {

class ErrorLog {
 public:
  explicit ErrorLog(std::size_t capacity = 256) : capacity_(capacity) {}

  // Records "ERRNAME PATH: MESSAGE" and returns `error`, so call sites read
  // `return errors.record(EINVAL, path, why);`.
  int record(int error, std::string_view path, std::string_view message);
  // Every recorded line, oldest first, each ending in '\n'.
  std::string text() const;
  std::size_t size() const;

 private:
  std::size_t capacity_;
  mutable std::mutex mu_;
  std::deque<std::string> lines_;
};

// "EINVAL", "ERANGE", ... (the symbolic name, or the number when unknown).
std::string errno_name(int error);

}  // namespace mmfs::fs

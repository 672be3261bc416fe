// The explanations behind errnos (docs/reference.md §1): every failed call records one line
// — path, what was wrong, what is accepted — and `/.mmfs/errors` shows the
// most recent ones. Bounded, so a client looping on a bad call cannot grow
// the daemon's memory.
//
// Each line remembers on whose behalf it was written: the user whose request
// failed, or nobody (the daemon's own work: the flusher, the scrub, the
// mount). A reader other than root sees only the lines of its own requests,
// so no user learns a path through this log that only another user reached
// (docs/daemon.md, "Permissions").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace mmfs::fs {

class ErrorLog {
 public:
  // The user a line belongs to; nullopt for the daemon's own work (root sees it).
  using Owner = std::optional<std::uint32_t>;

  explicit ErrorLog(std::size_t capacity = 256) : capacity_(capacity) {}

  // Records "ERRNAME PATH: MESSAGE" and returns `error`, so call sites read
  // `return errors.record(EINVAL, path, why);`.
  int record(int error, std::string_view path, std::string_view message, Owner owner = std::nullopt);
  // Records a line as it is (newlines folded into spaces).
  void append(std::string line, Owner owner = std::nullopt);
  // Every recorded line, oldest first, each ending in '\n'.
  std::string text() const;
  // The lines `viewer` may read: all of them for root (uid 0), else those
  // written on `viewer`'s behalf.
  std::string text_for(std::uint32_t viewer) const;
  std::size_t size() const;

 private:
  struct Line {
    std::string text;
    Owner owner;
  };
  std::size_t capacity_;
  mutable std::mutex mu_;
  std::deque<Line> lines_;
};

// "EINVAL", "ERANGE", ... (the symbolic name, or the number when unknown).
std::string errno_name(int error);

}  // namespace mmfs::fs

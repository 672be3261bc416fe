// Whole-length pread/pwrite on the mount, and the file descriptor that goes
// with them.
//
// One call moves a whole run (up to a box, tens of MiB): the kernel cuts it
// into FUSE requests of the daemon's max_write, which is far cheaper than as
// many system calls. Short transfers (a signal, a FUSE request cut short) are
// continued; an error becomes a ToolError naming the path, the operation and,
// when mmfs explained it in /.mmfs/errors, the daemon's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace mmfs::h5 {

// Owns a file descriptor; closes it (ignoring errors) unless released.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset();
  // Closes and throws ToolError when close reports an error (the last
  // chance to hear about a failed write-back).
  void close(const std::string& path);

 private:
  int fd_ = -1;
};

// A progress callback gets the bytes moved so far by this call, after each
// piece of at most kProgressPiece bytes (so a bar moves during a long run).
using PieceDone = std::function<void(std::uint64_t bytes)>;
inline constexpr std::size_t kProgressPiece = 16 << 20;

void write_fully(int fd, const std::string& path, std::span<const std::byte> data, std::uint64_t offset,
                 const PieceDone& done = {});
// Reads exactly data.size() bytes; an early end of file is an error.
void read_fully(int fd, const std::string& path, std::span<std::byte> data, std::uint64_t offset,
                const PieceDone& done = {});

// "path: Operation: strerror[; mmfs: daemon explanation]"
std::string io_error_text(const std::string& path, const char* operation, int error);

}  // namespace mmfs::h5

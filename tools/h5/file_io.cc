#include "tools/h5/file_io.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tools/h5/tool_error.h"
#include "tools/h5/xattr_io.h"

namespace mmfs::h5 {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Fd::close(const std::string& path) {
  if (fd_ < 0) return;
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int e = errno;
    throw ToolError(e, io_error_text(path, "close", e));
  }
}

std::string io_error_text(const std::string& path, const char* operation, int error) {
  std::string text = fmt::format("{}: {}: {}", path, operation, std::strerror(error));
  if (std::string why = daemon_explanation(path, error); !why.empty()) text += "; mmfs: " + why;
  return text;
}

void write_fully(int fd, const std::string& path, std::span<const std::byte> data, std::uint64_t offset,
                 const PieceDone& done) {
  std::uint64_t moved = 0;
  while (!data.empty()) {
    const std::size_t want = done ? std::min(data.size(), kProgressPiece) : data.size();
    ssize_t n = ::pwrite(fd, data.data(), want, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      throw ToolError(e, io_error_text(path, "write", e));
    }
    if (n == 0) throw ToolError(EIO, fmt::format("{}: write at offset {} wrote nothing", path, offset));
    data = data.subspan(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
    moved += static_cast<std::uint64_t>(n);
    if (done) done(moved);
  }
}

void read_fully(int fd, const std::string& path, std::span<std::byte> data, std::uint64_t offset,
                const PieceDone& done) {
  std::uint64_t moved = 0;
  while (!data.empty()) {
    const std::size_t want = done ? std::min(data.size(), kProgressPiece) : data.size();
    ssize_t n = ::pread(fd, data.data(), want, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      throw ToolError(e, io_error_text(path, "read", e));
    }
    if (n == 0)
      throw ToolError(EIO, fmt::format("{}: the file ends at offset {}, before the {} bytes its shape needs", path,
                                       offset, offset + data.size()));
    data = data.subspan(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
    moved += static_cast<std::uint64_t>(n);
    if (done) done(moved);
  }
}

}  // namespace mmfs::h5

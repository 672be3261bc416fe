#include "fs/error_log.h"

#include <fmt/format.h>

#include <cerrno>

namespace mmfs::fs {

std::string errno_name(int error) {
  switch (error) {
    case EINVAL: return "EINVAL";
    case ERANGE: return "ERANGE";
    case ENOENT: return "ENOENT";
    case EROFS: return "EROFS";
    case ENOTSUP: return "ENOTSUP";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case EBUSY: return "EBUSY";
    case EIO: return "EIO";
    case EEXIST: return "EEXIST";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENODATA: return "ENODATA";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case E2BIG: return "E2BIG";
    case ENOMEM: return "ENOMEM";
    case EUCLEAN: return "EUCLEAN";
    default: return fmt::format("errno {}", error);
  }
}

int ErrorLog::record(int error, std::string_view path, std::string_view message) {
  std::string line = fmt::format("{} {}: {}", errno_name(error), path, message);
  // One line per error, whatever the message holds.
  for (char& c : line)
    if (c == '\n') c = ' ';
  std::lock_guard lock(mu_);
  lines_.push_back(std::move(line));
  while (lines_.size() > capacity_) lines_.pop_front();
  return error;
}

std::string ErrorLog::text() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& l : lines_) {
    out += l;
    out += '\n';
  }
  return out;
}

std::size_t ErrorLog::size() const {
  std::lock_guard lock(mu_);
  return lines_.size();
}

}  // namespace mmfs::fs

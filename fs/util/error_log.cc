#include "fs/util/error_log.h"

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

int ErrorLog::record(int error, std::string_view path, std::string_view message, Owner owner) {
  append(fmt::format("{} {}: {}", errno_name(error), path, message), owner);
  return error;
}

void ErrorLog::append(std::string line, Owner owner) {
  // One line per entry, whatever the message holds.
  for (char& c : line)
    if (c == '\n') c = ' ';
  std::lock_guard lock(mu_);
  lines_.push_back(Line{std::move(line), owner});
  while (lines_.size() > capacity_) lines_.pop_front();
}

std::string ErrorLog::text() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& l : lines_) {
    out += l.text;
    out += '\n';
  }
  return out;
}

std::string ErrorLog::text_for(std::uint32_t viewer) const {
  if (viewer == 0) return text();
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& l : lines_)
    if (l.owner == viewer) {
      out += l.text;
      out += '\n';
    }
  return out;
}

std::size_t ErrorLog::size() const {
  std::lock_guard lock(mu_);
  return lines_.size();
}

}  // namespace mmfs::fs

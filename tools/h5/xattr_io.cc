#include "tools/h5/xattr_io.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fs/util/error_log.h"

namespace mmfs::h5 {

namespace {

XattrResult failure(const char* call, const std::string& name) {
  int e = errno;
  return XattrResult{e, fmt::format("{} {}: {}", call, name, std::strerror(e))};
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return {};
  return buf;
}

std::string parent_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

XattrResult set_xattr(int fd, const std::string& name, const std::string& value) {
  if (::fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) != 0) return failure("setxattr", name);
  return {};
}

XattrResult set_xattr(const std::string& path, const std::string& name, const std::string& value) {
  if (::setxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0) != 0) return failure("setxattr", name);
  return {};
}

XattrResult get_xattr(const std::string& path, const std::string& name, std::string* value) {
  // Size, then value; the value may grow in between (another writer): retry.
  for (int attempt = 0; attempt < 8; ++attempt) {
    ssize_t size = ::getxattr(path.c_str(), name.c_str(), nullptr, 0);
    if (size < 0) return failure("getxattr", name);
    value->assign(static_cast<std::size_t>(size), '\0');
    ssize_t got = ::getxattr(path.c_str(), name.c_str(), value->data(), value->size());
    if (got >= 0) {
      value->resize(static_cast<std::size_t>(got));
      return {};
    }
    if (errno != ERANGE) return failure("getxattr", name);
  }
  errno = ERANGE;
  return failure("getxattr", name);
}

XattrResult list_xattrs(const std::string& path, std::vector<std::string>* names) {
  std::string buf;
  for (int attempt = 0;; ++attempt) {
    ssize_t size = ::listxattr(path.c_str(), nullptr, 0);
    if (size < 0) return failure("listxattr", path);
    buf.assign(static_cast<std::size_t>(size), '\0');
    ssize_t got = ::listxattr(path.c_str(), buf.data(), buf.size());
    if (got >= 0) {
      buf.resize(static_cast<std::size_t>(got));
      break;
    }
    if (errno != ERANGE || attempt == 8) return failure("listxattr", path);
  }
  names->clear();
  // NUL-separated names.
  for (std::size_t at = 0; at < buf.size();) {
    std::size_t end = buf.find('\0', at);
    if (end == std::string::npos) end = buf.size();
    if (end > at) names->push_back(buf.substr(at, end - at));
    at = end + 1;
  }
  return {};
}

std::string mount_root(const std::string& path) {
  std::string p = real_path(path);
  if (p.empty()) p = real_path(parent_of(path));  // not created yet, or already removed
  if (p.empty()) return {};
  struct stat st{};
  if (::stat(p.c_str(), &st) != 0) return {};
  const dev_t dev = st.st_dev;
  while (p != "/") {
    std::string up = parent_of(p);
    if (::stat(up.c_str(), &st) != 0 || st.st_dev != dev) break;
    p = up;
  }
  return p;
}

std::string daemon_explanation(const std::string& path, int error) {
  const std::string root = mount_root(path);
  if (root.empty()) return {};
  std::ifstream in(root == "/" ? "/.mmfs/errors" : root + "/.mmfs/errors");
  if (!in) return {};
  // The path as the daemon names it: relative to the mount, with a leading '/'.
  std::string full = real_path(path);
  if (full.empty()) full = real_path(parent_of(path)) + "/" + path.substr(path.find_last_of('/') + 1);
  std::string rel = root == "/" ? full : full.substr(std::min(full.size(), root.size()));
  if (rel.empty()) rel = "/";

  const std::string prefix = fs::errno_name(error) + " ";
  std::string any, named, line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::string rest = line.substr(prefix.size());
    any = rest;
    if (rest.rfind(rel + ":", 0) == 0 || rest.rfind(rel + "@", 0) == 0) named = rest;
  }
  return named.empty() ? any : named;
}

}  // namespace mmfs::h5

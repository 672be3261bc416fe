#include "daemon/mount_readahead.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace mmfs::daemon {

namespace {

// Undoes mountinfo's octal escapes (\040 for a space, ...).
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const char a = s[i + 1], b = s[i + 2], c = s[i + 3];
      if (a >= '0' && a <= '3' && b >= '0' && b <= '7' && c >= '0' && c <= '7') {
        out.push_back(char((a - '0') * 64 + (b - '0') * 8 + (c - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> f;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) f.push_back(line.substr(i, j - i));
    i = j;
  }
  return f;
}

}  // namespace

std::string mount_device(std::string_view mountinfo, std::string_view mountpoint) {
  // Fields: mount ID, parent ID, MAJOR:MINOR, root, mount point, ...
  std::string found;
  std::size_t start = 0;
  while (start < mountinfo.size()) {
    std::size_t end = mountinfo.find('\n', start);
    if (end == std::string_view::npos) end = mountinfo.size();
    auto f = fields(mountinfo.substr(start, end - start));
    if (f.size() >= 5 && unescape(f[4]) == mountpoint) found = std::string(f[2]);
    start = end + 1;
  }
  return found;
}

int set_mount_read_ahead(const std::string& mountpoint, unsigned kb, std::string* why) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) {
    *why = "cannot read /proc/self/mountinfo";
    return errno ? errno : EIO;
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string dev = mount_device(text.str(), mountpoint);
  if (dev.empty()) {
    *why = fmt::format("{} is not in /proc/self/mountinfo", mountpoint);
    return ENOENT;
  }
  const std::string knob = fmt::format("/sys/class/bdi/{}/read_ahead_kb", dev);
  std::ofstream out(knob);
  if (out) out << kb << '\n';
  out.flush();
  if (!out) {
    int e = errno ? errno : EIO;
    *why = fmt::format("writing {} failed: {}", knob, std::strerror(e));
    return e;
  }
  return 0;
}

}  // namespace mmfs::daemon

#include "probes/throwaway_mount.h"

#define FUSE_USE_VERSION 35
#include <fcntl.h>
#include <fmt/format.h>
#include <fuse_lowlevel.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "daemon/read_path_settings.h"

namespace mmfs::probes {

ThrowawayMount::~ThrowawayMount() {
  stop();
  if (se_) fuse_session_destroy(se_);
  if (!dir_.empty()) ::rmdir(dir_.c_str());
}

int ThrowawayMount::mount(const std::string& name, const std::string& what, const fuse_lowlevel_ops& ops,
                          void* userdata, std::string* message) {
  std::string tmpl = "/tmp/" + name + ".XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    const int e = errno;
    *message = fmt::format("cannot make a directory for {}'s mount: {}", what, std::strerror(e));
    return e;
  }
  dir_ = tmpl;
  const std::string options = fmt::format("fsname={},subtype=mmfs,max_read={}", name, daemon::kMaxRead);
  const char* argv[] = {name.c_str(), "-o", options.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  se_ = fuse_session_new(&args, &ops, sizeof ops, userdata);
  fuse_opt_free_args(&args);  // parsing copied the arguments
  if (!se_) {
    *message = fmt::format("{} could not start a FUSE session", what);
    return EIO;
  }
  if (fuse_session_mount(se_, dir_.c_str()) != 0) {
    *message = fmt::format("{} could not mount FUSE at {} (is /dev/fuse there, and are we root?)", what, dir_);
    return EPERM;
  }
  mounted_ = true;
  return 0;
}

void ThrowawayMount::serve() {
  fuse_session* session = se_;
  loop_ = std::thread([session] {
    fuse_loop_config config;
    std::memset(&config, 0, sizeof config);
    config.clone_fd = 0;
    config.max_idle_threads = 16;
    fuse_session_loop_mt(session, &config);
  });
}

void ThrowawayMount::stop() {
  if (!se_) return;
  fuse_session_exit(se_);
  if (mounted_) fuse_session_unmount(se_);  // the threads' reads fail: they return
  mounted_ = false;
  if (loop_.joinable()) loop_.join();
}

double timed_fresh_read(const std::string& path, std::uint64_t expect) {
  constexpr std::size_t kReadCall = 8 << 20;
  const auto t = std::chrono::steady_clock::now();
  const std::size_t length = std::size_t(std::max<std::uint64_t>(expect, 1));
  void* map = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return -1;
  std::byte* buffer = static_cast<std::byte*>(map);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::uint64_t got = 0;
  int error = fd < 0 ? errno : 0;
  while (error == 0) {
    const std::size_t call = std::min<std::size_t>(kReadCall, length - std::size_t(got));  // got <= length
    const ssize_t n = call ? ::read(fd, buffer + got, call) : 0;
    if (n < 0) error = errno;
    if (n <= 0) break;
    got += std::uint64_t(n);
  }
  if (fd >= 0) ::close(fd);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  ::munmap(map, length);
  if (error || got != expect) {
    errno = error ? error : EIO;
    return -1;
  }
  return ms;
}

}  // namespace mmfs::probes

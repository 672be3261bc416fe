#include "probes/read_path_client.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

extern char** environ;

namespace mmfs::probes {
namespace {

// A file descriptor closed on destruction.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += std::size_t(n);
  }
  return true;
}

// Keeps `fd` off the standard descriptors (the caller may run with one of
// them closed), where handing it to the child as one would be a no-op.
int above_stdio(int fd) {
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  ::close(fd);
  return moved;
}

bool executable(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

nlohmann::json samples(const std::vector<double>& xs) {
  nlohmann::json a = nlohmann::json::array();
  for (double v : xs) a.push_back(v);
  return a;
}

}  // namespace

nlohmann::json read_path_result_to_json(const ReadPathProbeResult& r) {
  return {{"cold_view_ms", r.cold_view_ms},
          {"verify_ms_per_mib", r.verify_ms_per_mib},
          {"gather_ms_per_mib", r.gather_ms_per_mib},
          {"view_ms", samples(r.view_ms)},
          {"open_ms", samples(r.open_ms)},
          {"point_ms", samples(r.point_ms)},
          {"cube_ms", samples(r.cube_ms)},
          {"beam_ms", samples(r.beam_ms)},
          {"point_bytes", {r.point_read, r.point_useful}},
          {"cube_bytes", {r.cube_read, r.cube_useful}},
          {"beam_bytes", {r.beam_read, r.beam_useful}},
          {"seconds", r.seconds}};
}

ReadPathProbeResult read_path_result_from_json(const nlohmann::json& j) {
  ReadPathProbeResult r;
  r.cold_view_ms = j.at("cold_view_ms").get<double>();
  r.verify_ms_per_mib = j.at("verify_ms_per_mib").get<double>();
  r.gather_ms_per_mib = j.at("gather_ms_per_mib").get<double>();
  r.view_ms = j.at("view_ms").get<std::vector<double>>();
  r.open_ms = j.at("open_ms").get<std::vector<double>>();
  r.point_ms = j.at("point_ms").get<std::vector<double>>();
  r.cube_ms = j.at("cube_ms").get<std::vector<double>>();
  r.beam_ms = j.at("beam_ms").get<std::vector<double>>();
  r.point_read = j.at("point_bytes").at(0).get<std::uint64_t>();
  r.point_useful = j.at("point_bytes").at(1).get<std::uint64_t>();
  r.cube_read = j.at("cube_bytes").at(0).get<std::uint64_t>();
  r.cube_useful = j.at("cube_bytes").at(1).get<std::uint64_t>();
  r.beam_read = j.at("beam_bytes").at(0).get<std::uint64_t>();
  r.beam_useful = j.at("beam_bytes").at(1).get<std::uint64_t>();
  r.seconds = j.at("seconds").get<double>();
  return r;
}

std::vector<std::string> read_path_probe_candidates() {
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && self.has_parent_path()) {
    const std::filesystem::path dir = self.parent_path();
    out.push_back((dir / ".." / "probes" / kReadPathProbeProgram).lexically_normal().string());
    out.push_back((dir / kReadPathProbeProgram).string());
  }
  const char* path = std::getenv("PATH");
  for (std::string_view rest = path ? path : ""; !rest.empty();) {
    const std::size_t colon = rest.find(':');
    const std::string_view entry = rest.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (!entry.empty()) out.push_back((std::filesystem::path(entry) / kReadPathProbeProgram).string());
  }
  return out;
}

int run_read_path_probe(const nlohmann::json& geometry, const ReadPathProbeOptions& options,
                        ReadPathProbeResult* out, std::string* message) {
  *out = ReadPathProbeResult{};
  const std::vector<std::string> candidates = read_path_probe_candidates();
  std::string program;
  for (const std::string& c : candidates)
    if (executable(c)) {
      program = c;
      break;
    }
  if (program.empty()) {
    std::string looked;
    for (const std::string& c : candidates) looked += (looked.empty() ? "" : ", ") + c;
    *message = fmt::format("cannot find {}, which runs the daemon's read path (looked for {})",
                           kReadPathProbeProgram, looked.empty() ? "nothing: no PATH" : looked);
    return ENOENT;
  }
  auto failed = [&](const char* what) {
    const int e = errno;
    *message = fmt::format("cannot run {}: {}: {}", program, what, std::strerror(e));
    return e;
  };

  // Its standard input: the geometry, in memory.
  Fd input(above_stdio(::memfd_create("mmfs-read-path-probe-geometry", MFD_CLOEXEC)));
  if (input.fd < 0) return failed("memfd_create");
  if (!write_all(input.fd, geometry.dump()) || ::lseek(input.fd, 0, SEEK_SET) != 0)
    return failed("writing the geometry");
  // Its standard output: the result.
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return failed("pipe2");
  Fd from_child(pipe_fds[0]);
  Fd to_parent(above_stdio(pipe_fds[1]));
  if (to_parent.fd < 0) return failed("fcntl");

  const std::string samples = std::to_string(options.samples);
  std::vector<char*> argv = {const_cast<char*>(program.c_str()), const_cast<char*>("--samples"),
                             const_cast<char*>(samples.c_str())};
  if (options.verbose) argv.push_back(const_cast<char*>("--verbose"));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input.fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, to_parent.fd, STDOUT_FILENO);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  to_parent.reset();  // the child's end: EOF once it exits
  input.reset();
  if (spawned != 0) {
    errno = spawned;
    return failed("posix_spawn");
  }

  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(from_child.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, std::size_t(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  nlohmann::json reply;
  try {
    reply = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    reply = nullptr;
  }
  if (WIFEXITED(status) && reply.is_object()) {
    try {
      if (WEXITSTATUS(status) == 0 && reply.contains("read_path")) {
        *out = read_path_result_from_json(reply.at("read_path"));
        return 0;
      }
      if (WEXITSTATUS(status) != 0 && reply.contains("error")) {
        *message = reply.value("message", std::string("the read-path probe failed"));
        const int e = reply.at("error").get<int>();
        return e > 0 ? e : EIO;
      }
    } catch (const nlohmann::json::exception&) {
    }
  }
  *message = WIFSIGNALED(status)
                 ? fmt::format("{} was killed by signal {}", program, WTERMSIG(status))
                 : fmt::format("{} exited with status {} and no result", program, WEXITSTATUS(status));
  return EIO;
}

}  // namespace mmfs::probes

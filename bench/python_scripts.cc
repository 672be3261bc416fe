#include "bench/python_scripts.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace mmfs::bench {
namespace {

namespace fsys = std::filesystem;

std::vector<char*> argv_of(const std::string& script, const std::vector<std::string>& args,
                           std::vector<std::string>& storage) {
  storage = {"python3", script};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

std::string find_script(const std::string& source_path, std::vector<std::string>* looked) {
  std::vector<fsys::path> candidates;
#ifdef MMFS_SOURCE_DIR
  candidates.push_back(fsys::path(MMFS_SOURCE_DIR) / source_path);
#endif
  std::error_code ec;
  fsys::path exe = fsys::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path() / ".." / "share" / "mmfs" / fsys::path(source_path).filename());
  for (const fsys::path& p : candidates) {
    if (looked) looked->push_back(p.lexically_normal().string());
    if (fsys::is_regular_file(p, ec)) return p.lexically_normal().string();
  }
  return "";
}

std::string exec_python(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  std::vector<char*> argv = argv_of(script, args, storage);
  execvp("python3", argv.data());
  return std::strerror(errno);
}

int run_python(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  std::vector<char*> argv = argv_of(script, args, storage);
  // The script's stdout goes to our stderr: our stdout carries the report.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, "python3", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace mmfs::bench

#include "tools/h5/interrupt.h"

#include <atomic>
#include <cerrno>
#include <csignal>

#include "tools/h5/tool_error.h"

namespace mmfs::h5 {

namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "set from a signal handler");

extern "C" void on_signal(int sig) {
  g_signal.store(sig);
  std::signal(sig, SIG_DFL);
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // let a pwrite in flight finish its run
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void check_interrupted() {
  if (int sig = g_signal.load()) throw ToolError(EINTR, sig == SIGINT ? "interrupted" : "terminated");
}

}  // namespace mmfs::h5

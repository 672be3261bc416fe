#include "tools/h5/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace mmfs::h5 {

namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
constexpr std::size_t kBarWidth = 20;

std::size_t terminal_width(std::FILE* out) {
  winsize ws{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  return 80;
}

std::string eta_text(double seconds) {
  auto s = static_cast<std::uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

std::string progress_line(const std::string& label, std::uint64_t done, std::uint64_t total, double elapsed_s,
                          std::size_t width) {
  const double fraction = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
  const auto filled = static_cast<std::size_t>(fraction * kBarWidth);
  std::string bar = std::string(filled, '#') + std::string(kBarWidth - filled, '-');
  std::string rate = "-- MB/s", eta = "ETA --";
  if (elapsed_s >= 0.2) {
    const double bps = static_cast<double>(done) / elapsed_s;
    rate = fmt::format("{:.1f} MB/s", bps / 1e6);
    if (done >= total) eta = fmt::format("in {}", eta_text(elapsed_s));
    else if (bps > 0) eta = "ETA " + eta_text(static_cast<double>(total - done) / bps);
  }
  std::string tail = fmt::format(" [{}] {:3.0f}%  {:.1f}/{:.1f} MB  {}  {}", bar, fraction * 100,
                                 static_cast<double>(done) / 1e6, static_cast<double>(total) / 1e6, rate, eta);
  std::string name = label;
  if (width > tail.size() + 4 && name.size() + tail.size() > width)
    name = "..." + name.substr(name.size() - (width - tail.size() - 3));
  std::string line = name + tail;
  if (line.size() > width) line.resize(width);
  return line;
}

bool progress_wanted(int forced, bool quiet) {
  if (quiet) return false;
  if (forced != 0) return forced > 0;
  return ::isatty(STDERR_FILENO) == 1;
}

Progress::Progress(std::FILE* out, std::string label, std::uint64_t total, bool enabled)
    : out_(out), label_(std::move(label)), total_(total), enabled_(enabled),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() {
  if (enabled_ && drawn_ && !finished_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

void Progress::update(std::uint64_t done) {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  done_ = done;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  draw(done);
}

void Progress::finish() {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  if (finished_) return;
  draw(done_);
  std::fputc('\n', out_);
  std::fflush(out_);
  finished_ = true;
}

void Progress::draw(std::uint64_t done) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // One column short of the width: a line that fills the terminal exactly
  // wraps on some terminals and '\r' then redraws the wrong line.
  std::string line = progress_line(label_, done, total_, elapsed, terminal_width(out_) - 1);
  const std::size_t width = line.size();
  if (line.size() < last_width_) line.append(last_width_ - line.size(), ' ');
  last_width_ = width;
  std::fputc('\r', out_);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace mmfs::h5

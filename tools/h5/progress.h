// The progress bar of mmfs-import/mmfs-export, on stderr:
//
//   /grp/temp [########------------]  41%  440.4/1073.7 MB  153.8 MB/s  ETA 0:04
//
// Redrawn in place with '\r' at most ten times a second (a terminal redrawn
// on every box of a fast copy costs more than the copy), padded with blanks
// over the previous line rather than with terminal escapes, so a forced
// --progress into a file or pipe stays plain text. finish() draws the final
// state and ends the line; a bar abandoned by an exception ends its line in
// the destructor, so the error message starts on a line of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace mmfs::h5 {

// One line of the bar (no '\r', no newline), at most `width` columns: the
// label is shortened from the left ("...ong/name") when needed. Rate and ETA
// show "--" before `elapsed_s` reaches 0.2 s (too little to measure).
std::string progress_line(const std::string& label, std::uint64_t done, std::uint64_t total, double elapsed_s,
                          std::size_t width);

// Should a bar be shown: --progress / --no-progress when given (`forced` 1 or
// -1), else when stderr is a terminal; never with --quiet.
bool progress_wanted(int forced, bool quiet);

class Progress {
 public:
  // Disabled: every call does nothing.
  Progress(std::FILE* out, std::string label, std::uint64_t total, bool enabled);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();

  // `done` bytes of `total` are through. Thread-safe.
  void update(std::uint64_t done);
  // Draws 100% (or the last state) and ends the line.
  void finish();

 private:
  void draw(std::uint64_t done);  // REQUIRES mu_

  std::FILE* out_;
  std::string label_;
  std::uint64_t total_;
  bool enabled_;
  bool drawn_ = false;
  bool finished_ = false;
  std::size_t last_width_ = 0;
  std::uint64_t done_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mu_;
};

}  // namespace mmfs::h5

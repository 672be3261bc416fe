// What the process writes to its standard error while a StderrCapture lives
// (file descriptor 2 redirected to an unlinked temporary file): for tests of
// code that must stay quiet on bad input, e.g. a library that prints.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mmfs::testing {

class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    char name[] = "/tmp/mmfs-stderr-XXXXXX";
    file_ = ::mkstemp(name);
    if (file_ < 0) throw std::runtime_error("mkstemp failed");
    ::unlink(name);
    saved_ = ::dup(STDERR_FILENO);
    if (saved_ < 0 || ::dup2(file_, STDERR_FILENO) < 0) throw std::runtime_error("redirecting stderr failed");
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  ~StderrCapture() {
    restore();
    ::close(file_);
  }

  // Everything written so far (stderr stays redirected until destruction).
  std::string text() const {
    std::fflush(stderr);
    std::string out;
    char buf[4096];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(file_, buf, sizeof buf, at);
      if (n <= 0) break;
      out.append(buf, std::size_t(n));
      at += n;
    }
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  int file_ = -1;
  int saved_ = -1;
};

}  // namespace mmfs::testing

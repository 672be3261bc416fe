// The explanations behind errnos (fs/util/error_log.h): lines as
// "ERRNAME PATH: MESSAGE", one line each, bounded with the oldest dropped
// first, filtered per reader, and errno names.
#include <catch2/catch.hpp>

#include <cerrno>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fs/util/error_log.h"

using mmfs::fs::errno_name;
using mmfs::fs::ErrorLog;

TEST_CASE("ErrorLog: each reader but root sees only its own lines", "[caller][error_log]") {
  mmfs::fs::ErrorLog log(3);
  log.record(EACCES, "/a", "one", 1000u);
  log.record(ENOENT, "/secret/b", "two", 0u);
  log.record(EIO, "/c", "three");  // the daemon's own
  CHECK(log.text_for(0) == "EACCES /a: one\nENOENT /secret/b: two\nEIO /c: three\n");
  CHECK(log.text_for(1000) == "EACCES /a: one\n");
  CHECK(log.text_for(1001).empty());
  log.append("line\nwith a break", 1001u);  // bounded: the oldest goes
  CHECK(log.text_for(1000).empty());
  CHECK(log.text_for(1001) == "line with a break\n");
  CHECK(log.size() == 3);
}

TEST_CASE("ErrorLog: record returns its errno and keeps the line, oldest first", "[error_log]") {
  ErrorLog log;
  CHECK(log.size() == 0);
  CHECK(log.text().empty());
  CHECK(log.record(EINVAL, "/v/A@/slice/0/9", "index 9 is outside 0..7") == EINVAL);
  CHECK(log.record(ENOSPC, "/v/B", "no room for 4 MiB") == ENOSPC);
  log.append("a line as it is");
  CHECK(log.size() == 3);
  CHECK(log.text() == "EINVAL /v/A@/slice/0/9: index 9 is outside 0..7\nENOSPC /v/B: no room for 4 MiB\n"
                      "a line as it is\n");
  // Every newline of a message is folded, so each entry stays one line.
  log.record(EIO, "/x", "first\nsecond\n");
  CHECK(log.text().substr(log.text().rfind("EIO")) == "EIO /x: first second \n");
}

TEST_CASE("ErrorLog: at most capacity lines, the oldest dropped first", "[error_log]") {
  ErrorLog log(4);
  for (int i = 0; i < 10; ++i) log.append("line " + std::to_string(i));
  CHECK(log.size() == 4);
  CHECK(log.text() == "line 6\nline 7\nline 8\nline 9\n");
  ErrorLog none(0);
  none.record(EIO, "/x", "lost");
  CHECK(none.size() == 0);
  CHECK(none.text().empty());
  // Many writers at once: still bounded, every line whole.
  ErrorLog shared(100);
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&shared, t] {
      for (int i = 0; i < 500; ++i) shared.record(EINVAL, "/t" + std::to_string(t), "message " + std::to_string(i));
    });
  for (auto& w : writers) w.join();
  CHECK(shared.size() == 100);
  const std::string text = shared.text();
  std::size_t lines = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = text.find('\n', at);
    REQUIRE(end != std::string::npos);
    CHECK(text.compare(at, 9, "EINVAL /t") == 0);
    at = end + 1;
    ++lines;
  }
  CHECK(lines == 100);
}

TEST_CASE("errno names: the symbolic name, or the number when unknown", "[error_log]") {
  const std::pair<int, const char*> names[] = {
      {EINVAL, "EINVAL"}, {ERANGE, "ERANGE"},   {ENOENT, "ENOENT"},   {EROFS, "EROFS"},
      {ENOTSUP, "ENOTSUP"}, {EFBIG, "EFBIG"},   {ENOSPC, "ENOSPC"},   {EBUSY, "EBUSY"},
      {EIO, "EIO"},       {EEXIST, "EEXIST"},   {ENOTDIR, "ENOTDIR"}, {EISDIR, "EISDIR"},
      {EACCES, "EACCES"}, {EPERM, "EPERM"},     {ENODATA, "ENODATA"}, {ENOTEMPTY, "ENOTEMPTY"},
      {ENAMETOOLONG, "ENAMETOOLONG"}, {E2BIG, "E2BIG"}, {ENOMEM, "ENOMEM"}, {EUCLEAN, "EUCLEAN"}};
  for (const auto& [error, name] : names) CHECK(errno_name(error) == name);
  CHECK(errno_name(0) == "errno 0");
  CHECK(errno_name(EAGAIN) == "errno " + std::to_string(EAGAIN));
  CHECK(errno_name(-5) == "errno -5");
  ErrorLog log;
  log.record(EXDEV, "/a", "b");
  CHECK(log.text() == "errno " + std::to_string(EXDEV) + " /a: b\n");
}

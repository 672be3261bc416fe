// The daemon's table of open files (daemon/open_files.h): an entry is made
// on demand, found until erased, and visited once per inode.
#include <catch2/catch.hpp>

#include <map>

#include "daemon/open_files.h"

using mmfs::daemon::OpenFile;
using mmfs::daemon::OpenFiles;

TEST_CASE("open files: entries are made on demand, found until erased, visited once", "[daemon]") {
  OpenFiles table;
  CHECK(table.find(7) == nullptr);
  OpenFile& seven = table.entry(7);
  CHECK(seven.opens == 0);
  CHECK(!seven.plain);
  CHECK(!seven.array);
  CHECK(!seven.orphaned);
  ++seven.opens;
  ++table.entry(7).opens;  // the same entry
  REQUIRE(table.find(7) != nullptr);
  CHECK(table.find(7)->opens == 2);
  table.entry(9).orphaned = true;
  std::map<mmfs::fs::Ino, int> seen;
  table.for_each([&](mmfs::fs::Ino ino, OpenFile& file) { seen[ino] += file.opens + (file.orphaned ? 100 : 0); });
  CHECK(seen == std::map<mmfs::fs::Ino, int>{{7, 2}, {9, 100}});
  table.erase(7);
  CHECK(table.find(7) == nullptr);
  CHECK(table.find(9) != nullptr);
  table.erase(42);  // not there: nothing happens
  CHECK(table.find(9) != nullptr);
}

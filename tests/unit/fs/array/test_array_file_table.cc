// An array file's part in moving several arrays with one commit
// (fs/array/array_file_table.cc), driven by hand as a table does it: a
// placement staged (the bytes copied in, or the cells kept in place and
// extended), put into the caller's batch, and adopted; the old extents freed
// with the commit; refusals; dirty cells flushed first.
#include <catch2/catch.hpp>

#include <cerrno>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

// Stages `next` under the array's placement lock, commits it with the
// metadata and adopts it, as CapsuleTable does for each attribute.
int move_to(Mount& m, ArrayFile& a, const ArraySchema& next, const std::vector<Extent>* extents, bool copy,
            std::vector<Extent>* dropped, std::string* msg) {
  std::unique_lock lock(a.placement_mutex());
  ArrayFile::Staged staged;
  if (int r = a.stage_placement_locked(next, extents, copy, &staged, msg)) return r;
  *dropped = staged.dropped;
  WriteBatch batch;
  a.stage_commit_locked(staged, batch);
  if (int r = m.md().apply(batch, staged.dropped)) return r;
  a.adopt_locked(std::move(staged));
  return m.md().sync();
}

std::vector<Extent> extents_of(ArrayFile& a) {
  std::shared_lock lock(a.placement_mutex());
  return a.cells_locked()->layout().extents();
}

}  // namespace

TEST_CASE("array file table: a staged copy is committed with the caller's batch and adopted", "[array_file_table]") {
  const auto g = toy_disk();
  MemoryDevice dev(kToyDeviceBytes, 512);
  dev.bytes() = formatted(*g)->bytes();
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(dev)));
  const ArraySchema s = make_schema({20, 30}, "float64", "naive");
  auto a = create_array(m, "a", s);
  std::mt19937_64 rng(12);
  const Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);  // dirty: staging flushes it first
  CHECK(a->has_dirty_cells());
  const std::vector<Extent> old = extents_of(*a);
  std::string msg;
  ArraySchema next = s;
  next.layout = "hilbert";
  std::vector<Extent> dropped;
  REQUIRE(move_to(m, *a, next, nullptr, true, &dropped, &msg) == 0);
  CHECK_FALSE(a->has_dirty_cells());
  CHECK(dropped == old);
  CHECK(a->schema().layout == "hilbert");
  CHECK(bytes_diff(read_all(*a), model) == "");
  // The commit freed the old extents; the stored array is the new one.
  const std::uint64_t free_now = m.vol->allocator().free_sectors();
  for (const Extent& e : old) CHECK_FALSE(m.vol->allocator().free(e));  // already free: a double free is refused
  CHECK(m.vol->allocator().free_sectors() == free_now);
  auto b = open_stored(m, a->ino());
  CHECK(b->schema().layout == "hilbert");
  CHECK(bytes_diff(read_all(*b), model) == "");
}

TEST_CASE("array file table: cells kept in place keep their bytes; the array grows into the extents added",
          "[array_file_table]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  ArraySchema s = make_schema({20, 30}, "float64", "naive");
  s.cell = {1, 30};  // one row a cell: growing dimension 0 adds cells at the end
  auto a = create_array(m, "a", s);
  std::mt19937_64 rng(13);
  const Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);
  std::string msg;
  REQUIRE(a->flush(true, &msg) == 0);
  ArraySchema next = s;
  next.shape = {35, 30};
  std::vector<Extent> extents = extents_of(*a);
  std::vector<Extent> added;
  // A row of 240 bytes is a cell of one sector: room for the 15 new ones.
  REQUIRE(m.vol->allocator().allocate({layouts::SpaceShape::Runs, 15}, &added) == 0);
  extents.insert(extents.end(), added.begin(), added.end());
  std::vector<Extent> dropped;
  REQUIRE(move_to(m, *a, next, &extents, false, &dropped, &msg) == 0);
  CHECK(dropped.empty());
  CHECK(a->size() == 35 * 30 * 8);
  Bytes want = model;
  want.resize(35 * 30 * 8, 0);  // the new rows read as zeros
  CHECK(bytes_diff(read_all(*a), want) == "");
  CHECK(bytes_diff(read_all(*open_stored(m, a->ino())), want) == "");
}

TEST_CASE("array file table: placements that do not extend the current one, and mloc arrays, are refused",
          "[array_file_table]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  const ArraySchema s = make_schema({20, 30}, "float64", "naive");
  std::mt19937_64 rng(14);
  auto a = create_random(m, "a", s, rng);
  std::string msg;
  const std::uint64_t free_before = m.vol->allocator().free_sectors();
  std::unique_lock lock(a->placement_mutex());
  ArrayFile::Staged staged;
  // In place without extents, or with extents that do not begin with the current ones.
  CHECK(a->stage_placement_locked(s, nullptr, false, &staged, &msg) == EINVAL);
  CHECK(msg.find("must extend the current one") != std::string::npos);
  std::vector<Extent> elsewhere;
  {
    lock.unlock();
    REQUIRE(m.vol->allocator().allocate({layouts::SpaceShape::Runs, 64}, &elsewhere) == 0);
    lock.lock();
  }
  CHECK(a->stage_placement_locked(s, &elsewhere, false, &staged, &msg) == EINVAL);
  for (const Extent& e : elsewhere) m.vol->allocator().free(e);
  CHECK(m.vol->allocator().free_sectors() == free_before);  // nothing the refusals allocated is kept
  // Into an mloc image: refused.
  ArraySchema mloc = s;
  mloc.layout = "mloc";
  msg.clear();
  CHECK(a->stage_placement_locked(mloc, nullptr, true, &staged, &msg) == EINVAL);
  CHECK(msg.find("mloc") != std::string::npos);
  CHECK_FALSE(staged.state);
}

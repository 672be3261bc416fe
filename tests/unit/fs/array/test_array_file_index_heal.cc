// A bitmap index that does not read is built anew from the data by the
// query that meets it (ArrayFile::heal_index): a bitmap failing its checksum,
// or an index damaged when the array was loaded (its header). The query
// answers from the new index, equal to the data; on_index_healed says what
// happened, once; the new index is durable (a read-only mount builds
// nothing and says why). When the data does not read
// either, the query fails naming both reasons, and later queries do not
// read the whole array again for the same index until user.mmfs.index is
// set again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fs/array/array_index.h"
#include "fs/volume/fsck.h"
#include "tests/unit/support/array_index_test_support.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::array_indexes;
namespace array_indexes = mmfs::fs::testing::array_indexes;

namespace {

constexpr std::uint32_t kSector = 512;

// An int16 array of 200x150 small values with an exact e1 index, on `dev`,
// written and settled: the index's bitmaps fill many sectors after its header.
struct Indexed {
  std::unique_ptr<MemoryDevice> dev;
  Values data;
  Ino ino = 0;
  ArraySchema schema;

  explicit Indexed(std::uint64_t seed) {
    auto g = toy_disk();
    dev = formatted(*g);
    std::mt19937_64 rng(seed);
    data = random_values(rng, 200 * 150);
    schema = indexed(make_schema({200, 150}, "int16", "naive"), "e1", "exact");
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
    auto a = create_with_values(m, "h", schema, data);
    ino = a->ino();
    std::string msg;
    REQUIRE(a->settle(&msg) == 0);
  }
  // The volume sector holding byte `byte` of the stored index's object.
  Lbn object_sector(const Mount& m, std::uint64_t byte) const {
    std::unique_ptr<ArrayIndex> index;
    bool stale = false;
    std::string msg;
    REQUIRE(ArrayIndex::load({m.md(), m.vol->allocator(), *m.io}, ino, expected(), &index, &stale, &msg) == 0);
    REQUIRE(index);
    std::uint64_t sector = byte / kSector;
    for (const Extent& e : index->extents()) {
      if (sector < e.sectors) return e.start + sector;
      sector -= e.sectors;
    }
    FAIL("byte " << byte << " is past the index");
    return 0;
  }
  std::uint64_t object_bytes(const Mount& m) const {
    std::unique_ptr<ArrayIndex> index;
    bool stale = false;
    std::string msg;
    REQUIRE(ArrayIndex::load({m.md(), m.vol->allocator(), *m.io}, ino, expected(), &index, &stale, &msg) == 0);
    return index->object_bytes();
  }
  ArrayIndex::Expected expected() const { return {data.size(), indexes::ValueType::I16}; }
  void flip(Lbn lbn, std::uint32_t at = 100) { dev->bytes()[lbn * kSector + at] ^= std::byte{0x5A}; }
};

// The array opened afresh (nothing of its index cached), its heals recorded.
std::shared_ptr<ArrayFile> open_healing(const Mount& m, Ino ino, std::vector<std::string>* healed,
                                        bool read_only = false) {
  ArrayContext ctx = m.ctx();
  ctx.read_only = read_only;
  ctx.on_index_healed = [healed](Ino, const std::string& message) { healed->push_back(message); };
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  const int rc = ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg);
  INFO(msg);
  REQUIRE(rc == 0);
  return a;
}

// The index `a` holds is durable: the array opened afresh answers queries
// equal to the data and heals nothing; then the volume checks clean.
void reopened_whole_and_clean(const Indexed& h, const Mount& m, std::shared_ptr<ArrayFile>& a,
                              std::vector<std::string>* healed) {
  a->quiesce();
  a.reset();
  healed->clear();
  a = open_healing(m, h.ino, healed);
  check_index_matches(*a, h.data, true, "opened again");
  CHECK(healed->empty());
  a->quiesce();
  a.reset();
  CHECK(check_volume(*m.vol, false).problems.empty());
}

int count_eq(ArrayFile& a, int c, std::string* msg) {
  std::vector<indexes::Estimate> est;
  QueryCost cost;
  return a.atom_estimates({array_indexes::keys(indexes::CompareOp::Eq, c)}, std::nullopt, &est, &cost, msg);
}

}  // namespace

TEST_CASE("index healing: a bitmap failing its checksum is built anew from the data by the query that meets it",
          "[array_index][heal]") {
  Indexed h(71);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*h.dev)));
  // A byte of the last bitmap: the header still reads, the array opens whole.
  h.flip(h.object_sector(m, h.object_bytes(m) - 1), 0);
  std::vector<std::string> healed;
  auto a = open_healing(m, h.ino, &healed);
  CHECK_FALSE(a->info()["index_detail"].contains("damaged"));
  check_index_matches(*a, h.data, true, "healed at the first query");
  REQUIRE(healed.size() == 1);
  CHECK_THAT(healed[0], Catch::Contains("failed its checksum") && Catch::Contains("built anew from the data"));
  // Durable: opened again, the index reads and nothing more is healed.
  reopened_whole_and_clean(h, m, a, &healed);
}

TEST_CASE("index healing: an index damaged when the array was loaded is built anew by the next query",
          "[array_index][heal]") {
  Indexed h(73);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*h.dev)));
  h.flip(h.object_sector(m, 0), 3);  // its header
  std::vector<std::string> healed;
  // A read-only mount says why and builds nothing.
  auto a = open_healing(m, h.ino, &healed, true);
  std::string msg;
  CHECK(count_eq(*a, 3, &msg) == EIO);
  CHECK_THAT(msg, Catch::Contains("index is damaged") && Catch::Contains("read-only mount"));
  CHECK(healed.empty());
  a->quiesce();
  a = open_healing(m, h.ino, &healed);
  CHECK(a->info()["index_detail"].contains("damaged"));
  check_index_matches(*a, h.data, true, "healed at the first query");
  REQUIRE(healed.size() == 1);
  CHECK_THAT(healed[0], Catch::Contains("index is damaged") && Catch::Contains("built anew from the data"));
  CHECK_FALSE(a->info()["index_detail"].contains("damaged"));
  a->quiesce();
  a.reset();
  CHECK(check_volume(*m.vol, false).problems.empty());
}

// An index whose checksums hold but whose header belongs to another array
// (another row count or value type: a bug, or bytes moved whole) is damaged
// at the load as a header that fails its checksum is: a query would size its
// bitmaps by the header's rows. Here a well-formed index of the wrong shape
// replaces the array's own, committed as any index is.
TEST_CASE("index healing: an index whose header holds another row count or type is damaged, and built anew",
          "[array_index][heal]") {
  Indexed h(89);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*h.dev)));
  const ArrayIndex::Env env{m.md(), m.vol->allocator(), *m.io};
  std::uint64_t rows = h.data.size();
  auto type = indexes::ValueType::I16;
  std::string says;
  SECTION("fewer rows") {
    rows = 100;
    says = "100 rows of int16";
  }
  SECTION("more rows") {
    rows = h.data.size() + 1000;
    says = fmt::format("{} rows of int16", rows);
  }
  SECTION("another type") {
    type = indexes::ValueType::U16;
    says = fmt::format("{} rows of uint16", rows);
  }
  std::vector<std::int16_t> values(rows, 5);
  std::copy_n(h.data.begin(), std::min<std::size_t>(rows, h.data.size()), values.begin());
  auto read = [&](const ArrayIndex::Visitor& visit, std::string*) {
    visit(0, reinterpret_cast<const std::byte*>(values.data()), values.size());
    return 0;
  };
  std::unique_ptr<ArrayIndex> wrong;
  std::string msg;
  REQUIRE(ArrayIndex::build(env, h.ino, type, "e1", "exact", rows, read, false, &wrong, &msg) == 0);
  WriteBatch batch;
  wrong->stage(batch);
  REQUIRE(m.md().apply(batch, ArrayIndex::stored_extents(m.md(), h.ino)) == 0);
  REQUIRE(m.md().sync() == 0);
  wrong.reset();

  std::vector<std::string> healed;
  auto a = open_healing(m, h.ino, &healed);
  const auto info = a->info();
  REQUIRE(info["index_detail"].contains("damaged"));
  CHECK_THAT(info["index_detail"]["damaged"].get<std::string>(),
             Catch::Contains("its header says " + says) &&
                 Catch::Contains(fmt::format("the array holds {} of int16", h.data.size())));
  check_index_matches(*a, h.data, true, "healed at the first query");
  REQUIRE(healed.size() == 1);
  CHECK_THAT(healed[0], Catch::Contains("its header says") && Catch::Contains("built anew from the data"));
  reopened_whole_and_clean(h, m, a, &healed);
}

TEST_CASE("index healing: when the data does not read either, the query fails naming both, and is not retried "
          "until the index is set again",
          "[array_index][heal]") {
  Indexed h(79);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*h.dev)));
  h.flip(h.object_sector(m, 0), 3);
  const Lbn cell0 = m.md().extents(h.ino).at(0).start;
  h.flip(cell0);
  std::vector<std::string> healed;
  auto a = open_healing(m, h.ino, &healed);
  std::string msg;
  CHECK(count_eq(*a, 3, &msg) == EIO);
  CHECK_THAT(msg, Catch::Contains("index is damaged") &&
                      Catch::Contains("building the index anew from the data failed") &&
                      Catch::Contains("failed its checksum"));
  // The cell reads again: the same index is not built anew by a query...
  h.flip(cell0);
  const std::string first = msg;
  CHECK(count_eq(*a, 3, &msg) == EIO);
  CHECK(msg == first);
  CHECK(healed.empty());
  // ...but by setting user.mmfs.index again.
  REQUIRE(a->change_schema(h.schema, &msg) == 0);
  check_index_matches(*a, h.data, true, "set again");
  a->quiesce();
  a.reset();
  CHECK(check_volume(*m.vol, false).problems.empty());
}

// The scrub's check (ArrayFile::verify_index) reads every bitmap, not only
// those a query asks for: a bitmap no query has read, or a header damaged
// after the array loaded it, is found and built anew the same way.
TEST_CASE("index healing: the scrub's check finds a bitmap no query reads, and a header damaged after the load",
          "[array_index][heal]") {
  Indexed h(83);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*h.dev)));
  std::vector<std::string> healed;
  auto a = open_healing(m, h.ino, &healed);
  const std::atomic<bool> go{false}, stop{true};
  bool rebuilt = true;
  std::uint64_t read = 0;
  std::string msg;
  SECTION("a clean index is left as it is, read whole") {
    CHECK(a->verify_index(go, &rebuilt, &read, &msg) == 0);
    CHECK_FALSE(rebuilt);
    CHECK(healed.empty());
    CHECK(read >= h.object_bytes(m));
  }
  SECTION("a bitmap failing its checksum") {
    h.flip(h.object_sector(m, h.object_bytes(m) - 1), 0);
    // Asked to stop, it reads no bitmap and says nothing.
    CHECK(a->verify_index(stop, &rebuilt, &read, &msg) == 0);
    CHECK_FALSE(rebuilt);
    CHECK(read < h.object_bytes(m));
    // A read-only mount finds it and says why it builds nothing.
    auto ro = open_healing(m, h.ino, &healed, true);
    CHECK(ro->verify_index(go, &rebuilt, &read, &msg) == EIO);
    CHECK_FALSE(rebuilt);
    CHECK_THAT(msg, Catch::Contains("failed its checksum") && Catch::Contains("read-only mount"));
    ro->quiesce();
    ro.reset();
    CHECK(healed.empty());
    CHECK(a->verify_index(go, &rebuilt, &read, &msg) == 0);
    CHECK(rebuilt);
    REQUIRE(healed.size() == 1);
    CHECK_THAT(healed[0], Catch::Contains("after the scrub met it broken") && Catch::Contains("failed its checksum"));
  }
  SECTION("a header damaged after the array loaded it") {
    h.flip(h.object_sector(m, 0), 3);
    CHECK(a->verify_index(go, &rebuilt, &read, &msg) == 0);
    CHECK(rebuilt);
    REQUIRE(healed.size() == 1);
    CHECK_THAT(healed[0], Catch::Contains("header no longer decodes"));
  }
  SECTION("an index damaged when the array was loaded") {
    a->quiesce();
    a.reset();
    h.flip(h.object_sector(m, 0), 3);
    a = open_healing(m, h.ino, &healed);
    REQUIRE(a->info()["index_detail"].contains("damaged"));
    CHECK(a->verify_index(go, &rebuilt, &read, &msg) == 0);
    CHECK(rebuilt);
    REQUIRE(healed.size() == 1);
    CHECK_THAT(healed[0], Catch::Contains("index is damaged") && Catch::Contains("after the scrub met it broken"));
  }
  // Whatever was built is whole: checked again, nothing more; queries equal
  // the data, also from a fresh open.
  healed.clear();
  CHECK(a->verify_index(go, &rebuilt, &read, &msg) == 0);
  CHECK_FALSE(rebuilt);
  CHECK(healed.empty());
  check_index_matches(*a, h.data, true, "after the check");
  reopened_whole_and_clean(h, m, a, &healed);
}

namespace {
// Sets `stop` at its first read once armed: the scrub asked to stop while
// the index it found broken is being built from the data.
class StopAtRead final : public BlockDevice {
 public:
  StopAtRead(BlockDevice& d, std::atomic<bool>& stop) : d_(d), stop_(stop) {}
  std::uint64_t size_bytes() const override { return d_.size_bytes(); }
  std::uint32_t block_size() const override { return d_.block_size(); }
  int submit(std::span<IoRequest> batch) override {
    for (const IoRequest& r : batch)
      if (armed && r.op == IoRequest::Op::Read) stop_ = true;
    return d_.submit(batch);
  }
  int flush() override { return d_.flush(); }
  bool armed = false;

 private:
  BlockDevice& d_;
  std::atomic<bool>& stop_;
};
}  // namespace

// An unmount (or `stop`) does not wait for the build of a whole array's
// index: the build stops between slabs, commits nothing and records no heal
// failure, so the next scrub or query builds it.
TEST_CASE("index healing: the scrub stopped during the build leaves the index broken for the next heal",
          "[array_index][heal]") {
  Indexed h(89);
  Lbn header = 0;
  {
    Mount first = mount(std::unique_ptr<BlockDevice>(new RefDevice(*h.dev)));
    header = h.object_sector(first, 0);
  }
  h.flip(header, 3);
  std::atomic<bool> stop{false};
  auto* dev = new StopAtRead(*h.dev, stop);
  Mount m = mount(std::unique_ptr<BlockDevice>(dev));
  std::vector<std::string> healed;
  auto a = open_healing(m, h.ino, &healed);
  REQUIRE(a->info()["index_detail"].contains("damaged"));
  bool rebuilt = true;
  std::uint64_t read = 0;
  std::string msg;
  dev->armed = true;
  CHECK(a->verify_index(stop, &rebuilt, &read, &msg) == 0);
  dev->armed = false;
  CHECK(stop.load());
  CHECK_FALSE(rebuilt);
  CHECK(healed.empty());
  CHECK(a->info()["index_detail"].contains("damaged"));
  // Not a failure: the next check builds it.
  stop = false;
  CHECK(a->verify_index(stop, &rebuilt, &read, &msg) == 0);
  CHECK(rebuilt);
  REQUIRE(healed.size() == 1);
  check_index_matches(*a, h.data, true, "after the second check");
  reopened_whole_and_clean(h, m, a, &healed);
}

// A directory's table in the MEMS paper's capsules (fs/table/capsule_table.h):
// placing its attributes, growing it in place, moving it out again, reading
// records; every step against a model of the bytes, the capsule format and
// the device's equivalence classes, across remounts and power cuts.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_schema.h"
#include "fs/table/capsule_table.h"
#include "fs/device/fault_device.h"
#include "fs/volume/fsck.h"
#include "fs/volume/volume.h"
#include "geometry/memstore.h"
#include "layouts/capsule.h"
#include "array_test_support.h"
#include "fs_test_support.h"
#include "mems_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using testing::RefDevice;
using namespace testing::arrays;

using testing::Bytes;
using testing::bytes_diff;

// A small MEMStore (p = 10, N = 100, 40 cylinders of 10 tracks of 90 sectors,
// no micropositioning): a band of a capsule's tracks is one cylinder of 450
// KiB, so a memory device of a few tens of MiB holds many bands.
geom::MemStore small_mems() { return geom::MemStore(geom::testing::mems(10, 100, 40, 9, 0)); }
constexpr std::uint64_t kDeviceBytes = 14ull << 20;

// The table's attributes: named so that readdir (bytewise order) gives them in this order.
struct Column {
  std::string name, dtype, layout;
};
const std::vector<Column> kColumns = {{"a_f8", "float64", "naive"}, {"b_i4", "int32", "multimap"},
                                      {"c_u1", "uint8", "zorder"}};

Bytes read_all(ArrayFile& a) {
  Bytes out(a.size(), 0xAA);
  std::size_t got = 0;
  std::string msg;
  int r = a.read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  INFO("read of inode " << a.ino() << ": " << msg);
  REQUIRE(r == 0);
  out.resize(got);
  return out;
}

void write_at(ArrayFile& a, std::uint64_t offset, const Bytes& data) {
  std::string msg;
  int r = a.write(offset, reinterpret_cast<const std::byte*>(data.data()), data.size(), &msg);
  INFO(msg);
  REQUIRE(r == 0);
}

void flush(ArrayFile& a) {
  std::string msg;
  int r = a.flush(true, &msg);
  INFO(msg);
  REQUIRE(r == 0);
}

// A few random record ranges of every attribute written (the rest stays zero).
// Flushed (durable) unless `durable` is false: then the cells stay dirty in memory.
void write_random_records(std::vector<TableAttribute>& attrs, std::vector<Bytes>& models, std::mt19937_64& rng,
                          int ranges, bool durable = true) {
  for (std::size_t i = 0; i < attrs.size(); ++i) {
    const std::uint32_t size = attrs[i].array->schema().dtype.itemsize;
    const std::uint64_t records = models[i].size() / size;
    for (int k = 0; k < ranges; ++k) {
      const std::uint64_t first = rng() % records;
      const std::uint64_t count = std::min<std::uint64_t>(1 + rng() % 500, records - first);
      Bytes d(count * size);
      for (auto& x : d) x = std::uint8_t(rng() | 1);  // nonzero: a written element is told from an unwritten one
      write_at(*attrs[i].array, first * size, d);
      std::copy(d.begin(), d.end(), models[i].begin() + std::ptrdiff_t(first * size));
    }
    if (durable) flush(*attrs[i].array);
  }
}

// Fills most of the free space with a file of 0xEE bytes and removes it: the
// space the next allocations get holds stale bytes, not zeros.
void litter_free_space(const Mount& m) {
  const std::uint64_t bytes = m.vol->allocator().free_sectors() * m.vol->geometry().sector_size() * 8 / 10;
  {
    auto a = create_array(m, "litter", make_schema({bytes}, "uint8", "naive"));
    const Bytes d(1 << 20, 0xEE);
    for (std::uint64_t off = 0; off < bytes; off += d.size())
      write_at(*a, off, Bytes(d.begin(), d.begin() + std::ptrdiff_t(std::min<std::uint64_t>(d.size(), bytes - off))));
    flush(*a);
  }
  REQUIRE(m.md().unlink(kRootIno, "litter") == 0);
  REQUIRE(m.md().sync() == 0);
}

void check_fsck(Volume& vol) {
  FsckReport report = check_volume(vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}

// A mounted volume and its table directory's 1-D arrays, found as the daemon
// finds them (readdir order, stored schemas). The arrays go before the mount.
struct Table {
  Mount m;
  std::vector<TableAttribute> attrs;
};

// Unmounts: the arrays, then the SectorIo, then the volume.
void unmount(Table& t) {
  t.attrs.clear();
  t.m.io.reset();
  t.m.vol.reset();
}

std::vector<TableAttribute> attributes_of(const Mount& m, Ino dir) {
  std::vector<std::pair<std::string, Ino>> entries;
  m.md().readdir(dir, [&](std::string_view name, Ino ino) {
    entries.emplace_back(std::string(name), ino);
    return true;
  });
  std::vector<TableAttribute> out;
  for (auto& [name, ino] : entries) {
    auto s = stored_schema(m, ino);
    REQUIRE(s);
    if (s->shape.size() != 1) continue;
    out.push_back(TableAttribute{name, ino, open_stored(m, ino)});
  }
  return out;
}

Table open_table(std::unique_ptr<BlockDevice> dev, Ino dir) {
  Table t{mount(std::move(dev)), {}};
  t.attrs = attributes_of(t.m, dir);
  return t;
}

std::unique_ptr<BlockDevice> ref(MemoryDevice& d) { return std::unique_ptr<BlockDevice>(new RefDevice(d)); }

// Makes directory "t" holding the columns (of `lengths[i]` records each) in
// `m`; returns its inode. They are created last first: their inode order
// (the order of the placement locks) is not their order in the table.
Ino make_table_dir(const Mount& m, const std::vector<Column>& columns, const std::vector<std::uint64_t>& lengths) {
  Inode dir;
  REQUIRE(m.md().create(kRootIno, "t", S_IFDIR | 0755, 0, 0, "", &dir) == 0);
  for (std::size_t i = columns.size(); i-- > 0;) {
    Inode n;
    REQUIRE(m.md().create(dir.ino, columns[i].name, S_IFREG | 0644, 0, 0, "", &n) == 0);
    std::shared_ptr<ArrayFile> a;
    std::string msg;
    int r = ArrayFile::create(m.ctx(), n, make_schema({lengths[i]}, columns[i].dtype, columns[i].layout), nullptr,
                              &a, &msg);
    INFO(msg);
    REQUIRE(r == 0);
  }
  return dir.ino;
}

void check_bytes(const std::vector<TableAttribute>& attrs, const std::vector<Bytes>& models) {
  REQUIRE(attrs.size() == models.size());
  for (std::size_t i = 0; i < attrs.size(); ++i) {
    INFO("attribute " << attrs[i].name);
    CHECK(bytes_diff(read_all(*attrs[i].array), models[i]) == "");
  }
}

// Records [first, first + count) interleaved by brute force.
Bytes interleave(const std::vector<TableAttribute>& attrs, const std::vector<Bytes>& models, std::uint64_t first,
                 std::uint64_t count) {
  Bytes out;
  for (std::uint64_t r = first; r < first + count; ++r)
    for (std::size_t i = 0; i < attrs.size(); ++i) {
      const std::uint32_t size = attrs[i].array->schema().dtype.itemsize;
      out.insert(out.end(), models[i].begin() + std::ptrdiff_t(r * size),
                 models[i].begin() + std::ptrdiff_t((r + 1) * size));
    }
  return out;
}

void check_rows(const Mount& m, const std::vector<TableAttribute>& attrs, const std::vector<Bytes>& models,
                std::mt19937_64& rng) {
  const std::uint64_t records = attrs[0].array->shape().at(0);
  std::uint64_t record_bytes = 0;
  for (const TableAttribute& a : attrs) record_bytes += a.array->schema().dtype.itemsize;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges = {
      {0, 1}, {0, records}, {records - 1, 1}, {383, 2}, {1000, 517}};
  for (int k = 0; k < 4; ++k) {
    const std::uint64_t first = rng() % records;
    ranges.push_back({first, 1 + rng() % (records - first)});
  }
  for (auto [first, count] : ranges) {
    INFO("records " << first << "+" << count);
    Bytes got(count * record_bytes, 0xAA);
    std::string msg;
    int r = read_table_rows(m.ctx(), attrs, first, count, reinterpret_cast<std::byte*>(got.data()), &msg);
    INFO(msg);
    REQUIRE(r == 0);
    CHECK(bytes_diff(got, interleave(attrs, models, first, count)) == "");
  }
}

layouts::CapsuleFormat format_of(const Mount& m, const std::vector<TableAttribute>& attrs) {
  std::vector<std::uint32_t> sizes;
  for (const TableAttribute& a : attrs) sizes.push_back(a.array->schema().dtype.itemsize);
  return layouts::capsule_resolve(sizes, m.vol->geometry().sector_size(), m.vol->geometry().parallelism());
}

std::optional<TableRecord> stored_record(const Mount& m, Ino dir) {
  auto text = m.md().xattr(dir, kTableXattr);
  if (!text) return std::nullopt;
  auto rec = decode_table_record(*text);
  REQUIRE(rec);
  return rec;
}

// The sector and offset of record r of an attribute (lbn_text).
std::pair<geom::Lbn, std::uint64_t> where(const ArrayFile& a, std::uint64_t r) {
  std::string text, msg;
  const std::vector<std::uint64_t> x = {r};
  REQUIRE(a.lbn_text(x, &text, &msg) == 0);
  unsigned long long lbn = 0, offset = 0;
  REQUIRE(std::sscanf(text.c_str(), "%llu %llu", &lbn, &offset) == 2);
  return {lbn, offset};
}

// Records of [first, last) of which some attribute's element is not zero on
// the device (stale bytes where the array reads zeros).
std::uint64_t stale_records(const std::vector<TableAttribute>& attrs, MemoryDevice& dev, std::uint32_t sector,
                            std::uint64_t first, std::uint64_t last) {
  std::uint64_t n = 0;
  for (std::uint64_t r = first; r < last; r += 7) {
    bool stale = false;
    for (const TableAttribute& a : attrs) {
      auto [lbn, offset] = where(*a.array, r);
      const std::uint32_t size = a.array->schema().dtype.itemsize;
      const std::byte* at = dev.bytes().data() + lbn * sector + offset;
      stale = stale || std::any_of(at, at + size, [](std::byte b) { return b != std::byte{0}; });
    }
    n += stale;
  }
  return n;
}

// Every attribute's sector of the records in `sample`.
std::vector<std::vector<geom::Lbn>> lbns_of(const std::vector<TableAttribute>& attrs,
                                            const std::vector<std::uint64_t>& sample) {
  std::vector<std::vector<geom::Lbn>> out;
  for (std::uint64_t r : sample) {
    std::vector<geom::Lbn> row;
    for (const TableAttribute& a : attrs) row.push_back(where(*a.array, r).first);
    out.push_back(row);
  }
  return out;
}

// The table is in capsules of the format CapsuleResolve chooses: the stored
// schemas, the directory's record, each record's sectors in one equivalence
// class, and the elements where lbn_text says on the device.
void check_in_capsules(Table& t, Ino dir, std::uint64_t records, const std::vector<Bytes>& models,
                       MemoryDevice& dev) {
  const layouts::CapsuleFormat format = format_of(t.m, t.attrs);
  REQUIRE(format.total > 1);
  std::vector<int> covered(format.total, 0);
  for (std::size_t i = 0; i < t.attrs.size(); ++i) {
    INFO("attribute " << t.attrs[i].name);
    auto s = stored_schema(t.m, t.attrs[i].ino);
    REQUIRE(s);
    CHECK(*s == t.attrs[i].array->schema());
    CHECK(s->layout == "capsule");
    CHECK(s->shape == std::vector<std::uint64_t>{records});
    CHECK(s->cell == std::vector<std::uint64_t>{format.records_per_block(i)});
    REQUIRE(s->table_part);
    const TablePart& p = *s->table_part;
    CHECK(p.table == dir);
    CHECK(p.capsule_blocks == format.total);
    CHECK(p.first_block == format.first[i]);
    CHECK(p.cells_per_capsule == format.blocks[i]);
    REQUIRE(std::uint64_t(p.first_block) + p.cells_per_capsule <= format.total);
    for (std::uint32_t b = p.first_block; b < p.first_block + p.cells_per_capsule; ++b) ++covered[b];
  }
  // The attributes' blocks are disjoint and cover the capsule.
  CHECK(covered == std::vector<int>(format.total, 1));
  auto rec = stored_record(t.m, dir);
  REQUIRE(rec);
  CHECK(*rec == TableRecord{"capsule", format.records, format.total});
  const nlohmann::json info = table_info(t.attrs, dir, rec);
  INFO(info.dump());
  CHECK(info["records"] == records);
  CHECK(info["layout"] == "capsule");
  CHECK(info["capsule"]["all_attributes_in_capsules"] == true);
  CHECK(info["capsule"]["capsules"] == (records + format.records - 1) / format.records);
  const bool split = info["capsule"]["split_capsules"].get<std::uint64_t>() != 0;
  // Without micropositioning a band is allocated inside one cylinder: no capsule splits.
  CHECK_FALSE(split);
  // A record's sectors: one per attribute, distinct, in one equivalence class
  // (one parallel access), and holding the record's elements.
  const geom::Geometry& g = t.m.vol->geometry();
  const std::uint32_t sector = g.sector_size();
  std::uint64_t checked_bytes = 0;
  for (std::uint64_t r = 0; r < records; r += (r % 97 == 0 ? 1 : 13)) {
    INFO("record " << r);
    std::vector<geom::Lbn> cls;
    std::set<geom::Lbn> distinct;
    for (std::size_t i = 0; i < t.attrs.size(); ++i) {
      auto [lbn, offset] = where(*t.attrs[i].array, r);
      distinct.insert(lbn);
      if (i == 0) {
        cls = g.equivalent(lbn);
        std::sort(cls.begin(), cls.end());
      }
      if (!split) CHECK(std::binary_search(cls.begin(), cls.end(), lbn));
      const std::uint32_t size = t.attrs[i].array->schema().dtype.itemsize;
      REQUIRE(offset + size <= sector);
      const std::uint8_t* want = models[i].data() + r * size;
      if (std::any_of(want, want + size, [](std::uint8_t x) { return x != 0; })) {
        REQUIRE((lbn + 1) * sector <= dev.bytes().size());
        CHECK(std::memcmp(dev.bytes().data() + lbn * sector + offset, want, size) == 0);
        ++checked_bytes;
      }
    }
    CHECK(distinct.size() == t.attrs.size());
  }
  CHECK(checked_bytes > 0);
}

void check_apart(Table& t, Ino dir, const std::vector<ArraySchema>& want) {
  for (std::size_t i = 0; i < t.attrs.size(); ++i) {
    INFO("attribute " << t.attrs[i].name);
    auto s = stored_schema(t.m, t.attrs[i].ino);
    REQUIRE(s);
    CHECK(*s == want[i]);
    CHECK(!s->table_part);
    CHECK(t.attrs[i].array->schema() == want[i]);
  }
  CHECK(!t.m.md().xattr(dir, kTableXattr));
}

// The schemas place_table_apart is given to move a table out to `layout`.
std::vector<ArraySchema> apart_schemas(const std::vector<TableAttribute>& attrs, const std::string& layout) {
  std::vector<ArraySchema> next;
  for (const TableAttribute& a : attrs) {
    ArraySchema s = a.array->schema();
    s.table_part.reset();
    s.layout = layout;
    s.cell.clear();
    next.push_back(s);
  }
  return next;
}

int place(Table& t, Ino dir, std::string* msg) { return place_table_in_capsules(t.m.ctx(), dir, t.attrs, msg); }
int grow(Table& t, Ino dir, std::uint64_t n, std::string* msg) { return grow_table(t.m.ctx(), dir, t.attrs, n, msg); }
int apart(Table& t, Ino dir, const std::vector<ArraySchema>& next, std::string* msg) {
  return place_table_apart(t.m.ctx(), dir, t.attrs, next, msg);
}

std::vector<std::optional<ArraySchema>> stored_schemas(const Mount& m, const std::vector<TableAttribute>& attrs) {
  std::vector<std::optional<ArraySchema>> out;
  for (const TableAttribute& a : attrs) out.push_back(stored_schema(m, a.ino));
  return out;
}

}  // namespace

TEST_CASE("capsule table: placed, grown in place and moved out, record reads match a brute-force interleave",
          "[capsule_table]") {
  const geom::MemStore g = small_mems();
  std::mt19937_64 rng(2024);
  auto dev = formatted(g, kDeviceBytes);
  const std::uint64_t n0 = 3000;
  Ino dir = 0;
  std::vector<Bytes> models;
  {
    Mount m = mount(ref(*dev));
    dir = make_table_dir(m, kColumns, {n0, n0, n0});
  }
  {
    Table t = open_table(ref(*dev), dir);
    REQUIRE(t.attrs.size() == kColumns.size());
    for (std::size_t i = 0; i < kColumns.size(); ++i) {
      CHECK(t.attrs[i].name == kColumns[i].name);
      models.emplace_back(t.attrs[i].array->size(), 0);
    }
    write_random_records(t.attrs, models, rng, 6);
    // The last record too: its cells are partial (3000 is no multiple of a cell's records).
    for (std::size_t i = 0; i < t.attrs.size(); ++i) {
      const std::uint32_t size = t.attrs[i].array->schema().dtype.itemsize;
      const Bytes last(size, std::uint8_t(0x30 + i));
      write_at(*t.attrs[i].array, (n0 - 1) * size, last);
      flush(*t.attrs[i].array);
      std::copy(last.begin(), last.end(), models[i].end() - size);
    }
    check_bytes(t.attrs, models);
    CHECK(!t.m.md().xattr(dir, kTableXattr));
    litter_free_space(t.m);
    // Some not yet written back: the placement takes them along.
    write_random_records(t.attrs, models, rng, 2, false);
    for (const TableAttribute& a : t.attrs) CHECK(a.array->has_dirty_cells());

    std::string msg;
    int r = place(t, dir, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    check_in_capsules(t, dir, n0, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
  }
  std::vector<std::vector<geom::Lbn>> old_lbns;
  std::vector<std::uint64_t> sample = {0, 1, 63, 64, 383, 384, 1000, 2047, 2999};
  {
    // Remounted: the same placement from the stored schemas.
    Table t = open_table(ref(*dev), dir);
    check_in_capsules(t, dir, n0, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    // Writes into the capsules.
    write_random_records(t.attrs, models, rng, 3);
    check_bytes(t.attrs, models);
    check_in_capsules(t, dir, n0, models, *dev);
    old_lbns = lbns_of(t.attrs, sample);
    write_random_records(t.attrs, models, rng, 2, false);  // and dirty ones, which growing writes back

    // Grown inside the first band (its free slots): the old records keep
    // their sectors, the new read as zeros although their sectors hold stale bytes.
    std::string msg;
    const std::uint64_t nh = 20000;
    {
      int r = grow(t, dir, nh, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    for (std::size_t i = 0; i < models.size(); ++i) models[i].resize(nh * t.attrs[i].array->schema().dtype.itemsize, 0);
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
    CHECK(table_info(t.attrs, dir, stored_record(t.m, dir))["capsule"]["bands"] == 1);
    CHECK(stale_records(t.attrs, *dev, g.sector_size(), n0, nh) > 0);
    check_in_capsules(t, dir, nh, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);

    // Grown to more than a band: a new band, on stale bytes too.
    litter_free_space(t.m);
    const std::uint64_t n1 = 40000;
    int r = grow(t, dir, n1, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    for (std::size_t i = 0; i < models.size(); ++i) models[i].resize(n1 * t.attrs[i].array->schema().dtype.itemsize, 0);
    const std::uint64_t band_records = stored_record(t.m, dir)->records_per_capsule * g.sectors_per_track();
    REQUIRE(band_records < n1);
    CHECK(stale_records(t.attrs, *dev, g.sector_size(), band_records, n1) > 0);
    for (const TableAttribute& a : t.attrs) CHECK(a.array->shape() == std::vector<std::uint64_t>{n1});
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
    check_in_capsules(t, dir, n1, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    CHECK(table_info(t.attrs, dir, stored_record(t.m, dir))["capsule"]["bands"] == 2);
    check_fsck(*t.m.vol);
    // Growing to the same length changes nothing.
    REQUIRE(grow(t, dir, n1, &msg) == 0);
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
  }
  {
    Table t = open_table(ref(*dev), dir);
    const std::uint64_t n1 = t.attrs[0].array->shape().at(0);
    REQUIRE(n1 == 40000);
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
    check_in_capsules(t, dir, n1, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    // New records written, in the new band too.
    write_random_records(t.attrs, models, rng, 4);
    std::vector<std::uint8_t> last(t.attrs[0].array->schema().dtype.itemsize, 0x5A);
    write_at(*t.attrs[0].array, (n1 - 1) * last.size(), last);
    flush(*t.attrs[0].array);
    std::copy(last.begin(), last.end(), models[0].end() - std::ptrdiff_t(last.size()));
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);

    // Moved out to naive placements: the bytes stay, the capsule records go.
    const std::vector<ArraySchema> next = apart_schemas(t.attrs, "naive");
    std::string msg;
    int r = apart(t, dir, next, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    check_apart(t, dir, next);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    CHECK(table_info(t.attrs, dir, stored_record(t.m, dir))["layout"] == "none");
    check_fsck(*t.m.vol);
  }
  {
    Table t = open_table(ref(*dev), dir);
    const std::vector<ArraySchema> next = apart_schemas(t.attrs, "naive");
    check_apart(t, dir, next);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    // Not in capsules any more: growing is refused.
    std::string msg;
    CHECK(grow(t, dir, 50000, &msg) == EINVAL);
    // And back into capsules.
    int r = place(t, dir, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    check_in_capsules(t, dir, 40000, models, *dev);
    check_bytes(t.attrs, models);
    check_fsck(*t.m.vol);
  }
  {
    Table t = open_table(ref(*dev), dir);
    check_in_capsules(t, dir, 40000, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    // Records read see the writes not yet written back.
    write_random_records(t.attrs, models, rng, 3, false);
    check_rows(t.m, t.attrs, models, rng);
    check_bytes(t.attrs, models);
  }
}

TEST_CASE("capsule table: a power cut while placing, growing or moving out leaves every attribute old or every "
          "one new",
          "[capsule_table][crash]") {
  const geom::MemStore g = small_mems();
  std::mt19937_64 rng(777);
  const std::uint64_t n0 = 3000, n1 = 40000;
  // Golden images: the arrays apart (full of data, durable), and the same in capsules.
  auto apart_image = formatted(g, kDeviceBytes);
  Ino dir = 0;
  std::vector<Bytes> models;
  {
    Mount m = mount(ref(*apart_image));
    dir = make_table_dir(m, kColumns, {n0, n0, n0});
  }
  {
    Table t = open_table(ref(*apart_image), dir);
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    write_random_records(t.attrs, models, rng, 6);
  }
  const std::vector<Bytes> apart_models = models;
  auto capsule_image = copy_of(*apart_image);
  {
    Table t = open_table(ref(*capsule_image), dir);
    std::string msg;
    int r = place(t, dir, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    write_random_records(t.attrs, models, rng, 2);  // and some records written in the capsules
  }
  std::vector<Bytes> grown = models;
  for (std::size_t i = 0; i < grown.size(); ++i) grown[i].resize(grown[i].size() / n0 * n1, 0);

  struct Op {
    std::string name;
    MemoryDevice* golden;
    const std::vector<Bytes>* before;
    const std::vector<Bytes>* after;
  };
  const std::vector<Op> ops = {{"place_table_in_capsules", apart_image.get(), &apart_models, &apart_models},
                               {"grow_table", capsule_image.get(), &models, &grown},
                               {"place_table_apart", capsule_image.get(), &models, &models}};
  auto run = [&](std::size_t op, Table& t, std::string* msg) {
    switch (op) {
      case 0: return place(t, dir, msg);
      case 1: return grow(t, dir, n1, msg);
      default: return apart(t, dir, apart_schemas(t.attrs, "naive"), msg);
    }
  };
  for (std::size_t op = 0; op < ops.size(); ++op) {
    INFO("operation " << ops[op].name);
    // The old and new states (stored schemas and the directory's record), and
    // the device events between them, from a clean run.
    std::vector<std::optional<ArraySchema>> old_schemas, new_schemas;
    std::optional<std::string> old_record, new_record;
    std::uint64_t events = 0;
    {
      auto* fault = new FaultInjectingDevice(copy_of(*ops[op].golden), 1);
      Table t = open_table(std::unique_ptr<BlockDevice>(fault), dir);
      old_schemas = stored_schemas(t.m, t.attrs);
      old_record = t.m.md().xattr(dir, kTableXattr);
      const std::uint64_t before = fault->events();
      std::string msg;
      int r = run(op, t, &msg);
      INFO(msg);
      REQUIRE(r == 0);
      events = fault->events() - before;
      new_schemas = stored_schemas(t.m, t.attrs);
      new_record = t.m.md().xattr(dir, kTableXattr);
    }
    REQUIRE(events > 2);
    REQUIRE(old_schemas != new_schemas);
    for (std::size_t i = 0; i < old_schemas.size(); ++i) {
      REQUIRE(old_schemas[i]);
      REQUIRE(new_schemas[i]);
      REQUIRE(*old_schemas[i] != *new_schemas[i]);  // every attribute moves
    }
    if (op == 0) CHECK((!old_record && new_record));
    if (op == 1) CHECK((old_record && old_record == new_record));
    if (op == 2) CHECK((old_record && !new_record));
    // The cut points: every event (six times each: the unflushed writes of a
    // power cut are kept, lost or torn at random), or 60 of them (the first
    // and the last among them).
    std::vector<std::uint64_t> cuts;
    if (events <= 20) {
      for (int rep = 0; rep < 6; ++rep)
        for (std::uint64_t c = 1; c <= events; ++c) cuts.push_back(c);
    } else {
      cuts = {1, events};
      while (cuts.size() < 60) cuts.push_back(1 + rng() % events);
    }
    int old_kept = 0, new_kept = 0;
    for (std::size_t k = 0; k < cuts.size(); ++k) {
      const std::uint64_t cut = cuts[k];
      INFO("cut " << cut << " of " << events);
      auto* fault = new FaultInjectingDevice(copy_of(*ops[op].golden), 100 * op + k + 7);
      std::unique_ptr<MemoryDevice> image;
      int r = 0;
      {
        Table t = open_table(std::unique_ptr<BlockDevice>(fault), dir);
        fault->fail_after(fault->events() + cut);
        std::string msg;
        r = run(op, t, &msg);
        image = fault->crash_image();
      }
      Table t = open_table(std::move(image), dir);
      REQUIRE(t.attrs.size() == kColumns.size());
      const std::vector<std::optional<ArraySchema>> stored = stored_schemas(t.m, t.attrs);
      int is_old = 0, is_new = 0;
      for (std::size_t i = 0; i < stored.size(); ++i) {
        is_old += stored[i] == old_schemas[i];
        is_new += stored[i] == new_schemas[i];
      }
      const int n = int(stored.size());
      // All old or all new: never a mix, never a third state.
      REQUIRE(((is_old == n && is_new == 0) || (is_new == n && is_old == 0)));
      const bool now_new = is_new == n;
      if (r == 0) CHECK(now_new);  // the operation returns once the new placement is durable
      (now_new ? new_kept : old_kept)++;
      // The directory's record agrees with the attributes.
      CHECK(t.m.md().xattr(dir, kTableXattr) == (now_new ? new_record : old_record));
      check_bytes(t.attrs, now_new ? *ops[op].after : *ops[op].before);
      check_fsck(*t.m.vol);
    }
    INFO("old kept " << old_kept << ", new kept " << new_kept);
    CHECK(old_kept > 0);
    CHECK(new_kept > 0);
  }
}

TEST_CASE("capsule table: refused operations change nothing", "[capsule_table]") {
  std::mt19937_64 rng(5);
  // What every attribute stores and reads, to compare after a refusal.
  auto snapshot = [](const Table& t, Ino dir) {
    std::vector<std::pair<std::optional<ArraySchema>, Bytes>> out;
    for (const TableAttribute& a : t.attrs) out.emplace_back(stored_schema(t.m, a.ino), read_all(*a.array));
    return std::make_pair(out, t.m.md().xattr(dir, kTableXattr));
  };
  auto fill = [&](Table& t) {
    std::vector<Bytes> models;
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    write_random_records(t.attrs, models, rng, 3);
  };

  SECTION("attributes of different lengths: EINVAL") {
    const geom::MemStore g = small_mems();
    auto dev = formatted(g, kDeviceBytes);
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, kColumns, {3000, 2999, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    fill(t);
    const auto before = snapshot(t, dir);
    const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
    std::string msg;
    CHECK(place(t, dir, &msg) == EINVAL);
    CHECK_THAT(msg, Catch::Contains("b_i4"));
    CHECK(snapshot(t, dir) == before);
    CHECK(t.m.vol->allocator().free_sectors() == free_before);
    // Nor with no attributes at all, or one that is not 1-D.
    CHECK(place_table_in_capsules(t.m.ctx(), dir, std::vector<TableAttribute>{}, &msg) == EINVAL);
    {
      Inode n;
      REQUIRE(t.m.md().create(dir, "d_2d", S_IFREG | 0644, 0, 0, "", &n) == 0);
      std::shared_ptr<ArrayFile> a;
      REQUIRE(ArrayFile::create(t.m.ctx(), n, make_schema({3000, 2}, "int16", "naive"), nullptr, &a, &msg) == 0);
      std::vector<TableAttribute> with = {t.attrs[0], t.attrs[2], TableAttribute{"d_2d", n.ino, a}};
      CHECK(place_table_in_capsules(t.m.ctx(), dir, with, &msg) == EINVAL);
      CHECK_THAT(msg, Catch::Contains("d_2d"));
    }
    CHECK(snapshot(t, dir) == before);
    check_fsck(*t.m.vol);
    unmount(t);
    Table again = open_table(ref(*dev), dir);
    CHECK(snapshot(again, dir) == before);
  }

  SECTION("a sealed mloc attribute: EINVAL, the others' staged copies given back") {
    const geom::MemStore g = small_mems();
    auto dev = formatted(g, kDeviceBytes);
    std::vector<Column> columns = kColumns;
    columns[2].layout = "mloc";  // staged last: the first two are copied into the bands before it fails
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, columns, {3000, 3000, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    std::vector<Bytes> models;
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    std::vector<TableAttribute> cells = {t.attrs[0], t.attrs[1]};
    write_random_records(cells, models, rng, 3);
    REQUIRE(t.attrs[2].array->schema().layout == "mloc");
    const auto before = snapshot(t, dir);
    const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
    std::string msg;
    CHECK(place(t, dir, &msg) == EINVAL);
    CHECK_THAT(msg, Catch::Contains("c_u1"));
    CHECK(snapshot(t, dir) == before);
    CHECK(t.m.vol->allocator().free_sectors() == free_before);
    check_bytes(t.attrs, models);
    check_fsck(*t.m.vol);
    unmount(t);
    Table again = open_table(ref(*dev), dir);
    CHECK(snapshot(again, dir) == before);
    check_fsck(*again.m.vol);
  }

  SECTION("a volume without equivalence classes: ENOTSUP") {
    auto g = testing::toy_disk();
    auto dev = formatted(*g);
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, kColumns, {3000, 3000, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    fill(t);
    const auto before = snapshot(t, dir);
    const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
    std::string msg;
    CHECK(place(t, dir, &msg) == ENOTSUP);
    CHECK_THAT(msg, Catch::Contains("MEMS"));
    CHECK(snapshot(t, dir) == before);
    CHECK(t.m.vol->allocator().free_sectors() == free_before);
    check_fsck(*t.m.vol);
  }

  SECTION("growing: shrinking, an attribute with an index, a table not in capsules: EINVAL") {
    const geom::MemStore g = small_mems();
    auto dev = formatted(g, kDeviceBytes);
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, kColumns, {3000, 3000, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    fill(t);
    std::string msg;
    // Not (yet) in capsules.
    {
      const auto before = snapshot(t, dir);
      CHECK(grow(t, dir, 4000, &msg) == EINVAL);
      CHECK(snapshot(t, dir) == before);
    }
    REQUIRE(place(t, dir, &msg) == 0);
    {
      const auto before = snapshot(t, dir);
      const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
      CHECK(grow(t, dir, 2999, &msg) == EINVAL);
      CHECK_THAT(msg, Catch::Contains("shrinks"));
      CHECK(grow(t, dir, 0, &msg) == EINVAL);
      CHECK(snapshot(t, dir) == before);
      CHECK(t.m.vol->allocator().free_sectors() == free_before);
      for (const TableAttribute& a : t.attrs) CHECK(a.array->shape() == std::vector<std::uint64_t>{3000});
    }
    // An attribute with a bitmap index.
    ArraySchema s = t.attrs[1].array->schema();
    s.index = "e1";
    {
      int r = t.attrs[1].array->change_schema(s, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    {
      const auto before = snapshot(t, dir);
      const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
      CHECK(grow(t, dir, 40000, &msg) == EINVAL);
      CHECK_THAT(msg, Catch::Contains("b_i4"));
      CHECK(snapshot(t, dir) == before);
      CHECK(t.m.vol->allocator().free_sectors() == free_before);
      for (const TableAttribute& a : t.attrs) CHECK(a.array->shape() == std::vector<std::uint64_t>{3000});
      check_fsck(*t.m.vol);
      unmount(t);
      Table again = open_table(ref(*dev), dir);
      CHECK(snapshot(again, dir) == before);
      check_fsck(*again.m.vol);
    }
  }

  SECTION("an index set before placing: the table places, but does not grow") {
    const geom::MemStore g = small_mems();
    auto dev = formatted(g, kDeviceBytes);
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, kColumns, {3000, 3000, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    fill(t);
    std::string msg;
    ArraySchema s = t.attrs[2].array->schema();
    s.index = "e1";
    {
      int r = t.attrs[2].array->change_schema(s, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    {
      int r = place(t, dir, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    CHECK(t.attrs[2].array->schema().index == "e1");
    const auto before = snapshot(t, dir);
    CHECK(grow(t, dir, 40000, &msg) == EINVAL);
    CHECK_THAT(msg, Catch::Contains("c_u1"));
    CHECK(snapshot(t, dir) == before);
    check_fsck(*t.m.vol);
  }
}

TEST_CASE("capsule table: with an attribute removed, growing gives the new bands' tracks it would own back",
          "[capsule_table]") {
  const geom::MemStore g = small_mems();
  std::mt19937_64 rng(99);
  auto dev = formatted(g, kDeviceBytes);
  const std::uint64_t n0 = 3000, n1 = 40000;
  Ino dir = 0;
  {
    Mount m = mount(ref(*dev));
    dir = make_table_dir(m, kColumns, {n0, n0, n0});
  }
  std::vector<Bytes> models;
  std::vector<std::uint64_t> sample = {0, 5, 383, 384, 2999};
  std::vector<std::vector<geom::Lbn>> old_lbns;
  std::uint64_t track_sectors = 0, removed_blocks = 0, kept_blocks = 0, free_after = 0;
  {
    Table t = open_table(ref(*dev), dir);
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    write_random_records(t.attrs, models, rng, 5);
    std::string msg;
    {
      int r = place(t, dir, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    track_sectors = g.sectors_per_track();
    for (const TableAttribute& a : t.attrs)
      (a.name == "b_i4" ? removed_blocks : kept_blocks) += a.array->schema().table_part->cells_per_capsule;
    // b_i4 goes: its tracks of the band with it.
    const std::uint64_t free_placed = t.m.vol->allocator().free_sectors();
    t.attrs.erase(t.attrs.begin() + 1);
    models.erase(models.begin() + 1);
    REQUIRE(t.m.md().unlink(dir, "b_i4") == 0);
    REQUIRE(t.m.md().sync() == 0);
    CHECK(t.m.vol->allocator().free_sectors() == free_placed + removed_blocks * track_sectors);
    old_lbns = lbns_of(t.attrs, sample);
    const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
    // Grown into a second band: of its tracks, only the remaining attributes' stay allocated.
    {
      int r = grow(t, dir, n1, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    for (std::size_t i = 0; i < models.size(); ++i) models[i].resize(n1 * t.attrs[i].array->schema().dtype.itemsize, 0);
    CHECK(table_info(t.attrs, dir, stored_record(t.m, dir))["capsule"]["bands"] == 2);
    free_after = t.m.vol->allocator().free_sectors();
    CHECK(free_after == free_before - kept_blocks * track_sectors);
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
  }
  Table t = open_table(ref(*dev), dir);
  REQUIRE(t.attrs.size() == 2);
  CHECK(t.m.vol->allocator().free_sectors() == free_after);
  CHECK(lbns_of(t.attrs, sample) == old_lbns);
  check_bytes(t.attrs, models);
  check_rows(t.m, t.attrs, models, rng);
  check_fsck(*t.m.vol);
}

TEST_CASE("capsule table: more attributes than the parallelism, capsules split across two classes",
          "[capsule_table]") {
  const geom::MemStore g = small_mems();
  std::mt19937_64 rng(12);
  auto dev = formatted(g, kDeviceBytes);
  std::vector<Column> columns;
  const char* dtypes[] = {"uint8", "int16", "float32", "int64"};
  for (int i = 0; i < 12; ++i) columns.push_back({fmt::format("x{:02}", i), dtypes[i % 4], i % 2 ? "naive" : "hilbert"});
  const std::uint64_t n0 = 2500, n1 = 30000;
  Ino dir = 0;
  {
    Mount m = mount(ref(*dev));
    dir = make_table_dir(m, columns, std::vector<std::uint64_t>(columns.size(), n0));
  }
  std::vector<Bytes> models;
  {
    Table t = open_table(ref(*dev), dir);
    REQUIRE(t.attrs.size() == 12);
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    write_random_records(t.attrs, models, rng, 3);
    std::string msg;
    int r = place(t, dir, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    const layouts::CapsuleFormat format = format_of(t.m, t.attrs);
    CHECK(format.total == 12);
    const nlohmann::json info = table_info(t.attrs, dir, stored_record(t.m, dir));
    INFO(info.dump());
    CHECK(info["capsule"]["split_capsules"].get<std::uint64_t>() > 0);
    // A record's sectors lie in at most two classes: those of its first blocks, then the rest.
    for (std::uint64_t rec = 0; rec < n0; rec += 11) {
      INFO("record " << rec);
      std::vector<geom::Lbn> cls;
      int classes = 0;
      for (const TableAttribute& a : t.attrs) {
        const geom::Lbn lbn = where(*a.array, rec).first;
        if (classes == 0 || !std::binary_search(cls.begin(), cls.end(), lbn)) {
          ++classes;
          cls = g.equivalent(lbn);
          std::sort(cls.begin(), cls.end());
        }
      }
      CHECK(classes <= 2);
    }
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    r = grow(t, dir, n1, &msg);
    REQUIRE(r == 0);
    for (std::size_t i = 0; i < models.size(); ++i) models[i].resize(n1 * t.attrs[i].array->schema().dtype.itemsize, 0);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
  }
  Table t = open_table(ref(*dev), dir);
  check_bytes(t.attrs, models);
  check_rows(t.m, t.attrs, models, rng);
  check_fsck(*t.m.vol);
}

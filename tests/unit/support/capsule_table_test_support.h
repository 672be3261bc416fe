// Shared by the capsule-table tests (tests/unit/fs/table/test_capsule_table*.cc):
// a small MEMStore, the table's columns, mounting and remounting a table,
// its byte model and the checks of its bytes, format and placement.
#pragma once

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
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/mems_test_support.h"

namespace mmfs::fs::testing::tables {

using namespace mmfs::fs::testing::arrays;
using mmfs::fs::testing::Bytes;
using mmfs::fs::testing::bytes_diff;
using mmfs::fs::testing::RefDevice;

// A small MEMStore (p = 10, N = 100, 40 cylinders of 10 tracks of 90 sectors,
// no micropositioning): a band of a capsule's tracks is one cylinder of 450
// KiB, so a memory device of a few tens of MiB holds many bands.
inline geom::MemStore small_mems() { return geom::MemStore(geom::testing::mems(10, 100, 40, 9, 0)); }
constexpr std::uint64_t kDeviceBytes = 14ull << 20;

// The table's attributes: named so that readdir (bytewise order) gives them in this order.
struct Column {
  std::string name, dtype, layout;
};
inline const std::vector<Column> kColumns = {{"a_f8", "float64", "naive"}, {"b_i4", "int32", "multimap"},
                                      {"c_u1", "uint8", "zorder"}};

inline Bytes read_all(ArrayFile& a) {
  Bytes out(a.size(), 0xAA);
  std::size_t got = 0;
  std::string msg;
  int r = a.read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  INFO("read of inode " << a.ino() << ": " << msg);
  REQUIRE(r == 0);
  out.resize(got);
  return out;
}

inline void write_at(ArrayFile& a, std::uint64_t offset, const Bytes& data) {
  std::string msg;
  int r = a.write(offset, reinterpret_cast<const std::byte*>(data.data()), data.size(), &msg);
  INFO(msg);
  REQUIRE(r == 0);
}

inline void flush(ArrayFile& a) {
  std::string msg;
  int r = a.flush(true, &msg);
  INFO(msg);
  REQUIRE(r == 0);
}

// A few random record ranges of every attribute written (the rest stays zero).
// Flushed (durable) unless `durable` is false: then the cells stay dirty in memory.
inline void write_random_records(std::vector<TableAttribute>& attrs, std::vector<Bytes>& models, std::mt19937_64& rng,
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
inline void litter_free_space(const Mount& m) {
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

inline void check_fsck(Volume& vol) {
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
inline void unmount(Table& t) {
  t.attrs.clear();
  t.m.io.reset();
  t.m.vol.reset();
}

inline std::vector<TableAttribute> attributes_of(const Mount& m, Ino dir) {
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

inline Table open_table(std::unique_ptr<BlockDevice> dev, Ino dir) {
  Table t{mount(std::move(dev)), {}};
  t.attrs = attributes_of(t.m, dir);
  return t;
}

inline std::unique_ptr<BlockDevice> ref(MemoryDevice& d) { return std::unique_ptr<BlockDevice>(new RefDevice(d)); }

// Makes directory "t" holding the columns (of `lengths[i]` records each) in
// `m`; returns its inode. They are created last first: their inode order
// (the order of the placement locks) is not their order in the table.
inline Ino make_table_dir(const Mount& m, const std::vector<Column>& columns, const std::vector<std::uint64_t>& lengths) {
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

inline void check_bytes(const std::vector<TableAttribute>& attrs, const std::vector<Bytes>& models) {
  REQUIRE(attrs.size() == models.size());
  for (std::size_t i = 0; i < attrs.size(); ++i) {
    INFO("attribute " << attrs[i].name);
    CHECK(bytes_diff(read_all(*attrs[i].array), models[i]) == "");
  }
}

// Records [first, first + count) interleaved by brute force.
inline Bytes interleave(const std::vector<TableAttribute>& attrs, const std::vector<Bytes>& models, std::uint64_t first,
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

inline void check_rows(const Mount& m, const std::vector<TableAttribute>& attrs, const std::vector<Bytes>& models,
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

inline layouts::CapsuleFormat format_of(const Mount& m, const std::vector<TableAttribute>& attrs) {
  std::vector<std::uint32_t> sizes;
  for (const TableAttribute& a : attrs) sizes.push_back(a.array->schema().dtype.itemsize);
  return layouts::capsule_resolve(sizes, m.vol->geometry().sector_size(), m.vol->geometry().parallelism());
}

inline std::optional<TableRecord> stored_record(const Mount& m, Ino dir) {
  auto text = m.md().xattr(dir, kTableXattr);
  if (!text) return std::nullopt;
  auto rec = decode_table_record(*text);
  REQUIRE(rec);
  return rec;
}

// The sector and offset of record r of an attribute (lbn_text).
inline std::pair<geom::Lbn, std::uint64_t> where(const ArrayFile& a, std::uint64_t r) {
  std::string text, msg;
  const std::vector<std::uint64_t> x = {r};
  REQUIRE(a.lbn_text(x, &text, &msg) == 0);
  unsigned long long lbn = 0, offset = 0;
  REQUIRE(std::sscanf(text.c_str(), "%llu %llu", &lbn, &offset) == 2);
  return {lbn, offset};
}

// Records of [first, last) of which some attribute's element is not zero on
// the device (stale bytes where the array reads zeros).
inline std::uint64_t stale_records(const std::vector<TableAttribute>& attrs, MemoryDevice& dev, std::uint32_t sector,
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
inline std::vector<std::vector<geom::Lbn>> lbns_of(const std::vector<TableAttribute>& attrs,
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
inline void check_in_capsules(Table& t, Ino dir, std::uint64_t records, const std::vector<Bytes>& models,
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

inline void check_apart(Table& t, Ino dir, const std::vector<ArraySchema>& want) {
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
inline std::vector<ArraySchema> apart_schemas(const std::vector<TableAttribute>& attrs, const std::string& layout) {
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

inline int place(Table& t, Ino dir, std::string* msg) { return place_table_in_capsules(t.m.ctx(), dir, t.attrs, msg); }
inline int grow(Table& t, Ino dir, std::uint64_t n, std::string* msg) { return grow_table(t.m.ctx(), dir, t.attrs, n, msg); }
inline int apart(Table& t, Ino dir, const std::vector<ArraySchema>& next, std::string* msg) {
  return place_table_apart(t.m.ctx(), dir, t.attrs, next, msg);
}

inline std::vector<std::optional<ArraySchema>> stored_schemas(const Mount& m, const std::vector<TableAttribute>& attrs) {
  std::vector<std::optional<ArraySchema>> out;
  for (const TableAttribute& a : attrs) out.push_back(stored_schema(m, a.ino));
  return out;
}


}  // namespace mmfs::fs::testing::tables

// Array files under failure (fs/array/array_file.cc): durability across a
// remount and a power cut, crash consistency of relayouts and write-backs on
// the fault-injecting device, damaged cells and bit flips as EIO (never wrong
// bytes), and failed relayouts or conversions that leave metadata, allocator
// and handle in agreement.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_schema.h"
#include "fs/device/fault_device.h"
#include "fs/volume/fsck.h"
#include "fs/file/plain_file.h"
#include "fs/device/sector_io.h"
#include "fs/paths/view_path.h"
#include "layouts/cell_copy.h"
#include "layouts/selection_chunks.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/array_file_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

TEST_CASE("array file: flush(true) survives a remount and a power cut; fsck is clean", "[array_file]") {
  auto g = toy_disk();
  for (const std::string& layout : kLayouts) {
    INFO("layout " << layout);
    ArraySchema s = make_schema({3, 5, 4, 6}, "int16", layout);
    s.order = {1, 3, 0, 2};
    const std::uint64_t seed = std::hash<std::string>{}(layout);
    // The same writes (same seed) on a device closed cleanly and on one cut right after fsync.
    auto fill = [&](const Mount& m, Bytes* model) {
      std::mt19937_64 rng(seed);
      auto a = create_array(m, "durable", s);
      model->assign(array_bytes(s), 0);
      random_writes(*a, *model, rng, 30);
      std::string msg;
      REQUIRE(a->flush(true, &msg) == 0);
      return a->ino();
    };
    auto dev = formatted(*g);
    Bytes model, model2;
    Ino ino = 0;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
      ino = fill(m, &model);
    }
    std::unique_ptr<MemoryDevice> power_cut;
    {
      auto* fault = new FaultInjectingDevice(formatted(*g), 5);
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      REQUIRE(fill(m, &model2) == ino);
      power_cut = fault->crash_image();
    }
    REQUIRE(bytes_diff(model, model2) == "");
    for (int pass = 0; pass < 2; ++pass) {
      INFO((pass == 0 ? "remount" : "after the power cut"));
      Mount m = mount(pass == 0 ? std::unique_ptr<BlockDevice>(new RefDevice(*dev))
                                : std::unique_ptr<BlockDevice>(std::move(power_cut)));
      auto stored = stored_schema(m, ino);
      REQUIRE(stored);
      CHECK(*stored == s);
      auto a = open_stored(m, ino);
      CHECK(a->size() == model.size());
      CHECK(bytes_diff(read_all(*a), model) == "");
      CHECK(m.md().inode(ino)->size == model.size());
      auto report = check_volume(*m.vol, false);
      INFO((report.problems.empty() ? "" : report.problems[0]));
      CHECK(report.problems.empty());
    }
    // Write more after a remount, close, reopen the same device again.
    {
      std::mt19937_64 rng(seed + 1);
      Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
      auto a = open_stored(m, ino);
      Bytes more = random_bytes(rng, 50);
      REQUIRE(write_file(*a, 17, more) == 0);
      std::copy(more.begin(), more.end(), model.begin() + 17);
      std::string msg;
      REQUIRE(a->flush(true, &msg) == 0);
    }
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
      auto a = open_stored(m, ino);
      CHECK(bytes_diff(read_all(*a), model) == "");
      CHECK(check_volume(*m.vol, false).problems.empty());
    }
  }
}

TEST_CASE("array file: a power cut during a relayout leaves the old or the new placement, never a mix",
          "[array_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(31337);
  // The golden image: an array full of data, durable.
  auto golden = formatted(*g);
  ArraySchema s = make_schema({40, 30, 20}, "float32", "naive");
  Ino ino = 0;
  Bytes model(array_bytes(s), 0);
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "c", s);
    ino = a->ino();
    random_writes(*a, model, rng, 40);
    REQUIRE(write_file(*a, 0, Bytes(model.begin(), model.begin() + 1000)) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
  }
  std::vector<ArraySchema> targets;
  {
    ArraySchema t = s;
    t.layout = "hilbert";
    targets.push_back(t);
    t.layout = "multimap";
    t.order = {0, 1, 2};
    targets.push_back(t);
    t = s;
    t.cell = {5, 3, 2};
    targets.push_back(t);
  }
  // How many device events (writes and flushes) each relayout takes.
  std::vector<std::uint64_t> events(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    std::uint64_t before = fault->events();
    std::string msg;
    REQUIRE(a->change_schema(targets[t], &msg) == 0);
    events[t] = fault->events() - before;
    REQUIRE(events[t] > 2);
  }
  int old_kept = 0, new_kept = 0;
  for (std::uint64_t i = 0; i < 100; ++i) {
    std::size_t t = i % targets.size();
    // Cut points 1..events (the machine dies there) and, now and then, none at all.
    std::uint64_t cut = i % 10 == 9 ? 0 : 1 + rng() % events[t];
    INFO("iteration " << i << " target " << t << " cut " << cut << " of " << events[t]);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1000 + i);
    std::unique_ptr<MemoryDevice> image;
    int r = 0;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      auto a = open_stored(m, ino);
      if (cut) fault->fail_after(fault->events() + cut);
      std::string msg;
      r = a->change_schema(targets[t], &msg);
      if (!cut) CHECK(r == 0);
      image = fault->crash_image();
      a.reset();
    }
    Mount m = mount(std::move(image));
    auto stored = stored_schema(m, ino);
    REQUIRE(stored);
    bool is_old = *stored == s, is_new = *stored == targets[t];
    CHECK((is_old || is_new));
    if (r == 0) CHECK(is_new);  // change_schema returns when the new placement is durable
    (is_new ? new_kept : old_kept)++;
    auto a = open_stored(m, ino);
    Bytes got(model.size());
    std::size_t n = 0;
    std::string msg;
    int rr = a->read(0, got.size(), reinterpret_cast<std::byte*>(got.data()), &n, &msg);
    INFO(msg);
    REQUIRE(rr == 0);
    REQUIRE(n == model.size());
    REQUIRE(bytes_diff(got, model) == "");
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    REQUIRE(report.problems.empty());
  }
  CHECK(old_kept > 0);
  CHECK(new_kept > 0);
}

TEST_CASE("array file: a damaged cell reads as EIO, never as wrong bytes", "[array_file]") {
  auto g = toy_disk();
  for (const std::string& layout : kLayouts) {
    INFO("layout " << layout);
    std::mt19937_64 rng(99);
    MemoryDevice dev(kToyDeviceBytes, 512);
    {
      auto f = formatted(*g);
      dev.bytes() = f->bytes();
    }
    ArraySchema s = make_schema({9, 10, 11}, "float64", layout);
    Bytes model(array_bytes(s));
    auto* ref = new RefDevice(dev);
    Mount m = mount(std::unique_ptr<BlockDevice>(ref));
    auto a = create_array(m, "sum", s);
    model = random_bytes(rng, model.size());
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    // Element (4, 5, 6): flip one bit of its sector on the device.
    std::vector<std::uint64_t> x = {4, 5, 6};
    std::string where;
    REQUIRE(a->lbn_text(x, &where, &msg) == 0);
    std::uint64_t lbn = 0, offset = 0;
    REQUIRE(std::sscanf(where.c_str(), "%lu %lu", &lbn, &offset) == 2);
    std::uint64_t byte = lbn * 512 + offset;
    // The sector does hold the element (lbn_text points at it).
    std::uint64_t e = ((4 * 10) + 5) * 11 + 6;
    REQUIRE(std::memcmp(dev.bytes().data() + byte, model.data() + e * 8, 8) == 0);
    dev.bytes()[byte + 3] ^= std::byte{0x20};
    auto b = open_stored(m, a->ino());  // no cached chunks
    Bytes out(model.size());
    std::size_t got = 0;
    CHECK(b->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg) == EIO);
    CHECK_THAT(msg, Catch::Contains("checksum"));
    // A device that fails the read is not a checksum mismatch.
    ref->fail_reads = true;
    msg.clear();
    CHECK(open_stored(m, a->ino())->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg) ==
          EIO);
    CHECK(msg == "device read failed");
    ref->fail_reads = false;
    // Views that touch the cell fail too; views that do not are intact.
    DataView hit = resolve({"slice", "0", "4"}, s);
    Bytes hv(hit.bytes(8));
    CHECK(b->read_view(hit, 0, hv.size(), reinterpret_cast<std::byte*>(hv.data()), &got, &msg) == EIO);
    // A slice outside the damaged cell: along a dimension the cell does not span.
    std::vector<std::uint64_t> cell = b->info()["cell"].get<std::vector<std::uint64_t>>();
    std::size_t d = 0;
    while (d < 3 && cell[d] >= s.shape[d]) ++d;
    REQUIRE(d < 3);
    std::uint64_t lo = x[d] / cell[d] * cell[d];
    std::uint64_t i = lo > 0 ? 0 : cell[d];
    std::vector<Sel> away = {{false, 0, 9, 1}, {false, 0, 10, 1}, {false, 0, 11, 1}};
    away[d] = Sel{true, i, i + 1, 1};
    Bytes expect = extract(model, s.shape, 8, away);
    CHECK(bytes_diff(read_view_bytes(*b, resolve({"box", spell(away)}, s), 0, expect.size()), expect) == "");
    // A partial write into the damaged cell cannot be merged: flush fails with
    // EIO instead of writing a cell built on wrong bytes.
    REQUIRE(write_file(*b, e * 8 + 1, Bytes(2, 0x5A)) == 0);
    CHECK(b->flush(false, &msg) == EIO);
    // Repair the device: the pending write merges with the true bytes.
    dev.bytes()[byte + 3] ^= std::byte{0x20};
    REQUIRE(b->flush(false, &msg) == 0);
    model[e * 8 + 1] = model[e * 8 + 2] = 0x5A;
    CHECK(bytes_diff(read_all(*b), model) == "");
  }
}

TEST_CASE("array file: random read bit flips give EIO or the right bytes", "[array_file]") {
  auto g = toy_disk();
  std::mt19937_64 rng(5);
  auto golden = formatted(*g);
  ArraySchema s = make_schema({9, 10, 11}, "float64", "hilbert");
  Bytes model = random_bytes(rng, array_bytes(s));
  Ino ino = 0;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "flip", s);
    ino = a->ino();
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
  }
  auto* fault = new FaultInjectingDevice(copy_of(*golden), 8);
  Mount m = mount(std::unique_ptr<BlockDevice>(fault));
  int eio = 0, ok = 0;
  for (int i = 0; i < 20; ++i) {
    fault->set_read_bitflip_probability(0);
    auto a = open_stored(m, ino);
    fault->set_read_bitflip_probability(i % 2 ? 1.0 : 0.3);
    Bytes out(model.size());
    std::size_t got = 0;
    std::string msg;
    int r = a->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
    if (r == 0) {
      ++ok;
      CHECK(bytes_diff(out, model) == "");
    } else {
      ++eio;
      CHECK(r == EIO);
    }
  }
  CHECK(eio > 0);
}

TEST_CASE("array file: a relayout failing with EIO leaves metadata, allocator and handle in agreement",
          "[array_file]") {
  auto g = toy_disk();
  std::mt19937_64 rng(2024);
  auto golden = formatted(*g);
  ArraySchema s = make_schema({12, 10, 9}, "float32", "naive");
  Ino ino = 0;
  Bytes model(array_bytes(s), 0);
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "e", s);
    ino = a->ino();
    random_writes(*a, model, rng, 30);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
  }
  ArraySchema next = s;
  next.layout = "hilbert";
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    std::uint64_t before = fault->events();
    std::string msg;
    REQUIRE(a->change_schema(next, &msg) == 0);
    events = fault->events() - before;
  }
  for (std::uint64_t cut = 1; cut <= events; ++cut) {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), cut);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    fault->fail_after(fault->events() + cut);
    std::string msg;
    int r = a->change_schema(next, &msg);
    INFO("cut " << cut << " of " << events << ": change_schema returned " << r << " (" << msg << ")");
    if (r == 0) continue;
    CHECK(r == EIO);
    auto stored = stored_schema(m, ino);
    REQUIRE(stored);
    CHECK(a->schema() == *stored);
    std::vector<Extent> mine = m.md().extents(ino);
    std::uint64_t overlap = 0;
    for (const Extent& f : m.vol->allocator().free_extents())
      for (const Extent& e : mine) {
        std::uint64_t lo = std::max(f.start, e.start), hi = std::min(f.start + f.sectors, e.start + e.sectors);
        if (lo < hi) overlap += hi - lo;
      }
    CHECK(overlap == 0);  // sectors the store gives the array must not be free
  }
}

// The same for the conversion of a plain file: when ArrayFile::create fails
// with EIO, the sectors the store records for the file must not be free.
TEST_CASE("array file: a conversion failing with EIO leaves metadata and allocator in agreement",
          "[array_file]") {
  auto g = toy_disk();
  std::mt19937_64 rng(77);
  auto golden = formatted(*g);
  ArraySchema s = make_schema({12, 10, 9}, "float32", "naive");
  const std::uint64_t N = array_bytes(s);
  Bytes model = random_bytes(rng, N);
  Ino ino = 0;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    ino = new_file(m.md(), "p");
    PlainFile p(m.md(), m.vol->allocator(), *m.io, m.vol->geometry(), ino, 0);
    REQUIRE(p.write(0, reinterpret_cast<const std::byte*>(model.data()), N) == 0);
    REQUIRE(p.commit() == 0);
    REQUIRE(m.md().sync() == 0);
  }
  auto convert = [&](const Mount& m, int* r, std::string* msg) {
    PlainFile p(m.md(), m.vol->allocator(), *m.io, m.vol->geometry(), ino, N);
    std::shared_ptr<ArrayFile> a;
    *r = ArrayFile::create(m.ctx(), *m.md().inode(ino), s, &p, &a, msg);
    return a;
  };
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    std::uint64_t before = fault->events();
    int r = 0;
    std::string msg;
    auto a = convert(m, &r, &msg);
    REQUIRE(r == 0);
    CHECK(bytes_diff(read_all(*a), model) == "");
    events = fault->events() - before;
  }
  for (std::uint64_t cut = 1; cut <= events; ++cut) {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), cut);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    fault->fail_after(fault->events() + cut);
    int r = 0;
    std::string msg;
    auto a = convert(m, &r, &msg);
    INFO("cut " << cut << " of " << events << ": create returned " << r << " (" << msg << ")");
    if (r == 0) continue;
    CHECK(r == EIO);
    std::uint64_t overlap = 0;
    for (const Extent& f : m.vol->allocator().free_extents())
      for (const Extent& e : m.md().extents(ino)) {
        std::uint64_t lo = std::max(f.start, e.start), hi = std::min(f.start + f.sectors, e.start + e.sectors);
        if (lo < hi) overlap += hi - lo;
      }
    CHECK(overlap == 0);
  }
}

TEST_CASE("array file: fsynced elements survive a crash after a later unsynced write to their cell",
          "[array_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(808);
  ArraySchema s = make_schema({9, 10, 11}, "float64", "naive");
  Bytes model = random_bytes(rng, array_bytes(s));
  auto* fault = new FaultInjectingDevice(formatted(*g), 3);
  std::unique_ptr<MemoryDevice> image;
  Ino ino = 0;
  const std::uint64_t e = (4 * 10 + 5) * 11 + 6;  // the element rewritten after the fsync
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = create_array(m, "fs", s);
    ino = a->ino();
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);  // fsync: every element durable
    REQUIRE(write_file(*a, e * 8, Bytes(8, 0x33)) == 0);
    // A read writes the dirty cell back (flush(false): data and device flush, no metadata sync).
    Bytes probe = read_file(*a, e * 8, 8);
    CHECK(probe == Bytes(8, 0x33));
    image = fault->crash_image();  // the power cut
  }
  Mount m = mount(std::move(image));
  auto a = open_stored(m, ino);
  Bytes out(model.size());
  std::size_t got = 0;
  std::string msg;
  int r = a->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  INFO(msg);
  CHECK(r == 0);  // fails: EIO, the cell's stored checksum is the fsynced one, its sectors the new bytes
  if (r == 0) {
    // Every fsynced element is intact; the rewritten one is old or new.
    Bytes rewritten(out.begin() + std::ptrdiff_t(e * 8), out.begin() + std::ptrdiff_t(e * 8 + 8));
    CHECK((rewritten == Bytes(8, 0x33) ||
           rewritten == Bytes(model.begin() + std::ptrdiff_t(e * 8), model.begin() + std::ptrdiff_t(e * 8 + 8))));
    std::copy(rewritten.begin(), rewritten.end(), model.begin() + std::ptrdiff_t(e * 8));
    CHECK(bytes_diff(out, model) == "");
  }
}

// A cell that never held data reads as zeros without a device read; the
// sectors the placement got hold whatever an earlier file left there. The
// daemon killed anywhere in the first write-back of such cells (the
// alternative checksums durable, the cells not yet written) must leave each
// cell reading as zeros or as its new bytes, never as EIO.
TEST_CASE("array file: the daemon killed in the first write-back of cells leaves zeros or the new bytes",
          "[array_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(1919);
  ArraySchema s = make_schema({16, 16, 16}, "float64", "zorder");
  const Bytes data = random_bytes(rng, array_bytes(s));
  auto golden = formatted(*g);
  Ino ino = 0;
  {
    Mount m = mount(std::make_unique<RefDevice>(*golden));
    ino = create_array(m, "a", s)->ino();
    // An earlier file's bytes in the array's sectors.
    for (const Extent& e : m.md().extents(ino))
      std::fill_n(golden->bytes().begin() + std::ptrdiff_t(e.start * 512), e.sectors * 512, std::byte{0x5A});
  }
  auto run = [&](BlockDevice& dev) {
    Mount m = mount(std::make_unique<RefDevice>(dev));
    auto a = open_stored(m, ino);
    std::string msg;
    if (write_file(*a, 0, data) != 0) return;
    a->flush(true, &msg);
  };
  auto check = [&](MemoryDevice& image, std::uint64_t cut, std::uint64_t events) {
    INFO("killed after " << cut << " of " << events << " device events");
    Mount m = mount(std::make_unique<RefDevice>(image));
    auto a = open_stored(m, ino);
    Bytes got(data.size());
    std::size_t n = 0;
    std::string msg;
    int r = a->read(0, got.size(), reinterpret_cast<std::byte*>(got.data()), &n, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    // Element by element: zero (the cell's old state) or the value written.
    for (std::size_t e = 0; e < data.size(); e += 8) {
      Bytes x(got.begin() + std::ptrdiff_t(e), got.begin() + std::ptrdiff_t(e + 8));
      bool zero = x == Bytes(8, 0);
      bool written = std::equal(x.begin(), x.end(), data.begin() + std::ptrdiff_t(e));
      if (!zero && !written) FAIL("element " << e / 8 << " is neither zero nor the value written");
    }
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  };
  REQUIRE(testing::kill_at_every_event(*golden, run, check) > 2);
}

// The same during a relayout: change_schema first writes the dirty cells
// back in place (old placement), then copies. A power cut before its commit
// leaves the old placement, whose cells must still read (old or new bytes).
TEST_CASE("array file: a power cut during a relayout with unflushed writes leaves readable cells",
          "[array_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(4711);
  auto golden = formatted(*g);
  ArraySchema s = make_schema({12, 10, 9}, "float32", "naive");
  Ino ino = 0;
  Bytes model = random_bytes(rng, array_bytes(s));
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "u", s);
    ino = a->ino();
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
  }
  ArraySchema next = s;
  next.layout = "hilbert";
  int unreadable = 0;
  // 100 cut points: a few of them tear a cell that spans several device
  // blocks (settled at the next load, ArrayState::settle_torn_rewrites).
  for (std::uint64_t i = 0; i < 100; ++i) {
    std::mt19937_64 r(i);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 50 + i);
    Bytes written = model;
    std::unique_ptr<MemoryDevice> image;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      auto a = open_stored(m, ino);
      for (int k = 0; k < 5; ++k) {
        std::uint64_t off = r() % model.size();
        Bytes d = random_bytes(r, std::size_t(std::min<std::uint64_t>(1 + r() % 40, model.size() - off)));
        REQUIRE(write_file(*a, off, d) == 0);
        std::copy(d.begin(), d.end(), written.begin() + std::ptrdiff_t(off));
      }
      fault->fail_after(fault->events() + 1 + r() % 6);
      std::string msg;
      (void)a->change_schema(next, &msg);
      image = fault->crash_image();
    }
    Mount m = mount(std::move(image));
    auto stored = stored_schema(m, ino);
    REQUIRE(stored);
    CHECK((*stored == s || *stored == next));
    auto a = open_stored(m, ino);
    Bytes out(model.size());
    std::size_t got = 0;
    std::string msg;
    int rr = a->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
    INFO("iteration " << i << ": " << msg);
    if (rr != 0) {
      ++unreadable;
      std::printf("power cut %llu during a relayout: unreadable: %s\n", static_cast<unsigned long long>(i),
                  msg.c_str());
      continue;
    }
    std::size_t neither = 0;
    for (std::size_t b = 0; b < out.size(); ++b) neither += out[b] != model[b] && out[b] != written[b];
    CHECK(neither == 0);  // bytes that are neither the fsynced nor the written value
    CHECK(check_volume(*m.vol, false).problems.empty());
  }
  CHECK(unreadable == 0);
}

// The chunked read path of array files (fs/array/array_file_read.cc,
// fs/array/chunk_reader.h): a sequential reader loads each chunk once with
// the prefetch pipeline ahead of it, a view's plan is the reads its read
// makes, chunk sizes the model chooses, and mloc views and plans.
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

namespace {

constexpr std::uint64_t kSmallChunk = 64 << 10;  // 16 chunks of a 1 MiB array

// An array read in chunks of kSmallChunk, written at random, flushed, and
// opened again through a fresh handle: nothing cached, nothing loading.
std::shared_ptr<ArrayFile> small_chunked_array(Mount& m, const std::string& name, const ArraySchema& s,
                                               std::mt19937_64& rng, Bytes* model) {
  ArrayContext ctx = m.ctx();
  ctx.chunk_bytes = kSmallChunk;
  Inode n;
  new_file(m.md(), name, &n);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  REQUIRE(ArrayFile::create(ctx, n, s, nullptr, &a, &msg) == 0);
  model->assign(a->size(), 0);
  random_writes(*a, *model, rng, 40);
  REQUIRE(a->flush(true, &msg) == 0);
  a->quiesce();
  REQUIRE(ArrayFile::open(ctx, a->ino(), s, &a, &msg) == 0);
  return a;
}


// The cells of the [zarr_within] arrays (the toy disk's naive and Hilbert
// cells of a 64x64x32 float64 array).
const std::vector<std::uint64_t> kWithinCells{16, 32, 8};

// The data view of Zarr chunk `index` of the chunk shape `chunk`.
DataView zarr_chunk_view(const ArraySchema& s, const std::vector<std::uint64_t>& chunk,
                         const std::vector<std::uint64_t>& index) {
  std::vector<std::string> comps{"zarr", fmt::format("{}", fmt::join(chunk, ",")), "c"};
  for (auto i : index) comps.push_back(std::to_string(i));
  auto r = resolve_view(comps, s.shape, s.dtype.itemsize, false, kWithinCells, 0);
  REQUIRE(std::holds_alternative<ViewNode>(r));
  const ViewNode& node = std::get<ViewNode>(r);
  REQUIRE(node.data);
  return *node.data;
}

// What a box view of `model` (the array's bytes) reads.
Bytes box_bytes(const Bytes& model, const ArraySchema& s, const DataView& v) {
  std::vector<Sel> sel;
  for (const auto& d : v.selection.dims()) sel.push_back({false, d.start, d.stop, 1});
  return extract(model, s.shape, s.dtype.itemsize, sel);
}

}  // namespace

TEST_CASE("array file: a sequential reader loads each chunk once, the pipeline ahead of it", "[array_file]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(21);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  for (const char* layout : {"naive", "hilbert"}) {
    INFO(layout);
    ArraySchema s = make_schema({64, 64, 32}, "float64", layout);
    Bytes model;
    std::shared_ptr<ArrayFile> a = small_chunked_array(m, std::string("seq-") + layout, s, rng, &model);
    std::string msg;

    const DataView all = a->whole();
    // The chunk size is the model's choice (kSmallChunk or a multiple); the
    // plan says how many chunks the read takes.
    nlohmann::json plan;
    REQUIRE(a->plan(all, &plan, &msg) == 0);
    const std::uint64_t chunks = plan["chunks"].get<std::uint64_t>();
    REQUIRE(chunks >= 8);
    REQUIRE(a->chunk_stats().loads == 0);
    // The first chunk, then a pause: the pipeline fills the chunks after it.
    std::shared_ptr<const AlignedBuffer> first;
    const std::byte* first_data = nullptr;
    std::size_t first_got = 0;
    REQUIRE(a->view_span(all, 0, 8, &first, &first_data, &first_got, &msg) == 0);
    a->wait_for_prefetches();
    // Three chunks of the context's size ahead, in chunks of the chosen
    // size, and never fewer than two.
    const std::uint64_t depth =
        std::clamp<std::uint64_t>(3 * kSmallChunk / plan["chunk_bytes"].get<std::uint64_t>(), 2, 3);
    CHECK(a->chunk_stats().loads == depth + 1);
    CHECK(a->chunk_stats().prefetched == depth);
    // As the kernel reads a file: pieces smaller than a chunk, in order.
    constexpr std::size_t kPiece = 24 << 10;
    for (std::uint64_t off = 0; off < model.size(); off += kPiece) {
      std::size_t len = std::min<std::uint64_t>(kPiece, model.size() - off);
      std::shared_ptr<const AlignedBuffer> keep;
      const std::byte* data = nullptr;
      std::size_t got = 0;
      REQUIRE(a->view_span(all, off, len, &keep, &data, &got, &msg) == 0);
      Bytes piece;
      if (data != nullptr) {
        REQUIRE(got == len);
        piece.assign(reinterpret_cast<const std::uint8_t*>(data), reinterpret_cast<const std::uint8_t*>(data) + len);
      } else {
        piece = read_view_bytes(*a, all, off, len);  // the piece crosses chunks
      }
      Bytes want(model.begin() + std::ptrdiff_t(off), model.begin() + std::ptrdiff_t(off + len));
      REQUIRE(bytes_diff(piece, want) == "");
    }
    a->wait_for_prefetches();
    const ChunkStats st = a->chunk_stats();
    CHECK(st.loads == chunks);  // no chunk read twice: prefetched ones wait for their reader
    CHECK(st.evicted_unread == 0);
  }
}

TEST_CASE("array file: the plan of a view read in chunks is the reads the read makes", "[array_file]") {
  // A view longer than a chunk is read chunk by chunk, each chunk's cells
  // planned on their own. Its plan must say so: planned as one selection, the
  // whole file of a contiguous layout was one request, while the read made
  // hundreds (modeled_ms of the full read).
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(23);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  for (const char* layout : {"naive", "hilbert"}) {
    INFO(layout);
    ArraySchema s = make_schema({64, 64, 32}, "float64", layout);
    Bytes model;
    std::shared_ptr<ArrayFile> a = small_chunked_array(m, std::string("planned-") + layout, s, rng, &model);
    std::string msg;

    DataView rows;  // a view of several chunks, and the whole file
    rows.selection = layouts::Selection({{8, 40, 1}, {0, 64, 1}, {0, 32, 1}});
    rows.spelling = "box/8:48,:,:";
    for (const DataView& view : {a->whole(), rows}) {
      INFO(view.spelling);
      nlohmann::json plan;
      REQUIRE(a->plan(view, &plan, &msg) == 0);
      const std::uint64_t total = view.bytes(s.dtype.itemsize);
      CHECK(plan.value("chunks", std::uint64_t(0)) > 1);
      CHECK(plan.at("bytes_useful").get<std::uint64_t>() == total);
      const nlohmann::json before = m.io->stats();
      for (std::uint64_t off = 0; off < total; off += 24 << 10) {
        const std::size_t len = std::min<std::uint64_t>(24 << 10, total - off);
        std::shared_ptr<const AlignedBuffer> keep;
        const std::byte* data = nullptr;
        std::size_t got = 0;
        REQUIRE(a->view_span(view, off, len, &keep, &data, &got, &msg) == 0);
        if (data == nullptr) read_view_bytes(*a, view, off, len);  // the piece crosses chunks
      }
      a->wait_for_prefetches();
      const nlohmann::json after = m.io->stats();
      auto delta = [&](const char* key) { return after.at(key).get<std::uint64_t>() - before.at(key).get<std::uint64_t>(); };
      CHECK(delta("requests") == plan.at("requests").get<std::uint64_t>());
      CHECK(delta("data_sectors_read") * g->sector_size() == plan.at("bytes_read").get<std::uint64_t>());
      std::uint64_t planned_requests = 0;
      for (const auto& b : plan.at("batches")) planned_requests += b.size();
      CHECK(planned_requests == plan.at("requests").get<std::uint64_t>());
    }
  }
}

TEST_CASE("array file: a long view is read in larger chunks only when the model reads them cheaper per byte",
          "[array_file]") {
  // Flash priced per request (a request costs as much as 80 KB of transfer):
  // a chunk of one cell layer of a Hilbert grid is many short runs, and a
  // 2^k-aligned block of layers is long ones.
  auto flash = geom::load_geometry(nlohmann::json{{"kind", "flash"},       {"sector_size", 512},
                                                  {"capacity_sectors", 65536}, {"queues", 1},
                                                  {"latency_ms", 0.08},   {"bandwidth_mb_s", 1000},
                                                  {"name", "one-channel"}});
  std::mt19937_64 rng(31);
  Mount m = mount(formatted(*flash));
  ArraySchema s = make_schema({64, 64, 32}, "float64", "hilbert");
  s.cell = {4, 4, 4};
  Bytes model;
  std::shared_ptr<ArrayFile> a = small_chunked_array(m, "chosen", s, rng, &model);
  std::string msg;
  const DataView all = a->whole();
  nlohmann::json chosen;
  REQUIRE(a->plan(all, &chosen, &msg) == 0);

  ArrayContext fixed_ctx = m.ctx();  // the same array, read in chunks of kSmallChunk only
  fixed_ctx.chunk_bytes = kSmallChunk;
  fixed_ctx.max_chunk_scale = 1;
  std::shared_ptr<ArrayFile> fixed;
  REQUIRE(ArrayFile::open(fixed_ctx, a->ino(), s, &fixed, &msg) == 0);
  nlohmann::json base;
  REQUIRE(fixed->plan(all, &base, &msg) == 0);
  const auto num = [](const nlohmann::json& j, const char* k) { return j.at(k).get<double>(); };
  INFO("chosen " << chosen.dump().substr(0, 200) << "\nbase " << base.dump().substr(0, 200));
  CHECK(num(base, "chunks") == 16);
  CHECK((num(chosen, "chunks") == 8 || num(chosen, "chunks") == 4));
  CHECK(num(chosen, "requests") < num(base, "requests") / 2);
  CHECK(num(chosen, "modeled_ms") <= 0.9 * num(base, "modeled_ms"));
  CHECK(num(chosen, "bytes_read") <= num(base, "bytes_read"));  // fewer gaps read through
  // Both read the same bytes, the larger chunks with the requests planned.
  for (ArrayFile* f : {a.get(), fixed.get()}) {
    const nlohmann::json before = m.io->stats();
    // A reader's first piece starts the prefetch: three chunks of the
    // context's size ahead, and two of the larger ones, never one (one load
    // at a time leaves the device idle while it gathers).
    std::shared_ptr<const AlignedBuffer> keep;
    const std::byte* data = nullptr;
    std::size_t got = 0;
    REQUIRE(f->view_span(all, 0, 8, &keep, &data, &got, &msg) == 0);
    f->wait_for_prefetches();
    CHECK(f->chunk_stats().prefetched == (f == a.get() ? 2 : 3));
    CHECK(bytes_diff(read_view_bytes(*f, all, 0, model.size()), model) == "");
    f->wait_for_prefetches();
    const nlohmann::json after = m.io->stats();
    const nlohmann::json& plan = f == a.get() ? chosen : base;
    CHECK(after.at("requests").get<double>() - before.at("requests").get<double>() == num(plan, "requests"));
  }
  fixed->quiesce();
}

TEST_CASE("array file: mloc plans read through the gaps the volume's model says to, and only those",
          "[array_file][mloc]") {
  // One flash channel whose request costs as much as 100 KB of transfer:
  // the model reads through gaps of a few pieces (layouts/merge_gap.h). On
  // the toy disk it reads through none.
  auto flash = geom::load_geometry(nlohmann::json{{"kind", "flash"},       {"sector_size", 512},
                                                  {"capacity_sectors", 16384}, {"queues", 1},
                                                  {"latency_ms", 0.1},    {"bandwidth_mb_s", 1000},
                                                  {"name", "one-channel"}});
  auto disk = toy_disk();
  std::mt19937_64 rng(1777);
  std::size_t request_count[2] = {0, 0};  // flash, disk
  for (const geom::Geometry* g : {flash.get(), disk.get()}) {
    INFO(g->name());
    Mount m = mount(formatted(*g));
    ArraySchema s = make_schema({32, 32, 32}, "float64", "mloc");
    s.chunk = {8, 8, 8};
    auto a = create_array(m, "mloc", s);
    Bytes model = random_bytes(rng, a->size());
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->settle(&msg) == 0);
    DataView box;
    box.selection = layouts::Selection({{4, 12, 1}, {0, 20, 1}, {9, 30, 1}});
    box.spelling = "box/4:16,0:20,9:30";
    nlohmann::json plan;
    REQUIRE(a->plan(box, &plan, &msg) == 0);
    const std::uint64_t gap = plan.at("merge_gap_sectors").get<std::uint64_t>();
    if (g == disk.get()) CHECK(gap == 0);
    else CHECK(gap > 0);
    // No two requests closer than the gap: they would have been one.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> requests;
    for (const auto& b : plan.at("batches"))
      for (const auto& r : b) requests.push_back({r.at(0).get<std::uint64_t>(), r.at(1).get<std::uint64_t>()});
    std::sort(requests.begin(), requests.end());
    for (std::size_t i = 1; i < requests.size(); ++i)
      CHECK(requests[i].first > requests[i - 1].first + requests[i - 1].second + gap);
    request_count[g == disk.get()] = requests.size();
    check_views(*a, s, model, rng);  // and the reads that follow the plan give the model's bytes
  }
  // The same pieces: joined through their gaps on the flash, apart on the disk.
  CHECK(request_count[1] > 10);
  CHECK(request_count[0] < request_count[1]);
}

TEST_CASE("array file: mloc views equal the model read whole in one piece and through many pieces",
          "[array_file][mloc]") {
  // A view read in one piece decodes its chunks straight into the result
  // (selected elements only); one read in many pieces decodes whole chunks
  // and keeps them for the next piece. Both must give the model's bytes.
  auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(1601);
  for (const char* dtype : {"float64", "int16"}) {
    INFO(dtype);
    ArraySchema s = make_schema({21, 13, 70}, dtype, "mloc");
    s.chunk = {4, 8, 64};  // last side a power of two; clipped chunks at every far edge
    auto a = create_array(m, std::string("mloc-") + dtype, s);
    Bytes model = random_bytes(rng, a->size());
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->settle(&msg) == 0);  // sealed: reads come from the image
    REQUIRE(a->info()["mloc"].value("sealed", true));
    for (std::uint64_t chunk_bytes : {std::uint64_t(32) << 20, std::uint64_t(8) << 10}) {
      INFO("view pieces of " << chunk_bytes << " bytes");
      ArrayContext ctx = m.ctx();
      ctx.chunk_bytes = chunk_bytes;
      std::shared_ptr<ArrayFile> b;
      REQUIRE(ArrayFile::open(ctx, a->ino(), s, &b, &msg) == 0);
      check_views(*b, s, model, rng);
    }
  }
}

TEST_CASE("array file: a Zarr chunk thinner than the cells reads its bytes from the enclosing box's chunks",
          "[array_file][zarr_within]") {
  // Enclosing boxes of 128-256 KiB read in chunks of kSmallChunk: each Zarr
  // chunk's bytes come from several of the box's chunks (rearranged along
  // the Zarr grid at their load, layouts/regrid.h), at any offset and
  // length, and one layer's chunks read each of the box's chunks once.
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(23);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  for (const char* layout : {"naive", "hilbert"}) {
    INFO(layout);
    ArraySchema s = make_schema({64, 64, 32}, "float64", layout);
    Bytes model;
    std::shared_ptr<ArrayFile> a = small_chunked_array(m, std::string("within-") + layout, s, rng, &model);
    ArrayContext ctx = m.ctx();
    ctx.chunk_bytes = kSmallChunk;
    ctx.max_chunk_scale = 1;  // the boxes in several chunks
    std::string msg;
    REQUIRE(ArrayFile::open(ctx, a->ino(), s, &a, &msg) == 0);
    auto chunk_view = [&](const std::vector<std::uint64_t>& chunk, const std::vector<std::uint64_t>& index) {
      return zarr_chunk_view(s, chunk, index);
    };
    auto expect = [&](const DataView& v) { return box_bytes(model, s, v); };
    // Thin along the last dimension (a layer of 8 planes), along the first
    // (16 rows), and a grid that cuts the box's edge (5 along dimension 1).
    for (const auto& [chunk, grid] : std::vector<std::pair<std::vector<std::uint64_t>, std::vector<std::uint64_t>>>{
             {{64, 64, 1}, {1, 1, 32}}, {{1, 64, 32}, {64, 1, 1}}, {{64, 5, 1}, {1, 13, 32}}}) {
      for (int k = 0; k < 12; ++k) {
        std::vector<std::uint64_t> index;
        for (std::size_t d = 0; d < 3; ++d) index.push_back(rng() % grid[d]);
        const DataView v = chunk_view(chunk, index);
        INFO(v.spelling);
        if (!v.within) continue;  // a chunk across a layer boundary reads itself
        REQUIRE(v.within->regrid == chunk);
        check_view(*a, v, expect(v), rng);
      }
    }
    // Every chunk of the last two layers, from a fresh open: the boxes'
    // chunks are each read once, the second box's loaded ahead while the
    // first one's chunks are read (DataView::next_within).
    REQUIRE(ArrayFile::open(ctx, a->ino(), s, &a, &msg) == 0);
    const DataView first = chunk_view({64, 64, 1}, {0, 0, 16});
    REQUIRE(first.within);
    nlohmann::json plan;
    REQUIRE(a->plan(*first.within, &plan, &msg) == 0);
    REQUIRE(plan["chunks"].get<std::uint64_t>() >= 2);
    REQUIRE(first.within->next_within);
    CHECK(first.within->next_within->spelling == "box/0:64,0:64,24:32#zarr/64,64,1");
    CHECK_FALSE(chunk_view({64, 64, 1}, {0, 0, 24}).within->next_within);  // the array's last box
    for (std::uint64_t z = 16; z < 32; ++z) {
      const DataView v = chunk_view({64, 64, 1}, {0, 0, z});
      CHECK(bytes_diff(read_view_bytes(*a, v, 0, v.bytes(8)), expect(v)) == "");
      // Bytes inside one block are handed out without a copy.
      std::shared_ptr<const AlignedBuffer> keep;
      const std::byte* data = nullptr;
      std::size_t got = 0;
      REQUIRE(a->view_span(v, 8, 64, &keep, &data, &got, &msg) == 0);
      REQUIRE(data != nullptr);
      CHECK(got == 64);
      CHECK(std::memcmp(data, expect(v).data() + 8, 64) == 0);
      a->wait_for_prefetches();
      // The first chunk of a box reads that box only; the second starts the next box.
      if (z == 16) CHECK(a->chunk_stats().loads == plan["chunks"].get<std::uint64_t>());
    }
    a->wait_for_prefetches();
    const ChunkStats st = a->chunk_stats();
    CHECK(st.loads == 2 * plan["chunks"].get<std::uint64_t>());
    CHECK(st.prefetched >= 2);
    CHECK(st.evicted_unread == 0);
  }
}

TEST_CASE("array file: a cold thin chunk is read alone when the model reads it in half its box's time or less; "
          "the box's later chunks read through the box",
          "[array_file][zarr_within]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(29);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  ArraySchema s = make_schema({64, 64, 32}, "float64", "naive");
  Bytes model;
  std::shared_ptr<ArrayFile> a = small_chunked_array(m, "alone", s, rng, &model);
  ArrayContext ctx = m.ctx();
  ctx.chunk_bytes = kSmallChunk;
  ctx.max_chunk_scale = 1;
  std::string msg;
  auto chunk_view = [&](const std::vector<std::uint64_t>& chunk, const std::vector<std::uint64_t>& index) {
    DataView v = zarr_chunk_view(s, chunk, index);
    REQUIRE(v.within);
    return v;
  };
  auto expect = [&](const DataView& v) { return box_bytes(model, s, v); };
  auto modeled_ms = [&](const DataView& v) {
    nlohmann::json plan;
    REQUIRE(a->plan(v, &plan, &msg) == 0);
    return plan["modeled_ms"].get<double>();
  };

  // One row of each cell (2 KiB of 32 KiB): read alone, in one chunk of its own.
  REQUIRE(ArrayFile::open(ctx, a->ino(), s, &a, &msg) == 0);
  DataView row = chunk_view({1, 64, 32}, {5, 0, 0});
  REQUIRE(2 * modeled_ms(row) <= modeled_ms(*row.within));
  auto how_read = [&](const DataView& v) {
    nlohmann::json plan;
    REQUIRE(a->plan(v, &plan, &msg) == 0);
    CHECK(plan["within"]["box"] == v.within->spelling);
    return plan["within"]["read"].get<std::string>();
  };
  CHECK(how_read(row) == "alone while the box is cold");
  a->choose_within(&row);
  CHECK_FALSE(row.within);
  CHECK(bytes_diff(read_view_bytes(*a, row, 0, row.bytes(8)), expect(row)) == "");
  a->wait_for_prefetches();
  CHECK(a->chunk_stats().loads == 1);
  // The next rows of that box read through it (rows 4-7 are one of its
  // chunks: loaded once for both; the next box's chunks are loaded ahead).
  auto loaded_by_readers = [&] { return a->chunk_stats().loads - a->chunk_stats().prefetched; };
  for (std::uint64_t x : {6, 7}) {
    DataView next = chunk_view({1, 64, 32}, {x, 0, 0});
    a->choose_within(&next);
    CHECK(next.within);
    CHECK(bytes_diff(read_view_bytes(*a, next, 0, next.bytes(8)), expect(next)) == "");
    a->wait_for_prefetches();
    CHECK(loaded_by_readers() == 2);
  }
  CHECK(a->chunk_stats().prefetched >= 1);
  // That next box is begun: its first row reads through it too.
  DataView ahead = chunk_view({1, 64, 32}, {16, 0, 0});
  a->choose_within(&ahead);
  CHECK(ahead.within);
  CHECK(bytes_diff(read_view_bytes(*a, ahead, 0, ahead.bytes(8)), expect(ahead)) == "");
  a->wait_for_prefetches();  // (their source and device must outlive them)

  // A box whose chunks are cached (read, never chosen) is not cold either.
  REQUIRE(ArrayFile::open(ctx, a->ino(), s, &a, &msg) == 0);
  const DataView read_first = chunk_view({1, 64, 32}, {40, 0, 0});
  CHECK(bytes_diff(read_view_bytes(*a, read_first, 0, read_first.bytes(8)), expect(read_first)) == "");
  DataView cached = chunk_view({1, 64, 32}, {33, 0, 0});
  a->choose_within(&cached);
  CHECK(cached.within);
  a->wait_for_prefetches();

  // One plane of each cell touches every sector of it: read alone it costs
  // about the box, which serves the box's other planes too.
  REQUIRE(ArrayFile::open(ctx, a->ino(), s, &a, &msg) == 0);
  DataView plane = chunk_view({64, 64, 1}, {0, 0, 3});
  REQUIRE(2 * modeled_ms(plane) > modeled_ms(*plane.within));
  CHECK(how_read(plane) == "through the box");
  a->choose_within(&plane);
  CHECK(plane.within);
  CHECK(bytes_diff(read_view_bytes(*a, plane, 0, plane.bytes(8)), expect(plane)) == "");
  a->wait_for_prefetches();
}

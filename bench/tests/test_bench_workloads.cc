// mmfs-bench modeled (bench/): the workloads' selections (p%-length
// cubes, beams, slices, PLoD views), the library baselines' placement models
// (contiguous: page runs in file order; chunked: whole chunks), and the mmfs
// targets, whose plans and modeled times must equal what the daemon's
// `A@/plan/VIEW` shows for the same array (checked against a real ArrayFile
// on a volume formatted with the atlas10k3 geometry).
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/baselines.h"
#include "bench/mmfs_target.h"
#include "bench/workload_bench.h"
#include "bench/workloads.h"
#include "fs/array/array_file.h"
#include "fs/array/array_schema.h"
#include "fs/device/fault_device.h"
#include "fs/device/sector_io.h"
#include "fs/meta/allocator.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "layouts/io_plan.h"

using namespace mmfs;
using namespace mmfs::bench;
using layouts::Selection;

namespace {

std::vector<std::uint64_t> free_dims(const Selection& s) {
  std::vector<std::uint64_t> out;
  for (std::size_t d = 0; d < s.dims().size(); ++d)
    if (!s.dims()[d].fixed) out.push_back(d);
  return out;
}

// Every request of a plan, in issue order.
std::vector<geom::Request> requests(const layouts::IoPlan& p) {
  std::vector<geom::Request> out;
  for (const auto& b : p.batches) out.insert(out.end(), b.requests.begin(), b.requests.end());
  return out;
}

}  // namespace

TEST_CASE("bench: p%-length cubes have edges of p% of every dimension, as the MultiMap paper defines them", "[bench]") {
  const std::vector<std::uint64_t> shape = {1024, 1024, 256};
  CHECK(cube_edges(shape, 1) == std::vector<std::uint64_t>{10, 10, 3});
  CHECK(cube_edges(shape, 5) == std::vector<std::uint64_t>{51, 51, 13});
  CHECK(cube_edges(shape, 10) == std::vector<std::uint64_t>{102, 102, 26});
  CHECK(cube_edges(shape, 0.01) == std::vector<std::uint64_t>{1, 1, 1});  // at least one element
  CHECK(cube_edges(shape, 100) == shape);
  CHECK(cube_edges({5}, 50) == std::vector<std::uint64_t>{2});  // 2.5 rounds half to even, as Python's round()

  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    auto edges = cube_edges(shape, 10);
    Selection s = resolve_selection(random_cube_view(shape, edges, rng), shape, 8);
    for (std::size_t d = 0; d < 3; ++d) {
      CHECK(s.dims()[d].count() == edges[d]);
      CHECK(s.dims()[d].stop <= shape[d]);
    }
  }
}

TEST_CASE("bench: the workloads are the issue's views, resolved by the daemon's path resolver", "[bench]") {
  WorkloadOptions o;
  o.shape = {64, 48, 16};
  o.runs = 4;
  o.cubes = {1, 25};
  auto ws = make_workloads(o);
  std::vector<std::string> ids;
  for (const auto& w : ws) ids.push_back(w.id);
  CHECK(ids == std::vector<std::string>{"beam0", "beam1", "beam2", "slice0", "slice1", "slice2", "cube1", "cube25",
                                        "full", "plod2-full", "plod2-slice0"});
  for (const auto& w : ws) {
    INFO(w.id);
    REQUIRE(w.views.size() == w.selections.size());
    CHECK(w.views.size() == (w.random ? 4u : 1u));
    if (w.kind == "beam") {
      for (const Selection& s : w.selections) {
        CHECK(free_dims(s) == std::vector<std::uint64_t>{*w.dim});
        CHECK(s.elements() == o.shape[*w.dim]);
      }
    }
    if (w.kind == "slice") {
      const Selection& s = w.selections[0];
      CHECK(s.dims()[*w.dim].fixed);
      CHECK(s.dims()[*w.dim].start == o.shape[*w.dim] / 2);
      CHECK(w.views[0] == "slice/" + std::to_string(*w.dim) + "/" + std::to_string(o.shape[*w.dim] / 2));
    }
  }
  // PLoD views select what the unreduced views select.
  CHECK(ws[9].views[0] == "plod/2");
  CHECK(ws[9].selections[0].elements() == 64u * 48 * 16);
  CHECK(ws[10].views[0] == "plod/2@/slice/0/32");
  CHECK(ws[10].selections[0].dims()[0].fixed);
  CHECK(ws[10].selections[0].elements() == ws[3].selections[0].elements());
  // The same seed gives the same positions.
  CHECK(make_workloads(o)[0].views == ws[0].views);
  CHECK_THROWS_AS(resolve_selection("slice/3/0", o.shape, 8), std::invalid_argument);
  o.plod = 9;
  CHECK_THROWS_AS(make_workloads(o), std::invalid_argument);
}

TEST_CASE("bench: the contiguous baseline reads page runs in file order, one request at a time", "[bench]") {
  auto g = geom::load_geometry("atlas10k3");
  const std::vector<std::uint64_t> shape = {1024, 1024, 256};  // a row is 2 KiB, a 4 KiB page holds two
  auto target = make_contiguous_target(*g, shape, 8, 0);
  CHECK(target->kind() == "baseline");

  SECTION("a beam along the last dimension is one request") {
    std::vector<std::uint64_t> at = {3, 5, 0};
    auto p = target->plan(Selection::beam(shape, at, 2));
    CHECK(p.requests == 1);
    CHECK(p.bytes_read == 4096);
    CHECK(p.bytes_useful == 256 * 8);
  }
  SECTION("a beam along dimension 0 is one request per element row, ascending, one at a time") {
    std::vector<std::uint64_t> at = {0, 5, 7};
    auto p = target->plan(Selection::beam(shape, at, 0));
    CHECK(p.requests == 1024);
    CHECK(p.batches.size() == 1024);
    auto rs = requests(p);
    for (std::size_t i = 1; i < rs.size(); ++i) CHECK(rs[i].lbn - rs[i - 1].lbn == 2u * 1024 * 1024 / 512);
    auto runs = contiguous_page_runs(shape, 8, 4096, Selection::beam(shape, at, 0));
    CHECK(runs.size() == 1024);
    CHECK(runs[1] == PageRun{512 + 2, 1});  // page of element (1, 5, 7): (1*1024*256 + 5*256 + 7) * 8 / 4096
  }
  SECTION("rows sharing or touching pages merge: a beam along dimension 1 is one sequential request") {
    std::vector<std::uint64_t> at = {9, 0, 100};
    auto p = target->plan(Selection::beam(shape, at, 1));
    CHECK(p.requests == 1);
    CHECK(p.bytes_read == 2u * 1024 * 1024);
    CHECK(p.modeled_ms > 0);
  }
}

TEST_CASE("bench: the contiguous model equals mmfs's naive layout with page-sized row cells", "[bench]") {
  // With cells of two whole rows (4 KiB), naive's cells are exactly the file's pages.
  auto g = geom::load_geometry("cheetah36es");
  const std::vector<std::uint64_t> shape = {64, 32, 256};
  auto contiguous = make_contiguous_target(*g, shape, 8, 4096);
  auto naive = layouts::make_layout("naive", *g, layouts::CellGrid(shape, 8, {1, 2, 256}, {2, 1, 0}));
  layouts::SpaceRequest req = naive->space();
  fs::Allocator a(*g, 4096, g->capacity_sectors());
  std::vector<layouts::Extent> ext;
  REQUIRE(a.allocate(req, &ext) == 0);
  naive->place(ext);
  layouts::PlanOptions one_at_a_time;
  one_at_a_time.queue_depth = 1;
  std::mt19937_64 rng(3);
  std::vector<Selection> sels;
  for (std::uint32_t d = 0; d < 3; ++d) {
    sels.push_back(Selection::slice(shape, d, shape[d] / 3));
    sels.push_back(resolve_selection(random_beam_view(shape, d, rng), shape, 8));
  }
  for (double p : {1.0, 10.0, 30.0}) sels.push_back(resolve_selection(random_cube_view(shape, cube_edges(shape, p), rng), shape, 8));
  sels.push_back(Selection::all(shape));
  for (const Selection& s : sels) {
    auto want = layouts::plan_selection(*naive, s, one_at_a_time);
    layouts::model_plan(want, *g);
    auto got = contiguous->plan(s);
    CHECK(got.to_json() == want.to_json());
  }
}

TEST_CASE("bench: the chunked baseline reads whole chunks, contiguous ones as one request, in file order", "[bench]") {
  auto g = geom::load_geometry("atlas10k3");
  const std::vector<std::uint64_t> shape = {128, 128, 100};
  CHECK(library_chunk(shape, 64) == std::vector<std::uint64_t>{64, 64, 64});
  CHECK(library_chunk({10, 300}, 64) == std::vector<std::uint64_t>{10, 64});
  auto t = make_chunked_target(*g, shape, 8, 64, 0);
  const std::uint64_t chunk = 64 * 64 * 64 * 8;
  CHECK(t->describe()["chunk_bytes"] == chunk);

  // Grid 2x2x2 (the last chunk along dim 2 padded): a beam along dim 0 touches
  // chunks (0,j,k) and (1,j,k), four chunks apart in the file.
  std::vector<std::uint64_t> at = {0, 70, 3};
  auto beam = t->plan(Selection::beam(shape, at, 0));
  auto rs = requests(beam);
  REQUIRE(rs.size() == 2);
  CHECK(beam.batches.size() == 2);
  CHECK(beam.bytes_read == 2 * chunk);
  CHECK(rs[1].lbn - rs[0].lbn == 4 * chunk / 512);
  // A beam along dim 2 crosses chunks (i,j,0) and (i,j,1): adjacent, one request.
  at = {5, 6, 0};
  auto along = t->plan(Selection::beam(shape, at, 2));
  CHECK(along.requests == 1);
  CHECK(along.bytes_read == 2 * chunk);
  // A small box inside one chunk still reads the whole chunk.
  std::vector<std::uint64_t> lo = {1, 1, 70}, hi = {3, 3, 72};
  auto box = t->plan(Selection::box(lo, hi));
  CHECK(box.requests == 1);
  CHECK(box.bytes_read == chunk);
  // The full scan is the whole file in one request.
  auto full = t->plan(Selection::all(shape));
  CHECK(full.requests == 1);
  CHECK(full.bytes_read == 8 * chunk);
}

TEST_CASE("bench: an mmfs target's plan and modeled_ms equal the daemon's A@/plan for the same array", "[bench]") {
  auto g = geom::load_geometry("atlas10k3");
  auto dev = std::make_unique<fs::MemoryDevice>(64ull << 20, 512);
  fs::FormatOptions fo;
  fo.meta_bytes = 4 << 20;
  std::string msg;
  REQUIRE(fs::format_volume(*dev, *g, fo, nullptr, &msg) == 0);
  int err = 0;
  auto vol = fs::Volume::open(std::move(dev), &err, &msg);
  INFO(msg);
  REQUIRE(vol);
  fs::SectorIo io(vol->device(), vol->geometry());
  fs::ArrayContext ctx{vol->metadata(), vol->allocator(), io, vol->geometry(), "atlas10k3"};
  const std::vector<std::uint64_t> shape = {64, 48, 40};
  const geom::Lbn data_first = vol->allocator().first();

  WorkloadOptions wo;
  wo.shape = shape;
  wo.runs = 3;
  auto workloads = make_workloads(wo);
  bool first = true;
  for (const std::string layout : {"naive", "zorder", "hilbert", "multimap"}) {
    INFO(layout);
    fs::ArraySchema schema;
    schema.shape = shape;
    schema.dtype = *fs::parse_dtype("float64");
    schema.layout = layout;
    REQUIRE(fs::validate_schema(schema).error == 0);
    fs::Inode inode;
    REQUIRE(vol->metadata().create(fs::kRootIno, layout, S_IFREG | 0644, 0, 0, "", &inode) == 0);
    std::shared_ptr<fs::ArrayFile> array;
    REQUIRE(fs::ArrayFile::create(ctx, inode, schema, nullptr, &array, &msg) == 0);
    const auto extents = vol->metadata().extents(inode.ino);

    MmfsArraySpec spec{layout, shape, 8, {}, {}};
    CHECK(array->info()["cell"] == daemon_cell(*g, spec));
    auto target = make_mmfs_target(*g, spec, extents);
    for (const Workload& w : workloads)
      for (std::size_t i = 0; i < w.views.size(); ++i) {
        INFO(w.views[i]);
        nlohmann::json daemon;
        REQUIRE(array->plan(fs::DataView{w.selections[i], w.plod.value_or(0), w.views[i]}, &daemon, &msg) == 0);
        // The array is smaller than one read chunk, so the daemon reads every
        // view in one piece, as the bench plans it (longer views are planned
        // chunk by chunk by the daemon only).
        CHECK(daemon.at("chunks") == 1);
        CHECK(daemon.at("chunk_bytes") == ctx.chunk_bytes);
        daemon.erase("chunks");
        daemon.erase("chunk_bytes");
        CHECK(target->plan(w.selections[i]).to_json() == daemon);
      }
    // The first array of a fresh volume: --first-lbn = the data area's start reproduces its extents.
    if (first) {
      auto fresh = make_mmfs_target(*g, spec, data_first);
      CHECK(fresh->describe()["first_lbn"] == extents.front().start);
      nlohmann::json daemon;
      REQUIRE(array->plan(fs::DataView{workloads[3].selections[0], 0, workloads[3].views[0]}, &daemon, &msg) == 0);
      daemon.erase("chunks");
      daemon.erase("chunk_bytes");
      CHECK(fresh->plan(workloads[3].selections[0]).to_json() == daemon);
      first = false;
    }
  }
}

TEST_CASE("bench: run_workload_bench gives every workload on every target, ratios against the best baseline", "[bench]") {
  WorkloadBenchOptions o;
  o.profiles = {"atlas10k3"};
  o.shape = {128, 96, 64};
  o.runs = 3;
  o.cubes = {5};
  nlohmann::json doc = run_workload_bench(o);
  CHECK(doc["schema"] == "mmfs-bench-modeled/1");
  CHECK(doc["clock"] == "modeled");
  REQUIRE(doc["profiles"].size() == 1);
  const auto& prof = doc["profiles"][0];
  CHECK(prof["cell"] == std::vector<std::uint64_t>{8, 8, 8});
  CHECK(prof["targets"].size() == 6);
  CHECK(prof["workloads"].size() == 3 + 3 + 1 + 1 + 2);
  CHECK(prof["results"].size() == prof["workloads"].size() * 6);
  std::map<std::pair<std::string, std::string>, nlohmann::json> by;
  for (const auto& r : prof["results"]) by[{r["workload"], r["target"]}] = r;
  for (const auto& r : prof["results"]) {
    INFO(r.dump());
    const bool random = r["kind"] == "beam" || r["kind"] == "cube";
    CHECK(r["ms"]["runs"].size() == (random ? 3u : 1u));
    CHECK(r["ms"]["min"] <= r["ms"]["median"]);
    CHECK(r["ms"]["median"] <= r["ms"]["max"]);
    CHECK(r["bytes_read"] >= r["bytes_useful"]);
    const auto& best = by[{r["workload"], r["best_baseline"]}];
    CHECK(best["ratio_vs_best_baseline"] == 1.0);
    CHECK(r["ratio_vs_best_baseline"].get<double>() ==
          Approx(best["ms"]["median"].get<double>() / r["ms"]["median"].get<double>()));
    // Beams touch the same number of cells wherever they are (cubes may not: ref_cells is a mean).
    for (std::size_t i = 0; r["kind"] != "cube" && i < r["ms"]["runs"].size(); ++i)
      CHECK(r["ms_per_cell"]["runs"][i].get<double>() * r["ref_cells"].get<double>() ==
            Approx(r["ms"]["runs"][i].get<double>()));
    if (r["target_kind"] == "mmfs") CHECK(r["cells"] == r["ref_cells"]);
  }
  // PLoD plans like the unreduced views (byte planes come with MLOC).
  for (const std::string t : {"mmfs-naive", "mmfs-multimap", "contiguous"}) {
    CHECK(by[{"plod2-full", t}]["ms"] == by[{"full", t}]["ms"]);
    CHECK(by[{"plod2-slice0", t}]["ms"] == by[{"slice0", t}]["ms"]);
  }
}

TEST_CASE("bench: summaries take the median as Python's statistics.median does", "[bench]") {
  CHECK(summarize({3, 1, 2})["median"] == 2.0);
  CHECK(summarize({4, 1, 2, 3})["median"] == 2.5);
  CHECK(summarize({4, 1})["runs"] == std::vector<double>{4, 1});
  CHECK(summarize({}).is_null());
}

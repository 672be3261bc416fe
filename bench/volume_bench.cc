#include "bench/volume_bench.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "layouts/multimap.h"

namespace mmfs::bench {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::unique_ptr<fs::BlockDevice> open_image(const std::string& path, std::uint64_t size) {
  fs::OpenOptions o;
  o.create = true;
  o.create_size = size;
  int err = 0;
  std::string msg;
  auto dev = fs::open_device(path, o, &err, &msg);
  if (!dev) throw std::runtime_error(fmt::format("{}: {}", path, msg));
  return dev;
}

}  // namespace

std::string run_volume_bench(const VolumeBenchOptions& opt) {
  std::string out;
  std::string tera = (std::filesystem::path(opt.dir) / "mmfs-bench-1t.img").string();
  std::string small = (std::filesystem::path(opt.dir) / "mmfs-bench-meta.img").string();
  std::filesystem::remove(tera);
  std::filesystem::remove(small);

  // 1. Formatting a 1 TiB sparse image (the ssd profile covers it).
  {
    auto t = Clock::now();
    auto dev = open_image(tera, 1ull << 40);
    auto g = geom::load_geometry("ssd");
    std::string msg;
    if (fs::format_volume(*dev, *g, {}, nullptr, &msg)) throw std::runtime_error(msg);
    out += fmt::format("| format a 1 TiB sparse image (create + mkfs, `ssd`) | {:.1f} ms |\n", ms_since(t));
  }
  std::filesystem::remove(tera);

  // 2. Metadata operations committed durably in batches, and isolated commits.
  {
    auto g = geom::load_geometry("atlas10k3");
    {
      auto dev = open_image(small, 2ull << 30);
      std::string msg;
      if (fs::format_volume(*dev, *g, {}, nullptr, &msg)) throw std::runtime_error(msg);
    }
    int err = 0;
    std::string msg;
    auto vol = fs::Volume::open(open_image(small, 0), &err, &msg);
    if (!vol) throw std::runtime_error(msg);
    fs::Metadata& m = vol->metadata();
    fs::Inode dir;
    if (m.create(fs::kRootIno, "d", S_IFDIR | 0755, 0, 0, "", &dir)) throw std::runtime_error("mkdir failed");
    if (m.sync()) throw std::runtime_error("sync failed");
    auto flushes0 = vol->store().stats().flushes;
    auto t = Clock::now();
    for (unsigned i = 0; i < opt.operations; ++i) {
      if (int r = m.create(dir.ino, fmt::format("f{}", i), S_IFREG | 0644, 0, 0, "", nullptr))
        throw std::runtime_error(fmt::format("create failed: {}", r));
      if ((i + 1) % opt.batch == 0 && m.sync()) throw std::runtime_error("sync failed");
    }
    if (m.sync()) throw std::runtime_error("sync failed");
    double ms = ms_since(t);
    out += fmt::format("| {} creates, durable in commits of {} ({} device flushes) | {:.0f} ms = {:.0f} ops/s |\n",
                       opt.operations, opt.batch, vol->store().stats().flushes - flushes0, ms,
                       opt.operations / (ms / 1000));
    double total = 0, worst = 0;
    for (unsigned i = 0; i < opt.isolated; ++i) {
      auto t1 = Clock::now();
      if (m.set_xattr(dir.ino, "user.k", fmt::format("{}", i)) || m.sync()) throw std::runtime_error("commit failed");
      double one = ms_since(t1);
      total += one;
      worst = std::max(worst, one);
    }
    out += fmt::format("| one isolated commit (set_xattr + sync), mean of {} | {:.3f} ms (worst {:.3f}) |\n",
                       opt.isolated, total / opt.isolated, worst);
  }
  std::filesystem::remove(small);

  // 3. Extents for a 64 GiB MultiMap array (16-surface Atlas: 64 GiB does not
  // fit the 8-surface model once MultiMap's per-track slack is counted).
  {
    auto g = geom::load_geometry(nlohmann::json{{"profile", "atlas10k3"}, {"surfaces", 16}});
    layouts::CellGrid grid({4 * 585, 4 * 580, 4 * 396}, 8, {4, 4, 4}, {2, 1, 0});
    auto t = Clock::now();
    layouts::MultiMapLayout layout(*g, grid, {117, 116, 396});
    fs::Allocator a(*g, 686 * 16 * 2, g->capacity_sectors() - 64);
    std::vector<layouts::Extent> extents;
    if (a.allocate(layout.space(), &extents)) throw std::runtime_error("allocation failed");
    layout.place(extents);
    out += fmt::format("| extents for a 64.1 GiB MultiMap array ({} track groups of {} tracks) | {:.2f} ms |\n",
                       extents.size(), layout.tracks_per_group(), ms_since(t));
  }
  return "| figure | measured |\n|---|---|\n" + out;
}

}  // namespace mmfs::bench

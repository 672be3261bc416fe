#include "probes/read_path_probe.h"

#define FUSE_USE_VERSION 35
#include <fmt/format.h>
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>

#include "daemon/filesystem.h"
#include "daemon/fuse_ops.h"
#include "fs/array/array_file.h"
#include "fs/array/array_schema.h"
#include "fs/device/fault_device.h"
#include "fs/device/sector_io.h"
#include "fs/paths/view_path.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "layouts/default_layout.h"
#include "probes/throwaway_mount.h"
#include "util/stats.h"

namespace mmfs::probes {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kMiB = 1 << 20;

// The in-memory volume: room for the array, its metadata and slack.
constexpr std::uint64_t kVolumeBytes = 128ull << 20;
constexpr std::uint64_t kMetaBytes = 8ull << 20;
// The array: the shape ratio of the benchmark's (1024, 1024, 256), so the default
// rule gives it the same cells (16x16x4 float64 on flash), in 32 MiB.
const std::vector<std::uint64_t> kShape = {256, 256, 64};
// More than the last-level cache the machine reports here (260 MiB on the
// the virtio test machine): rewritten before every view, so its cells
// and the daemon's structures are as cold as after a device read.
constexpr std::size_t kEvictBytes = 320ull << 20;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The in-memory device, shared by every mount of the probe, with the time
// its copies take (what a real device's DMA would do instead).
class TimedDevice final : public fs::BlockDevice {
 public:
  explicit TimedDevice(fs::MemoryDevice& base) : base_(base) {}
  std::uint64_t size_bytes() const override { return base_.size_bytes(); }
  std::uint32_t block_size() const override { return base_.block_size(); }
  int submit(std::span<fs::IoRequest> batch) override {
    const auto t = Clock::now();
    const int r = base_.submit(batch);
    copy_ms += ms_between(t, Clock::now());
    return r;
  }
  int flush() override { return base_.flush(); }
  double copy_ms = 0;  // one thread reads at a time here

 private:
  fs::MemoryDevice& base_;
};

fs::DataView box_view(std::vector<layouts::DimRange> dims, std::string spelling) {
  fs::DataView v;
  v.selection = layouts::Selection(std::move(dims));
  v.spelling = std::move(spelling);
  return v;
}

struct Mounted {
  std::unique_ptr<fs::Volume> volume;
  std::unique_ptr<fs::SectorIo> io;
  TimedDevice* device = nullptr;
  fs::ArrayContext ctx() const {
    return fs::ArrayContext{volume->metadata(), volume->allocator(), *io, volume->geometry(),
                            volume->geometry().name()};
  }
  ~Mounted() { io.reset(); }  // before the volume whose device it uses
};

int mount(fs::MemoryDevice& memory, Mounted* m, std::string* message) {
  auto device = std::make_unique<TimedDevice>(memory);
  m->device = device.get();
  int err = 0;
  m->volume = fs::Volume::open(std::move(device), &err, message);
  if (!m->volume) return err ? err : EIO;
  m->io = std::make_unique<fs::SectorIo>(m->volume->device(), m->volume->geometry());
  return 0;
}

// The volume in memory served by the daemon's own code (Filesystem and its
// FUSE operations) on a temporary mount point, as `mmfs` serves a volume
// with -o busy_poll=0 (libfuse's loop; the default request poller measured
// 1.15 ms against 1.21 for a cold one-element view). Unmounted, shut down
// and removed on destruction.
class DaemonMount {
 public:
  ~DaemonMount() {
    mount_.stop();  // no request after it
    if (filesystem_) {
      daemon::release_open_handles(*filesystem_);
      filesystem_->shutdown();
    }
  }

  int start(fs::MemoryDevice& memory, std::string* message) {
    int err = 0;
    auto volume = fs::Volume::open(std::make_unique<TimedDevice>(memory), &err, message);
    if (!volume) return err ? err : EIO;
    filesystem_ = std::make_unique<daemon::Filesystem>(std::move(volume), false);
    slot_ = filesystem_.get();
    if (int r = mount_.mount("mmfs-read-path-probe", "the read-path probe", daemon::fuse_operations(), &slot_, message))
      return r;
    filesystem_->start();
    mount_.serve();
    return 0;
  }

  const std::string& dir() const { return mount_.dir(); }

 private:
  std::unique_ptr<daemon::Filesystem> filesystem_;
  daemon::Filesystem* slot_ = nullptr;  // the session's userdata, as the daemon's
  ThrowawayMount mount_;                // gone before the Filesystem
};

// Formats the volume and writes the array; its inode.
int make_array(fs::MemoryDevice& memory, const geom::Geometry& geometry, fs::Ino* ino, std::string* message) {
  fs::FormatOptions format;
  format.meta_bytes = kMetaBytes;
  format.label = "host-probe";
  if (int r = fs::format_volume(memory, geometry, format, nullptr, message)) return r;
  Mounted m;
  if (int r = mount(memory, &m, message)) return r;
  fs::ArraySchema schema;
  schema.shape = kShape;
  schema.dtype = *fs::parse_dtype("float64");
  schema.layout = layouts::default_layout(geometry).layout;
  if (auto v = fs::validate_schema(schema); v.error) {
    *message = v.message;
    return v.error;
  }
  fs::Inode inode;
  if (int r = m.volume->metadata().create(fs::kRootIno, "a", S_IFREG | 0644, 0, 0, "", &inode)) {
    *message = "cannot create the probe's array file";
    return r;
  }
  std::shared_ptr<fs::ArrayFile> array;
  if (int r = fs::ArrayFile::create(m.ctx(), inode, schema, nullptr, &array, message)) return r;
  std::vector<std::byte> data(4 << 20);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 2654435761u >> 13);  // not zero, not one value
  for (std::uint64_t off = 0; off < array->size(); off += data.size())
    if (int r = array->write(off, data.data(), std::min<std::uint64_t>(data.size(), array->size() - off), message))
      return r;
  if (int r = array->flush(true, message)) return r;
  *ino = inode.ino;
  return 0;
}

// Reads `view` whole as the daemon serves it (the chunk, no copy): ms without
// the device's copies; its plan's bytes read and returned.
int timed_view(Mounted& m, fs::ArrayFile& array, const fs::DataView& view, double* ms, std::uint64_t* read,
               std::uint64_t* useful, std::string* message) {
  nlohmann::json plan;
  if (int r = array.plan(view, &plan, message)) return r;
  *read = plan.value("bytes_read", std::uint64_t(0));
  *useful = plan.value("bytes_useful", std::uint64_t(0));
  const std::uint64_t bytes = view.bytes(8);
  m.device->copy_ms = 0;
  const auto t = Clock::now();
  std::shared_ptr<const fs::AlignedBuffer> keep;
  const std::byte* data = nullptr;
  std::size_t got = 0;
  if (int r = array.view_span(view, 0, bytes, &keep, &data, &got, message)) return r;
  *ms = std::max(0.0, ms_between(t, Clock::now()) - m.device->copy_ms);
  if (!data || got != bytes) {
    *message = fmt::format("the probe's view {} was not served whole ({} of {} bytes)", view.spelling, got, bytes);
    return EIO;
  }
  return 0;
}

void evict(std::vector<std::byte>& buffer, int round) { std::memset(buffer.data(), round & 0xff, buffer.size()); }

// v per MiB read and g per MiB returned from the differences of the cube and
// the beam against the point: dc = v*rc + g*uc, db = v*rb + g*ub. A
// coefficient the noise makes negative is 0 and the other is taken alone.
void fit(double dc, double rc, double uc, double db, double rb, double ub, double* v, double* g) {
  const double det = rc * ub - rb * uc;
  *v = det != 0 ? (dc * ub - db * uc) / det : 0;
  *g = det != 0 ? (rc * db - rb * dc) / det : 0;
  if (*v < 0) {
    *v = 0;
    *g = uc > 0 ? std::max(0.0, dc) / uc : 0;
  } else if (*g < 0) {
    *g = 0;
    *v = rb > 0 ? std::max(0.0, db) / rb : 0;
  }
}

}  // namespace

int probe_read_path(const nlohmann::json& geometry, const ReadPathProbeOptions& opt, ReadPathProbeResult* out,
                    std::string* message) {
  *out = ReadPathProbeResult{};
  const auto t_start = Clock::now();
  try {
    nlohmann::json small = geometry;
    const std::uint32_t sector = small.value("sector_size", 4096u);
    if (!small.contains("capacity_sectors")) {
      *message = "the read-path probe needs a flash geometry (capacity_sectors)";
      return EINVAL;
    }
    small["capacity_sectors"] = kVolumeBytes / sector;
    small.erase("host");
    const std::unique_ptr<geom::Geometry> g = geom::load_geometry(small);
    fs::MemoryDevice memory(kVolumeBytes, sector);
    fs::Ino ino = 0;
    if (int r = make_array(memory, *g, &ino, message)) {
      *message = "the read-path probe could not make its array: " + *message;
      return r;
    }
    // A one-element box, a box like the benchmark's cube10 (102x102x26: 2 MiB out
    // of ~400 cells, most of each used) and one element of every cell of a
    // plane (every cell read for little).
    const fs::DataView point = box_view({{200, 201, 1, true}, {37, 38, 1, true}, {50, 51, 1, true}}, "box/200,37,50");
    const fs::DataView cube = box_view({{20, 122}, {130, 232}, {30, 56}}, "box/20:122,130:232,30:56");
    const fs::DataView beam = box_view({{0, 256, 16}, {3, 256, 16}, {41, 42, 1, true}}, "box/0:256:16,3:256:16,41");
    std::vector<std::byte> eviction(kEvictBytes);
    for (int s = 0; s < opt.samples; ++s) {
      Mounted m;
      if (int r = mount(memory, &m, message)) return r;
      auto raw = m.volume->metadata().xattr(ino, std::string(fs::ArrayFile::kSchemaXattr));
      const auto schema = raw ? fs::decode_schema(*raw) : std::nullopt;
      if (!schema) {
        *message = "the read-path probe's array lost its schema";
        return EIO;
      }
      evict(eviction, 2 * s);
      std::shared_ptr<fs::ArrayFile> array;
      m.device->copy_ms = 0;
      const auto t = Clock::now();
      if (int r = fs::ArrayFile::open(m.ctx(), ino, *schema, &array, message)) return r;
      out->open_ms.push_back(std::max(0.0, ms_between(t, Clock::now()) - m.device->copy_ms));
      double ms = 0;
      if (int r = timed_view(m, *array, point, &ms, &out->point_read, &out->point_useful, message)) return r;
      out->point_ms.push_back(ms);
      evict(eviction, 2 * s + 1);
      if (int r = timed_view(m, *array, cube, &ms, &out->cube_read, &out->cube_useful, message)) return r;
      out->cube_ms.push_back(ms);
      evict(eviction, 2 * s);
      if (int r = timed_view(m, *array, beam, &ms, &out->beam_read, &out->beam_useful, message)) return r;
      out->beam_ms.push_back(ms);
      array->quiesce();
    }
    // The one-element view through the daemon's FUSE operations, as a reader
    // reads it on a fresh mount: the fixed part of every cold view.
    const std::string view_path = "/a@/" + point.spelling;
    for (int s = 0; s < opt.samples; ++s) {
      DaemonMount daemon;
      if (int r = daemon.start(memory, message)) return r;
      evict(eviction, s);
      const double ms = timed_fresh_read(daemon.dir() + view_path, 8);
      if (ms < 0) {
        const int e = errno;
        *message = fmt::format("the read-path probe could not read {}: {}", view_path, std::strerror(e));
        return e;
      }
      out->view_ms.push_back(ms);
    }
  } catch (const std::exception& e) {
    *message = fmt::format("the read-path probe failed: {}", e.what());
    return EIO;
  }
  const double point = util::median(out->point_ms);
  out->cold_view_ms = util::median(out->view_ms);
  fit(util::median(out->cube_ms) - point, double(out->cube_read - std::min(out->cube_read, out->point_read)) / kMiB,
      double(out->cube_useful - std::min(out->cube_useful, out->point_useful)) / kMiB, util::median(out->beam_ms) - point,
      double(out->beam_read - std::min(out->beam_read, out->point_read)) / kMiB,
      double(out->beam_useful - std::min(out->beam_useful, out->point_useful)) / kMiB, &out->verify_ms_per_mib,
      &out->gather_ms_per_mib);
  out->seconds = ms_between(t_start, Clock::now()) / 1e3;
  if (opt.verbose)
    fmt::print(stderr,
               "  the daemon: a cold one-element view {:.3f} ms, {:.3f} ms per MiB of cells verified, {:.3f} ms per MiB "
               "gathered\n",
               out->cold_view_ms, out->verify_ms_per_mib, out->gather_ms_per_mib);
  return 0;
}

}  // namespace mmfs::probes

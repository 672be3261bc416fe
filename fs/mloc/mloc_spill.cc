#include "fs/mloc/mloc_spill.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <queue>

#include "util/align.h"

namespace mmfs::fs {

namespace {

// A run is written through a window of this size, and read back through
// one per run of at most this size: large enough that requests stream.
constexpr std::uint64_t kWindow = 4ull << 20;
// The read windows of a merge together: an array of many slabs (a run
// each) reads each through a smaller window, down to kMinReadWindow.
constexpr std::uint64_t kMergeBytes = 256ull << 20;
constexpr std::uint64_t kMinReadWindow = 64ull << 10;

// The sector runs of extents `extents` covering bytes [offset, offset + n)
// (sector-aligned), into `buffer`.
std::vector<SectorRun> runs_of(const std::vector<Extent>& extents, std::uint64_t ss, std::uint64_t offset,
                               std::uint64_t n, std::byte* buffer) {
  std::vector<SectorRun> out;
  std::uint64_t sector = offset / ss, left = n / ss;
  for (const Extent& e : extents) {
    if (left == 0) break;
    if (sector >= e.sectors) {
      sector -= e.sectors;
      continue;
    }
    const std::uint64_t take = std::min(left, e.sectors - sector);
    out.push_back({e.start + sector, take, buffer});
    buffer += take * ss;
    left -= take;
    sector = 0;
  }
  return out;
}

}  // namespace

MlocSpill::~MlocSpill() {
  for (Run& r : runs_)
    for (const Extent& e : r.extents) allocator_.free(e);
}

std::size_t MlocSpill::runs_in_memory() const {
  return std::size_t(std::count_if(runs_.begin(), runs_.end(), [](const Run& r) { return r.extents.empty() && r.bytes; }));
}

int MlocSpill::add_run(std::vector<Piece>& pieces, std::string* message) {
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.key < b.key; });
  Run run;
  for (const Piece& p : pieces) {
    run.keys.push_back(p.key);
    run.sizes.push_back(p.bytes.size());
    run.bytes += p.bytes.size();
  }
  const std::uint64_t ss = io_.sector_size();
  const std::uint64_t sectors = util::div_up(run.bytes, ss);
  if (sectors != 0 && allocator_.allocate({layouts::SpaceShape::Runs, sectors}, &run.extents) != 0) {
    // No room for it on the device: this run stays in memory.
    run.extents.clear();
    run.held.reserve(run.bytes);
    for (Piece& p : pieces) run.held.insert(run.held.end(), p.bytes.begin(), p.bytes.end());
    pieces.clear();
    runs_.push_back(std::move(run));
    return 0;
  }
  AlignedBuffer window(std::min<std::uint64_t>(kWindow, std::max<std::uint64_t>(sectors, 1) * ss),
                       AlignedBuffer::ForIo{});
  std::uint64_t written = 0, filled = 0;
  auto flush = [&]() -> int {
    if (filled == 0) return 0;
    const std::uint64_t bytes = util::align_up(filled, ss);
    std::memset(window.data() + filled, 0, bytes - filled);
    const int r = io_.write(runs_of(run.extents, ss, written, bytes, window.data()));
    written += bytes;
    filled = 0;
    return r;
  };
  int r = 0;
  for (Piece& p : pieces) {
    const std::byte* at = p.bytes.data();
    for (std::uint64_t left = p.bytes.size(); r == 0 && left > 0;) {
      const std::uint64_t take = std::min(left, window.size() - filled);
      std::memcpy(window.data() + filled, at, take);
      filled += take;
      at += take;
      left -= take;
      if (filled == window.size()) r = flush();
    }
    std::vector<std::byte>().swap(p.bytes);  // the slab's memory goes as it is written
  }
  if (r == 0) r = flush();
  pieces.clear();
  runs_.push_back(std::move(run));  // freed by the destructor even when the write failed
  if (r) *message = "writing the mloc image's pieces to temporary sectors failed";
  return r;
}

int MlocSpill::read_run(const Run& run, std::uint64_t offset, std::uint64_t n, std::byte* out) const {
  return io_.read(runs_of(run.extents, io_.sector_size(), offset, n, out));
}

int MlocSpill::hold_all(std::string* message) {
  const std::uint64_t ss = io_.sector_size();
  for (Run& run : runs_) {
    if (run.extents.empty()) continue;
    const std::uint64_t bytes = util::align_up(run.bytes, ss);
    AlignedBuffer all(std::max<std::uint64_t>(bytes, ss), AlignedBuffer::ForIo{});
    if (int r = read_run(run, 0, bytes, all.data())) {
      *message = "reading the mloc image's pieces back from temporary sectors failed";
      return r;
    }
    run.held.assign(all.data(), all.data() + run.bytes);
    for (const Extent& e : run.extents) allocator_.free(e);
    run.extents.clear();
  }
  return 0;
}

int MlocSpill::merge(const std::function<int(std::span<const std::byte>)>& emit, std::string* message) {
  const std::uint64_t ss = io_.sector_size();
  struct Cursor {
    std::size_t piece = 0;
    std::uint64_t at = 0;  // the piece's first byte in the run
    AlignedBuffer window;
    std::uint64_t window_start = 0, window_bytes = 0;
  };
  std::vector<Cursor> cursors(runs_.size());
  const std::uint64_t read_window =
      std::clamp(kMergeBytes / std::max<std::size_t>(runs_.size(), 1), kMinReadWindow, kWindow) / ss * ss;
  using Next = std::pair<std::uint64_t, std::size_t>;  // (key, run)
  std::priority_queue<Next, std::vector<Next>, std::greater<Next>> next;
  for (std::size_t i = 0; i < runs_.size(); ++i)
    if (!runs_[i].keys.empty()) next.push({runs_[i].keys[0], i});
  while (!next.empty()) {
    const std::size_t i = next.top().second;
    next.pop();
    const Run& run = runs_[i];
    Cursor& c = cursors[i];
    const std::uint64_t size = run.sizes[c.piece];
    std::span<const std::byte> bytes;
    if (!run.extents.empty()) {
      if (c.at < c.window_start || c.at + size > c.window_start + c.window_bytes) {
        // The window moves on to this piece: from its sector, at least read_window.
        const std::uint64_t start = c.at / ss * ss;
        const std::uint64_t run_end = util::align_up(run.bytes, ss);
        const std::uint64_t want =
            std::min(run_end - start, std::max(read_window, util::align_up(c.at + size - start, ss)));
        // Heap memory, not ForIo: with thousands of runs a granule per window
        // would break the merge's memory bound (kMergeBytes).
        if (c.window.size() < want) c.window = AlignedBuffer(want, AlignedBuffer::Uninitialized{});
        if (int r = read_run(run, start, want, c.window.data())) {
          *message = "reading the mloc image's pieces back from temporary sectors failed";
          return r;
        }
        c.window_start = start;
        c.window_bytes = want;
      }
      bytes = {c.window.data() + (c.at - c.window_start), size};
    } else {
      bytes = {run.held.data() + c.at, size};
    }
    if (int r = emit(bytes)) return r;
    c.at += size;
    if (++c.piece < run.keys.size()) next.push({run.keys[c.piece], i});
  }
  return 0;
}

}  // namespace mmfs::fs

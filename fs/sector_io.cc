#include "fs/sector_io.h"

#include <algorithm>
#include <cerrno>
#include <exception>

namespace mmfs::fs {

namespace {
// One submission holds at most this many requests, and a request at most this
// many bytes (IoRequest lengths are 32-bit).
constexpr std::size_t kMaxBatch = 1024;
constexpr std::uint64_t kMaxRequestBytes = 64ull << 20;
}  // namespace

SectorIo::SectorIo(BlockDevice& device, const geom::Geometry& geometry)
    : device_(device), geometry_(geometry), sector_size_(geometry.sector_size()),
      model_(geometry.make_service_model()) {}

int SectorIo::submit(std::span<const SectorRun> runs, IoRequest::Op op) {
  std::vector<IoRequest> batch;
  std::vector<geom::Request> modeled;
  batch.reserve(std::min(runs.size(), kMaxBatch));
  auto issue = [&]() -> int {
    if (batch.empty()) return 0;
    int r = device_.submit(batch);
    requests_ += batch.size();
    batches_ += 1;
    {
      std::lock_guard lock(model_mu_);
      try {
        modeled_ms_ += model_->serve(modeled);
      } catch (const std::exception&) {
        // A request past the modeled device cannot happen on a mounted volume;
        // the counters must never take the daemon down if it does.
      }
    }
    batch.clear();
    modeled.clear();
    return r;
  };
  for (const SectorRun& run : runs) {
    std::uint64_t done = 0;
    while (done < run.sectors) {
      std::uint64_t n = std::min<std::uint64_t>(run.sectors - done, kMaxRequestBytes / sector_size_);
      IoRequest req;
      req.op = op;
      req.offset = (run.lbn + done) * sector_size_;
      req.length = std::uint32_t(n * sector_size_);
      req.buffer = run.buffer + done * sector_size_;
      batch.push_back(req);
      modeled.push_back({run.lbn + done, std::uint32_t(n)});
      (op == IoRequest::Op::Read ? sectors_read_ : sectors_written_) += n;
      done += n;
      if (batch.size() == kMaxBatch)
        if (int r = issue()) return r;
    }
  }
  return issue();
}

nlohmann::json SectorIo::stats() const {
  nlohmann::json j;
  j["requests"] = requests_.load();
  j["batches"] = batches_.load();
  j["sectors_read"] = sectors_read_.load();
  j["sectors_written"] = sectors_written_.load();
  j["sectors"] = sectors_read_.load() + sectors_written_.load();
  // Reads split by what they serve: bitmap indexes, and everything else
  // (array cells, plain files).
  j["index_sectors_read"] = index_sectors_read_.load();
  j["data_sectors_read"] = sectors_read_.load() - std::min(sectors_read_.load(), index_sectors_read_.load());
  j["flushes"] = flushes_.load();
  j["sector_size"] = sector_size_;
  std::lock_guard lock(model_mu_);
  j["modeled_ms"] = modeled_ms_;
  return j;
}

}  // namespace mmfs::fs

// The scrub's engine (fs/scrub/scrub.h).
#include "fs/scrub/scrub.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "fs/device/block_device.h"
#include "fs/meta/cell_checksums.h"
#include "fs/util/error_log.h"
#include "fs/meta/superblock.h"
#include "util/align.h"
#include "util/coding.h"

namespace mmfs::fs {

namespace {

std::uint32_t le32(const std::string& record, std::uint64_t index) {
  if (record.size() < (index + 1) * 4) return 0;
  return util::get_le32(record.data() + index * 4);
}

class StoreMetadata final : public ScrubMetadata {
 public:
  explicit StoreMetadata(const MetaStore& store) : store_(store) {}

  StoredChecksums checksums(Ino ino, std::uint64_t unit) const override {
    const std::uint64_t record = unit / CellChecksums::kCellsPerRecord, i = unit % CellChecksums::kCellsPerRecord;
    StoredChecksums s;
    if (auto v = store_.get(keys::checksum_record(ino, record, keys::kChecksumTable))) s.sum = le32(*v, i);
    if (auto v = store_.get(keys::checksum_record(ino, record, keys::kAltChecksumTable))) s.alt = le32(*v, i);
    return s;
  }

  bool unchanged(const ScrubObject& object) const override {
    if (object.ino == 0) return true;  // superblocks: only mmfsck rewrites them, never under a mount
    const std::string key = object.extents_key.empty() ? keys::extents(object.ino) : object.extents_key;
    if (store_.get(key).value_or("") != object.extents_record) return false;
    if (!object.schema_record.empty() &&
        store_.get(keys::xattr(object.ino, "mmfs.schema")).value_or("") != object.schema_record)
      return false;
    return true;
  }

 private:
  const MetaStore& store_;
};

bool is_unit_kind(OwnerKind kind) {
  return kind == OwnerKind::ArrayCell || kind == OwnerKind::PlainBlock || kind == OwnerKind::Superblock;
}

}  // namespace

std::unique_ptr<ScrubMetadata> store_metadata(const MetaStore& store) { return std::make_unique<StoreMetadata>(store); }

const char* to_string(ReadPath path) {
  switch (path) {
    case ReadPath::FreeBandwidth: return "free_bandwidth";
    case ReadPath::IdleTime: return "idle_time";
    case ReadPath::Completion: return "completion";
    case ReadPath::Foreground: return "foreground";
  }
  return "?";
}

// --- CoverageMap -------------------------------------------------------------

CoverageMap::CoverageMap(std::uint64_t sectors)
    : sectors_(sectors), chunks_(util::div_up(sectors, kChunkSectors)) {}

std::uint64_t CoverageMap::chunk_sectors(std::size_t c) const {
  return std::min<std::uint64_t>(kChunkSectors, sectors_ - std::uint64_t(c) * kChunkSectors);
}

std::uint64_t CoverageMap::mark(geom::Lbn lbn, std::uint64_t count) {
  if (lbn >= sectors_) return 0;
  count = std::min(count, sectors_ - lbn);
  std::uint64_t fresh_total = 0;
  while (count > 0) {
    const std::size_t c = std::size_t(lbn / kChunkSectors);
    const std::uint64_t size = chunk_sectors(c), off = lbn % kChunkSectors;
    const std::uint64_t take = std::min(count, size - off);
    Chunk& ch = chunks_[c];
    if (ch.count < size) {
      if (ch.bits.empty()) ch.bits.assign((size + 63) / 64, 0);
      std::uint64_t fresh = 0;
      for (std::uint64_t b = off; b < off + take;) {
        const std::uint64_t bit = b % 64, n = std::min<std::uint64_t>(64 - bit, off + take - b);
        const std::uint64_t mask = (n == 64 ? ~std::uint64_t(0) : ((std::uint64_t(1) << n) - 1)) << bit;
        std::uint64_t& w = ch.bits[b / 64];
        fresh += std::uint64_t(std::popcount(mask & ~w));
        w |= mask;
        b += n;
      }
      ch.count += fresh;
      fresh_total += fresh;
      if (ch.count == size) ch.bits = {};  // full: no bits needed
    }
    lbn += take;
    count -= take;
  }
  count_ += fresh_total;
  return fresh_total;
}

bool CoverageMap::covered(geom::Lbn lbn) const {
  if (lbn >= sectors_) return false;
  const Chunk& ch = chunks_[lbn / kChunkSectors];
  if (ch.count == chunk_sectors(lbn / kChunkSectors)) return true;
  if (ch.bits.empty()) return false;
  const std::uint64_t off = lbn % kChunkSectors;
  return (ch.bits[off / 64] >> (off % 64)) & 1;
}

std::optional<geom::Lbn> CoverageMap::next_uncovered(geom::Lbn from) const {
  if (complete() || sectors_ == 0) return std::nullopt;
  if (from >= sectors_) from = 0;
  auto scan = [&](geom::Lbn begin, geom::Lbn end) -> std::optional<geom::Lbn> {
    for (geom::Lbn l = begin; l < end;) {
      const std::size_t c = std::size_t(l / kChunkSectors);
      const std::uint64_t size = chunk_sectors(c), base = std::uint64_t(c) * kChunkSectors;
      const Chunk& ch = chunks_[c];
      const geom::Lbn chunk_end = std::min<geom::Lbn>(end, base + size);
      if (ch.count == size) {
        l = chunk_end;
        continue;
      }
      if (ch.bits.empty()) return l;
      for (std::uint64_t off = l - base; base + off < chunk_end;) {
        const std::uint64_t free_bits = ~ch.bits[off / 64] >> (off % 64);
        if (free_bits != 0) {
          const geom::Lbn hit = base + off + std::uint64_t(std::countr_zero(free_bits));
          if (hit < chunk_end) return hit;
          break;
        }
        off = (off / 64 + 1) * 64;
      }
      l = chunk_end;
    }
    return std::nullopt;
  };
  if (auto hit = scan(from, sectors_)) return hit;
  return scan(0, from);
}

std::uint64_t CoverageMap::uncovered_run(geom::Lbn lbn, std::uint64_t limit) const {
  std::uint64_t n = 0;
  while (n < limit && lbn + n < sectors_ && !covered(lbn + n)) ++n;
  return n;
}

// --- ScrubEngine -------------------------------------------------------------

ScrubEngine::ScrubEngine(std::unique_ptr<OwnerMap> map, std::unique_ptr<ScrubMetadata> metadata,
                         ScrubOptions options, std::function<void(const ScrubFinding&)> report)
    : map_(std::move(map)), metadata_(std::move(metadata)), options_(options), report_(std::move(report)),
      coverage_(map_->sectors()) {}

void ScrubEngine::deliver(std::span<const geom::Lbn> lbns, const std::byte* data, std::span<const int> results,
                          ReadPath how) {
  const std::uint32_t ss = map_->sector_size();
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < lbns.size(); ++i)
    take_sector_locked(lbns[i], data + i * ss, i < results.size() ? results[i] : 0, how);
}

void ScrubEngine::deliver_run(geom::Lbn first, std::uint64_t count, const std::byte* data, int result,
                              ReadPath how) {
  const std::uint32_t ss = map_->sector_size();
  std::lock_guard lock(mu_);
  for (std::uint64_t i = 0; i < count; ++i) take_sector_locked(first + i, data + i * ss, result, how);
}

void ScrubEngine::foreground_read(geom::Lbn first, std::uint64_t count) {
  std::lock_guard lock(mu_);
  sectors_by_[ReadPath::Foreground] += coverage_.mark(first, count);
}

void ScrubEngine::take_sector_locked(geom::Lbn lbn, const std::byte* data, int result, ReadPath how) {
  if (lbn >= map_->sectors()) return;
  sectors_by_[how] += coverage_.mark(lbn);
  const Owner o = map_->owner(lbn);
  const bool unit = is_unit_kind(o.kind);
  const UnitKey key{o.object, o.unit};
  if (result != 0) {
    if (unreadable_.insert(lbn).second) {
      const bool owned = o.kind != OwnerKind::Outside && o.kind != OwnerKind::Metadata && o.kind != OwnerKind::Free;
      report_locked({{lbn, 1}}, owned ? std::optional(o.object) : std::nullopt,
                    owned && unit ? std::optional(o.unit) : std::nullopt,
                    owned ? map_->object(o.object).path : map_->describe(lbn),
                    fmt::format("LBN {} ({}) could not be read: {}", lbn, map_->describe(lbn), errno_name(result)));
    }
    if (unit) {
      settled_.insert(key);
      if (auto it = partial_.find(key); it != partial_.end()) {
        partial_bytes_ -= it->second.data.size();
        partial_.erase(it);
      }
      pending_.erase(key);
      suspects_.erase(key);
    }
    return;
  }
  if (!unit || settled_.count(key)) return;
  const ScrubObject& obj = map_->object(o.object);
  const std::uint32_t ss = map_->sector_size();
  if (obj.unit_sectors == 1) {
    verify_locked(key, {data, ss}, how);
    return;
  }
  auto [it, fresh] = partial_.try_emplace(key);
  Partial& p = it->second;
  if (fresh) {
    p.data.resize(std::size_t(obj.unit_sectors) * ss);
    p.have.assign(obj.unit_sectors, false);
    partial_bytes_ += p.data.size();
    partial_order_.push_back(key);
    if (partial_order_.size() > 4 * partial_.size() + 1024) {  // drop the names of units since completed
      std::deque<UnitKey> live;
      for (const UnitKey& k : partial_order_)
        if (partial_.count(k)) live.push_back(k);
      partial_order_ = std::move(live);
    }
  }
  if (p.have[o.sector]) return;
  std::memcpy(p.data.data() + std::size_t(o.sector) * ss, data, ss);
  p.have[o.sector] = true;
  if (++p.count < obj.unit_sectors) {
    evict_locked();
    return;
  }
  std::vector<std::byte> whole = std::move(p.data);
  partial_bytes_ -= whole.size();
  partial_.erase(it);
  verify_locked(key, whole, how);
}

void ScrubEngine::evict_locked() {
  // The oldest incomplete units go: the completion pass reads them whole.
  while (partial_bytes_ > options_.partial_bytes && !partial_order_.empty()) {
    const UnitKey k = partial_order_.front();
    partial_order_.pop_front();
    auto it = partial_.find(k);
    if (it == partial_.end()) continue;
    partial_bytes_ -= it->second.data.size();
    partial_.erase(it);
    pending_.insert(k);
    ++evicted_;
  }
}

bool ScrubEngine::unit_valid_locked(const ScrubObject& object, std::uint64_t unit, std::span<const std::byte> bytes,
                                    const StoredChecksums* before, std::string* why) {
  if (object.kind == OwnerKind::Superblock) {
    SuperblockStatus status = SuperblockStatus::Ok;
    if (bytes.size() >= kSuperblockBytes && decode_superblock(bytes.first(kSuperblockBytes), &status)) return true;
    *why = fmt::format("is damaged ({})", to_string(status));
    return false;
  }
  const StoredChecksums now = metadata_->checksums(object.ino, unit);
  const std::uint32_t h =
      cell_checksum(bytes.first(std::min<std::size_t>(bytes.size(), object.checked_bytes_of(unit))));
  for (std::uint32_t s : {now.sum, now.alt, before ? before->sum : 0u, before ? before->alt : 0u})
    if (s != 0 && s == h) return true;
  *why = "failed its checksum";
  return false;
}

void ScrubEngine::verify_locked(const UnitKey& key, std::span<const std::byte> bytes, ReadPath how,
                                const StoredChecksums* before) {
  const ScrubObject& obj = map_->object(key.object);
  pending_.erase(key);
  const bool confirming = before != nullptr;
  if (confirming) suspects_.erase(key);
  if (obj.kind != OwnerKind::Superblock) {
    const StoredChecksums now = metadata_->checksums(obj.ino, key.unit);
    if (now == StoredChecksums{} && (!before || *before == StoredChecksums{})) {
      ++unwritten_;  // never held data: nothing recorded to verify against
      return;
    }
  }
  std::string why;
  if (unit_valid_locked(obj, key.unit, bytes, before, &why)) {
    ++verified_by_[how];
    if (confirming) ++false_alarms_;  // a race with a rewrite, not damage
    return;
  }
  if (!confirming) {
    suspects_.insert(key);  // read it again before saying anything
    return;
  }
  if (!metadata_->unchanged(obj)) {
    ++void_findings_;  // moved or rewritten since the scrub started
    return;
  }
  settled_.insert(key);
  report_locked(obj.unit_runs(key.unit), key.object, key.unit, obj.path,
                fmt::format("{} {}", obj.unit_name(key.unit), why));
}

void ScrubEngine::report_locked(std::vector<layouts::Run> runs, std::optional<std::uint32_t> object,
                                std::optional<std::uint64_t> unit, std::string path, std::string what) {
  ScrubFinding f;
  f.lbn = runs.empty() ? 0 : runs.front().lbn;
  f.runs = std::move(runs);
  f.ino = object ? map_->object(*object).ino : 0;
  f.object = object;
  f.unit = unit;
  f.path = std::move(path);
  f.what = std::move(what);
  ++findings_;
  if (finding_list_.size() < options_.finding_list) finding_list_.push_back(f);
  if (report_) report_(f);
}

std::optional<std::pair<geom::Lbn, std::uint64_t>> ScrubEngine::next_uncovered(geom::Lbn from,
                                                                             std::uint64_t limit) const {
  std::lock_guard lock(mu_);
  auto hit = coverage_.next_uncovered(from);
  if (!hit) return std::nullopt;
  return std::make_pair(*hit, coverage_.uncovered_run(*hit, limit));
}

bool ScrubEngine::coverage_complete() const {
  std::lock_guard lock(mu_);
  return coverage_.complete();
}

std::optional<ScrubEngine::UnitJob> ScrubEngine::next_unit_job() {
  std::lock_guard lock(mu_);
  auto job_for = [&](const UnitKey& key, bool confirm) -> std::optional<UnitJob> {
    const ScrubObject& obj = map_->object(key.object);
    UnitJob job;
    job.object = key.object;
    job.unit = key.unit;
    job.confirm = confirm;
    job.runs = obj.unit_runs(key.unit);
    std::uint64_t n = 0;
    for (const auto& r : job.runs) n += r.sectors;
    if (n != obj.unit_sectors) return std::nullopt;  // not placed whole (a damaged map): nothing to read
    if (confirm && obj.kind != OwnerKind::Superblock) job.before = metadata_->checksums(obj.ino, key.unit);
    return job;
  };
  while (!suspects_.empty()) {
    const UnitKey key = *suspects_.begin();
    if (auto job = job_for(key, true)) return job;
    suspects_.erase(key);
  }
  if (!coverage_.complete()) return std::nullopt;
  if (!partial_.empty()) {
    // Every sector is covered, yet these units were not all delivered here
    // (a foreground read or a write covered the rest): read them whole.
    for (const auto& [key, p] : partial_) pending_.insert(key);
    partial_.clear();
    partial_order_.clear();
    partial_bytes_ = 0;
    swept_ = true;
  }
  while (!pending_.empty()) {
    const UnitKey key = *pending_.begin();
    if (auto job = job_for(key, false)) return job;
    pending_.erase(key);
  }
  return std::nullopt;
}

void ScrubEngine::finish_unit_job(const UnitJob& job, const std::byte* data, int result) {
  std::lock_guard lock(mu_);
  const UnitKey key{job.object, job.unit};
  const ScrubObject& obj = map_->object(job.object);
  for (const auto& r : job.runs) sectors_by_[ReadPath::Completion] += coverage_.mark(r.lbn, r.sectors);
  if (result != 0) {
    pending_.erase(key);
    suspects_.erase(key);
    if (settled_.insert(key).second)
      report_locked(job.runs, job.object, job.unit, obj.path,
                    fmt::format("{} could not be read: {}", obj.unit_name(job.unit), errno_name(result)));
    return;
  }
  const std::size_t bytes = std::size_t(obj.unit_sectors) * map_->sector_size();
  verify_locked(key, {data, bytes}, ReadPath::Completion, job.confirm ? &job.before : nullptr);
}

std::vector<ScrubEngine::RecheckJob> ScrubEngine::recheck_jobs() const {
  std::lock_guard lock(mu_);
  std::vector<RecheckJob> jobs;
  for (std::size_t i = 0; i < finding_list_.size(); ++i) {
    const ScrubFinding& f = finding_list_[i];
    if (!f.resolved.empty()) continue;
    RecheckJob job;
    job.finding = i;
    if (f.object && !metadata_->unchanged(map_->object(*f.object))) {
      jobs.push_back(std::move(job));  // no read: its owner is elsewhere now
      continue;
    }
    if (f.object && f.unit) {
      const ScrubObject& obj = map_->object(*f.object);
      job.runs = obj.unit_runs(*f.unit);
      std::uint64_t n = 0;
      for (const auto& r : job.runs) n += r.sectors;
      if (n != obj.unit_sectors) continue;  // not placed whole: nothing to read it by
    } else {
      job.runs = f.runs;
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

void ScrubEngine::finish_recheck(const RecheckJob& job, const std::byte* data, int result) {
  std::lock_guard lock(mu_);
  if (job.finding >= finding_list_.size()) return;
  ScrubFinding& f = finding_list_[job.finding];
  if (!f.resolved.empty()) return;
  auto resolve = [&](std::string why) {
    f.resolved = std::move(why);
    ++resolved_;
  };
  if (f.object && !metadata_->unchanged(map_->object(*f.object))) {
    resolve(fmt::format("{} was moved or rewritten since: the sectors found bad no longer hold it",
                        f.unit ? "its unit's owner" : "its owner"));
    return;
  }
  if (result != 0 || job.runs.empty()) return;
  if (f.object && f.unit) {
    const ScrubObject& obj = map_->object(*f.object);
    std::string why;
    const std::size_t bytes = std::size_t(obj.unit_sectors) * map_->sector_size();
    if (!unit_valid_locked(obj, *f.unit, {data, bytes}, nullptr, &why)) return;
    resolve(fmt::format("{} reads and matches its checksum now (repaired)", obj.unit_name(*f.unit)));
    return;
  }
  resolve("reads now");
}

bool ScrubEngine::complete() const {
  std::lock_guard lock(mu_);
  return coverage_.complete() && partial_.empty() && pending_.empty() && suspects_.empty();
}

std::uint64_t ScrubEngine::findings() const {
  std::lock_guard lock(mu_);
  return findings_;
}

nlohmann::json ScrubEngine::status() const {
  std::lock_guard lock(mu_);
  nlohmann::json j;
  const std::uint64_t total = coverage_.sectors(), scanned = coverage_.count();
  j["sectors_total"] = total;
  j["sectors_scanned"] = scanned;
  j["progress"] = total ? double(scanned) / double(total) : 1.0;
  nlohmann::json by = nlohmann::json::object(), verified = nlohmann::json::object();
  std::uint64_t cells = 0;
  for (ReadPath p : {ReadPath::FreeBandwidth, ReadPath::IdleTime, ReadPath::Completion, ReadPath::Foreground}) {
    auto s = sectors_by_.find(p);
    by[to_string(p)] = s == sectors_by_.end() ? 0 : s->second;
    if (p == ReadPath::Foreground) continue;
    auto v = verified_by_.find(p);
    const std::uint64_t n = v == verified_by_.end() ? 0 : v->second;
    verified[to_string(p)] = n;
    cells += n;
  }
  j["sectors_by"] = by;
  j["cells_verified"] = cells;
  j["verified_by"] = verified;
  j["cells_unwritten"] = unwritten_;
  j["cells_gathering"] = partial_.size();
  j["gathering_bytes"] = partial_bytes_;
  j["cells_pending"] = pending_.size();
  j["cells_evicted"] = evicted_;
  j["suspects"] = suspects_.size();
  j["false_alarms"] = false_alarms_;
  j["void_findings"] = void_findings_;
  j["objects_unplaced"] = map_->unmapped_objects();
  j["map_bytes"] = map_->memory_bytes();
  j["errors"] = findings_;
  j["errors_resolved"] = resolved_;
  nlohmann::json list = nlohmann::json::array();
  for (const ScrubFinding& f : finding_list_) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& r : f.runs) runs.push_back({r.lbn, r.sectors});
    nlohmann::json e = {{"lbn", f.lbn}, {"lbns", std::move(runs)}, {"path", f.path}, {"what", f.what}};
    if (f.ino) e["ino"] = f.ino;
    if (!f.resolved.empty()) e["resolved"] = f.resolved;
    list.push_back(std::move(e));
  }
  j["error_list"] = std::move(list);
  return j;
}

}  // namespace mmfs::fs

#include "fs/array/array_index.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "fs/meta/meta_codec.h"
#include "util/align.h"

namespace mmfs::fs {

using indexes::Bitmap;
using indexes::Estimate;
using indexes::IndexHeader;


namespace {

// Objects below this go to small extents from the top of the data area;
// larger ones take whole tracks like array cells (a range query's bitmaps
// are then one sequential run).
constexpr std::uint64_t kSmallObjectBytes = 1ull << 20;
// Arrays up to this size are read once for an index build, not twice.
constexpr std::uint64_t kInMemoryBuildBytes = 256ull << 20;

std::uint64_t checksum(const std::string& bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// Where the bytes [offset, offset+length) of an object stored over `extents`
// lie: sector runs of the device, in order.
struct Piece {
  geom::Lbn lbn;
  std::uint64_t sectors;
};
std::vector<Piece> object_pieces(const std::vector<Extent>& extents, std::uint64_t first_sector,
                                 std::uint64_t sectors) {
  std::vector<Piece> out;
  std::uint64_t at = 0;  // object sector where the extent starts
  for (const Extent& e : extents) {
    if (sectors == 0) break;
    if (first_sector < at + e.sectors) {
      std::uint64_t skip = first_sector > at ? first_sector - at : 0;
      std::uint64_t take = std::min(e.sectors - skip, sectors);
      out.push_back({e.start + skip, take});
      first_sector += take;
      sectors -= take;
    }
    at += e.sectors;
  }
  return out;
}

}  // namespace

ArrayIndex::ArrayIndex(const Env& env, Ino ino) : env_(env), ino_(ino) {}

int ArrayIndex::write_blob(const Env& env, const std::string& bytes, std::vector<Extent>* extents,
                           std::string* message) {
  const std::uint32_t ss = env.io.sector_size();
  const std::uint64_t sectors = std::max<std::uint64_t>(1, util::div_up(bytes.size(), ss));
  int r;
  if (sectors * ss <= kSmallObjectBytes) {
    r = env.allocator.allocate_small(sectors, extents);
  } else {
    layouts::SpaceRequest req;
    req.shape = layouts::SpaceShape::Runs;
    req.sectors = sectors;
    r = env.allocator.allocate(req, extents);
  }
  if (r) {
    *message = fmt::format("the index needs {} KiB on the device; {} KiB are free", sectors * ss >> 10,
                           env.allocator.free_sectors() * ss >> 10);
    return r;
  }
  std::uint64_t have = 0;
  for (const Extent& e : *extents) have += e.sectors;
  AlignedBuffer buf(have * ss);  // zero-filled: the tail past the object is defined
  std::memcpy(buf.data(), bytes.data(), bytes.size());
  std::vector<SectorRun> runs;
  std::uint64_t at = 0;
  for (const Extent& e : *extents) {
    runs.push_back({e.start, e.sectors, buf.data() + at * ss});
    at += e.sectors;
  }
  if (int w = env.io.write(runs); w || (w = env.io.flush())) {
    for (const Extent& e : *extents) env.allocator.free(e);
    extents->clear();
    *message = "writing the index to the device failed";
    return w;
  }
  return 0;
}

int ArrayIndex::build(const Env& env, Ino ino, indexes::ValueType type, const std::string& encoding,
                      const std::string& bins, std::uint64_t rows, const DataReader& read, bool provisional,
                      std::unique_ptr<ArrayIndex>* out, std::string* message) {
  auto enc = indexes::parse_encoding(encoding);
  if (!enc) {
    *message = fmt::format("user.mmfs.index: '{}' is not an encoding; accepted: none e1 bn range interval re ie",
                           encoding);
    return EINVAL;
  }
  std::string spec_text = bins.empty() ? std::string(indexes::default_bin_spec(type)) : bins;
  auto spec = indexes::parse_bin_spec(spec_text);
  if (auto* e = std::get_if<std::string>(&spec)) {
    *message = "user.mmfs.bins: " + *e;
    return EINVAL;
  }
  indexes::BinningBuilder binner(type, std::get<indexes::BinSpec>(spec), rows);
  // Building takes two passes (bins from the data, then rows into bins). An
  // array that fits kInMemoryBuildBytes is read from the device once and
  // kept for the second pass; a larger one is read twice.
  const std::size_t size = indexes::itemsize(type);
  std::vector<std::byte> kept;
  if (rows * size <= kInMemoryBuildBytes) kept.resize(rows * size);
  if (int r = read(
          [&](std::uint64_t first, const std::byte* p, std::size_t n) {
            binner.add(p, n);
            if (!kept.empty() && first + n <= rows) std::memcpy(kept.data() + first * size, p, n * size);
          },
          message))
    return r;
  auto binning = binner.finish();
  if (auto* e = std::get_if<std::string>(&binning)) {
    *message = "user.mmfs.bins: " + *e;
    return EINVAL;
  }
  indexes::IndexBuilder builder(std::get<indexes::Binning>(binning), *enc, rows);
  if (!kept.empty()) {
    builder.add(0, kept.data(), rows);
    std::vector<std::byte>().swap(kept);
  } else if (int r = read([&](std::uint64_t first, const std::byte* p, std::size_t n) { builder.add(first, p, n); },
                          message)) {
    return r;
  }
  const std::string object = builder.finish();

  std::unique_ptr<ArrayIndex> index(new ArrayIndex(env, ino));
  auto header_len = IndexHeader::header_bytes(
      {reinterpret_cast<const std::byte*>(object.data()), std::min(object.size(), IndexHeader::kPrefixBytes)});
  auto header = header_len && *header_len <= object.size()
                    ? IndexHeader::decode({reinterpret_cast<const std::byte*>(object.data()), *header_len})
                    : std::variant<IndexHeader, std::string>(std::string("no header"));
  if (auto* e = std::get_if<std::string>(&header)) {
    *message = "the built index does not decode: " + *e;  // a defect, not bad input
    return EIO;
  }
  index->header_ = std::move(std::get<IndexHeader>(header));
  index->encoding_ = encoding;
  index->bins_ = bins;
  index->provisional_ = provisional;
  index->object_bytes_ = object.size();
  index->delta_ = indexes::IndexDelta(index->header_.binning());
  if (int r = write_blob(env, object, &index->object_extents_, message)) return r;
  *out = std::move(index);
  return 0;
}

std::string ArrayIndex::encode_record() const {
  nlohmann::json j;
  j["encoding"] = encoding_;
  j["bins"] = bins_;
  j["provisional"] = provisional_;
  j["object_bytes"] = object_bytes_;
  j["object_extents"] = object_extents_.size();
  j["delta_bytes"] = delta_bytes_;
  j["delta_checksum"] = delta_checksum_;
  return j.dump();
}

void ArrayIndex::stage(WriteBatch& batch) const {
  batch.put(keys::index_record(ino_), encode_record());
  batch.put(keys::index_extents(ino_), encode_extents(extents()));
  batch.del(keys::index_pending(ino_));
}

void ArrayIndex::stage_pending(Ino ino, WriteBatch& batch) { batch.put(keys::index_pending(ino), "1"); }

void ArrayIndex::stage_drop(const Metadata& metadata, Ino ino, WriteBatch& batch) {
  (void)metadata;
  batch.del(keys::index_record(ino));
  batch.del(keys::index_pending(ino));
  batch.del(keys::index_extents(ino));
}

std::vector<Extent> ArrayIndex::stored_extents(Metadata& metadata, Ino ino) {
  auto text = metadata.store().get(keys::index_extents(ino));
  if (!text) return {};
  auto extents = decode_extents(*text);
  return extents ? *extents : std::vector<Extent>{};
}

std::vector<Extent> ArrayIndex::extents() const {
  std::vector<Extent> all = object_extents_;
  all.insert(all.end(), delta_extents_.begin(), delta_extents_.end());
  return all;
}

void ArrayIndex::release() {
  for (const Extent& e : extents()) env_.allocator.free(e);
  object_extents_.clear();
  delta_extents_.clear();
}

std::uint64_t ArrayIndex::device_bytes() const {
  std::uint64_t s = 0;
  for (const Extent& e : extents()) s += e.sectors;
  return s * env_.io.sector_size();
}

int ArrayIndex::read_blob(const std::vector<Extent>& extents, std::uint64_t offset, std::uint64_t length,
                          std::vector<std::byte>* out, IndexCost* cost, bool background) const {
  const std::uint32_t ss = env_.io.sector_size();
  const std::uint64_t first = offset / ss, last = util::div_up(offset + length, ss);
  AlignedBuffer buf(std::max<std::uint64_t>(1, last - first) * ss, AlignedBuffer::ForIo{});
  std::vector<SectorRun> runs;
  std::uint64_t at = 0;
  for (const Piece& p : object_pieces(extents, first, last - first)) {
    runs.push_back({p.lbn, p.sectors, buf.data() + at * ss});
    at += p.sectors;
  }
  if (at != last - first) return EIO;  // past the extents: the record lied
  if (int r = background ? env_.io.read_background(runs) : env_.io.read_index(runs)) return r;
  if (cost) {
    cost->bytes += at * ss;
    cost->requests += runs.size();
  }
  out->assign(buf.data() + (offset - first * ss), buf.data() + (offset - first * ss) + length);
  return 0;
}

int ArrayIndex::load(const Env& env, Ino ino, const Expected& expected, std::unique_ptr<ArrayIndex>* out,
                     bool* stale, std::string* message) {
  out->reset();
  *stale = false;
  auto record = env.metadata.store().get(keys::index_record(ino));
  if (!record) return 0;
  *stale = env.metadata.store().get(keys::index_pending(ino)).has_value();
  auto extents_text = env.metadata.store().get(keys::index_extents(ino));
  nlohmann::json j = nlohmann::json::parse(*record, nullptr, false);
  std::optional<std::vector<Extent>> extents;
  if (extents_text) extents = decode_extents(*extents_text);
  auto damaged = [&](const std::string& why) {
    *message = fmt::format("the array's index is damaged ({}); set user.mmfs.index again to rebuild it", why);
    return EIO;
  };
  if (j.is_discarded() || !j.is_object() || !extents) return damaged("its record does not decode");
  std::unique_ptr<ArrayIndex> index(new ArrayIndex(env, ino));
  try {
    index->encoding_ = j.at("encoding").get<std::string>();
    index->bins_ = j.at("bins").get<std::string>();
    index->provisional_ = j.at("provisional").get<bool>();
    index->object_bytes_ = j.at("object_bytes").get<std::uint64_t>();
    std::size_t n_object = j.at("object_extents").get<std::size_t>();
    index->delta_bytes_ = j.at("delta_bytes").get<std::uint64_t>();
    index->delta_checksum_ = j.at("delta_checksum").get<std::uint64_t>();
    if (n_object > extents->size()) return damaged("its extent count is wrong");
    index->object_extents_.assign(extents->begin(), extents->begin() + std::ptrdiff_t(n_object));
    index->delta_extents_.assign(extents->begin() + std::ptrdiff_t(n_object), extents->end());
  } catch (const std::exception&) {
    return damaged("its record lacks a field");
  }
  const std::uint32_t ss = env.io.sector_size();
  auto capacity = [&](const std::vector<Extent>& xs) {
    std::uint64_t s = 0;
    for (const Extent& e : xs) s += e.sectors;
    return s * ss;
  };
  if (index->object_bytes_ < IndexHeader::kPrefixBytes || index->object_bytes_ > capacity(index->object_extents_) ||
      index->delta_bytes_ > capacity(index->delta_extents_))
    return damaged("its sizes exceed its extents");
  // The header: its prefix says how long it is.
  std::vector<std::byte> bytes;
  // A device that does not read it damages the index too: the array opens.
  auto unread = [&](int r) { return damaged(fmt::format("it does not read: {}", std::strerror(r))); };
  if (int r = index->read_blob(index->object_extents_, 0, IndexHeader::kPrefixBytes, &bytes, nullptr)) return unread(r);
  auto header_len = IndexHeader::header_bytes(bytes);
  if (!header_len || *header_len > index->object_bytes_) return damaged("its header is not an index header");
  if (int r = index->read_blob(index->object_extents_, 0, *header_len, &bytes, nullptr)) return unread(r);
  auto header = IndexHeader::decode(bytes);
  if (auto* e = std::get_if<std::string>(&header)) return damaged(*e);
  index->header_ = std::move(std::get<IndexHeader>(header));
  if (index->header_.rows() != expected.rows || index->header_.type() != expected.type)
    return damaged(fmt::format("its header says {} rows of {}, the array holds {} of {}", index->header_.rows(),
                               indexes::type_name(index->header_.type()), expected.rows,
                               indexes::type_name(expected.type)));
  index->delta_ = indexes::IndexDelta(index->header_.binning());
  if (index->delta_bytes_ > 0) {
    std::vector<std::byte> delta;
    if (int r = index->read_blob(index->delta_extents_, 0, index->delta_bytes_, &delta, nullptr)) return unread(r);
    if (XXH3_64bits(delta.data(), delta.size()) != index->delta_checksum_)
      return damaged("its delta fails its checksum");
    auto d = indexes::IndexDelta::decode(index->header_.binning(), delta);
    if (!d) return damaged("its delta does not decode");
    index->delta_ = std::move(*d);
  }
  *out = std::move(index);
  return 0;
}

ArrayIndex::CacheKey ArrayIndex::bitmap_key(std::uint32_t id) {
  CacheKey k(1 + sizeof id, 'b');
  std::memcpy(k.data() + 1, &id, sizeof id);
  return k;
}

ArrayIndex::CacheKey ArrayIndex::plan_key(const indexes::AtomPlan& plan) {
  CacheKey k(1, plan.sure_nan ? 'N' : 'a');
  auto put = [&](std::uint32_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(std::uint32_t(plan.sure.size()));
  for (const auto& r : plan.sure) {
    put(r.first);
    put(r.last);
    put(std::uint32_t(r.coarse) | std::uint32_t(r.complement) << 1);
  }
  for (std::uint32_t b : plan.maybe_bins) put(b);
  return k;
}

std::optional<ArrayIndex::Cached> ArrayIndex::cached(const CacheKey& key) {
  std::lock_guard lock(cache_mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.at);
  return it->second;
}

void ArrayIndex::remember(const CacheKey& key, Cached entry) {
  std::lock_guard lock(cache_mu_);
  if (cache_.count(key)) return;
  lru_.push_front(key);
  entry.at = lru_.begin();
  cache_bytes_ += entry.bytes;
  cache_.emplace(key, std::move(entry));
  while (cache_bytes_ > kCacheBytes && lru_.size() > 1) {
    auto victim = cache_.find(lru_.back());
    cache_bytes_ -= victim->second.bytes;
    cache_.erase(victim);
    lru_.pop_back();
  }
}

int ArrayIndex::estimate(const indexes::KeySet& keys, Estimate* out, IndexCost* cost, std::string* message) {
  indexes::AtomPlan plan = header_.plan(keys);
  const auto& dir = header_.directory();
  if (cost) {
    // What the plan reads from a cold cache: its bitmaps, neighbours as one run.
    cost->planned += plan.bytes;
    const std::uint32_t ss = env_.io.sector_size();
    for (std::size_t i = 0; i < plan.bitmaps.size();) {
      std::size_t j = i + 1;
      while (j < plan.bitmaps.size() && plan.bitmaps[j] == plan.bitmaps[j - 1] + 1) ++j;  // back to back
      if (plan.bitmaps[j - 1] < dir.size()) {
        const std::uint64_t begin = dir.offset(plan.bitmaps[i]);
        const std::uint64_t end = dir.offset(plan.bitmaps[j - 1]) + dir.length(plan.bitmaps[j - 1]);
        for (const Piece& p : object_pieces(object_extents_, begin / ss, util::div_up(end, ss) - begin / ss))
          cost->trace.push_back({p.lbn, std::uint32_t(p.sectors)});
      }
      i = j;
    }
  }
  // An atom that combines several bitmaps: its rows may be cached whole.
  const bool combined = plan.bitmaps.size() > 1;
  const CacheKey atom_key = combined ? plan_key(plan) : CacheKey();
  if (combined) {
    if (auto hit = cached(atom_key)) {
      if (cost) cost->cached_bytes += plan.bytes;
      // Lent, not copied (the aliasing pointer keeps the cached estimate).
      *out = indexes::Estimate{Bitmap(), hit->estimate->maybe,
                               std::shared_ptr<const Bitmap>(hit->estimate, &hit->estimate->sure)};
      if (!delta_.empty()) {
        out->own();
        *out = delta_.apply(header_.binning(), keys, std::move(*out));
      }
      return 0;
    }
  }
  // Cached bitmaps, and the stored bytes of the others: read (neighbours as
  // one request) and checked against their checksums here, decoded only when
  // the evaluation asks for them. A union of many fine bins is ORed from
  // the bytes straight into a bitset instead: decoding the 1,001 bitmaps of
  // a range of a 10,000-bin index, 150 containers each, took 27 ms.
  std::unordered_map<std::uint32_t, std::shared_ptr<const Bitmap>> have;
  std::unordered_map<std::uint32_t, std::span<const std::byte>> stored;
  std::vector<std::vector<std::byte>> buffers;
  std::vector<std::uint32_t> missing;
  for (std::uint32_t id : plan.bitmaps) {
    if (id >= dir.size()) {
      *message = "the index plan names a bitmap the index does not have";
      return EIO;
    }
    if (auto hit = cached(bitmap_key(id))) {
      if (cost) cost->cached_bytes += dir.length(id);
      have[id] = std::move(hit->bitmap);
    } else {
      missing.push_back(id);
    }
  }
  std::size_t i = 0;
  while (i < missing.size()) {
    std::size_t j = i + 1;
    while (j < missing.size() && missing[j] == missing[j - 1] + 1) ++j;  // back to back in the object
    std::vector<std::byte>& bytes = buffers.emplace_back();
    if (int r = read_bitmaps(missing[i], missing[j - 1] + 1, &bytes, cost, false, message)) return r;
    std::uint64_t at = 0;
    for (std::size_t k = i; k < j; ++k) {
      stored[missing[k]] = std::span<const std::byte>(bytes.data() + at, dir.length(missing[k]));
      at += dir.length(missing[k]);
    }
    i = j;
  }
  std::optional<std::uint32_t> malformed;  // checksum right, yet not a bitmap: written wrong
  const Bitmap none;
  auto fetch = [&](std::uint32_t id) -> const Bitmap& {
    if (auto it = have.find(id); it != have.end()) return *it->second;
    auto bitmap = std::make_shared<Bitmap>();
    if (!indexes::deserialize(stored.at(id), bitmap.get())) {
      malformed = id;
      return none;
    }
    remember(bitmap_key(id), Cached{bitmap, nullptr, dir.length(id), {}});
    return *(have[id] = std::move(bitmap));
  };
  // Rows below 2^28 (a 32 MiB bitset at most); wider unions than this many
  // bins. The fine bitmap of bin b is directory entry b.
  constexpr std::uint32_t kBitsetUnionBins = 8;
  const bool bitset_unions = header_.rows() <= (1ull << 28);
  auto fine_union = [&](std::uint32_t first, std::uint32_t last) -> std::optional<Bitmap> {
    if (!bitset_unions || last - first + 1 < kBitsetUnionBins) return std::nullopt;
    std::vector<std::uint64_t> words((header_.rows() + 65535) / 65536 * 1024, 0);
    std::vector<const Bitmap*> decoded;
    const indexes::BinStatsView bins = header_.stats();
    for (std::uint32_t b = first; b <= last; ++b) {
      if (auto it = have.find(b); it != have.end()) {
        decoded.push_back(it->second.get());
      } else if (auto st = stored.find(b); st != stored.end()) {
        if (!indexes::or_serialized_into(st->second, words)) malformed = b;
      } else if (bins.rows(b) > 0) {
        return std::nullopt;  // not fetched: the bitmap-by-bitmap way reports it
      }  // else an empty bin, which the plan does not read
    }
    Bitmap rows = indexes::bitmap_of_words(words);
    if (decoded.empty()) return rows;
    decoded.push_back(&rows);
    return indexes::union_all(std::move(decoded));
  };
  if (auto lone = header_.lone_bitmap(plan); lone && delta_.empty()) {
    fetch(*lone);
    if (!malformed) {
      *out = indexes::Estimate{Bitmap(), Bitmap(), have.at(*lone)};  // lent from the cache
      return 0;
    }
  } else {
    *out = header_.evaluate(plan, fetch, fine_union);
  }
  if (malformed) {
    *message = fmt::format("bitmap {} of the index is malformed (its checksum matches: it was written so)", *malformed);
    return EIO;
  }
  if (combined) {
    auto kept = std::make_shared<const indexes::Estimate>(*out);
    const std::uint64_t bytes = kept->sure.getSizeInBytes(true) + kept->maybe.getSizeInBytes(true);
    remember(atom_key, Cached{nullptr, std::move(kept), bytes, {}});
  }
  if (!delta_.empty()) *out = delta_.apply(header_.binning(), keys, std::move(*out));
  return 0;
}

int ArrayIndex::read_bitmaps(std::uint32_t first, std::uint32_t last, std::vector<std::byte>* bytes, IndexCost* cost,
                             bool background, std::string* message) const {
  const auto& dir = header_.directory();
  const std::uint64_t begin = dir.offset(first);
  const std::uint64_t end = dir.offset(last - 1) + dir.length(last - 1);
  if (end > object_bytes_ || begin > end) {
    *message = "the index directory points past the index";
    return EIO;
  }
  if (int r = read_blob(object_extents_, begin, end - begin, bytes, cost, background)) {
    *message = fmt::format("reading the index's bitmaps failed: {}", std::strerror(r));
    return r;
  }
  std::uint64_t at = 0;
  for (std::uint32_t k = first; k < last; ++k) {
    const std::span<const std::byte> one(bytes->data() + at, dir.length(k));
    at += one.size();
    if (!header_.check_bitmap(k, one)) {
      *message = fmt::format("bitmap {} of the index failed its checksum (the device returned other bytes than "
                             "were written)",
                             k);
      return EIO;
    }
  }
  return 0;
}

int ArrayIndex::verify_step(VerifyCursor* cursor, std::uint64_t* bytes_read, std::string* message) const {
  // Bitmaps are read back to back in runs of about this size.
  constexpr std::uint64_t kRunBytes = 4ull << 20;
  std::vector<std::byte> bytes;
  auto unread = [&](int r, std::string_view what) {
    *message = fmt::format("reading the index's {} failed: {}", what, std::strerror(r));
    return r;
  };
  const auto& dir = header_.directory();
  if (!cursor->header_checked) {
    if (int r = read_blob(object_extents_, 0, header_.header_length(), &bytes, nullptr, true))
      return unread(r, "header");
    *bytes_read += bytes.size();
    if (auto header = IndexHeader::decode(bytes); std::holds_alternative<std::string>(header)) {
      *message = fmt::format("the index's header no longer decodes ({})", std::get<std::string>(header));
      return EIO;
    }
    cursor->header_checked = true;
    return 0;
  }
  if (const std::size_t i = cursor->bitmaps_checked; i < dir.size()) {
    const std::uint64_t begin = dir.offset(std::uint32_t(i));
    std::size_t j = i + 1;
    while (j < dir.size() && dir.offset(std::uint32_t(j)) + dir.length(std::uint32_t(j)) - begin <= kRunBytes) ++j;
    const int r = read_bitmaps(std::uint32_t(i), std::uint32_t(j), &bytes, nullptr, true, message);
    *bytes_read += bytes.size();  // read, also when a checksum then failed
    if (r) return r;
    cursor->bitmaps_checked = j;
    return 0;
  }
  // The delta last: it is the one part a flush replaces, under the lock
  // this step runs under.
  if (delta_bytes_ > 0) {
    if (int r = read_blob(delta_extents_, 0, delta_bytes_, &bytes, nullptr, true)) return unread(r, "delta");
    *bytes_read += bytes.size();
    if (XXH3_64bits(bytes.data(), bytes.size()) != delta_checksum_) {
      *message = "the index's delta fails its checksum";
      return EIO;
    }
  }
  cursor->done = true;
  return 0;
}

std::optional<std::uint64_t> ArrayIndex::exact_count(const indexes::KeySet& keys) const {
  if (!delta_.empty()) return std::nullopt;
  return header_.plan(keys).count;
}

void ArrayIndex::note(std::uint64_t first_row, const std::byte* elements, std::size_t count) {
  if (count == 0) return;
  delta_.set(header_.binning(), first_row, elements, count);
  delta_changed_ = true;
}

bool ArrayIndex::wants_rebuild() const {
  if (delta_.empty()) return false;
  if (provisional_) return delta_.rows() * 2 >= header_.rows();
  return delta_.bytes() > std::max<std::uint64_t>(4ull << 20, object_bytes_ / 2);
}

int ArrayIndex::persist_delta(std::vector<Extent>* dropped, std::string* message) {
  const std::string bytes = delta_.encode();
  std::vector<Extent> fresh;
  if (!bytes.empty())
    if (int r = write_blob(env_, bytes, &fresh, message)) return r;
  dropped->insert(dropped->end(), delta_extents_.begin(), delta_extents_.end());
  delta_extents_ = std::move(fresh);
  delta_bytes_ = bytes.size();
  delta_checksum_ = checksum(bytes);
  delta_changed_ = false;
  return 0;
}

}  // namespace mmfs::fs

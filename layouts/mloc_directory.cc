#include "layouts/mloc_directory.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include "util/align.h"
#include "util/coding.h"

namespace mmfs::layouts {

namespace {

constexpr char kMagic[8] = {'M', 'M', 'F', 'S', 'M', 'L', 'C', '1'};

template <class T>
void put(std::string& s, T v) {
  util::append_le(s, v);
}

struct Reader {
  std::string_view s;
  std::size_t at = 0;
  bool ok = true;
  template <class T>
  T get() {
    if (s.size() - at < sizeof(T)) {
      ok = false;
      return T{};
    }
    const T v = util::get_le<T>(s.data() + at);
    at += sizeof v;
    return v;
  }
};

}  // namespace

void MlocDirectory::locate(std::uint32_t sector_size) { locate(sector_size, encoded_bytes()); }

void MlocDirectory::locate(std::uint32_t sector_size, std::uint64_t header) {
  header_bytes = header;
  positions_start = util::align_up(header_bytes, sector_size);
  std::uint64_t at = positions_start;
  auto blocks_of = [&at](const auto& entries, std::vector<std::uint64_t>* blocks) {
    blocks->assign(util::div_up(entries.size(), kOffsetBlock), 0);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i % kOffsetBlock == 0) (*blocks)[i / kOffsetBlock] = at;
      at += entries[i].stored;
    }
  };
  blocks_of(positions, &position_blocks);
  data_start = at;
  blocks_of(units, &unit_blocks);
  image_bytes = at;
}

namespace {

bool is_zero(const MlocPositionEntry& e) { return e.count == 0 && e.raw == 0 && e.stored == 0 && e.checksum == 0; }
bool is_zero(const MlocUnitEntry& e) { return e.stored == 0 && e.checksum == 0; }

// Calls f(bin, group, rank, unit) for every unit of the grid in unit order
// (the priority's): the order of both the unit table and the units on the
// device, so that a walk through either is sequential.
template <class F>
void for_each_unit(const MlocGrid& g, const MlocPriority& priority, F&& f) {
  std::uint64_t n[3], at[3];
  for (int l = 0; l < 3; ++l)
    n[l] = priority[l] == MlocLevel::Value ? g.bins() : priority[l] == MlocLevel::Precision ? g.groups().size() : g.chunks();
  auto level = [&](MlocLevel want) {
    for (int l = 0; l < 3; ++l)
      if (priority[l] == want) return l;
    return 0;
  };
  const int lb = level(MlocLevel::Value), lk = level(MlocLevel::Precision), lc = level(MlocLevel::Space);
  std::uint64_t u = 0;
  for (at[0] = 0; at[0] < n[0]; ++at[0])
    for (at[1] = 0; at[1] < n[1]; ++at[1])
      for (at[2] = 0; at[2] < n[2]; ++at[2]) f(std::uint32_t(at[lb]), std::uint32_t(at[lk]), at[lc], u++);
}

}  // namespace

std::vector<bool> MlocDirectory::present() const {
  // Version 2 stores the entries of a (bin, chunk) only when one of them is
  // not zero: a chunk holds values of a few of the bins, and the images mmfs
  // writes leave every entry of an empty (bin, chunk) zero.
  const MlocGrid g = grid();
  std::vector<bool> out(positions.size(), false);
  const std::uint32_t G = std::uint32_t(g.groups().size());
  for (std::size_t e = 0; e < positions.size(); ++e) {
    bool any = !is_zero(positions[e]);
    const std::uint32_t b = std::uint32_t(e / g.chunks());
    const std::uint64_t c = e % g.chunks();
    for (std::uint32_t k = 0; !any && k < G; ++k) any = !is_zero(units[g.unit(b, k, c)]);
    out[e] = any;
  }
  return out;
}

std::uint64_t MlocDirectory::encoded_bytes() const {
  // As encode() writes them, without building the string.
  std::uint64_t fixed = sizeof kMagic + 3 * 4 + 1 + priority.size() + 3 * 4 + 8 * (shape.size() + chunk.size()) + 8 +
                        8 * bin_lower.size() + 2 * 8;
  if (!dense_tables()) {
    const std::vector<bool> p = present();
    const std::uint64_t n = std::uint64_t(std::count(p.begin(), p.end(), true));
    const std::uint64_t G = positions.empty() ? 0 : units.size() / positions.size();
    return fixed + (positions.size() + 7) / 8 + n * (sizeof(MlocPositionEntry) + G * sizeof(MlocUnitEntry));
  }
  return fixed + positions.size() * sizeof(MlocPositionEntry) + units.size() * sizeof(MlocUnitEntry);
}

bool MlocDirectory::dense_tables() const {
  // Version 1, or tables the grid does not describe (only a test writes
  // those, to see decode() refuse them): both tables whole.
  if (version == 1) return true;
  try {
    const MlocGrid g = grid();
    return positions.size() != std::uint64_t(g.bins()) * g.chunks() || units.size() != g.units();
  } catch (const std::exception&) {
    return true;
  }
}

std::string MlocDirectory::encode() const {
  std::string s(kMagic, sizeof kMagic);
  const bool dense = dense_tables();
  put<std::uint32_t>(s, dense ? 1 : 2);
  put<std::uint32_t>(s, std::uint32_t(shape.size()));
  put<std::uint32_t>(s, itemsize);
  put<std::uint8_t>(s, float64);
  for (MlocLevel l : priority) put<char>(s, char(l));
  put<std::uint32_t>(s, bins);
  put<std::int32_t>(s, zstd_level);
  put<std::uint32_t>(s, value_type);
  for (auto v : shape) put<std::uint64_t>(s, v);
  for (auto v : chunk) put<std::uint64_t>(s, v);
  put<std::uint64_t>(s, bin_lower.size());
  for (auto v : bin_lower) put<std::uint64_t>(s, v);
  put<std::uint64_t>(s, positions.size());
  put<std::uint64_t>(s, units.size());
  if (dense) {
    s.append(reinterpret_cast<const char*>(positions.data()), positions.size() * sizeof(MlocPositionEntry));
    s.append(reinterpret_cast<const char*>(units.data()), units.size() * sizeof(MlocUnitEntry));
    return s;
  }
  // Version 2: which (bin, chunk)s are present, a bit each (entry order,
  // least significant bit first); their position entries; then the unit
  // entries of the present ones, in unit order.
  const std::vector<bool> p = present();
  std::string bits((positions.size() + 7) / 8, '\0');
  for (std::size_t e = 0; e < p.size(); ++e)
    if (p[e]) bits[e / 8] = char(std::uint8_t(bits[e / 8]) | (1u << (e % 8)));
  s += bits;
  for (std::size_t e = 0; e < p.size(); ++e)
    if (p[e]) s.append(reinterpret_cast<const char*>(&positions[e]), sizeof(MlocPositionEntry));
  const MlocGrid g = grid();
  for_each_unit(g, priority, [&](std::uint32_t b, std::uint32_t, std::uint64_t c, std::uint64_t u) {
    if (p[g.position_entry(b, c)]) s.append(reinterpret_cast<const char*>(&units[u]), sizeof(MlocUnitEntry));
  });
  return s;
}

namespace {

// What both decoders check first: the header, and tables of the sizes its
// grid needs (version 2: as many entries as the presence bits say).
struct Encoded {
  MlocHeader head;
  std::uint32_t version = 0;
  std::uint64_t np = 0, nu = 0;
  std::optional<MlocGrid> grid;
  const std::byte* bits = nullptr;  // version 2: presence, one bit per position entry
  std::uint64_t present = 0;        // entries the tables hold
  const char* tables = nullptr;     // the first entry
};

bool is_present(const std::byte* bits, std::uint64_t e) { return (std::uint8_t(bits[e / 8]) >> (e % 8)) & 1; }

std::optional<Encoded> parse(std::string_view bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  Reader r{bytes, sizeof kMagic};
  Encoded x;
  MlocHeader& d = x.head;
  x.version = r.get<std::uint32_t>();
  if (x.version != 1 && x.version != 2) return std::nullopt;
  std::uint32_t dims = r.get<std::uint32_t>();
  d.itemsize = r.get<std::uint32_t>();
  d.float64 = r.get<std::uint8_t>() != 0;
  for (MlocLevel& l : d.priority) l = MlocLevel(r.get<char>());
  d.bins = r.get<std::uint32_t>();
  d.zstd_level = r.get<std::int32_t>();
  d.value_type = r.get<std::uint32_t>();
  if (!r.ok || dims == 0 || dims > 16) return std::nullopt;
  for (std::uint32_t i = 0; i < dims; ++i) d.shape.push_back(r.get<std::uint64_t>());
  for (std::uint32_t i = 0; i < dims; ++i) d.chunk.push_back(r.get<std::uint64_t>());
  std::uint64_t lowers = r.get<std::uint64_t>();
  if (!r.ok || lowers > d.bins || lowers > (bytes.size() - r.at) / 8) return std::nullopt;
  for (std::uint64_t i = 0; i < lowers; ++i) d.bin_lower.push_back(r.get<std::uint64_t>());
  x.np = r.get<std::uint64_t>();
  x.nu = r.get<std::uint64_t>();
  if (!r.ok) return std::nullopt;
  // The tables' sizes before the grid that needs them is built: a short or
  // corrupt directory is refused without allocating for it.
  if (d.itemsize == 0 || d.itemsize > 8 || d.bins == 0) return std::nullopt;
  std::uint64_t chunks = 1;
  for (std::uint32_t i = 0; i < dims; ++i) {
    if (d.shape[i] == 0 || d.chunk[i] == 0) return std::nullopt;
    const std::uint64_t c = (d.shape[i] + std::min(d.chunk[i], d.shape[i]) - 1) / std::min(d.chunk[i], d.shape[i]);
    if (c > MlocGrid::kMaxUnits || chunks * c > MlocGrid::kMaxUnits) return std::nullopt;
    chunks *= c;
  }
  const std::uint64_t ngroups = mloc_byte_groups(d.itemsize, d.float64).size();
  if (x.np != std::uint64_t(d.bins) * chunks || x.nu != x.np * ngroups || x.nu > MlocGrid::kMaxUnits)
    return std::nullopt;
  const std::uint64_t left = bytes.size() - r.at;
  // Version 2: the presence bits first; the entries of the present ones.
  x.present = x.np;
  if (x.version == 2) {
    if (left < (x.np + 7) / 8) return std::nullopt;
    x.bits = reinterpret_cast<const std::byte*>(bytes.data() + r.at);
    x.present = 0;
    for (std::uint64_t i = 0; i < (x.np + 7) / 8; ++i) x.present += std::popcount(std::uint8_t(x.bits[i]));
    if (x.np % 8 != 0 && (std::uint8_t(x.bits[x.np / 8]) >> (x.np % 8)) != 0) return std::nullopt;  // bits past the end
    r.at += (x.np + 7) / 8;
  }
  if (bytes.size() - r.at != x.present * (sizeof(MlocPositionEntry) + ngroups * sizeof(MlocUnitEntry)))
    return std::nullopt;
  try {
    if (!parse_mloc_priority(mloc_priority_text(d.priority))) return std::nullopt;
    x.grid.emplace(d.grid());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (x.np != std::uint64_t(x.grid->bins()) * x.grid->chunks() || x.nu != x.grid->units()) return std::nullopt;
  x.tables = bytes.data() + r.at;
  return x;
}

}  // namespace

std::optional<MlocDirectory> MlocDirectory::decode(std::string_view bytes, std::uint32_t sector_size) {
  auto x = parse(bytes);
  if (!x) return std::nullopt;
  MlocDirectory d;
  static_cast<MlocHeader&>(d) = std::move(x->head);
  d.version = x->version;
  const MlocGrid& grid = *x->grid;
  const std::uint64_t np = x->np, nu = x->nu, C = grid.chunks();
  const std::uint32_t G = std::uint32_t(grid.groups().size());
  const std::byte* bits = x->bits;
  d.positions.resize(np);
  d.units.resize(nu);
  const char* at = x->tables;
  if (d.version == 1) {
    std::memcpy(d.positions.data(), at, np * sizeof(MlocPositionEntry));
    std::memcpy(d.units.data(), at + np * sizeof(MlocPositionEntry), nu * sizeof(MlocUnitEntry));
  }
  // Sizes must agree with the grid: counts add up per chunk, stored bytes
  // never exceed raw ones.
  std::vector<std::uint64_t> per_chunk(C, 0);
  if (d.version == 1) {
    // A chunk at a time along each (bin, group): the tables in their order
    // for priorities that put space last, the common case.
    const std::uint64_t rank_stride = C > 1 ? grid.unit(0, 0, 1) : 0;
    for (std::uint32_t b = 0; b < grid.bins(); ++b) {
      const MlocPositionEntry* e = d.positions.data() + grid.position_entry(b, 0);
      for (std::uint64_t c = 0; c < C; ++c) {
        if (e[c].stored > e[c].raw) return std::nullopt;
        per_chunk[c] += e[c].count;
      }
      for (std::uint32_t g = 0; g < G; ++g) {
        const std::uint64_t bytes_per = grid.groups()[g].bytes;
        std::uint64_t u = grid.unit(b, g, 0);
        for (std::uint64_t c = 0; c < C; ++c, u += rank_stride)
          if (d.units[u].stored > e[c].count * bytes_per) return std::nullopt;
      }
    }
  } else {
    // The present entries only, each checked as it is placed (absent ones
    // are zero, so they fit); both walks are sequential in the bytes and
    // the tables.
    for (std::uint64_t e = 0; e < np; ++e) {
      if (!is_present(bits, e)) continue;
      MlocPositionEntry& pe = d.positions[e];
      std::memcpy(&pe, at, sizeof pe);
      at += sizeof pe;
      if (pe.stored > pe.raw) return std::nullopt;
      per_chunk[e % C] += pe.count;
    }
    bool fits = true;
    for_each_unit(grid, d.priority, [&](std::uint32_t b, std::uint32_t k, std::uint64_t c, std::uint64_t u) {
      const std::uint64_t e = grid.position_entry(b, c);
      if (!is_present(bits, e)) return;
      MlocUnitEntry& ue = d.units[u];
      std::memcpy(&ue, at, sizeof ue);
      at += sizeof ue;
      fits = fits && ue.stored <= std::uint64_t(d.positions[e].count) * grid.groups()[k].bytes;
    });
    if (!fits) return std::nullopt;
  }
  for (std::uint64_t c = 0; c < C; ++c)
    if (per_chunk[c] != grid.chunk_elements(c)) return std::nullopt;
  d.locate(sector_size, bytes.size());
  return d;
}

// --- MlocCatalog ---

std::uint64_t MlocCatalog::table_index(std::uint64_t e, std::uint64_t s, std::uint32_t k) const {
  const std::uint64_t at = order_of_slot_.empty() ? s : order_of_slot_[s];
  switch (precision_level_) {
    case 0: return k * present_ + at;
    case 2: return at * groups_ + k;
  }
  const std::uint64_t C = grid_->chunks();
  const std::uint64_t run = bins_first_ ? e / C : e % C;
  const std::uint64_t first = run_start_[run], n = run_start_[run + 1] - first;
  return first * groups_ + k * n + (at - first);
}

std::uint64_t MlocCatalog::position_offset(std::uint64_t e) const {
  const std::uint64_t s = slot(e);
  std::uint64_t at = position_blocks_[s / kOffsetBlock];
  for (std::uint64_t j = s - s % kOffsetBlock; j < s; ++j) at += position_at(j).stored;
  return at;
}

std::uint64_t MlocCatalog::unit_offset(std::uint64_t e, std::uint32_t group) const {
  const std::uint64_t i = table_index(e, slot(e), group);
  std::uint64_t at = unit_blocks_[i / kOffsetBlock];
  for (std::uint64_t j = i - i % kOffsetBlock; j < i; ++j) at += unit_at(j).stored;
  return at;
}

bool MlocCatalog::read_tables(std::uint64_t positions_start, std::uint64_t header_bytes) {
  const MlocGrid& g = *grid_;
  const std::uint64_t C = g.chunks(), P = present_;
  groups_ = std::uint32_t(g.groups().size());
  const MlocPriority& p = head_.priority;
  while (p[precision_level_] != MlocLevel::Precision) ++precision_level_;
  bins_first_ = p[precision_level_ == 0 ? 1 : 0] == MlocLevel::Value;

  // The position entries, in slot order: their sizes and counts.
  std::vector<std::uint64_t> per_chunk(C, 0);
  bin_elements_.assign(g.bins(), 0);
  run_start_.assign((bins_first_ ? g.bins() : C) + 1, 0);
  std::vector<std::uint32_t> chunk_of_slot;
  if (!bins_first_) chunk_of_slot.reserve(P);
  position_blocks_.resize(util::div_up(P, kOffsetBlock));
  std::uint64_t at = positions_start, s = 0;
  for (std::uint64_t w = 0; w < bits_.size(); ++w)
    for (std::uint64_t word = bits_[w]; word != 0; word &= word - 1, ++s) {
      const std::uint64_t e = w * 64 + std::uint64_t(std::countr_zero(word));
      const MlocPositionEntry pe = position_at(s);
      if (pe.stored > pe.raw) return false;
      if (s % kOffsetBlock == 0) position_blocks_[s / kOffsetBlock] = at;
      at += pe.stored;
      per_chunk[e % C] += pe.count;
      bin_elements_[e / C] += pe.count;
      lists_ += pe.count != 0;
      positions_raw_ += pe.raw;
      ++run_start_[(bins_first_ ? e / C : e % C) + 1];
      if (!bins_first_) chunk_of_slot.push_back(std::uint32_t(e % C));
    }
  for (std::uint64_t c = 0; c < C; ++c)
    if (per_chunk[c] != g.chunk_elements(c)) return false;
  data_start_ = at;
  for (std::size_t r = 1; r < run_start_.size(); ++r) run_start_[r] += run_start_[r - 1];
  // Chunks before bins: slots sorted by chunk, stably (bins stay ascending).
  std::vector<std::uint32_t> slot_at;
  if (!bins_first_) {
    order_of_slot_.resize(P);
    slot_at.resize(P);
    std::vector<std::uint64_t> next(run_start_.begin(), run_start_.end() - 1);
    for (std::uint64_t t = 0; t < P; ++t) {
      order_of_slot_[t] = std::uint32_t(next[chunk_of_slot[t]]++);
      slot_at[order_of_slot_[t]] = std::uint32_t(t);
    }
  }

  // The unit entries, in unit order: each no larger than its elements' raw bytes.
  unit_blocks_.resize(util::div_up(P * groups_, kOffsetBlock));
  group_stored_.assign(groups_, 0);
  std::uint64_t i = 0;
  bool fits = true;
  auto visit = [&](std::uint64_t o, std::uint32_t k) {
    const std::uint64_t t = bins_first_ ? o : slot_at[o];
    const MlocUnitEntry ue = unit_at(i);
    fits = fits && ue.stored <= std::uint64_t(position_at(t).count) * g.groups()[k].bytes;
    if (i % kOffsetBlock == 0) unit_blocks_[i / kOffsetBlock] = at;
    at += ue.stored;
    group_stored_[k] += ue.stored;
    ++i;
  };
  if (precision_level_ == 0) {
    for (std::uint32_t k = 0; k < groups_; ++k)
      for (std::uint64_t o = 0; o < P; ++o) visit(o, k);
  } else if (precision_level_ == 2) {
    for (std::uint64_t o = 0; o < P; ++o)
      for (std::uint32_t k = 0; k < groups_; ++k) visit(o, k);
  } else {
    for (std::size_t r = 0; r + 1 < run_start_.size(); ++r)
      for (std::uint32_t k = 0; k < groups_; ++k)
        for (std::uint64_t o = run_start_[r]; o < run_start_[r + 1]; ++o) visit(o, k);
  }
  header_bytes_ = header_bytes;
  positions_start_ = positions_start;
  image_bytes_ = at;
  return fits;
}

std::optional<MlocCatalog> MlocCatalog::from_v2(std::string_view bytes, std::shared_ptr<const void> keep,
                                                std::uint64_t positions_start, std::uint64_t header_bytes) {
  auto x = parse(bytes);
  if (!x || x->version != 2) return std::nullopt;
  MlocCatalog c;
  c.keep_ = std::move(keep);
  c.head_ = std::move(x->head);
  c.grid_ = std::move(x->grid);
  c.present_ = x->present;
  c.bits_.assign(x->np / 64 + 1, 0);
  for (std::uint64_t i = 0; i < (x->np + 7) / 8; ++i) c.bits_[i / 8] |= std::uint64_t(std::uint8_t(x->bits[i])) << (8 * (i % 8));
  c.before_.resize(c.bits_.size());
  std::uint64_t n = 0;
  for (std::size_t w = 0; w < c.bits_.size(); ++w) {
    c.before_[w] = n;
    n += std::uint64_t(std::popcount(c.bits_[w]));
  }
  c.positions_ = x->tables;
  c.units_ = x->tables + c.present_ * sizeof(MlocPositionEntry);
  if (!c.read_tables(positions_start, header_bytes)) return std::nullopt;
  return c;
}

std::optional<MlocCatalog> MlocCatalog::decode(std::string_view bytes, std::uint32_t sector_size,
                                               std::shared_ptr<const void> keep) {
  if (!keep) {
    auto copy = std::make_shared<const std::string>(bytes);
    bytes = *copy;
    keep = std::move(copy);
  }
  auto x = parse(bytes);
  if (!x) return std::nullopt;
  if (x->version == 1) {
    // Re-encoded as version 2; its pieces stay where version 1 put them.
    auto d = MlocDirectory::decode(bytes, sector_size);
    if (!d) return std::nullopt;
    d->version = 2;
    auto v2 = std::make_shared<const std::string>(d->encode());
    return from_v2(*v2, v2, d->positions_start, d->header_bytes);
  }
  return from_v2(bytes, std::move(keep), util::align_up(bytes.size(), sector_size), bytes.size());
}

MlocCatalog MlocCatalog::of(const MlocDirectory& d) {
  MlocDirectory v2 = d;
  v2.version = 2;
  auto bytes = std::make_shared<const std::string>(v2.encode());
  auto c = from_v2(*bytes, bytes, d.positions_start, d.header_bytes);  // where d's pieces are
  if (!c) throw std::invalid_argument("MlocCatalog::of: the directory's sizes disagree with its grid");
  return std::move(*c);
}

}  // namespace mmfs::layouts

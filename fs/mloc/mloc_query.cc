// Queries from an mloc image's level structure (fs/mloc/mloc_image.h): which bins
// a condition touches, the rows of aligned bins from their position lists
// alone, the rows of edge bins from their units, and the values of given rows.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <iterator>
#include <optional>

#include "fs/mloc/mloc_image.h"
#include "fs/mloc/mloc_internal.h"
#include "indexes/scan.h"
#include "indexes/values.h"
#include "layouts/cell_copy.h"
#include "util/align.h"

namespace mmfs::fs {

using layouts::MlocGrid;

namespace {

// Chunks fetched per device batch.
constexpr std::size_t kChunksPerBatch = 256;

// Row of brick position p of a chunk: base(chunk) + table[p / C_last] + p % C_last.
struct BrickRows {
  std::vector<std::uint64_t> table;
  std::uint64_t last = 1;
  BrickRows(const MlocGrid& g) {
    const auto& C = g.chunk();
    const auto& S = g.shape();
    const std::size_t n = C.size();
    last = C[n - 1];
    std::uint64_t outer = 1;
    for (std::size_t d = 0; d + 1 < n; ++d) outer *= C[d];
    table.resize(outer);
    std::vector<std::uint64_t> stride(n, 1);
    for (std::size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * S[d + 1];
    std::vector<std::uint64_t> x(n, 0);
    for (std::uint64_t i = 0; i < outer; ++i) {
      std::uint64_t r = 0;
      for (std::size_t d = 0; d + 1 < n; ++d) r += x[d] * stride[d];
      table[i] = r;
      for (std::size_t d = n - 1; d-- > 0;) {
        if (++x[d] < C[d]) break;
        x[d] = 0;
      }
    }
  }
  std::uint64_t base(const MlocGrid& g, std::uint64_t rank) const {
    const auto c = g.coords_of(rank);
    const auto& S = g.shape();
    std::uint64_t r = 0;
    for (std::size_t d = 0; d < S.size(); ++d) r = r * S[d] + c[d] * g.chunk()[d];
    return r;
  }
  std::uint64_t row(std::uint64_t base, std::uint32_t p) const { return base + table[p / last] + p % last; }
};

// The `n` <= 64 bits of `bits` from bit `at` (bits has a spare word at the end).
std::uint64_t bits_at(const std::uint64_t* bits, std::uint64_t at, std::uint64_t n) {
  const std::uint64_t w = at >> 6, o = at & 63;
  std::uint64_t v = bits[w] >> o;
  if (o != 0) v |= bits[w + 1] << (64 - o);
  return n == 64 ? v : v & ((1ull << n) - 1);
}

// ORs the `n` <= 64 bits of `v` into `words` from bit `at`. Atomic: the two
// decoding threads' chunks can share a word of rows.
void or_bits(std::vector<std::uint64_t>& words, std::uint64_t at, std::uint64_t n, std::uint64_t v) {
  const std::uint64_t w = at >> 6, o = at & 63;
  std::atomic_ref<std::uint64_t>(words[w]).fetch_or(v << o, std::memory_order_relaxed);
  if (o != 0 && o + n > 64)
    std::atomic_ref<std::uint64_t>(words[w + 1]).fetch_or(v >> (64 - o), std::memory_order_relaxed);
}



}  // namespace

std::vector<MlocImage::BinUse> MlocImage::bin_uses(const indexes::KeySet& keys_in) const {
  const indexes::KeySet keys = indexes::normalized(keys_in);
  const indexes::Binning& b = *binning_;
  std::vector<BinUse> uses(grid_->bins(), BinUse::None);
  for (std::uint32_t bin = 0; bin < b.value_bins(); ++bin) {
    auto [lo, hi] = b.key_range(bin);
    for (const auto& [a, z] : keys.ranges) {
      if (z < lo || a > hi) continue;
      uses[bin] = (a <= lo && hi <= z) ? BinUse::Aligned : BinUse::Edge;
      break;
    }
  }
  if (b.has_nan_bin() && keys.nan) uses[b.nan_bin()] = BinUse::Aligned;
  return uses;
}

std::optional<std::uint64_t> MlocImage::aligned_count(const indexes::KeySet& keys) const {
  if (!dir_) return std::nullopt;
  const auto uses = bin_uses(keys);
  std::uint64_t n = 0;
  for (std::uint32_t b = 0; b < uses.size(); ++b) {
    if (uses[b] == BinUse::Edge) return std::nullopt;
    if (uses[b] == BinUse::Aligned)
      n += dir_->bin_elements(b);
  }
  return n;
}

std::vector<MlocImage::Slab> MlocImage::slabs_of(const std::vector<std::uint64_t>& ranks) const {
  const MlocGrid& g = *grid_;
  const auto& S = g.shape();
  const std::uint64_t c0_rows = g.chunk()[0];
  const std::uint64_t per_row = g.elements() / std::max<std::uint64_t>(1, S[0]);
  std::vector<Slab> slabs(util::div_up(S[0], c0_rows));
  for (std::size_t i = 0; i < slabs.size(); ++i) {
    slabs[i].first_row = i * c0_rows * per_row;
    slabs[i].end_row = std::min<std::uint64_t>((i + 1) * c0_rows, S[0]) * per_row;
    slabs[i].word_row = slabs[i].first_row & ~std::uint64_t(0xFFFF);
  }
  for (std::uint64_t rank : ranks) slabs[g.coords_of(rank)[0]].ranks.push_back(rank);
  std::vector<Slab> out;
  for (Slab& slab : slabs)
    if (!slab.ranks.empty()) {
      std::sort(slab.ranks.begin(), slab.ranks.end());  // the curve's order: neighbours on the device
      out.push_back(std::move(slab));
    }
  return out;
}

namespace {

// The batches of the slabs' chunks that `keep` keeps, each within one slab
// and of at most kChunksPerBatch chunks, in slab order.
struct SlabBatch {
  std::size_t slab = 0;
  std::vector<std::uint64_t> ranks;
};

template <class Slabs, class Keep>
std::vector<SlabBatch> batches_of(const Slabs& slabs, Keep&& keep) {
  std::vector<SlabBatch> out;
  for (std::size_t s = 0; s < slabs.size(); ++s) {
    SlabBatch b{s, {}};
    for (std::uint64_t rank : slabs[s].ranks) {
      if (!keep(rank)) continue;
      b.ranks.push_back(rank);
      if (b.ranks.size() == kChunksPerBatch) {
        out.push_back(std::move(b));
        b = SlabBatch{s, {}};
      }
    }
    if (!b.ranks.empty()) out.push_back(std::move(b));
  }
  return out;
}

// The leading byte groups an edge bin is first read in: those holding the
// most significant half of the item, for items of 4 bytes or more (a byte
// of a 2-byte item leaves too many undecided); all groups otherwise.
std::uint32_t leading_groups(const MlocGrid& g) {
  if (g.itemsize() < 4) return std::uint32_t(g.groups().size());
  return layouts::mloc_groups_for_bytes(g.groups(), (g.itemsize() + 1) / 2);
}

// Words for the rows [word_row, end_row) of a slab, with the spare word
// bits_at and or_bits may touch.
std::size_t slab_words(std::uint64_t word_row, std::uint64_t end_row) { return (end_row - word_row + 63) / 64 + 1; }

}  // namespace

int MlocImage::match_rows(const indexes::KeySet& keys, const std::vector<std::uint64_t>& ranks_in,
                          indexes::Bitmap* rows, std::uint64_t* bytes_read, std::string* message) const {
  return match(keys, ranks_in, rows, nullptr, nullptr, bytes_read, message);
}

int MlocImage::match_output(const indexes::KeySet& keys, MatchOutput output, std::string* out,
                            std::uint64_t* bytes_read, std::string* message) const {
  out->clear();
  if (!dir_) return 0;
  // Room for every element of the bins the condition touches (an upper
  // bound: the edge bins' elements do not all match).
  const auto uses = bin_uses(keys);
  std::uint64_t bound = 0;
  for (std::uint32_t b = 0; b < uses.size(); ++b)
    if (uses[b] != BinUse::None)
      bound += dir_->bin_elements(b);
  if (output == MatchOutput::Coords) {
    out->reserve(bound * 8);
    return match(keys, {}, nullptr, nullptr, out, bytes_read, message);
  }
  out->reserve(bound * grid_->itemsize());
  // Values are placed a batch at a time, so every slab must be one batch.
  std::vector<std::uint64_t> all(grid_->chunks());
  for (std::uint64_t c = 0; c < all.size(); ++c) all[c] = c;
  for (const Slab& slab : slabs_of(all))
    if (slab.ranks.size() > kChunksPerBatch) return ENOTSUP;
  return match(keys, {}, nullptr, out, nullptr, bytes_read, message);
}

int MlocImage::match(const indexes::KeySet& keys, const std::vector<std::uint64_t>& ranks_in, indexes::Bitmap* rows,
                     std::string* values, std::string* coords, std::uint64_t* bytes_read, std::string* message) const {
  const MlocGrid& g = *grid_;
  const auto uses = bin_uses(keys);
  std::vector<std::uint64_t> ranks = ranks_in;
  if (ranks.empty())
    for (std::uint64_t c = 0; c < g.chunks(); ++c) ranks.push_back(c);
  const std::uint32_t G = std::uint32_t(g.groups().size());
  const std::uint32_t item = g.itemsize();
  const BrickRows brick_rows(g);
  const auto type = indexes::ValueType(dir_->header().value_type);
  // Edge bins are first read in their leading groups only (half the item
  // or more), which decide all but the elements within a few ulps of a
  // range's end (PrefixMatcher); those are settled by a second read of
  // their (bin, chunk)'s other groups once every chunk is done.
  // Values are wanted whole, so then every group of edge and aligned bins
  // is read at once; coords are written as each slab finishes, so no row
  // may be left to settle_undecided.
  const std::uint32_t lead = leading_groups(g);
  std::optional<indexes::PrefixMatcher> prefix;
  if (lead < G && values == nullptr && coords == nullptr)
    prefix.emplace(type, keys, item - g.groups()[lead].first_rank);  // the bytes from group `lead` on are unknown
  const std::uint32_t edge_groups = prefix ? lead : G;
  const std::uint32_t aligned_groups = values ? G : 0;
  std::vector<Undecided> undecided[2];  // per thread of on_two_threads
  // With values (a batch is a whole slab, match_output checks): each
  // chunk's matches are kept, by bin, while the batch sets the slab's rows;
  // then each match's value goes to its place in row order, the set bits
  // before its row.
  struct BinMatches {
    std::uint32_t count = 0;                // elements of the (bin, chunk)
    bool all = false;                       // an aligned bin: every element
    std::vector<std::uint32_t> positions;   // the bin's brick positions
    std::vector<std::uint32_t> which;       // an edge bin: the matching elements
    std::vector<std::vector<std::byte>> unpacked;  // planes the units were unpacked into
    std::vector<const std::byte*> planes;
  };
  std::vector<std::vector<BinMatches>> kept;
  // A slab (the chunks of one chunk row of dimension 0) at a time: its rows
  // as a bitset small enough to stay in cache, handed to the result as
  // finished containers when the slab is done.
  const std::vector<Slab> slabs = slabs_of(ranks);
  const std::vector<SlabBatch> batches = batches_of(slabs, [](std::uint64_t) { return true; });
  std::vector<std::uint64_t> words;
  // Per thread of on_two_threads: a chunk's matches by brick position.
  const std::size_t local_words = g.brick_elements() / 64 + 2;
  std::vector<std::uint64_t> local_bits[2];
  std::size_t current = slabs.size();
  auto finish_slab = [&] {
    if (current >= slabs.size()) return;
    if (rows) *rows |= indexes::bitmap_of_words(words, slabs[current].word_row, false);
    if (!coords) return;
    // The rows themselves, ascending: no bitmap in between.
    std::uint64_t n = 0;
    for (std::uint64_t w : words) n += std::uint64_t(std::popcount(w));
    const std::size_t at = coords->size();
    coords->resize(at + n * 8);
    std::byte* out = reinterpret_cast<std::byte*>(coords->data()) + at;
    const std::uint64_t word_row = slabs[current].word_row;
    for (std::size_t w = 0; w < words.size(); ++w)
      for (std::uint64_t v = words[w]; v != 0; v &= v - 1) {
        const std::uint64_t row = word_row + w * 64 + std::uint64_t(std::countr_zero(v));
        std::memcpy(out, &row, 8);
        out += 8;
      }
  };
  // The kept matches' values, once the slab's rows are all set.
  auto place_values = [&](const SlabBatch& batch) {
    std::vector<std::uint64_t> before(words.size());
    std::uint64_t n = 0;
    for (std::size_t w = 0; w < words.size(); ++w) {
      before[w] = n;
      n += std::uint64_t(std::popcount(words[w]));
    }
    const std::size_t at = values->size();
    values->resize(at + n * item);
    std::byte* const out = reinterpret_cast<std::byte*>(values->data()) + at;
    const std::uint64_t word_row = slabs[current].word_row;
    mloc_detail::on_two_threads(batch.ranks.size(), [&](std::size_t c) {
      const std::uint64_t base = brick_rows.base(g, batch.ranks[c]) - word_row;
      for (const BinMatches& m : kept[c]) {
        const layouts::MlocElementReader element(g, m.count, G, m.planes.data());
        auto place = [&](std::uint32_t k) {
          const std::uint64_t row = base + brick_rows.row(0, m.positions[k]);
          const std::uint64_t word = words[row >> 6], bit = 1ull << (row & 63);
          const std::uint64_t v = element.value(k);
          std::memcpy(out + (before[row >> 6] + std::uint64_t(std::popcount(word & (bit - 1)))) * item, &v, item);
        };
        if (m.all)
          for (std::uint32_t k = 0; k < m.count; ++k) place(k);
        else
          for (std::uint32_t k : m.which) place(k);
      }
    });
    kept.clear();
  };
  auto pieces_of = [&](std::size_t i, std::vector<Piece>* pieces, std::vector<std::size_t>* first) {
    for (std::uint64_t rank : batches[i].ranks) {
      first->push_back(pieces->size());
      for (std::uint32_t b = 0; b < g.bins(); ++b) {
        if (uses[b] == BinUse::None) continue;
        entry_pieces(g.position_entry(b, rank), uses[b] == BinUse::Edge ? edge_groups : aligned_groups, pieces);
      }
    }
  };
  auto consume = [&](std::size_t i, const std::vector<Piece>& pieces, const std::vector<std::size_t>& first,
                     const AlignedBuffer& buffer) {
    const SlabBatch& batch = batches[i];
    if (batch.slab != current) {
      finish_slab();
      current = batch.slab;
      words.assign(slab_words(slabs[current].word_row, slabs[current].end_row), 0);
    }
    const std::uint64_t word_row = slabs[current].word_row;
    const std::size_t n = batch.ranks.size();
    std::vector<int> errors(n, 0);
    std::vector<std::string> messages(n);
    if (values) kept.assign(n, {});
    mloc_detail::on_two_threads(n, [&](std::size_t c) {
      const std::uint64_t rank = batch.ranks[c];
      const std::uint64_t base = brick_rows.base(g, rank) - word_row;
      std::vector<std::uint32_t> positions;
      std::vector<std::byte> scratch;
      std::vector<std::vector<std::byte>> planes(G);
      std::vector<const std::byte*> plane_at(G);
      std::vector<std::byte> elements;
      std::vector<std::uint32_t> hits;
      std::size_t at = first[c];
      // With values: the bin's matches, its positions and planes kept for
      // place_values (the planes point into the batch's buffer or into the
      // unpacked copies, which move along).
      auto keep = [&](std::uint32_t count, bool all, std::vector<std::uint32_t> which) {
        BinMatches& m = kept[c].emplace_back();
        m.count = count;
        m.all = all;
        m.which = std::move(which);
        m.positions = std::move(positions);
        m.planes = plane_at;
        m.unpacked.resize(G);
        for (std::uint32_t k = 0; k < G; ++k)
          if (!planes[k].empty() && plane_at[k] == planes[k].data()) m.unpacked[k] = std::move(planes[k]);
        positions.clear();
      };
      // The chunk's matches as a bitset of brick positions first (plain
      // stores), then ORed into the slab's rows a brick row at a time. The
      // bitset is this thread's (on_two_threads runs c % 2 on one thread)
      // and is left all zero by the OR below.
      std::vector<std::uint64_t>& local = local_bits[c % 2];
      local.resize(local_words, 0);
      auto set = [&](std::uint32_t p) { local[p >> 6] |= 1ull << (p & 63); };
      for (std::uint32_t b = 0; b < g.bins(); ++b) {
        if (uses[b] == BinUse::None) continue;
        const layouts::MlocPositionEntry& pe = dir_->position(g.position_entry(b, rank));
        if (pe.count == 0) continue;
        if ((errors[c] = positions_of(b, rank, pieces[at++], buffer, &scratch, &positions, &messages[c]))) return;
        if (uses[b] == BinUse::Aligned) {
          for (std::uint32_t p : positions) set(p);
          if (!values) continue;
        }
        for (std::uint32_t k = 0; k < (uses[b] == BinUse::Edge ? edge_groups : aligned_groups); ++k)
          if ((errors[c] = plane_of(b, k, rank, pe.count, pieces[at++], buffer, &planes[k], &plane_at[k],
                                    &messages[c])))
            return;
        if (uses[b] == BinUse::Aligned) {
          keep(pe.count, true, {});
          continue;
        }
        if (prefix) {
          const layouts::MlocElementReader lead_bytes_of(g, pe.count, lead, plane_at.data());
          Undecided* open = nullptr;
          for (std::uint32_t k = 0; k < pe.count; ++k)
            switch ((*prefix)(lead_bytes_of.value(k))) {
              case indexes::PrefixMatch::No: break;
              case indexes::PrefixMatch::Yes: set(positions[k]); break;
              case indexes::PrefixMatch::Maybe:
                if (open == nullptr) open = &undecided[c % 2].emplace_back(Undecided{b, rank, {}, {}});
                open->indices.push_back(k);
                open->positions.push_back(positions[k]);
            }
          continue;
        }
        elements.resize(std::size_t(pe.count) * item);
        hits.resize(pe.count);
        layouts::mloc_assemble(g, pe.count, G, plane_at.data(), elements.data());
        const std::size_t matched = indexes::matching_indices(type, keys, elements.data(), pe.count, hits.data());
        for (std::size_t k = 0; k < matched; ++k) set(positions[hits[k]]);
        if (values && matched) keep(pe.count, false, std::vector<std::uint32_t>(hits.begin(), hits.begin() + matched));
      }
      // Brick rows past the array's edge hold no positions, so no bits.
      if (brick_rows.last % 64 == 0) {
        // Brick rows are whole words: visit the set ones only.
        const std::uint64_t per_row = brick_rows.last / 64;
        for (std::uint64_t w = 0; w < local_words; ++w) {
          const std::uint64_t v = local[w];
          if (v == 0) continue;
          local[w] = 0;
          or_bits(words, base + brick_rows.table[w / per_row] + (w % per_row) * 64, 64, v);
        }
        return;
      }
      for (std::uint64_t r = 0; r < brick_rows.table.size(); ++r)
        for (std::uint64_t k = 0; k < brick_rows.last; k += 64) {
          const std::uint64_t len = std::min<std::uint64_t>(64, brick_rows.last - k);
          if (std::uint64_t v = bits_at(local.data(), r * brick_rows.last + k, len))
            or_bits(words, base + brick_rows.table[r] + k, len, v);
        }
      std::fill(local.begin(), local.end(), 0);
    });
    for (std::size_t c = 0; c < n; ++c)
      if (errors[c]) {
        *message = messages[c];
        return errors[c];
      }
    if (values) place_values(batch);
    return 0;
  };
  if (int r = pipelined(batches.size(), pieces_of, consume, bytes_read, message)) return r;
  finish_slab();
  std::vector<Undecided> rest = std::move(undecided[0]);
  rest.insert(rest.end(), std::make_move_iterator(undecided[1].begin()), std::make_move_iterator(undecided[1].end()));
  return settle_undecided(keys, rest, rows, bytes_read, message);
}

int MlocImage::settle_undecided(const indexes::KeySet& keys, const std::vector<Undecided>& open, indexes::Bitmap* rows,
                                std::uint64_t* bytes_read, std::string* message) const {
  if (open.empty()) return 0;
  const MlocGrid& g = *grid_;
  const std::uint32_t G = std::uint32_t(g.groups().size());
  const BrickRows brick_rows(g);
  const auto type = indexes::ValueType(dir_->header().value_type);
  const std::size_t batches = util::div_up(open.size(), kChunksPerBatch);
  auto pieces_of = [&](std::size_t i, std::vector<Piece>* pieces, std::vector<std::size_t>* first) {
    for (std::size_t j = i * kChunksPerBatch; j < std::min(open.size(), (i + 1) * kChunksPerBatch); ++j) {
      first->push_back(pieces->size());
      const std::uint64_t e = g.position_entry(open[j].bin, open[j].rank);
      for (std::uint32_t k = 0; k < G; ++k) pieces->push_back({dir_->unit_offset(e, k), dir_->unit(e, k).stored, 0});
    }
  };
  auto consume = [&](std::size_t i, const std::vector<Piece>& pieces, const std::vector<std::size_t>& first,
                     const AlignedBuffer& buffer) {
    std::vector<std::vector<std::byte>> planes(G);
    std::vector<const std::byte*> plane_at(G);
    std::byte element[8];
    for (std::size_t j = i * kChunksPerBatch; j < std::min(open.size(), (i + 1) * kChunksPerBatch); ++j) {
      const Undecided& u = open[j];
      const std::uint32_t count = dir_->position(g.position_entry(u.bin, u.rank)).count;
      std::size_t at = first[j - i * kChunksPerBatch];
      for (std::uint32_t k = 0; k < G; ++k)
        if (int r = plane_of(u.bin, k, u.rank, count, pieces[at++], buffer, &planes[k], &plane_at[k], message))
          return r;
      const layouts::MlocElementReader whole(g, count, G, plane_at.data());
      const std::uint64_t base = brick_rows.base(g, u.rank);
      for (std::size_t n = 0; n < u.indices.size(); ++n) {
        whole.write(u.indices[n], element);
        if (indexes::contains(keys, type, element)) rows->add(brick_rows.row(base, u.positions[n]));
      }
    }
    return 0;
  };
  return pipelined(batches, pieces_of, consume, bytes_read, message);
}

int MlocImage::gather(const indexes::Bitmap& rows, const std::vector<bool>& hint, std::byte* out,
                      std::uint64_t* bytes_read, std::string* message) const {
  const MlocGrid& g = *grid_;
  const std::uint32_t item = g.itemsize();
  const std::uint64_t count = rows.cardinality();
  if (!dir_) {
    std::memset(out, 0, count * item);
    return 0;
  }
  const BrickRows brick_rows(g);
  const std::uint32_t G = std::uint32_t(g.groups().size());
  std::vector<std::uint64_t> all(g.chunks());
  for (std::uint64_t c = 0; c < all.size(); ++c) all[c] = c;
  const std::vector<Slab> slabs = slabs_of(all);
  // A slab at a time, as in match_rows: the wanted rows of the slab as a
  // bitset, and before each word the count of wanted rows of the slab
  // before it; a row's place in `out` is the slab's first place plus a
  // popcount. Chunks find their wanted rows a brick row at a time.
  std::vector<std::uint64_t> words, before;
  std::size_t current = slabs.size();
  auto load_slab = [&](std::size_t s) {
    if (s == current) return;
    current = s;
    const Slab& slab = slabs[s];
    words.assign(slab_words(slab.word_row, slab.end_row), 0);
    indexes::or_rows_into(rows, slab.word_row, std::span(words).first(words.size() - 1));
    // Rows before the slab's first share its first container: not its own.
    const std::uint64_t skip = slab.first_row - slab.word_row;
    std::fill(words.begin(), words.begin() + std::ptrdiff_t(skip / 64), 0);
    if (skip % 64) words[skip / 64] &= ~0ull << (skip % 64);
    const std::uint64_t end = slab.end_row - slab.word_row;
    for (std::uint64_t w = end / 64; w < words.size(); ++w)
      words[w] &= w == end / 64 ? (1ull << (end % 64)) - 1 : 0;
    before.resize(words.size());
    std::uint64_t n = 0;
    for (std::size_t w = 0; w < words.size(); ++w) {
      before[w] = n;
      n += std::popcount(words[w]);
    }
  };
  // The wanted rows in chunk `rank` of the loaded slab: its rows inside the
  // array, a run along the last dimension at a time.
  auto wanted_in = [&](std::uint64_t rank) {
    const std::size_t n = g.dims();
    std::vector<std::uint64_t> lo(n), extent(n), x(n, 0);
    g.chunk_box(rank, lo.data(), extent.data());
    const std::uint64_t base = brick_rows.base(g, rank) - slabs[current].word_row, run = extent[n - 1];
    std::uint64_t wanted = 0;
    for (;;) {
      std::uint64_t r = 0;
      for (std::size_t d = 0; d + 1 < n; ++d) r = r * g.chunk()[d] + x[d];
      const std::uint64_t row = base + brick_rows.table[r];
      for (std::uint64_t k = 0; k < run; k += 64)
        wanted += std::popcount(bits_at(words.data(), row + k, std::min<std::uint64_t>(64, run - k)));
      std::size_t d = n - 1;
      while (d-- > 0) {
        if (++x[d] < extent[d]) break;
        x[d] = 0;
      }
      if (d == std::size_t(-1)) return wanted;
    }
  };
  // Each slab's first place in `out`, and each chunk's wanted rows.
  std::vector<std::uint64_t> slab_at(slabs.size()), wanted(g.chunks(), 0), found(g.chunks(), 0);
  std::uint64_t placed = 0;
  for (std::size_t s = 0; s < slabs.size(); ++s) {
    load_slab(s);
    slab_at[s] = placed;
    placed += before.back() + std::popcount(words.back());
    if (before.back() + std::popcount(words.back()) == 0) continue;
    for (std::uint64_t rank : slabs[s].ranks) wanted[rank] = wanted_in(rank);
  }
  if (placed != count) {
    *message = "gather: a row lies past the array";
    return EINVAL;
  }
  // Pass 0 searches the hinted bins, pass 1 every other bin of the chunks
  // that still miss rows. Each element lies in one bin: nothing is found twice.
  std::uint64_t total_found = 0;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<bool> in_pass(g.bins());
    for (std::uint32_t b = 0; b < g.bins(); ++b) {
      const bool hinted = hint.empty() || (b < hint.size() && hint[b]);
      in_pass[b] = pass == 0 ? hinted : !hinted;
    }
    if (pass == 1 && (hint.empty() || total_found == count)) break;
    const std::vector<SlabBatch> batches =
        batches_of(slabs, [&](std::uint64_t rank) { return found[rank] < wanted[rank]; });
    auto pieces_of = [&](std::size_t i, std::vector<Piece>* pieces, std::vector<std::size_t>* first) {
      for (std::uint64_t rank : batches[i].ranks) {
        first->push_back(pieces->size());
        for (std::uint32_t b = 0; b < g.bins(); ++b) {
          if (in_pass[b]) entry_pieces(g.position_entry(b, rank), G, pieces);
        }
      }
    };
    auto consume = [&](std::size_t i, const std::vector<Piece>& pieces, const std::vector<std::size_t>& first,
                       const AlignedBuffer& buffer) {
      const SlabBatch& batch = batches[i];
      load_slab(batch.slab);
      const std::uint64_t word_row = slabs[current].word_row;
      std::byte* const slab_out = out + slab_at[current] * item;
      const std::size_t n = batch.ranks.size();
      std::vector<int> errors(n, 0);
      std::vector<std::string> messages(n);
      mloc_detail::on_two_threads(n, [&](std::size_t c) {
        const std::uint64_t rank = batch.ranks[c];
        const std::uint64_t base = brick_rows.base(g, rank) - word_row;
        std::vector<std::uint32_t> positions;
        std::vector<std::byte> scratch;
        std::vector<std::vector<std::byte>> planes(G);
        std::vector<const std::byte*> plane_at(G);
        std::size_t at = first[c];
        for (std::uint32_t b = 0; b < g.bins(); ++b) {
          const layouts::MlocPositionEntry& pe = dir_->position(g.position_entry(b, rank));
          if (!in_pass[b] || pe.count == 0) continue;
          if ((errors[c] = positions_of(b, rank, pieces[at++], buffer, &scratch, &positions, &messages[c]))) return;
          for (std::uint32_t k = 0; k < G; ++k)
            if ((errors[c] = plane_of(b, k, rank, pe.count, pieces[at++], buffer, &planes[k], &plane_at[k],
                                      &messages[c])))
              return;
          const layouts::MlocElementReader element(g, pe.count, G, plane_at.data());
          // The brick line of each position: positions ascend, so a
          // division only when a position leaves the line of the last one.
          std::uint64_t line = 0, line_start = 0;
          for (std::size_t k = 0; k < positions.size(); ++k) {
            const std::uint32_t p = positions[k];
            if (p - line_start >= brick_rows.last) {
              line = p / brick_rows.last;
              line_start = line * brick_rows.last;
            }
            const std::uint64_t row = base + brick_rows.table[line] + (p - line_start);
            const std::uint64_t word = words[row >> 6], bit = 1ull << (row & 63);
            if (!(word & bit)) continue;
            element.write(k, slab_out + (before[row >> 6] + std::uint64_t(std::popcount(word & (bit - 1)))) * item);
            ++found[rank];  // this chunk is this thread's alone
          }
        }
      });
      for (std::size_t c = 0; c < n; ++c)
        if (errors[c]) {
          *message = messages[c];
          return errors[c];
        }
      return 0;
    };
    if (int r = pipelined(batches.size(), pieces_of, consume, bytes_read, message)) return r;
    total_found = 0;
    for (std::uint64_t c = 0; c < g.chunks(); ++c) total_found += found[c];
  }
  if (total_found != count) {
    *message = "an element is in no bin of its chunk (run mmfsck)";
    return EUCLEAN;
  }
  return 0;
}

}  // namespace mmfs::fs

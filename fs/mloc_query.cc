// Queries from an mloc image's level structure (fs/mloc_image.h): which bins
// a condition touches, the rows of aligned bins from their position lists
// alone, the rows of edge bins from their units, and the values of given rows.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>

#include "fs/mloc_image.h"
#include "fs/mloc_internal.h"
#include "indexes/scan.h"
#include "layouts/cell_copy.h"

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
      for (std::uint64_t c = 0; c < grid_->chunks(); ++c) n += dir_->positions[grid_->position_entry(b, c)].count;
  }
  return n;
}

int MlocImage::match_rows(const indexes::KeySet& keys, const std::vector<std::uint64_t>& ranks_in,
                          std::vector<std::uint64_t>* words, std::uint64_t* bytes_read, std::string* message) const {
  const MlocGrid& g = *grid_;
  const auto uses = bin_uses(keys);
  std::vector<std::uint64_t> ranks = ranks_in;
  if (ranks.empty())
    for (std::uint64_t c = 0; c < g.chunks(); ++c) ranks.push_back(c);
  const std::uint32_t G = std::uint32_t(g.groups().size());
  const std::uint32_t item = g.itemsize();
  const BrickRows brick_rows(g);
  const auto type = indexes::ValueType(dir_->value_type);
  for (std::size_t b0 = 0; b0 < ranks.size(); b0 += kChunksPerBatch) {
    const std::size_t b1 = std::min(ranks.size(), b0 + kChunksPerBatch);
    std::vector<Piece> pieces;
    std::vector<std::size_t> first(b1 - b0);
    for (std::size_t i = b0; i < b1; ++i) {
      first[i - b0] = pieces.size();
      for (std::uint32_t b = 0; b < g.bins(); ++b) {
        if (uses[b] == BinUse::None) continue;
        const std::uint64_t e = g.position_entry(b, ranks[i]);
        if (dir_->positions[e].count == 0) continue;
        pieces.push_back({dir_->position_offset[e], dir_->positions[e].stored, 0});
        if (uses[b] == BinUse::Edge)
          for (std::uint32_t k = 0; k < G; ++k) {
            const std::uint64_t u = g.unit(b, k, ranks[i]);
            pieces.push_back({dir_->unit_offset[u], dir_->units[u].stored, 0});
          }
      }
    }
    AlignedBuffer buffer;
    if (int r = fetch(pieces, &buffer, bytes_read, nullptr)) {
      *message = "reading mloc position lists and units failed";
      return r;
    }
    std::vector<int> errors(b1 - b0, 0);
    std::vector<std::string> messages(b1 - b0);
    mloc_detail::on_two_threads(b1 - b0, [&](std::size_t i) {
      const std::uint64_t rank = ranks[b0 + i];
      const std::uint64_t base = brick_rows.base(g, rank);
      std::vector<std::uint32_t> positions;
      std::vector<std::byte> scratch;
      std::vector<std::vector<std::byte>> planes(G);
      std::vector<const std::byte*> plane_at(G);
      std::vector<std::byte> elements;
      std::size_t at = first[i];
      // The chunk's matches as a bitset of brick positions first (plain
      // stores), then ORed into the array's rows a brick row at a time.
      std::vector<std::uint64_t> local(g.brick_elements() / 64 + 2, 0);
      auto set = [&](std::uint32_t p) { local[p >> 6] |= 1ull << (p & 63); };
      for (std::uint32_t b = 0; b < g.bins(); ++b) {
        if (uses[b] == BinUse::None) continue;
        const layouts::MlocPositionEntry& pe = dir_->positions[g.position_entry(b, rank)];
        if (pe.count == 0) continue;
        if ((errors[i] = positions_of(b, rank, pieces[at++], buffer, &scratch, &positions, &messages[i]))) return;
        if (uses[b] == BinUse::Aligned) {
          for (std::uint32_t p : positions) set(p);
          continue;
        }
        for (std::uint32_t k = 0; k < G; ++k)
          if ((errors[i] = plane_of(b, k, rank, pe.count, pieces[at++], buffer, &planes[k], &plane_at[k],
                                    &messages[i])))
            return;
        elements.resize(std::size_t(pe.count) * item);
        layouts::mloc_assemble(g, pe.count, G, plane_at.data(), elements.data());
        indexes::Bitmap hits;
        indexes::scan_keys(type, keys, elements.data(), pe.count, 0, &hits);
        for (std::uint64_t k : indexes::rows_of(hits)) set(positions[k]);
      }
      // Brick rows past the array's edge hold no positions, so no bits.
      for (std::uint64_t r = 0; r < brick_rows.table.size(); ++r)
        for (std::uint64_t k = 0; k < brick_rows.last; k += 64) {
          const std::uint64_t n = std::min<std::uint64_t>(64, brick_rows.last - k);
          if (std::uint64_t v = bits_at(local.data(), r * brick_rows.last + k, n))
            or_bits(*words, base + brick_rows.table[r] + k, n, v);
        }
    });
    for (std::size_t i = 0; i < errors.size(); ++i)
      if (errors[i]) {
        *message = messages[i];
        return errors[i];
      }
  }
  return 0;
}

int MlocImage::gather(const std::vector<std::uint64_t>& rows, const std::vector<bool>& hint, std::byte* out,
                      std::uint64_t* bytes_read, std::string* message) const {
  const MlocGrid& g = *grid_;
  const std::uint32_t item = g.itemsize();
  if (!dir_) {
    std::memset(out, 0, rows.size() * item);
    return 0;
  }
  // The wanted rows as a bitset of the array's rows (a spare word for
  // bits_at), and before each word the count of wanted rows before it: a
  // row's place in `out` is then a popcount away. Chunks find their wanted
  // elements a brick row at a time, with no per-row division or sort.
  const std::uint64_t nwords = (g.elements() + 63) / 64;
  std::vector<std::uint64_t> words(nwords + 1, 0);
  for (std::uint64_t r : rows) words[r >> 6] |= 1ull << (r & 63);
  std::vector<std::uint64_t> before(nwords);
  {
    std::uint64_t n = 0;
    for (std::uint64_t w = 0; w < nwords; ++w) {
      before[w] = n;
      n += std::popcount(words[w]);
    }
    if (n != rows.size()) {
      *message = "gather: the rows are not ascending and distinct";
      return EINVAL;
    }
  }
  const BrickRows brick_rows(g);
  const std::uint32_t G = std::uint32_t(g.groups().size());
  // The wanted rows in chunk `rank`: its rows inside the array, a run along
  // the last dimension at a time (a brick's padding rows are other chunks' rows).
  auto wanted_in = [&](std::uint64_t rank) {
    const std::size_t n = g.dims();
    std::vector<std::uint64_t> lo(n), extent(n), x(n, 0);
    g.chunk_box(rank, lo.data(), extent.data());
    const std::uint64_t base = brick_rows.base(g, rank), run = extent[n - 1];
    std::uint64_t count = 0;
    for (;;) {
      std::uint64_t r = 0;
      for (std::size_t d = 0; d + 1 < n; ++d) r = r * g.chunk()[d] + x[d];
      const std::uint64_t row = base + brick_rows.table[r];
      for (std::uint64_t k = 0; k < run; k += 64)
        count += std::popcount(bits_at(words.data(), row + k, std::min<std::uint64_t>(64, run - k)));
      std::size_t d = n - 1;
      while (d-- > 0) {
        if (++x[d] < extent[d]) break;
        x[d] = 0;
      }
      if (d == std::size_t(-1)) return count;
    }
  };
  std::vector<std::uint64_t> wanted(g.chunks()), found(g.chunks(), 0);
  std::uint64_t total_found = 0;
  // Pass 0 searches the hinted bins, pass 1 every other bin of the chunks
  // that still miss rows. Each element lies in one bin: nothing is found twice.
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<bool> in_pass(g.bins());
    for (std::uint32_t b = 0; b < g.bins(); ++b) {
      const bool hinted = hint.empty() || (b < hint.size() && hint[b]);
      in_pass[b] = pass == 0 ? hinted : !hinted;
    }
    if (pass == 1 && (hint.empty() || total_found == rows.size())) break;
    std::vector<std::uint64_t> ranks;
    for (std::uint64_t c = 0; c < g.chunks(); ++c) {
      if (pass == 0) wanted[c] = wanted_in(c);
      if (found[c] < wanted[c]) ranks.push_back(c);
    }
    for (std::size_t b0 = 0; b0 < ranks.size(); b0 += kChunksPerBatch) {
      const std::size_t b1 = std::min(ranks.size(), b0 + kChunksPerBatch);
      std::vector<Piece> pieces;
      std::vector<std::size_t> first(b1 - b0);
      for (std::size_t i = b0; i < b1; ++i) {
        first[i - b0] = pieces.size();
        for (std::uint32_t b = 0; b < g.bins(); ++b) {
          const std::uint64_t e = g.position_entry(b, ranks[i]);
          if (!in_pass[b] || dir_->positions[e].count == 0) continue;
          pieces.push_back({dir_->position_offset[e], dir_->positions[e].stored, 0});
          for (std::uint32_t k = 0; k < G; ++k) {
            const std::uint64_t u = g.unit(b, k, ranks[i]);
            pieces.push_back({dir_->unit_offset[u], dir_->units[u].stored, 0});
          }
        }
      }
      AlignedBuffer buffer;
      if (int r = fetch(pieces, &buffer, bytes_read, nullptr)) {
        *message = "reading mloc units failed";
        return r;
      }
      std::vector<int> errors(b1 - b0, 0);
      std::vector<std::string> messages(b1 - b0);
      mloc_detail::on_two_threads(b1 - b0, [&](std::size_t i) {
        const std::uint64_t rank = ranks[b0 + i];
        const std::uint64_t base = brick_rows.base(g, rank);
        std::vector<std::uint32_t> positions;
        std::vector<std::byte> scratch;
        std::vector<std::vector<std::byte>> planes(G);
        std::vector<const std::byte*> plane_at(G);
        std::size_t at = first[i];
        for (std::uint32_t b = 0; b < g.bins(); ++b) {
          const layouts::MlocPositionEntry& pe = dir_->positions[g.position_entry(b, rank)];
          if (!in_pass[b] || pe.count == 0) continue;
          if ((errors[i] = positions_of(b, rank, pieces[at++], buffer, &scratch, &positions, &messages[i]))) return;
          for (std::uint32_t k = 0; k < G; ++k)
            if ((errors[i] = plane_of(b, k, rank, pe.count, pieces[at++], buffer, &planes[k], &plane_at[k],
                                      &messages[i])))
              return;
          for (std::size_t k = 0; k < positions.size(); ++k) {
            const std::uint64_t row = brick_rows.row(base, positions[k]);
            const std::uint64_t word = words[row >> 6], bit = 1ull << (row & 63);
            if (!(word & bit)) continue;
            std::byte* e = out + (before[row >> 6] + std::uint64_t(std::popcount(word & (bit - 1)))) * item;
            for (std::uint32_t gi = 0; gi < G; ++gi) {
              const layouts::MlocByteGroup& grp = g.groups()[gi];
              for (std::uint32_t j = 0; j < grp.bytes; ++j)
                e[item - 1 - (grp.first_rank + j)] = plane_at[gi][j * std::size_t(pe.count) + k];
            }
            ++found[rank];  // this chunk is this thread's alone
          }
        }
      });
      for (std::size_t i = 0; i < errors.size(); ++i)
        if (errors[i]) {
          *message = messages[i];
          return errors[i];
        }
    }
    total_found = 0;
    for (std::uint64_t c = 0; c < g.chunks(); ++c) total_found += found[c];
  }
  if (total_found != rows.size()) {
    *message = "an element is in no bin of its chunk (run mmfsck)";
    return EUCLEAN;
  }
  return 0;
}

}  // namespace mmfs::fs

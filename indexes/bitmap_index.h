// A bitmap index over one array (the bitmap-index paper, §4; FastBit's split
// of binning, encoding and compression): its stored form, the planner that
// picks which bitmaps an atom needs, and the evaluation of an atom to the
// rows it surely matches and the candidates its cut bins leave.
//
// Encodings (`user.mmfs.index`), over the bins b_0..b_{B-1} of a Binning
// (plus the NaN bin of float dtypes, always stored as its own equality
// bitmap):
//   e1        equality: E_i = rows in bin i
//   bn        binary (bit-sliced): S_k = rows whose bin number has bit k set
//   range     R_i = rows in bins 0..i            (i < B-1)
//   interval  I_i = rows in bins i..i+m-1, m = ceil(B/2)   (i <= B-m); any
//             range of bins is one or two of them (Chan & Ioannidis)
//   re        a fine equality level E_i and a coarse range-encoded level
//             over coarse bins: consecutive fine bins grouped so that each
//             coarse bin holds the same total size of fine bitmaps, their
//             number chosen so that the coarse level's cost matches the fine
//             level's (§4.2); no coarse level when it cannot lower any cost
//   ie        the same with an interval-encoded coarse level
//
// The stored object (one byte string, written to its own extents):
//   header   magic, version, dtype, encoding, rows, binning edges, per-bin
//            statistics (rows, smallest and largest key present), coarse
//            groups, a directory of every bitmap (offset, length, XXH3-64),
//            and the header's own XXH3-64
//   bitmaps  CRoaring portable serializations, in directory order: the fine
//            level in bin order (so the bins of one range are one contiguous
//            run), then the NaN bitmap, then the coarse level (a separate run)
// Decoding never trusts a byte: every length and offset is bounded by the
// object, every bitmap and the header checked against their checksums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "indexes/binning.h"
#include "indexes/bitmap.h"
#include "indexes/evaluate.h"
#include "indexes/header_columns.h"
#include "indexes/values.h"

namespace mmfs::indexes {

enum class Encoding : std::uint8_t { E1, BN, Range, Interval, RE, IE };
std::optional<Encoding> parse_encoding(std::string_view name);  // e1 bn range interval re ie
std::string_view encoding_name(Encoding e);

// Pass 2 of building: every row's element once (any order of pieces).
// Arrays of at most `direct_rows` rows are built bin by bin from a sort of
// their rows (4 bytes a row while building; see index_builder.cc), larger
// ones incrementally; both give the same object.
class IndexBuilder {
 public:
  static constexpr std::uint64_t kDirectRows = 1ull << 25;
  IndexBuilder(Binning binning, Encoding encoding, std::uint64_t rows, std::uint64_t direct_rows = kDirectRows);
  void add(std::uint64_t first_row, const std::byte* elements, std::size_t count);
  // The stored object.
  std::string finish();

 private:
  Binning binning_;
  Encoding encoding_;
  std::uint64_t rows_;
  bool direct_;
  void add_unwritten_rows();
  // The body (bitmaps in directory order); fills the header's coarse groups
  // and directory.
  std::string finish_direct(std::vector<std::uint32_t>* groups, std::vector<BitmapEntry>* directory);
  std::string finish_incremental(std::vector<std::uint32_t>* groups,
                                 std::vector<BitmapEntry>* directory);
  std::string finish_bit_sliced(std::vector<BitmapEntry>* directory);

  std::vector<std::uint32_t> bin_of_row_;  // direct: each row's bin
  std::vector<Bitmap> fine_;               // incremental: one per bin (NaN last)
  std::vector<BinStats> stats_;
};

// What one atom needs and how it is answered.
struct AtomPlan {
  std::vector<std::uint32_t> bitmaps;  // directory ids to fetch, ascending
  std::uint64_t bytes = 0;             // their stored size
  bool aligned = false;                // no candidate rows: the bins decide every row
  std::optional<std::uint64_t> count;  // the exact count from the header alone (aligned e1-like sums)

  // The recipe (filled by IndexHeader::plan, read by IndexHeader::evaluate).
  struct Range {
    std::uint32_t first = 0, last = 0;  // fine bins, inclusive
    bool coarse = false;                // answered through the coarse level
    bool complement = false;            // e1: all rows but those of every other bin (and NaN)
  };
  std::vector<Range> sure;                // bin ranges entirely inside the atom
  std::vector<std::uint32_t> maybe_bins;  // bins the atom cuts (checked against data)
  bool sure_nan = false;
};

class IndexHeader {
 public:
  // The object's first kPrefixBytes say how long the whole header is.
  static constexpr std::size_t kPrefixBytes = 64;
  // nullopt when the prefix is not an index header (bad magic/version/sizes).
  static std::optional<std::uint64_t> header_bytes(std::span<const std::byte> prefix);
  // The whole header (exactly header_bytes long), checked; or a reason.
  static std::variant<IndexHeader, std::string> decode(std::span<const std::byte> header);

  ValueType type() const { return binning_.type(); }
  Encoding encoding() const { return encoding_; }
  std::uint64_t rows() const { return rows_; }
  const Binning& binning() const { return binning_; }
  // Per bin (NaN last); a view of the header's columns, valid while it lives.
  BinStatsView stats() const { return {&bin_rows_, &min_offsets_, &max_offsets_, binning_.lower().data()}; }
  std::uint64_t object_bytes() const { return object_bytes_; }
  std::uint64_t header_length() const { return header_length_; }

  using Entry = BitmapEntry;
  const BitmapDirectory& directory() const { return directory_; }
  // Directory ids of the fine level's bitmap of bin b, and of the coarse
  // level (empty without one), for reports.
  std::uint32_t coarse_bins() const { return std::uint32_t(coarse_groups_.size()); }
  std::uint64_t fine_bytes() const;
  std::uint64_t coarse_bytes() const;

  // The cheapest way to answer the atom's keys: fewest bytes, then fewest
  // bitmaps, among the levels and bitmaps the encoding has. Cut bins whose
  // present keys (BinStats) lie inside the keys count as sure, those whose
  // present keys miss them entirely are dropped.
  AtomPlan plan(const KeySet& keys) const;
  // Rows of the atom from the fetched bitmaps (`bitmap(id)` for each id of
  // plan.bitmaps).
  // `fine_union`, when given, may answer the union of the fine level's
  // bitmaps of bins first..last (ids first..last) itself, e.g. from their
  // stored bytes without decoding each; nullopt leaves it to `bitmap`.
  using FineUnion = std::function<std::optional<Bitmap>(std::uint32_t first, std::uint32_t last)>;
  Estimate evaluate(const AtomPlan& plan, const std::function<const Bitmap&(std::uint32_t)>& bitmap,
                    const FineUnion& fine_union = {}) const;
  // The one stored bitmap that is exactly the plan's rows (sure, no
  // candidates), if there is one: a caller holding it can lend it as is.
  std::optional<std::uint32_t> lone_bitmap(const AtomPlan& plan) const;
  // Decodes one fetched bitmap, checking its checksum (false when it fails).
  bool decode_bitmap(std::uint32_t id, std::span<const std::byte> bytes, Bitmap* out) const;
  // Whether the fetched bytes are bitmap `id` as written (length, checksum).
  bool check_bitmap(std::uint32_t id, std::span<const std::byte> bytes) const;

 private:
  Encoding encoding_ = Encoding::E1;
  std::uint64_t rows_ = 0;
  Binning binning_;
  std::shared_ptr<const std::byte[]> columns_;  // the unpacked columns the views below point into
  PackedColumn bin_rows_, min_offsets_, max_offsets_;
  std::vector<std::uint32_t> coarse_groups_;  // first fine bin of each coarse bin
  BitmapDirectory directory_;
  std::uint64_t object_bytes_ = 0;
  std::uint64_t header_length_ = 0;
  // The stored object: the header of these parts followed by `body` (the
  // bitmaps back to back, in directory order; offsets are not stored).
  static std::string encode(Encoding encoding, std::uint64_t rows, const Binning& binning,
                            const std::vector<BinStats>& stats, const std::vector<std::uint32_t>& coarse_groups,
                            const std::vector<Entry>& directory, std::string_view body);
  struct Planner;  // index_plan.cc
  friend class IndexBuilder;
};

// Rows rewritten since the stored index was built. Their stored bits are
// stale (ignored); their current bins are kept here. An index on the volume
// is its stored object plus its delta, and the delta costs in proportion to
// the rows written, not to the array.
class IndexDelta {
 public:
  IndexDelta() = default;
  explicit IndexDelta(const Binning& binning);

  // Rows first_row .. first_row+count-1 now hold `elements`.
  void set(const Binning& binning, std::uint64_t first_row, const std::byte* elements, std::size_t count);
  bool empty() const { return stale_.isEmpty(); }
  std::uint64_t rows() const { return stale_.cardinality(); }
  const Bitmap& stale() const { return stale_; }
  // The base index's estimate of an atom, corrected: stale rows removed,
  // rewritten rows added by their current bins (classified against `keys`
  // with this delta's own per-bin statistics).
  Estimate apply(const Binning& binning, const KeySet& keys, Estimate base) const;
  // Size in bytes of encode().
  std::uint64_t bytes() const;
  std::string encode() const;
  // Bounded decode; nullopt on anything malformed or not matching `binning`.
  static std::optional<IndexDelta> decode(const Binning& binning, std::span<const std::byte> bytes);

 private:
  std::uint32_t bins_ = 0;
  Bitmap stale_;
  std::vector<Bitmap> added_;  // per bin (NaN last); empty until the first set()
  std::vector<BinStats> stats_;
};

}  // namespace mmfs::indexes

#include "fs/paths/view_path.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "util/align.h"

namespace mmfs::fs {

using layouts::DimRange;
using layouts::Selection;

NumberStatus parse_number(std::string_view text, std::uint64_t& out) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return NumberStatus::Malformed;
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) return NumberStatus::TooLarge;
  if (ec != std::errc() || ptr != text.data() + text.size()) return NumberStatus::Malformed;
  out = value;
  return NumberStatus::Ok;
}

namespace {

constexpr std::string_view kTopListing[] = {"info", "slice", "box", "plod", "query", "lbn", "plan", "zarr"};
constexpr const char* kBoxAccepted =
    "per dimension I, A:B, A:B:STEP, ':', 'A:', ':B', '::STEP' "
    "(numpy basic indexing, no negative indices, 0 <= A < B <= size, STEP >= 1)";

constexpr std::string_view kQueryOutputs[] = {"count", "coords", "values", "mask"};

PathError error(int err, std::string message) { return PathError{err, std::move(message)}; }

// The condition of a query path, or EINVAL naming where it went wrong.
std::variant<indexes::Condition, PathError> query_condition(const std::string& text, const std::string& where) {
  auto parsed = indexes::parse_condition(text);
  if (auto* e = std::get_if<indexes::ConditionError>(&parsed))
    return error(EINVAL, fmt::format("'{}': malformed condition at position {}: {} (grammar: atoms [NAME] OP NUMBER "
                                     "or [NAME] in [A,B] with OP one of == != < <= > >=, joined by & and |, "
                                     "negated by !, grouped by parentheses)",
                                     where, e->position, e->message));
  return std::move(std::get<indexes::Condition>(parsed));
}

// Parses `text` as a number, or explains why not. `what` names it in the
// message ("slice dimension", ...); `accepted` says what would be valid.
std::optional<PathError> number(std::string_view text, std::uint64_t& out, std::string_view what,
                                std::string_view accepted) {
  switch (parse_number(text, out)) {
    case NumberStatus::Ok: return std::nullopt;
    case NumberStatus::TooLarge:
      return error(ERANGE, fmt::format("{} '{}' is too large (at most {}); accepted: {}", what, text,
                                       std::numeric_limits<std::uint64_t>::max(), accepted));
    case NumberStatus::Malformed: break;
  }
  if (!text.empty() && text.front() == '-')
    return error(EINVAL, fmt::format("{} '{}' is negative; accepted: {}", what, text, accepted));
  return error(EINVAL, fmt::format("{} '{}' is not a non-negative decimal integer; accepted: {}", what, text,
                                   accepted));
}

std::string range_text(std::uint64_t lo, std::uint64_t count) {
  if (count == 0) return "nothing (the range is empty)";
  return fmt::format("{}..{}", lo, lo + count - 1);
}

std::vector<std::string> numbers(std::uint64_t first, std::uint64_t count, std::string_view suffix = {}) {
  std::vector<std::string> out;
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) out.push_back(fmt::format("{}{}", first + i, suffix));
  return out;
}

// `text` cut at every `sep` (n separators give n + 1 fields, empty ones included).
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto at = text.find(sep);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

std::vector<std::string> names(std::span<const std::string_view> list) {
  return std::vector<std::string>(list.begin(), list.end());
}

std::string joined(std::span<const std::string> components, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count && i < components.size(); ++i) {
    if (i) out += '/';
    out += components[i];
  }
  return out;
}

// The walk over the components; `pos` is the index of the component being
// resolved, so messages can name the path up to it.
class Walker {
 public:
  Walker(std::span<const std::string> c, std::span<const std::uint64_t> shape, std::uint32_t itemsize,
         bool with_listing, std::span<const std::uint64_t> natural_chunk, std::size_t copies)
      : c_(c), shape_(shape), itemsize_(itemsize), with_listing_(with_listing), natural_(natural_chunk),
        copies_(copies) {}

  std::variant<ViewNode, PathError> top() {
    if (c_.empty()) {
      std::vector<std::string> listing = names(kTopListing);
      if (copies_ > 0) listing.push_back("copy");
      return dir(std::move(listing));
    }
    const std::string& name = c_[0];
    if (name == "copy") return copy(0, false);
    if (name == "info") {
      if (auto e = file_end(1)) return *e;
      ViewNode n;
      n.kind = ViewKind::Info;
      return n;
    }
    if (name == "slice" || name == "box" || name == "plod") return data_tree(0, false);
    if (name == "query") return query(0, std::nullopt, 0, "", false);
    if (name == "lbn") return lbn();
    if (name == "zarr") return zarr(0, false);
    if (name == "plan") {
      if (c_.size() == 1) {
        std::vector<std::string> listing{"slice", "box", "plod", "query", "zarr"};
        if (copies_ > 0) listing.push_back("copy");
        return dir(std::move(listing));
      }
      const std::string& next = c_[1];
      if (next == "copy") return copy(1, true);
      if (next == "slice" || next == "box" || next == "plod") return data_tree(1, true);
      if (next == "query") return query(1, std::nullopt, 0, "", true);
      if (next == "zarr") return zarr(1, true);
      return error(ENOENT, fmt::format("'{}': '{}' is not a view whose plan can be shown; accepted: slice, box, "
                                       "plod, query, zarr (e.g. plan/slice/0/5, plan/box/:,3, plan/query/>0/count)",
                                       joined(c_, 2), next));
    }
    return error(ENOENT, fmt::format("'{}' is not a view of an array; accepted: info, slice, box, plod, query, "
                                     "lbn, plan, zarr{}",
                                     name, copies_ > 0 ? ", copy" : ""));
  }

 private:
  // copy, copy/K (the whole array through copy K), copy/K@ and the data
  // views under it, read through copy K only.
  std::variant<ViewNode, PathError> copy(std::size_t pos, bool plan) const {
    if (c_.size() == pos + 1) {
      std::vector<std::string> listing = listed(0, copies_ + 1);
      std::vector<std::string> at = listed(0, copies_ + 1, "@");
      listing.insert(listing.end(), at.begin(), at.end());
      return dir(std::move(listing));
    }
    std::string_view k_text = c_[pos + 1];
    const bool views = !k_text.empty() && k_text.back() == '@';
    if (views) k_text.remove_suffix(1);
    const std::string accepted =
        fmt::format("K or K@ with 0 <= K <= {} (0: the primary placement; 1..: user.mmfs.copies in order)", copies_);
    std::uint64_t k = 0;
    if (auto e = number(k_text, k, fmt::format("'{}': copy number", joined(c_, pos + 2)), accepted)) return *e;
    if (k > copies_)
      return error(ERANGE, fmt::format("'{}': copy {} is out of range: the array has {} cop{}; accepted: {}",
                                       joined(c_, pos + 2), k, copies_, copies_ == 1 ? "y" : "ies", accepted));
    if (!views) {
      if (auto e = file_end(pos + 2))
        return error(e->error, fmt::format("{}; the views of copy/{} are under copy/{}@ (e.g. copy/{}@/slice/0/0)",
                                           e->message, k, k, k));
      ViewNode n = data_file(Selection::all(shape_), 0, fmt::format("copy/{}", k), plan);
      n.data->copy = int(k);
      return n;
    }
    if (c_.size() == pos + 2) return dir(plan ? std::vector<std::string>{"slice", "box", "plod"}
                                              : std::vector<std::string>{"slice", "box", "plod", "lbn"});
    const std::string& next = c_[pos + 2];
    if (next != "slice" && next != "box" && next != "plod" && (next != "lbn" || plan))
      return error(ENOENT, fmt::format("'{}': '{}' cannot follow a copy; accepted: slice, box, plod{} (queries are "
                                       "answered from the primary: A@/query/...)",
                                       joined(c_, pos + 3), next, plan ? "" : ", lbn"));
    const Walker sub(c_.subspan(pos + 2), shape_, itemsize_, with_listing_, natural_, copies_);
    if (next == "lbn") {
      auto resolved = sub.lbn();
      if (auto* e = std::get_if<PathError>(&resolved))
        return error(e->error, fmt::format("copy/{}@/{}", k, e->message));
      ViewNode n = std::move(std::get<ViewNode>(resolved));
      n.copy = int(k);
      return n;
    }
    auto resolved = sub.data_tree(0, plan);
    if (auto* e = std::get_if<PathError>(&resolved))
      return error(e->error, fmt::format("copy/{}@/{}", k, e->message));
    ViewNode n = std::move(std::get<ViewNode>(resolved));
    if (n.query)
      return error(ENOENT, fmt::format("'{}': queries are answered from the primary (A@/query/...), not through a "
                                       "copy",
                                       joined(c_, c_.size())));
    if (n.data) {
      n.data->copy = int(k);
      n.data->spelling = fmt::format("copy/{}@/{}", k, n.data->spelling);
    }
    return n;
  }

  // "first" .. "first+count-1", each + suffix; nothing when no listing is wanted.
  std::vector<std::string> listed(std::uint64_t first, std::uint64_t count, std::string_view suffix = {}) const {
    return with_listing_ ? numbers(first, count, suffix) : std::vector<std::string>{};
  }

  // A Dir of the names "0" .. "count - 1".
  ViewNode numbered_dir(std::uint64_t count) const {
    ViewNode n = dir({});
    if (with_listing_) n.numbered = count;
    return n;
  }

  ViewNode dir(std::vector<std::string> listing) const {
    ViewNode n;
    n.kind = ViewKind::Dir;
    if (with_listing_) n.listing = std::move(listing);
    return n;
  }

  // The component at `file_pos - 1` is a file: nothing may follow it.
  std::optional<PathError> file_end(std::size_t file_pos) const {
    if (c_.size() <= file_pos) return std::nullopt;
    return error(ENOTDIR, fmt::format("'{}' is a file, not a directory: '{}' cannot follow it",
                                      joined(c_, file_pos), c_[file_pos]));
  }

  // query, query/COND, query/COND/OUT starting at c_[pos] == "query".
  std::variant<ViewNode, PathError> query(std::size_t pos, std::optional<Selection> box, std::uint32_t plod,
                                          const std::string& prefix, bool plan) const {
    if (c_.size() == pos + 1) return dir({});
    auto parsed = query_condition(c_[pos + 1], joined(c_, pos + 2));
    if (auto* e = std::get_if<PathError>(&parsed)) return *e;
    if (c_.size() == pos + 2) return dir(names(kQueryOutputs));
    const std::string& out = c_[pos + 2];
    QueryView q;
    if (out == "count") q.output = QueryView::Output::Count;
    else if (out == "coords") q.output = QueryView::Output::Coords;
    else if (out == "values") q.output = QueryView::Output::Values;
    else if (out == "mask") q.output = QueryView::Output::Mask;
    else
      return error(ENOENT, fmt::format("'{}': '{}' is not a query result; accepted: count, coords, values, mask",
                                       joined(c_, pos + 3), out));
    if (auto e = file_end(pos + 3)) return *e;
    q.condition = std::move(std::get<indexes::Condition>(parsed));
    q.condition_text = c_[pos + 1];
    q.box = std::move(box);
    q.plod_bytes = plod;
    q.spelling = fmt::format("{}query/{}/{}", prefix, c_[pos + 1], out);
    ViewNode n;
    n.kind = plan ? ViewKind::Plan : ViewKind::Query;
    n.query = std::move(q);
    return n;
  }

  // slice/..., box/... or plod/... starting at c_[pos].
  std::variant<ViewNode, PathError> data_tree(std::size_t pos, bool plan) const {
    const std::string& name = c_[pos];
    if (name != "plod") return selection(pos, 0, "", plan);
    if (c_.size() == pos + 1) {
      std::vector<std::string> listing = listed(1, itemsize_);
      std::vector<std::string> at = listed(1, itemsize_, "@");
      listing.insert(listing.end(), at.begin(), at.end());
      return dir(std::move(listing));
    }
    std::string_view k_text = c_[pos + 1];
    const bool views = !k_text.empty() && k_text.back() == '@';
    if (views) k_text.remove_suffix(1);
    const std::string accepted = fmt::format("K or K@ with 1 <= K <= {} (the itemsize)", itemsize_);
    std::uint64_t k = 0;
    if (auto e = number(k_text, k, fmt::format("'{}': PLoD byte count", joined(c_, pos + 2)), accepted)) return *e;
    if (k < 1 || k > itemsize_)
      return error(ERANGE, fmt::format("'{}': PLoD byte count {} is out of range; accepted: {}", joined(c_, pos + 2),
                                       k, accepted));
    if (!views) {
      if (auto e = file_end(pos + 2))
        return error(e->error, fmt::format("{}; the views of plod/{} are under plod/{}@ (e.g. plod/{}@/slice/0/0)",
                                           e->message, k, k, k));
      return data_file(Selection::all(shape_), std::uint32_t(k), fmt::format("plod/{}", k), plan);
    }
    if (c_.size() == pos + 2) return dir({"slice", "box", "query"});
    const std::string& next = c_[pos + 2];
    if (next == "query") return query(pos + 2, std::nullopt, std::uint32_t(k), fmt::format("plod/{}@/", k), plan);
    if (next != "slice" && next != "box")
      return error(ENOENT, fmt::format("'{}': '{}' cannot follow a PLoD view; accepted: slice, box, query",
                                       joined(c_, pos + 3), next));
    return selection(pos + 2, std::uint32_t(k), fmt::format("plod/{}@/", k), plan);
  }

  // slice/... or box/... starting at c_[pos].
  std::variant<ViewNode, PathError> selection(std::size_t pos, std::uint32_t plod, const std::string& prefix,
                                              bool plan) const {
    if (c_[pos] == "box") {
      if (c_.size() == pos + 1) return dir({});
      std::string_view sel_text = c_[pos + 1];
      const bool views = sel_text.size() > 1 && sel_text.back() == '@';
      if (views) sel_text.remove_suffix(1);
      auto parsed = parse_box(sel_text, shape_);
      if (auto* e = std::get_if<PathError>(&parsed))
        return error(e->error, fmt::format("'{}': {}", joined(c_, pos + 2), e->message));
      Selection sel = std::move(std::get<Selection>(parsed));
      if (views) {  // box/SEL@: the views of the box
        if (c_.size() == pos + 2) return dir({"query"});
        if (c_[pos + 2] != "query")
          return error(ENOENT, fmt::format("'{}': '{}' cannot follow a box's views; accepted: query",
                                           joined(c_, pos + 3), c_[pos + 2]));
        std::string box_prefix = fmt::format("{}box/{}@/", prefix, box_spelling(sel));
        return query(pos + 2, std::move(sel), plod, box_prefix, plan);
      }
      if (auto e = file_end(pos + 2)) return *e;
      std::string spelling = fmt::format("{}box/{}", prefix, box_spelling(sel));
      return data_file(std::move(sel), plod, std::move(spelling), plan);
    }
    // slice
    const std::uint64_t rank = shape_.size();
    if (c_.size() == pos + 1) return dir(listed(0, rank));
    std::uint64_t d = 0;
    const std::string dim_accepted = fmt::format("a dimension number {}", range_text(0, rank));
    if (auto e = number(c_[pos + 1], d, fmt::format("'{}': slice dimension", joined(c_, pos + 2)), dim_accepted))
      return *e;
    if (d >= rank)
      return error(ERANGE, fmt::format("'{}': slice dimension {} is out of range: the array has {} dimension{}; "
                                       "accepted: {}",
                                       joined(c_, pos + 2), d, rank, rank == 1 ? "" : "s", dim_accepted));
    if (c_.size() == pos + 2) return numbered_dir(shape_[d]);
    std::uint64_t i = 0;
    const std::string idx_accepted = fmt::format("an index {} (dimension {} has size {})",
                                                 range_text(0, shape_[d]), d, shape_[d]);
    if (auto e = number(c_[pos + 2], i, fmt::format("'{}': slice index", joined(c_, pos + 3)), idx_accepted))
      return *e;
    if (i >= shape_[d])
      return error(ERANGE, fmt::format("'{}': slice index {} is out of range; accepted: {}", joined(c_, pos + 3), i,
                                       idx_accepted));
    if (auto e = file_end(pos + 3)) return *e;
    return data_file(Selection::slice(shape_, std::size_t(d), i), plod,
                     fmt::format("{}slice/{}/{}", prefix, d, i), plan);
  }

  ViewNode data_file(Selection sel, std::uint32_t plod, std::string spelling, bool plan) const {
    ViewNode n;
    n.kind = plan ? ViewKind::Plan : ViewKind::Data;
    n.data = DataView{std::move(sel), plod, std::move(spelling)};
    return n;
  }

  std::variant<ViewNode, PathError> lbn() const {
    if (c_.size() == 1) return dir({});
    const std::string& text = c_[1];
    const std::string where = joined(c_, 2);
    const std::string accepted =
        fmt::format("one coordinate per dimension, I0,I1,... with 0 <= Id < S_d (shape {})", fmt::join(shape_, ","));
    const std::vector<std::string_view> items = split(text, ',');
    if (items.size() != shape_.size())
      return error(EINVAL, fmt::format("'{}': {} coordinate{} given, the array has {} dimension{}; accepted: {}",
                                       where, items.size(), items.size() == 1 ? "" : "s", shape_.size(),
                                       shape_.size() == 1 ? "" : "s", accepted));
    ViewNode n;
    n.kind = ViewKind::Lbn;
    for (std::size_t d = 0; d < items.size(); ++d) {
      std::uint64_t v = 0;
      if (auto e = number(items[d], v, fmt::format("'{}': coordinate {}", where, d), accepted)) return *e;
      if (v >= shape_[d])
        return error(ERANGE, fmt::format("'{}': coordinate {} = {} is out of range (dimension {} has size {}); "
                                         "accepted: {}",
                                         where, d, v, d, shape_[d], accepted));
      n.coords.push_back(v);
    }
    if (auto e = file_end(2)) return *e;
    return n;
  }

  // zarr/... starting at c_[pos] == "zarr" (docs/reference.md §5, the Zarr v3 view).
  std::variant<ViewNode, PathError> zarr(std::size_t pos, bool plan) const {
    const std::size_t rank = shape_.size();
    std::vector<std::uint64_t> chunk(natural_.begin(), natural_.end());
    if (chunk.size() != rank) chunk.assign(shape_.begin(), shape_.end());
    std::size_t at = pos + 1;
    if (c_.size() > at && c_[at] != "zarr.json" && c_[at] != "c") {
      const std::string where = joined(c_, at + 1);
      // Readers probe for names of other formats (.zarray, .zgroup, ...): a
      // name that is no chunk shape at all is ENOENT, as in any directory.
      if (c_[at].find_first_not_of("0123456789,") != std::string::npos)
        return error(ENOENT, fmt::format("'{}': '{}' is not part of a Zarr array; accepted: zarr.json, c, or a "
                                         "chunk shape C0,C1,...",
                                         where, c_[at]));
      const std::string accepted = fmt::format("a chunk shape C0,C1,... of {} positive numbers (e.g. {}), then "
                                               "zarr.json or c",
                                               rank, fmt::join(chunk, ","));
      const std::vector<std::string_view> items = split(c_[at], ',');
      if (items.size() != rank)
        return error(ENOENT, fmt::format("'{}': not a chunk shape of the array's {} dimension{}; accepted: {}",
                                         where, rank, rank == 1 ? "" : "s", accepted));
      std::uint64_t bytes = itemsize_;
      for (std::size_t d = 0; d < rank; ++d) {
        std::uint64_t v = 0;
        if (auto e = number(items[d], v, fmt::format("'{}': chunk size {}", where, d), accepted)) return *e;
        if (v == 0) return error(EINVAL, fmt::format("'{}': chunk size {} is 0; accepted: {}", where, d, accepted));
        chunk[d] = v;
        if (__builtin_mul_overflow(bytes, v, &bytes)) bytes = ~std::uint64_t{0};
      }
      if (bytes > kMaxZarrChunkBytes)
        return error(EINVAL, fmt::format("'{}': a chunk of {} bytes is larger than the {} MiB a Zarr view's chunk "
                                         "may be",
                                         where, bytes, kMaxZarrChunkBytes >> 20));
      ++at;
    }
    // A plan's zarr/ lists only c: plan/zarr/zarr.json is ENOENT (metadata has no plan).
    if (c_.size() == at) return dir(plan ? std::vector<std::string>{"c"} : std::vector<std::string>{"zarr.json", "c"});
    if (c_[at] == "zarr.json") {
      if (auto e = file_end(at + 1)) return *e;
      if (plan)
        return error(ENOENT, fmt::format("'{}': zarr.json is metadata, read without a plan; plans are of the "
                                         "chunks (c/I0/...)",
                                         joined(c_, at + 1)));
      ViewNode n;
      n.kind = ViewKind::ZarrMeta;
      n.chunk_shape = std::move(chunk);
      return n;
    }
    if (c_[at] != "c")
      return error(ENOENT, fmt::format("'{}': '{}' is not part of a Zarr array; accepted: zarr.json, c",
                                       joined(c_, at + 1), c_[at]));
    std::vector<DimRange> dims;
    bool edge = false;
    for (std::size_t d = 0; d < rank; ++d) {
      const std::uint64_t grid = util::div_up(shape_[d], chunk[d]);
      const std::size_t k = at + 1 + d;
      if (c_.size() == k) return numbered_dir(grid);
      std::uint64_t i = 0;
      const std::string accepted = fmt::format("a chunk index {} along dimension {}", range_text(0, grid), d);
      if (auto e = number(c_[k], i, fmt::format("'{}': chunk index", joined(c_, k + 1)), accepted)) return *e;
      if (i >= grid)
        return error(ERANGE, fmt::format("'{}': chunk index {} is out of range; accepted: {}", joined(c_, k + 1), i,
                                         accepted));
      const std::uint64_t first = i * chunk[d];
      const std::uint64_t stop = std::min(shape_[d], first + chunk[d]);
      edge = edge || stop - first != chunk[d];
      dims.push_back(DimRange{first, stop, 1, false});
    }
    if (auto e = file_end(at + 1 + rank)) return *e;
    // (A plan carries it too: it prices the chunk's own box and says how the read goes.)
    std::shared_ptr<const DataView> within = enclosing_cells_and_next(dims, chunk);
    Selection box(std::move(dims));
    std::string spelling = "box/" + box_spelling(box);
    if (!edge || plan) {
      ViewNode n = data_file(std::move(box), 0, std::move(spelling), plan);
      if (n.data) n.data->within = std::move(within);
      return n;
    }
    ViewNode n;
    n.kind = ViewKind::ZarrChunk;
    n.data = DataView{std::move(box), 0, std::move(spelling)};
    n.data->within = std::move(within);
    n.chunk_shape = std::move(chunk);
    return n;
  }

  // The box of whole cells (natural_) holding a chunk's box `dims`, when it
  // is larger than the box and no larger than kMaxZarrWithinBytes (see
  // DataView::within); null otherwise. Only where every neighbour sharing
  // the box's cells has the same enclosing box: along each dimension the
  // chunk lies inside one layer of cells or is cut at cell boundaries. (A
  // chunk across a boundary between layers would give a box of its own,
  // which no neighbour reads again; it reads its cells itself.)
  // enclosing_cells, with the box a reader scanning the chunks in C order
  // reads after it (DataView::next_within): the enclosing box of the chunk
  // after the box's last one.
  std::shared_ptr<const DataView> enclosing_cells_and_next(const std::vector<DimRange>& dims,
                                                           const std::vector<std::uint64_t>& chunk) const {
    std::shared_ptr<DataView> box = enclosing_cells(dims, chunk);
    if (!box) return nullptr;
    const std::size_t rank = dims.size();
    std::vector<std::uint64_t> index(rank);
    for (std::size_t d = 0; d < rank; ++d) index[d] = (box->selection.dims()[d].stop - 1) / chunk[d];
    std::size_t d = rank;
    while (d-- > 0) {
      if (++index[d] < util::div_up(shape_[d], chunk[d])) break;
      index[d] = 0;
    }
    if (d == std::size_t(-1)) return box;  // the last chunk of the array
    std::vector<DimRange> next;
    for (std::size_t e = 0; e < rank; ++e)
      next.push_back(DimRange{index[e] * chunk[e], std::min(shape_[e], (index[e] + 1) * chunk[e]), 1, false});
    box->next_within = enclosing_cells(next, chunk);
    return box;
  }

  std::shared_ptr<DataView> enclosing_cells(const std::vector<DimRange>& dims,
                                            const std::vector<std::uint64_t>& chunk) const {
    if (natural_.size() != dims.size()) return nullptr;
    std::vector<DimRange> outer;
    std::uint64_t bytes = itemsize_;
    bool larger = false;
    for (std::size_t d = 0; d < dims.size(); ++d) {
      const std::uint64_t cell = natural_[d];
      const std::uint64_t first = dims[d].start / cell * cell;
      const std::uint64_t stop = std::min(shape_[d], util::div_up(dims[d].stop, cell) * cell);
      const bool aligned = first == dims[d].start && stop == dims[d].stop;
      if (!aligned && stop - first > cell) return nullptr;
      larger = larger || !aligned;
      if (__builtin_mul_overflow(bytes, stop - first, &bytes)) return nullptr;
      outer.push_back(DimRange{first, stop, 1, false});
    }
    if (!larger || bytes > kMaxZarrWithinBytes) return nullptr;
    Selection box(std::move(outer));
    std::string spelling = fmt::format("box/{}#zarr/{}", box_spelling(box), fmt::join(chunk, ","));
    auto view = std::make_shared<DataView>(DataView{std::move(box), 0, std::move(spelling)});
    view->regrid = chunk;
    return view;
  }

  std::span<const std::string> c_;
  std::span<const std::uint64_t> shape_;
  std::uint32_t itemsize_;
  bool with_listing_;
  std::span<const std::uint64_t> natural_;
  std::size_t copies_ = 0;
};

}  // namespace

std::variant<ViewNode, PathError> resolve_view(std::span<const std::string> components,
                                               std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                               bool with_listing, std::span<const std::uint64_t> natural_chunk,
                                               std::size_t copies) {
  return Walker(components, shape, itemsize, with_listing, natural_chunk, copies).top();
}

std::variant<ViewNode, PathError> resolve_table_view(std::span<const std::string> c, std::uint64_t records,
                                                     bool with_listing) {
  auto dir = [&](std::vector<std::string> listing) {
    ViewNode n;
    if (with_listing) n.listing = std::move(listing);
    return n;
  };
  auto after_file = [&](std::size_t pos) -> std::optional<PathError> {
    if (c.size() > pos + 1)
      return error(ENOTDIR, fmt::format("'{}' is a file, not a directory: '{}' cannot follow it", joined(c, pos + 1),
                                        c[pos + 1]));
    return std::nullopt;
  };
  // rows/SEL at `pos` (the `rows` component).
  auto rows = [&](std::size_t pos, ViewKind kind) -> std::variant<ViewNode, PathError> {
    if (c.size() == pos + 1) return dir({});
    if (auto e = after_file(pos + 1)) return *e;
    const std::uint64_t shape[1] = {records};
    auto sel = parse_box(c[pos + 1], shape);
    if (auto* e = std::get_if<PathError>(&sel)) return *e;
    const DimRange& r = std::get<Selection>(sel).dims()[0];
    if (r.step != 1)
      return error(EINVAL, fmt::format("rows '{}': a record range has no step; accepted: A:B, A:, :B, : or I",
                                       c[pos + 1]));
    ViewNode n;
    n.kind = kind;
    n.row_first = r.start;
    n.row_count = r.stop - r.start;
    return n;
  };
  if (c.empty()) return dir({"info", "rows", "plan", "query", "zarr"});
  if (c[0] == "info") {
    if (auto e = after_file(0)) return *e;
    ViewNode n;
    n.kind = ViewKind::Info;
    return n;
  }
  if (c[0] == "rows") return rows(0, ViewKind::Rows);
  if (c[0] == "plan") {
    if (c.size() == 1) return dir({"rows"});
    if (c[1] != "rows")
      return error(ENOENT, fmt::format("'{}' is not a plannable view of a directory; accepted: rows", c[1]));
    return rows(1, ViewKind::Plan);
  }
  if (c[0] != "query")
    return error(ENOENT, fmt::format("'{}' is not a view of a directory; accepted: info, rows, plan, query", c[0]));
  if (c.size() == 1) return dir({});
  auto parsed = query_condition(c[1], joined(c, 2));
  if (auto* e = std::get_if<PathError>(&parsed)) return *e;
  if (c.size() == 2) return dir({"count", "coords", "mask"});
  QueryView q;
  if (c[2] == "count") q.output = QueryView::Output::Count;
  else if (c[2] == "coords") q.output = QueryView::Output::Coords;
  else if (c[2] == "mask") q.output = QueryView::Output::Mask;
  else
    return error(ENOENT, fmt::format("'{}': '{}' is not a table query result; accepted: count, coords, mask",
                                     joined(c, 3), c[2]));
  if (c.size() > 3)
    return error(ENOTDIR, fmt::format("'{}' is a file, not a directory: '{}' cannot follow it", joined(c, 3), c[3]));
  q.condition = std::move(std::get<indexes::Condition>(parsed));
  q.condition_text = c[1];
  q.spelling = fmt::format("query/{}/{}", c[1], c[2]);
  ViewNode n;
  n.kind = ViewKind::Query;
  n.query = std::move(q);
  return n;
}

std::variant<Selection, PathError> parse_box(std::string_view sel, std::span<const std::uint64_t> shape) {
  const std::vector<std::string_view> items = split(sel, ',');
  if (items.size() != shape.size())
    return error(EINVAL, fmt::format("box selector '{}' has {} item{}, the array has {} dimension{} (shape {}); "
                                     "one item per dimension, comma-separated, accepted {}",
                                     sel, items.size(), items.size() == 1 ? "" : "s", shape.size(),
                                     shape.size() == 1 ? "" : "s", fmt::join(shape, ","), kBoxAccepted));
  std::vector<DimRange> dims;
  dims.reserve(items.size());
  for (std::size_t d = 0; d < items.size(); ++d) {
    const std::string_view item = items[d];
    const std::uint64_t size = shape[d];
    const std::string what = fmt::format("box selector '{}', dimension {} (size {}), item '{}'", sel, d, size, item);
    auto fail = [&](int err, const std::string& why) {
      return error(err, fmt::format("{}: {}; accepted {}", what, why, kBoxAccepted));
    };
    auto field = [&](std::string_view text, std::string_view name, std::uint64_t& out) {
      return number(text, out, fmt::format("{}: {}", what, name), kBoxAccepted);
    };
    const std::vector<std::string_view> f = split(item, ':');
    if (f.size() > 3) return fail(EINVAL, "too many ':'");
    if (f.size() == 1) {  // a fixed index
      std::uint64_t i = 0;
      if (auto e = field(f[0], "index", i)) return *e;
      if (i >= size) return fail(ERANGE, fmt::format("index {} is out of range 0..{}", i, size - 1));
      dims.push_back(DimRange{i, i + 1, 1, true});
      continue;
    }
    std::uint64_t start = 0, stop = size, step = 1;
    if (!f[0].empty()) {
      if (auto e = field(f[0], "start", start)) return *e;
      if (start >= size) return fail(ERANGE, fmt::format("start {} is past the end (size {})", start, size));
    }
    if (!f[1].empty()) {
      if (auto e = field(f[1], "stop", stop)) return *e;
      if (stop > size) return fail(ERANGE, fmt::format("stop {} is past the end (size {})", stop, size));
    }
    if (f.size() == 3 && !f[2].empty()) {
      if (auto e = field(f[2], "step", step)) return *e;
      if (step == 0) return fail(EINVAL, "the step must be at least 1");
    }
    if (start >= stop) return fail(EINVAL, fmt::format("empty selection (start {} >= stop {})", start, stop));
    // Normalize: stop one past the last element, step 1 for a single element.
    const std::uint64_t count = (stop - start - 1) / step + 1;
    if (count == 1) step = 1;
    dims.push_back(DimRange{start, start + (count - 1) * step + 1, step, false});
  }
  return Selection(std::move(dims));
}

std::string box_spelling(const Selection& selection) {
  std::string out;
  for (const DimRange& r : selection.dims()) {
    if (!out.empty()) out += ',';
    if (r.fixed) out += fmt::format("{}", r.start);
    else if (r.step == 1) out += fmt::format("{}:{}", r.start, r.stop);
    else out += fmt::format("{}:{}:{}", r.start, r.stop, r.step);
  }
  return out;
}

}  // namespace mmfs::fs

// Path resolution below an array's virtual directory `A@` (docs/reference.md §5). Pure:
// no FUSE, no I/O — the daemon's FUSE adapter asks what a path names and
// gets a directory listing, a file kind with its selection, or an errno with
// a one-line explanation for `.mmfs/errors`.
//
// A kernel path walk needs every component to be either a directory or a
// file, so docs/reference.md's `A@/plod/K` (the whole array, a file) and
// `A@/plod/K/slice/...` (a directory) cannot both hold. `A@/plod/K` stays the
// file; the composed views are spelled `A@/plod/K@/slice/D/I` and
// `A@/plod/K@/box/SEL` (the `X@` convention: "the views of X").
//
// Grammar of the components after `A@`:
//
//   (none)              Dir: info slice box plod query lbn plan
//   info                File (Info)
//   slice               Dir: 0 .. n-1
//   slice/D             Dir: 0 .. S_D-1
//   slice/D/I           File (Data): the hyperplane x_D = I
//   box                 Dir (empty: selectors are free-form)
//   box/SEL             File (Data): see parse_box
//   plod                Dir: 1 .. itemsize, 1@ .. itemsize@
//   plod/K              File (Data): the whole array, K most significant bytes kept
//   plod/K@             Dir: slice box
//   plod/K@/slice/...   as slice/..., with K bytes kept
//   plod/K@/box/SEL     as box/SEL, with K bytes kept
//   lbn                 Dir (empty)
//   lbn/I0,I1,...       File (Lbn)
//   plan                Dir: slice box plod query
//   plan/VIEW           the Dir/File structure of the data views; files are Plan
//   query               Dir (empty: conditions are free-form)
//   query/COND          Dir: count coords values mask (COND: indexes/condition.h)
//   query/COND/OUT      File (Query)
//   box/SEL@            Dir: query — the views of box/SEL
//   box/SEL@/query/...  as query/..., restricted to the box
//   plod/K@/query/...   as query/...; `values` with K bytes kept
//   plod/K@/box/SEL@/query/...
//   plan/query/..., plan/box/SEL@/query/..., plan/plod/K@/...query/...: Plan of the query
//   zarr                Dir: zarr.json c — a Zarr v3 array in chunks of the
//                       natural shape (`natural_chunk`: the layout's brick)
//   zarr/C0,C1,...      Dir: zarr.json c — the same in chunks of that shape
//   .../zarr.json       File (ZarrMeta): chunk_shape is the chunk shape
//   .../c               Dir: 0 .. G_0-1, G_d = ceil(S_d / C_d) chunks along d
//   .../c/I0/.../I{n-1} File: chunk (I0, ..., I{n-1}), C order; inside the
//                       array a Data view (its box), at an edge ZarrChunk:
//                       the box padded with zeros to the chunk shape
//   plan/zarr/.../c/I0/...   Plan of the chunk's box
//   copy                Dir (with `copies` > 0 only in A@'s listing): 0 .. N, 0@ .. N@
//   copy/K              File (Data): the whole array read through copy K only
//                       (0 = the primary, 1..N = user.mmfs.copies in order)
//   copy/K@             Dir: slice box plod lbn
//   copy/K@/lbn/I0,...  File (Lbn) of the element in copy K
//   copy/K@/slice/..., copy/K@/box/SEL, copy/K@/plod/...   as without copy/K@, through copy K
//   plan/copy/K, plan/copy/K@/...   Plan of the view through copy K
//
// Errors: an unknown name ENOENT; a malformed number, selector or condition
// EINVAL (a condition's message names the position of the problem); an
// index, dimension or K out of range (or a number too large for 64 bits)
// ERANGE; a component after a file ENOTDIR.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fs/array/view_types.h"
#include "indexes/condition.h"
#include "layouts/selection.h"

namespace mmfs::fs {

// Why a path does not resolve: an errno and a one-line explanation naming the
// component, what was wrong with it and what is accepted.
struct PathError {
  int error = 0;
  std::string message;
};

enum class ViewKind { Dir, Info, Data, Lbn, Plan, Query, Rows, ZarrMeta, ZarrChunk };

struct ViewNode {
  ViewKind kind = ViewKind::Dir;
  std::vector<std::string> listing;    // Dir: the names that can follow
  // Dir: after `listing`, the names "0" .. "numbered - 1" (a dimension's
  // indices, a Zarr grid's chunk indices). Left as a count, for the reader
  // of the directory to spell as it goes: a dimension may have billions.
  std::uint64_t numbered = 0;
  std::optional<DataView> data;        // Data, and Plan (the view whose plan is shown)
  std::optional<QueryView> query;      // Query, and Plan of a query
  std::vector<std::uint64_t> coords;   // Lbn: the element's coordinates
  int copy = -1;                       // Lbn under copy/K@: that placement (else the primary)
  // Rows (and Plan of rows): records [row_first, row_first + row_count) of a table.
  std::uint64_t row_first = 0, row_count = 0;
  // ZarrMeta: the chunk shape of the Zarr array; ZarrChunk: the shape its
  // box (`data`) is padded to.
  std::vector<std::uint64_t> chunk_shape;
};

// A Zarr view's chunks may be at most this large (an edge chunk is padded in
// memory at its open): EINVAL beyond.
inline constexpr std::uint64_t kMaxZarrChunkBytes = 256ull << 20;
// The largest cell-aligned box a thin Zarr chunk is read through
// (DataView::within): within what the array's chunk cache holds.
inline constexpr std::uint64_t kMaxZarrWithinBytes = 128ull << 20;

// Resolves the components after `A@` (possibly none) for an array of `shape`
// and `itemsize`. With `with_listing` false, Dir nodes come back with an
// empty listing (lookup/getattr need no listing; `slice/D` lists S_D names,
// as `numbered`).
// A directory's views (`D@`, docs/reference.md §5) over the table of D's 1-D arrays,
// `records` long (fs/table/capsule_table.h):
//
//   (none)              Dir: info rows plan query zarr
//   zarr/...            resolved by the daemon (daemon/zarr_views.cc): a Zarr
//                       v3 group whose child NAME/ is NAME@/zarr/
//   info                File (Info): the table's attributes and placement
//   rows                Dir (empty: ranges are free-form)
//   rows/SEL            File (Rows): records SEL (`A:B`, `A:`, `:B`, `:` or
//                       one index `I`; no step): per record every attribute's
//                       element, attributes in readdir order, packed
//   plan                Dir: rows
//   plan/rows/SEL       File (Plan) of rows/SEL
//   query/COND/{count,coords,mask}   File (Query)
std::variant<ViewNode, PathError> resolve_table_view(std::span<const std::string> components,
                                                     std::uint64_t records, bool with_listing = true);

// `natural_chunk`: the chunk shape of `zarr/` (the layout's brick; empty: the
// whole array as one chunk).
std::variant<ViewNode, PathError> resolve_view(std::span<const std::string> components,
                                               std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                               bool with_listing = true,
                                               std::span<const std::uint64_t> natural_chunk = {},
                                               std::size_t copies = 0);

// A box selector (one path component): comma-separated items, exactly one
// per dimension, numpy basic indexing without negative indices:
//   I          fixed index (the dimension is dropped)
//   A:B        half-open range; A defaults to 0, B to S_d (`:`, `A:`, `:B`)
//   A:B:STEP   with a step; an empty STEP is 1 (`::2`, `A::STEP`, `A:B:`)
// I >= S_d, A >= S_d or B > S_d: ERANGE. An empty range (A >= B), STEP 0, a
// negative or malformed number, or the wrong number of items: EINVAL.
// The Selection is normalized: stop is one past the last selected element
// and a range selecting one element has step 1 (same elements, same shape).
std::variant<layouts::Selection, PathError> parse_box(std::string_view sel, std::span<const std::uint64_t> shape);

// The canonical selector of a selection, as parse_box reads it back:
// "I" for a fixed dimension, "A:B" or "A:B:STEP" otherwise.
std::string box_spelling(const layouts::Selection& selection);

// Strict unsigned decimal as paths spell numbers: digits only (no sign, no
// blanks, not empty, no trailing junk), fitting in 64 bits.
enum class NumberStatus { Ok, Malformed, TooLarge };
NumberStatus parse_number(std::string_view text, std::uint64_t& out);

}  // namespace mmfs::fs

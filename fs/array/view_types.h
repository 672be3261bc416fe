// What a view of an array selects, as the array layer reads it: the elements
// of a data view (slice, box, PLoD) and the condition, box and output of a
// query. The path grammar that produces them is fs/paths/view_path.h; the
// array layer serves them without knowing how they were spelled.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "indexes/condition.h"
#include "layouts/cell_grid.h"
#include "layouts/selection.h"

namespace mmfs::fs {

// The elements a data view returns.
struct DataView {
  layouts::Selection selection{{}};
  std::uint32_t plod_bytes = 0;  // bytes kept per element (layouts::apply_plod); 0 = whole elements
  // Canonical path below A@ that resolves to this view: numbers without
  // leading zeros, box selectors normalized (see parse_box), e.g.
  // "slice/1/42", "plod/3", "plod/3@/box/0:4,2".
  std::string spelling;
  // The bytes of the result each chunk it is read in holds (chosen by
  // ArrayFile::view_chunking from the volume's model); 0 until chosen.
  std::uint64_t chunk_bytes = 0;
  // A box the array reads in this one's place and takes this one's bytes
  // from: the cell-aligned box enclosing a Zarr view's chunk that is thinner
  // than the cells (fs/paths/view_path.h), so that the chunks beside it, which
  // need the same cells, find them in the array's chunk cache instead of
  // reading them again. Null: the view is read itself. REQUIRES, when set:
  // both are boxes of step 1 without fixed dimensions, `within` holding this
  // one, no PLoD.
  std::shared_ptr<const DataView> within = nullptr;
  // On a `within` box: the reader's chunk shape. Each chunk of the box is
  // kept rearranged block by block along this grid (layouts/regrid.h), so a
  // thin chunk's bytes are one run per chunk of the box, not one element in
  // every few (the spelling says so, keeping it apart in the cache). Empty:
  // C order.
  std::vector<std::uint64_t> regrid = {};
  // On a `within` box: the box a reader going through the chunks in C order
  // of their grid reads next (the enclosing box of the chunk after this
  // box's last), whose first chunks are loaded ahead while this box's chunks
  // are handed out. Null: none (the array's last, or a chunk that reads itself).
  std::shared_ptr<const DataView> next_within = nullptr;
  // The placement the view is read through: -1 the cheapest current one
  // (the primary or a copy, ArrayFile::serving_locked), K >= 0 copy K only
  // (A@/copy/K@/..., 0 = the primary).
  int copy = -1;
  // The placement whose grid cuts the view into chunks and which serves
  // them, chosen under placement epoch `served_epoch`, and that grid (set
  // with chunk_bytes by ArrayFile::view_chunking; part of a chunk's cache
  // key). A chunk whose placement has changed or fallen behind since is
  // read from the primary, cut the same way.
  std::uint32_t served = 0;
  std::uint64_t served_epoch = 0;
  std::shared_ptr<const layouts::CellGrid> cut = nullptr;
  // Size of the view's bytes: selection.elements() * itemsize (PLoD views
  // keep whole elements, with the dropped bytes filled).
  std::uint64_t bytes(std::uint32_t itemsize) const { return selection.elements() * itemsize; }
};

// A query's result (docs/reference.md §5): which rows match `condition`,
// inside `box` when one is given, and what the file holds about them.
struct QueryView {
  enum class Output { Count, Coords, Values, Mask };
  indexes::Condition condition;
  std::string condition_text;         // as written in the path
  std::optional<layouts::Selection> box;
  std::uint32_t plod_bytes = 0;       // values: bytes kept per element (0 = whole)
  Output output = Output::Count;
  std::string spelling;               // the path below A@ (without plan/)
};

}  // namespace mmfs::fs

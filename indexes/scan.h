// Answering atoms without an index: one pass over element bytes. Pure.
#pragma once

#include <cstddef>
#include <cstdint>

#include "indexes/bitmap.h"
#include "indexes/values.h"

namespace mmfs::indexes {

// Adds to `out` the rows first_row + i (i < count) whose element is in `keys`.
// Tight per-dtype loops; rows are added in bulk, in ascending order.
void scan_keys(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count, std::uint64_t first_row,
               Bitmap* out);
// Writes to `out` (room for `count`) the indices i < count, ascending, whose
// element is in `keys`; returns how many. For callers that place matches
// themselves: no bitmap is built. count < 2^32.
std::size_t matching_indices(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count,
                             std::uint32_t* out);
// How many of the elements are in `keys`.
std::uint64_t count_keys(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count);

}  // namespace mmfs::indexes

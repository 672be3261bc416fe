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
// How many of the elements are in `keys`.
std::uint64_t count_keys(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count);

}  // namespace mmfs::indexes

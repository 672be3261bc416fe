// PLoD, precision of level of detail (the papers' index, MLOC): a view of an
// array that keeps only the most significant bytes of each element. Pure
// byte arithmetic, shared by the views (fs/array) and the MLOC layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace mmfs::layouts {

// Keeps the `keep_bytes` most significant bytes of each little-endian element
// of `elements` (whole elements of `itemsize` bytes) and fills the dropped
// ones: for float64 0x7F in the most significant dropped byte and 0xFF below
// it (MLOC's fill, the midpoint of the dropped mantissa range), for every
// other dtype zeros (docs/reference.md §5). keep_bytes 0 or == itemsize
// leaves the elements unchanged. Throws std::invalid_argument for itemsize 0,
// keep_bytes > itemsize, or a size that is not a multiple of itemsize.
void apply_plod(std::span<std::byte> elements, std::uint32_t itemsize, bool is_float64, std::uint32_t keep_bytes);

}  // namespace mmfs::layouts

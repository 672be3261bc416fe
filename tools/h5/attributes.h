// HDF5 attributes <-> mmfs xattrs (docs/import-export.md, "Attributes").
//
// An attribute NAME becomes the xattr user.NAME holding:
//  * a scalar string: its bytes (fixed-length strings lose their padding:
//    trailing NULs, or spaces for space-padded ones; a NUL-terminated one
//    ends at its first NUL);
//  * a scalar number: its JSON text (`2.5`, `-3`); float32 values are written
//    with the shortest decimal that reads back to the same float32, not the
//    float64 digits of its widening (`0.1`, not `0.10000000149011612`);
//  * an array of numbers or strings: a JSON list, nested in C order.
// JSON has no NaN or infinities: they are written as the strings "NaN",
// "Infinity" and "-Infinity" in lists, and as that bare text for a scalar
// (what Python's json module reads back as floats).
//
// user.hdf5.types records each written attribute's type and shape, so export
// gives back the same HDF5 types: {"units": {"type": "string", "shape": []},
// "origin": {"type": "float64", "shape": [3]}}. Without it (an xattr set by a
// user), export writes the xattr as a string attribute.
//
// Attributes that only encode dimension scales or netCDF-4 library
// structure (dimension_scales.h) are left out silently: they become
// user.mmfs.dims. What cannot be represented is skipped with a warning: other types
// (compound, enum, references, float16, ...), null dataspaces, names starting
// with "mmfs." or equal to "hdf5.types" (mmfs's own), names longer than an
// xattr name allows, and values over 64 KiB (mmfs's xattr limit).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmfs::h5 {

inline constexpr std::size_t kMaxXattrValue = 64 * 1024;
inline constexpr std::string_view kTypesXattr = "user.hdf5.types";

using Xattrs = std::vector<std::pair<std::string, std::string>>;  // full xattr name, value

struct ImportedAttributes {
  Xattrs xattrs;                      // user.NAME values, then user.hdf5.types (when any)
  std::vector<std::string> warnings;  // one line each: "attribute NAME: why, skipped"
};

// Reads every attribute of the HDF5 object `object` (a dataset or group), in
// name order. Throws H5Error when the library fails to read one.
ImportedAttributes attributes_to_xattrs(hid_t object);

// Writes the attributes that `xattrs` (an array file's user.* xattrs; others
// are ignored, and so are user.mmfs.* and user.hdf5.types themselves) stand
// for onto `object`, with the types user.hdf5.types records; strings are
// variable-length UTF-8. Returns warnings (a value that does not match its
// recorded type is written as a string, with a warning). Throws H5Error when
// the library fails to write one.
std::vector<std::string> xattrs_to_attributes(hid_t object, const Xattrs& xattrs);

}  // namespace mmfs::h5

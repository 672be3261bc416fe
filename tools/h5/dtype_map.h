// HDF5 datatypes <-> mmfs dtypes (docs/reference.md §1).
//
// mmfs arrays hold little-endian int8 ... uint64, float32 and float64. An HDF5
// integer of 1, 2, 4 or 8 bytes or an IEEE float of 4 or 8 bytes, in either
// byte order, maps to one of them (HDF5 converts big-endian data when it is
// read into the little-endian memory type). Every other class is refused with
// a description of what it is, so the message can name the type.
#pragma once

#include <hdf5.h>

#include <string>
#include <string_view>
#include <variant>

#include "fs/array/array_schema.h"

namespace mmfs::h5 {

// Why a type was refused: a short description ("compound", "float16",
// "enum (h5py bool)", "integer of 16 bytes", ...).
struct UnsupportedType {
  std::string description;
};

// The mmfs dtype of an HDF5 datatype, or why there is none.
std::variant<fs::Dtype, UnsupportedType> dtype_of(hid_t type);

// "unsupported HDF5 type (compound); mmfs arrays hold int8 … uint64, float32, float64"
std::string unsupported_type_message(const UnsupportedType& why);

// The predefined little-endian HDF5 type of an mmfs dtype (H5T_STD_I32LE,
// H5T_IEEE_F64LE, ...). Used as the file type on export and as the memory type
// on import (the array's bytes are little-endian whatever the host). A
// library-owned identifier: never close it. Throws std::invalid_argument for a
// Dtype that parse_dtype would not produce.
hid_t hdf5_type_of(const fs::Dtype& dtype);

}  // namespace mmfs::h5

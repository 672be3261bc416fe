#include "tools/h5/dtype_map.h"

#include <fmt/format.h>

#include <stdexcept>

namespace mmfs::h5 {

namespace {

UnsupportedType refuse(std::string text) { return UnsupportedType{std::move(text)}; }

// h5py stores numpy's bool as an 8-bit enum {FALSE = 0, TRUE = 1}; naming it
// tells the user where the enum came from.
bool is_h5py_bool(hid_t type) {
  if (H5Tget_nmembers(type) != 2) return false;
  char* first = H5Tget_member_name(type, 0);
  char* second = H5Tget_member_name(type, 1);
  bool yes = first && second && std::string_view(first) == "FALSE" && std::string_view(second) == "TRUE";
  H5free_memory(first);
  H5free_memory(second);
  return yes;
}

std::variant<fs::Dtype, UnsupportedType> integer(hid_t type, std::size_t size) {
  if (size != 1 && size != 2 && size != 4 && size != 8)
    return refuse(fmt::format("integer of {} bytes", size));
  H5T_order_t order = H5Tget_order(type);
  if (order != H5T_ORDER_LE && order != H5T_ORDER_BE && !(size == 1 && order == H5T_ORDER_NONE))
    return refuse(fmt::format("integer of {} bytes in a mixed byte order", size));
  bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
  auto name = fmt::format("{}int{}", is_signed ? "" : "u", size * 8);
  return fs::Dtype{name, static_cast<std::uint32_t>(size), is_signed ? 'i' : 'u'};
}

std::variant<fs::Dtype, UnsupportedType> floating(hid_t type, std::size_t size) {
  if (size == 2) return refuse("float16");
  if (size > 8) return refuse(fmt::format("long double ({} bytes)", size));
  if (size != 4 && size != 8) return refuse(fmt::format("float of {} bytes", size));
  // A 4- or 8-byte float with another bit layout (a user-defined type, or a
  // truncated precision) cannot be copied bit for bit; HDF5 could convert it,
  // but silently changing the values is worse than saying no.
  std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return refuse("float with unknown fields");
  bool ieee = size == 4 ? (spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23)
                        : (spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52);
  if (!ieee) return refuse(fmt::format("non-IEEE float of {} bytes", size));
  H5T_order_t order = H5Tget_order(type);
  if (order != H5T_ORDER_LE && order != H5T_ORDER_BE)
    return refuse(fmt::format("float of {} bytes in VAX or mixed byte order", size));
  return size == 4 ? fs::Dtype{"float32", 4, 'f'} : fs::Dtype{"float64", 8, 'f'};
}

}  // namespace

std::variant<fs::Dtype, UnsupportedType> dtype_of(hid_t type) {
  std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return integer(type, size);
    case H5T_FLOAT: return floating(type, size);
    case H5T_COMPOUND: return refuse("compound");
    case H5T_STRING: return refuse(H5Tis_variable_str(type) > 0 ? "variable-length string" : "string");
    case H5T_ENUM: return refuse(is_h5py_bool(type) ? "enum (h5py bool)" : "enum");
    case H5T_ARRAY: return refuse("array");
    case H5T_VLEN: return refuse("variable-length");
    case H5T_REFERENCE: return refuse("reference");
    case H5T_OPAQUE: return refuse("opaque");
    case H5T_BITFIELD: return refuse("bitfield");
    case H5T_TIME: return refuse("time");
    default: return refuse("unknown class");
  }
}

std::string unsupported_type_message(const UnsupportedType& why) {
  return fmt::format("unsupported HDF5 type ({}); mmfs arrays hold int8 … uint64, float32, float64",
                     why.description);
}

hid_t hdf5_type_of(const fs::Dtype& dtype) {
  const std::string& n = dtype.name;
  if (n == "int8") return H5T_STD_I8LE;
  if (n == "uint8") return H5T_STD_U8LE;
  if (n == "int16") return H5T_STD_I16LE;
  if (n == "uint16") return H5T_STD_U16LE;
  if (n == "int32") return H5T_STD_I32LE;
  if (n == "uint32") return H5T_STD_U32LE;
  if (n == "int64") return H5T_STD_I64LE;
  if (n == "uint64") return H5T_STD_U64LE;
  if (n == "float32") return H5T_IEEE_F32LE;
  if (n == "float64") return H5T_IEEE_F64LE;
  throw std::invalid_argument("not an mmfs dtype: " + n);
}

}  // namespace mmfs::h5

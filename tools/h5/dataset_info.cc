#include "tools/h5/dataset_info.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <variant>

#include "tools/h5/dtype_map.h"
#include "tools/h5/hdf5_handle.h"

namespace mmfs::h5 {

namespace {

// A filter as h5py users know it: gzip(LEVEL), shuffle, fletcher32, szip,
// nbit, scaleoffset, or the name the file gives (e.g. "lzf", "blosc"), and
// whether this HDF5 library can decode it.
std::string filter_text(H5Z_filter_t id, const char* name, const unsigned* cd, std::size_t ncd) {
  std::string text;
  switch (id) {
    case H5Z_FILTER_DEFLATE: text = ncd > 0 ? fmt::format("gzip({})", cd[0]) : "gzip"; break;
    case H5Z_FILTER_SHUFFLE: text = "shuffle"; break;
    case H5Z_FILTER_FLETCHER32: text = "fletcher32"; break;
    case H5Z_FILTER_SZIP: text = "szip"; break;
    case H5Z_FILTER_NBIT: text = "nbit"; break;
    case H5Z_FILTER_SCALEOFFSET: text = "scaleoffset"; break;
    default: text = name && *name ? fmt::format("{} (filter {})", name, id) : fmt::format("filter {}", id);
  }
  return text;
}

bool filter_decodes(H5Z_filter_t id) {
  if (H5Zfilter_avail(id) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  unsigned config = 0;
  if (H5Zget_filter_info(id, &config) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return (config & H5Z_FILTER_CONFIG_DECODE_ENABLED) != 0;
}

}  // namespace

std::vector<std::uint64_t> DatasetInfo::transfer_chunks() const {
  if (!chunks.empty()) return chunks;
  return std::vector<std::uint64_t>(shape.size(), 1);
}

std::uint64_t DatasetInfo::bytes() const {
  std::uint64_t n = dtype ? dtype->itemsize : 0;
  for (auto s : shape) n *= s;
  return n;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  return shape.empty() ? "scalar" : fmt::format("{}", fmt::join(shape, "x"));
}

DatasetInfo inspect_dataset(hid_t dataset) {
  DatasetInfo info;
  Datatype type(H5Dget_type(dataset), "H5Dget_type");
  auto mapped = dtype_of(type.get());
  if (auto* d = std::get_if<fs::Dtype>(&mapped)) {
    info.dtype = *d;
    info.type = d->name;
  } else {
    info.type = std::get<UnsupportedType>(mapped).description;
  }

  Dataspace space(H5Dget_space(dataset), "H5Dget_space");
  const H5S_class_t sclass = H5Sget_simple_extent_type(space.get());
  info.space = sclass == H5S_SCALAR ? "scalar" : sclass == H5S_NULL ? "null" : "simple";
  if (sclass == H5S_SIMPLE) {
    int rank = check_ok(H5Sget_simple_extent_ndims(space.get()), "H5Sget_simple_extent_ndims");
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    check_ok(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "H5Sget_simple_extent_dims");
    info.shape.assign(dims.begin(), dims.end());
  }

  Plist dcpl(H5Dget_create_plist(dataset), "H5Dget_create_plist");
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_CHUNKED: {
      info.storage = "chunked";
      std::vector<hsize_t> c(H5S_MAX_RANK);
      int rank = check_ok(H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, c.data()), "H5Pget_chunk");
      info.chunks.assign(c.begin(), c.begin() + rank);
      break;
    }
    case H5D_COMPACT: info.storage = "compact"; break;
    case H5D_VIRTUAL: info.storage = "virtual"; break;
    default: info.storage = "contiguous"; break;
  }
  std::string missing_filter;
  const int nfilters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, config = 0;
    unsigned cd[16] = {};
    std::size_t ncd = 16;
    char name[128] = {};
    H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &ncd, cd, sizeof name, name, &config);
    if (id < 0) throw_hdf5_error("H5Pget_filter2");
    std::string text = filter_text(id, name, cd, std::min<std::size_t>(ncd, 16));
    if (!filter_decodes(id)) {
      if (missing_filter.empty()) missing_filter = text;
      text += " (not available)";
    }
    info.filters.push_back(std::move(text));
  }

  // The verdict: the first reason found, in the order a user would fix them.
  if (!info.dtype) info.refusal = unsupported_type_message(std::get<UnsupportedType>(mapped));
  else if (sclass == H5S_SCALAR) info.refusal = "scalar dataspace; mmfs arrays have 1 to 16 dimensions";
  else if (sclass == H5S_NULL) info.refusal = "null dataspace (the dataset holds no data)";
  else if (info.shape.empty()) info.refusal = "no dimensions; mmfs arrays have 1 to 16 dimensions";
  else if (info.shape.size() > kMaxRank)
    info.refusal = fmt::format("{} dimensions; mmfs arrays have 1 to {}", info.shape.size(), kMaxRank);
  else if (!missing_filter.empty())
    info.refusal = fmt::format("compressed with {}, which this HDF5 library cannot decode (is its plugin on "
                               "HDF5_PLUGIN_PATH?)",
                               missing_filter);
  else {
    unsigned __int128 bytes = info.dtype->itemsize;
    for (std::size_t d = 0; d < info.shape.size(); ++d) {
      if (info.shape[d] == 0) {
        info.refusal = fmt::format("dimension {} has length 0 ({}); mmfs arrays have lengths >= 1", d,
                                   shape_text(info.shape));
        break;
      }
      bytes *= info.shape[d];
      if (bytes >> 64) {
        info.refusal = fmt::format("{} {} is more than 2^64 bytes", shape_text(info.shape), info.dtype->name);
        break;
      }
    }
  }
  return info;
}

}  // namespace mmfs::h5

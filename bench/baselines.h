// The baselines of `mmfs-bench modeled`: how a library's file would sit on
// the same modeled device, and which requests the library would issue. These
// are models, labelled as such — the real libraries are measured by
// bench/mmfs_bench_real.py.
//
// * contiguous (h5py contiguous dataset / numpy memmap of a raw file): the
//   C-order bytes packed from the start of one extent. A read touches the
//   4 KiB pages (max(4096, sector) bytes: the page cache's unit) under the
//   selection's C-order runs; pages that touch or overlap merge into one
//   request (HDF5's sieve buffer and the page cache's merging do that), and
//   the requests are issued one at a time in file order (a library's
//   synchronous reads: queue depth 1).
// * chunked (h5py chunked dataset / zarr): chunks of 64 elements per
//   dimension (clipped to the shape), each stored whole (edge chunks padded,
//   as HDF5 and zarr store them), one after another in C order of the chunk
//   grid. A read fetches every chunk it touches whole; contiguous chunks make
//   one request; one request at a time, in file order. This is mmfs's naive
//   layout with a chunk-sized cell, planned with queue depth 1.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bench/target.h"
#include "geometry/geometry.h"
#include "layouts/selection.h"

namespace mmfs::bench {

// The unit a library's reads reach the device in: a 4 KiB page, or a sector when larger.
std::uint32_t library_page_bytes(const geom::Geometry& geometry);

// Pages [first, first + count) of a file.
struct PageRun {
  std::uint64_t first = 0, count = 0;
  bool operator==(const PageRun&) const = default;
};
// The merged page runs a selection of a C-order file of `shape` touches, in file order.
std::vector<PageRun> contiguous_page_runs(const std::vector<std::uint64_t>& shape, std::uint32_t itemsize,
                                          std::uint32_t page_bytes, const layouts::Selection& selection);

std::unique_ptr<Target> make_contiguous_target(const geom::Geometry& geometry, const std::vector<std::uint64_t>& shape,
                                               std::uint32_t itemsize, geom::Lbn first_lbn);

// The chunk shape: `edge` elements per dimension, clipped to the shape.
std::vector<std::uint64_t> library_chunk(const std::vector<std::uint64_t>& shape, std::uint64_t edge);
std::unique_ptr<Target> make_chunked_target(const geom::Geometry& geometry, const std::vector<std::uint64_t>& shape,
                                            std::uint32_t itemsize, std::uint64_t chunk_edge, geom::Lbn first_lbn);

}  // namespace mmfs::bench

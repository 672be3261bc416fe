// One placement of an array's elements on the device, behind the interface
// the read paths, A@/plan, A@/info and A@/lbn use, so ArrayFile asks "read
// this selection" or "plan it" without knowing how the elements lie.
//
// Two kinds:
//  * cells (CellPlacement): the layout's cells on their extents, with
//    checksums and the dirty-cell cache (ArrayState); the one kind that
//    takes writes.
//  * a sealed MLOC image (ImagePlacement, fs/mloc/mloc_image.h): read-only;
//    ArrayFile unpacks it into staging cells at the first write and seals
//    the cells into a new image at the last close.
//
// What only one kind can do stays reachable through cells() and image()
// (the write path, flush and relayout need cells; MLOC queries answered
// from the level structure need the image).
//
// Not thread-safe: ArrayFile's placement lock guards a placement, shared
// for the const methods, exclusive for anything else.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fs/array/array_state.h"
#include "fs/device/sector_io.h"
#include "fs/meta/metadata.h"
#include "fs/mloc/mloc_image.h"
#include "geometry/geometry.h"
#include "layouts/cell_grid.h"
#include "layouts/io_plan.h"
#include "layouts/selection.h"

namespace mmfs::fs {

class MemberSetSite;

class Placement {
 public:
  virtual ~Placement() = default;

  // The grid views are cut into pieces by: the layout's cells, or an
  // image's chunks taken as cells.
  virtual const layouts::CellGrid& grid() const = 0;
  // True when any element was ever written (else every element reads zero).
  virtual bool holds_data() const = 0;
  // In the volume's LBNs (a placement on a member set works in the set's:
  // fs/array/member_sets.h).
  virtual const std::vector<Extent>& extents() const = 0;
  // The data's bytes on the device.
  virtual std::uint64_t device_bytes() const = 0;

  // The selection's C-order elements into `out` (selection.elements() x
  // itemsize bytes), the `keep` most significant bytes of each at least (0:
  // all; the caller applies PLoD to the rest). *bytes_read counts the device
  // bytes. `device_done` runs once the device reads are done (a sequential
  // reader starts its next piece there). `scratch` holds the sectors read,
  // reused by a loop of reads. `once`: no later piece of the same view
  // wants these sectors, so nothing is kept for it. Errors: EIO with the
  // cell or chunk that failed its checksum in *message, or the device's.
  // Cells must have no dirty cell (ArrayFile writes them back first).
  // `bad_cell`, when given, receives the cell that failed its checksum
  // (kNoBadCell for any other error).
  static constexpr std::uint64_t kNoBadCell = ~std::uint64_t{0};
  virtual int read_selection(const layouts::Selection& selection, std::uint32_t keep, std::byte* out,
                             std::uint64_t* bytes_read, std::string* message,
                             const std::function<void()>& device_done, AlignedBuffer* scratch, bool once,
                             std::uint64_t* bad_cell = nullptr) = 0;
  // The device requests read_selection issues for `selection`; modeled_ms
  // is set only when choosing the plan needed the model.
  virtual layouts::IoPlan plan(const layouts::Selection& selection, std::uint32_t keep) const = 0;
  // The same with modeled_ms always set (the volume's model, from idle).
  virtual layouts::IoPlan modeled_plan(const layouts::Selection& selection, std::uint32_t keep) const = 0;
  // Whether a view is read in chunks whose size the model chooses by
  // pricing them (cells: a layout's runs grow with the cell layers a chunk
  // spans), and A@/plan shows one plan per chunk. An image decodes whole
  // chunks of its own and is planned as one read.
  virtual bool chunks_by_model() const = 0;
  // A plan of this placement with its requests in the volume's LBNs, for A@/plan.
  virtual layouts::IoPlan on_volume(const layouts::IoPlan& plan) const { return plan; }

  // The sector holding element `coords` and the byte offset there; ENOTSUP
  // or ENODATA with a reason when the placement has no such sector.
  virtual int element_location(std::span<const std::uint64_t> coords, geom::Lbn* lbn, std::uint32_t* offset,
                               std::string* message) const = 0;
  // The placement's own fields of A@/info.
  virtual void describe(nlohmann::json* info) const = 0;
  // The layout's choice of `name` (cell, basic_cube, chunk) for getfattr
  // when the attribute is not set: "none" when the layout has none.
  virtual std::string chosen_attr(std::string_view name) const = 0;

  // The member set the placement lies on (fs/array/member_sets.h), or null: the whole volume.
  virtual MemberSetSite* site() const = 0;
  // False for a placement that cannot be read at all (unreadable_placement):
  // nothing is priced or served through it.
  virtual bool readable() const { return true; }

  virtual ArrayState* cells() { return nullptr; }
  const ArrayState* cells() const { return const_cast<Placement*>(this)->cells(); }
  virtual MlocImage* image() { return nullptr; }
  const MlocImage* image() const { return const_cast<Placement*>(this)->image(); }
};

std::unique_ptr<Placement> cell_placement(std::unique_ptr<ArrayState> state, const geom::Geometry& geometry);
// `site`: the member set the image lies on (its extents in the set's LBNs), or null.
std::unique_ptr<Placement> image_placement(std::unique_ptr<MlocImage> image, const geom::Geometry& geometry,
                                           MemberSetSite* site = nullptr);
// A sealed mloc primary whose image does not load (its directory damaged,
// or on a lost member) while the array has copies: the array still opens,
// every view served from a copy, until a scrub or mmfsck --rebuild encodes
// the image anew (docs/copies-on-members.md). Every read fails with EIO and
// `why`; holds_data() is true (what it held is unknown); its extents are the
// stored image's (`stored`, volume LBNs, `sector_bytes` each) so a new image
// frees them. `stand_in`: the empty image load_image returned in its place,
// for the grid and the member set. image() is null: queries never take the
// directory's shortcuts from it.
std::unique_ptr<Placement> unreadable_placement(std::unique_ptr<Placement> stand_in, std::vector<Extent> stored,
                                                std::uint64_t sector_bytes, std::string why);

}  // namespace mmfs::fs

// Free space of a volume's data area, in geometry sectors (LBNs).
//
// Arrays take whole tracks from the bottom of the data area up (the outer,
// faster zones first): runs of tracks for the linear layouts, groups of
// consecutive tracks inside one zone for MultiMap (for the quadrangle layout,
// groups aligned to its stripes inside its one zone: SpaceRequest's
// align_tracks, exact_track_sectors and within). Small objects (plain-file
// data) take sector-granular extents from the top down, so they never cut
// holes into the track space arrays need. The free map is rebuilt at mount
// from the extent maps in the metadata store, so it cannot drift from them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "geometry/geometry.h"
#include "layouts/layout.h"

namespace mmfs::fs {

using geom::Lbn;
using layouts::Extent;

// Where an object that takes space of its own (an mloc image, its spilled
// pieces) gets sectors and gives them back: the volume's Allocator, or a
// member set's share of it (SubsetAllocator), in that space's own LBNs.
class SpaceSource {
 public:
  virtual ~SpaceSource() = default;
  virtual int allocate(const layouts::SpaceRequest& request, std::vector<Extent>* out) = 0;
  virtual bool free(const Extent& e) = 0;
  virtual std::uint64_t free_sectors() const = 0;
};

class Allocator final : public SpaceSource {
 public:
  // Everything in [first, end) free.
  Allocator(const geom::Geometry& geometry, Lbn first, Lbn end);

  // Mount-time rebuild: marks an extent in use. Returns false (and changes
  // nothing) when any of it is outside the area or already in use.
  bool mark_used(const Extent& e);

  // The space a layout asks for. 0, or ENOSPC with nothing allocated.
  int allocate(const layouts::SpaceRequest& request, std::vector<Extent>* out) override;
  // `sectors` for a small object, from the top down, in as few extents as fit.
  int allocate_small(std::uint64_t sectors, std::vector<Extent>* out);
  // Returns an extent to the free map. Returns false when any of it is
  // already free or outside the area (a double free: the caller has a bug or
  // the metadata is corrupt). Its withheld parts (below) stay out of it.
  bool free(const Extent& e) override;
  // Sectors that a free never returns to the free map: `withheld(e)` gives
  // the parts of `e` to keep out (in any order). A RAID 0 volume running
  // without a member keeps its sectors out (Volume::exclude_member_space):
  // nothing new may land there, and files deleted meanwhile held some. The
  // map is rebuilt from the extent maps at the next mount, which excludes
  // the member again. Replaces the previous filter; empty: none.
  using Withheld = std::function<std::vector<Extent>(const Extent& e)>;
  void set_withheld(Withheld withheld);

  std::uint64_t free_sectors() const override;
  std::uint64_t total_sectors() const { return end_ - first_; }
  Lbn first() const { return first_; }
  Lbn end() const { return end_; }
  // The free runs, ascending (for mmfsck and statfs).
  std::vector<Extent> free_extents() const;

 private:
  bool is_free_locked(Lbn start, Lbn end) const;
  void take_locked(Lbn start, Lbn end);
  void give_locked(Lbn start, Lbn end);
  Lbn track_start_at_or_after(Lbn lbn) const;

  const geom::Geometry& geometry_;
  Lbn first_, end_;
  mutable std::mutex mu_;
  std::map<Lbn, Lbn> free_;  // start -> end (exclusive), disjoint, coalesced
  Withheld withheld_;
  std::uint64_t free_total_ = 0;
};

}  // namespace mmfs::fs

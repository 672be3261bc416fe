// Path resolution below the control directory `/.mmfs` (docs/reference.md §6). Pure: no
// FUSE, no I/O. The static files' contents are computed here, byte for byte
// as `mmfs-geom` prints them (docs/reference.md §7); `stats` and `errors` are the
// daemon's to fill.
//
//   (none)                   Dir: geometry stats errors audit scrub boundaries adjacent
//                            equivalent rectangle
//   geometry                 File: geometry.info().dump(2) + "\n"
//   stats, errors, audit     File (dynamic: empty content here)
//   scrub                    File (dynamic: the scrub's status; the one writable
//                            file: its commands, docs/daemon.md "Scrub")
//   boundaries               Dir (empty)
//   boundaries/LBN           File: "LOW HIGH\n"
//   adjacent                 Dir (empty)
//   adjacent/LBN             Dir: 1 .. D
//   adjacent/LBN/STEP        File: "LBN\n" (1 <= STEP <= D)
//   equivalent               Dir (empty)
//   equivalent/LBN           File: one LBN per line (MEMS; ENOTSUP elsewhere)
//
// Errors: an unknown name ENOENT; a malformed number EINVAL; LBN >=
// capacity, STEP outside 1..D, an adjacent block past the last track, or a
// number too large for 64 bits ERANGE; a component after a file ENOTDIR.
#pragma once

#include <span>
#include <string>
#include <variant>
#include <vector>

#include "fs/paths/view_path.h"
#include "geometry/geometry.h"

namespace mmfs::fs {

enum class ControlKind { Dir, Geometry, Stats, Errors, Audit, Scrub, Boundaries, Adjacent, Equivalent, Rectangle };

struct ControlNode {
  ControlKind kind = ControlKind::Dir;
  std::vector<std::string> listing;  // Dir
  std::string content;               // the static files' text; empty for Stats, Errors, Audit and Scrub
};

// Resolves the components after "/.mmfs" (possibly none).
std::variant<ControlNode, PathError> resolve_control(std::span<const std::string> components,
                                                     const geom::Geometry& geometry);

}  // namespace mmfs::fs

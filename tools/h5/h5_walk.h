// Walks the hierarchy below an HDF5 group: every group and dataset once,
// in name order, depth first.
//
// Links of every kind (hard, soft, external) are followed, but an object
// reached again — a second hard link, a soft link to something already seen,
// a link back to an ancestor — is reported as a duplicate of the path it was
// first reached by and not entered again, so cycles end and nothing is
// imported twice. A link that leads nowhere (dangling soft link, missing
// external file) is reported as unreachable. Named datatypes are skipped.
#pragma once

#include <hdf5.h>

#include <string>

namespace mmfs::h5 {

class WalkVisitor {
 public:
  virtual ~WalkVisitor() = default;
  // A group below the start; false: do not walk its contents.
  virtual bool enter_group(const std::string& path, hid_t group) = 0;
  // A dataset: the link `name` in `group` (the visitor opens it with the
  // access properties it needs).
  virtual void dataset(const std::string& path, hid_t group, const std::string& name) = 0;
  virtual void duplicate(const std::string& path, const std::string& first_path) = 0;
  virtual void unreachable(const std::string& path, const std::string& why) = 0;
};

// Walks the contents of `group` (whose path in the file is `path`, "/" for
// the root). Exceptions from the visitor propagate.
void walk_hdf5(hid_t group, const std::string& path, WalkVisitor& visitor);

// "/" + name for the root, path + "/" + name otherwise.
std::string child_path(const std::string& parent, const std::string& name);

}  // namespace mmfs::h5

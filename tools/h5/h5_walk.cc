#include "tools/h5/h5_walk.h"

#include <fmt/format.h>

#include <map>
#include <utility>
#include <vector>

#include "tools/h5/hdf5_handle.h"

namespace mmfs::h5 {

namespace {

// Objects are identified by the file they live in and their header address
// (HDF5 1.10's H5O_info_t; an external link's target has another fileno).
using ObjectKey = std::pair<unsigned long, haddr_t>;

ObjectKey key_of(hid_t object) {
  H5O_info_t info;
  check_ok(H5Oget_info2(object, &info, H5O_INFO_BASIC), "H5Oget_info");
  return {info.fileno, info.addr};
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

const char* link_kind(H5L_type_t type) {
  switch (type) {
    case H5L_TYPE_SOFT: return "soft link";
    case H5L_TYPE_EXTERNAL: return "external link";
    case H5L_TYPE_HARD: return "hard link";
    default: return "user-defined link";
  }
}

class Walker {
 public:
  explicit Walker(WalkVisitor& v) : visitor_(v) {}

  void walk(hid_t group, const std::string& path) {
    seen_.emplace(key_of(group), path);
    contents(group, path);
  }

 private:
  void contents(hid_t group, const std::string& path) {
    // Names first, then the visits: the visitor does HDF5 calls of its own
    // and may throw, neither of which belongs inside H5Literate's callback.
    std::vector<std::string> names;
    hsize_t idx = 0;
    check_ok(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names),
             fmt::format("listing group {}", path));
    for (const auto& name : names) visit(group, path, name);
  }

  void visit(hid_t group, const std::string& parent, const std::string& name) {
    const std::string path = child_path(parent, name);
    H5L_info_t link;
    check_ok(H5Lget_info(group, name.c_str(), &link, H5P_DEFAULT), fmt::format("reading link {}", path));
    Object object(H5Oopen(group, name.c_str(), H5P_DEFAULT));
    if (!object) {
      std::string why = hdf5_error_text();
      visitor_.unreachable(path, fmt::format("{} leads to no object{}", link_kind(link.type),
                                             why.empty() ? "" : " (" + why + ")"));
      return;
    }
    const ObjectKey key = key_of(object.get());
    if (auto it = seen_.find(key); it != seen_.end()) {
      visitor_.duplicate(path, it->second);
      return;
    }
    seen_.emplace(key, path);
    switch (H5Iget_type(object.get())) {
      case H5I_GROUP:
        if (visitor_.enter_group(path, object.get())) contents(object.get(), path);
        break;
      case H5I_DATASET:
        object.reset();  // closed, so the visitor's open takes its own access properties
        visitor_.dataset(path, group, name);
        break;
      default: break;  // named datatypes hold no data
    }
  }

  WalkVisitor& visitor_;
  std::map<ObjectKey, std::string> seen_;
};

}  // namespace

std::string child_path(const std::string& parent, const std::string& name) {
  return parent == "/" ? "/" + name : parent + "/" + name;
}

void walk_hdf5(hid_t group, const std::string& path, WalkVisitor& visitor) {
  Walker(visitor).walk(group, path);
}

}  // namespace mmfs::h5

// The FILE.h5:/PATH arguments of mmfs-import and mmfs-export. Pure: the file
// system is asked through the predicate only.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mmfs::h5 {

struct H5Spec {
  std::string file;
  std::string object;  // "/group/dataset", "/" for the root group; empty: none given
};

// mmfs-import's SOURCE: the whole argument when it names an existing file (so
// file names may hold ':'), else split at the last ':' followed by '/'; with
// no such ':', the whole argument is the file. The object path loses
// trailing slashes (but "/" stays "/").
H5Spec split_import_source(std::string_view arg, const std::function<bool(const std::string&)>& file_exists);

// mmfs-export's DEST: split at the last ':' followed by '/'. nullopt when
// there is none, the file part is empty, or the path names the root group.
std::optional<H5Spec> split_export_dest(std::string_view arg);

// The path's last component ("/a/b" -> "b", "/" -> "").
std::string object_basename(std::string_view object);

}  // namespace mmfs::h5

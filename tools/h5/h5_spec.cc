#include "tools/h5/h5_spec.h"

namespace mmfs::h5 {

namespace {

std::string::size_type last_colon_slash(std::string_view arg) {
  for (auto at = arg.size(); at-- > 0;)
    if (arg[at] == ':' && at + 1 < arg.size() && arg[at + 1] == '/') return at;
  return std::string::npos;
}

std::string clean_object(std::string_view object) {
  while (object.size() > 1 && object.back() == '/') object.remove_suffix(1);
  return std::string(object);
}

}  // namespace

H5Spec split_import_source(std::string_view arg, const std::function<bool(const std::string&)>& file_exists) {
  const std::string whole(arg);
  if (file_exists(whole)) return H5Spec{whole, ""};
  const auto at = last_colon_slash(arg);
  if (at == std::string::npos) return H5Spec{whole, ""};
  return H5Spec{std::string(arg.substr(0, at)), clean_object(arg.substr(at + 1))};
}

std::optional<H5Spec> split_export_dest(std::string_view arg) {
  const auto at = last_colon_slash(arg);
  if (at == std::string::npos || at == 0) return std::nullopt;
  H5Spec spec{std::string(arg.substr(0, at)), clean_object(arg.substr(at + 1))};
  if (spec.object == "/") return std::nullopt;
  return spec;
}

std::string object_basename(std::string_view object) {
  while (object.size() > 1 && object.back() == '/') object.remove_suffix(1);
  auto slash = object.find_last_of('/');
  return std::string(slash == std::string_view::npos ? object : object.substr(slash + 1));
}

}  // namespace mmfs::h5

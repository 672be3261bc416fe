#include "tools/h5/hdf5_handle.h"

#include <fmt/format.h>

#include <vector>

namespace mmfs::h5 {

namespace {

struct StackEntry {
  std::string desc;   // the failing function's own description, e.g. "unable to open file"
  std::string minor;  // the library's category, e.g. "file signature not found"
};

herr_t collect(unsigned, const H5E_error2_t* err, void* data) {
  auto* entries = static_cast<std::vector<StackEntry>*>(data);
  StackEntry e;
  if (err->desc) e.desc = err->desc;
  char buf[256];
  if (H5Eget_msg(err->min_num, nullptr, buf, sizeof buf) > 0) e.minor = buf;
  entries->push_back(std::move(e));
  return 0;
}

}  // namespace

void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string hdf5_error_text() {
  std::vector<StackEntry> entries;
  // Downward: from the API call to the innermost function that detected the error.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &entries);
  H5Eclear2(H5E_DEFAULT);
  if (entries.empty()) return {};
  // The API entry says what failed; the innermost one says why. The layers in
  // between repeat the same thing in library-internal terms, so they are left out.
  const StackEntry& top = entries.front();
  const StackEntry& inner = entries.back();
  std::string text = top.desc;
  if (&inner != &top && !inner.desc.empty() && inner.desc != top.desc)
    text += (text.empty() ? "" : ": ") + inner.desc;
  if (!inner.minor.empty() && text.find(inner.minor) == std::string::npos)
    text += fmt::format(" ({})", inner.minor);
  return text;
}

void throw_hdf5_error(std::string_view what) {
  std::string why = hdf5_error_text();
  if (why.empty()) throw H5Error(std::string(what));
  throw H5Error(fmt::format("{}: {}", what, why));
}

}  // namespace mmfs::h5

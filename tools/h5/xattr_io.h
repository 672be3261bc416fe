// Extended attributes of files on the mount, with errors as values, and the
// daemon's explanation of a refusal.
//
// The tools talk to mmfs only through the mount: the schema is set and read
// with xattrs (docs/reference.md §4), and when mmfs refuses one (EINVAL for a bad layout,
// ENOSPC for a shape the volume cannot hold, ...) the errno alone says little;
// the daemon writes the reason to MOUNT/.mmfs/errors (docs/reference.md §1, §6), which
// daemon_explanation() fetches for the error message.
#pragma once

#include <string>
#include <vector>

namespace mmfs::h5 {

// errno 0 on success; otherwise `message` is one line such as
// "setxattr user.mmfs.shape: No space left on device".
struct XattrResult {
  int error = 0;
  std::string message;
  explicit operator bool() const { return error != 0; }
};

// On an open file descriptor (the array being created).
XattrResult set_xattr(int fd, const std::string& name, const std::string& value);
// On a path (directories, the array file to export); symlinks are followed.
XattrResult set_xattr(const std::string& path, const std::string& name, const std::string& value);
XattrResult get_xattr(const std::string& path, const std::string& name, std::string* value);
XattrResult list_xattrs(const std::string& path, std::vector<std::string>* names);

// The root of the filesystem holding `path` (an existing file or directory):
// the highest directory above it on the same device. Empty when `path`
// cannot be stat'ed.
std::string mount_root(const std::string& path);

// The daemon's explanation of the latest failure with errno `error`: the last
// line of MOUNT/.mmfs/errors that starts with its errno name (EINVAL, ...),
// preferring one that names `path` (relative to the mount). Empty when there
// is none (not an mmfs mount, or the line was not written).
std::string daemon_explanation(const std::string& path, int error);

}  // namespace mmfs::h5

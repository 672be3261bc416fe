// The one error type the import/export code throws for anything the user
// should read: an errno (0 when none applies) and a one-line reason. The
// command-line front ends print it as "mmfs-import: WHAT: reason" and exit 1;
// WHAT (the dataset or source being worked on) is added by whoever knows it.
#pragma once

#include <stdexcept>
#include <string>

namespace mmfs::h5 {

class ToolError : public std::runtime_error {
 public:
  ToolError(int error, const std::string& message) : std::runtime_error(message), error_(error) {}
  explicit ToolError(const std::string& message) : ToolError(0, message) {}
  int error() const { return error_; }

 private:
  int error_;
};

}  // namespace mmfs::h5

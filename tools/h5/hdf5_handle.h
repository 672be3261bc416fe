// RAII for HDF5 identifiers, and HDF5 failures as exceptions.
//
// The HDF5 C API reports failure as a negative return value and, by default,
// prints its whole error stack to stderr. The tools want one readable line
// instead, so silence_hdf5_errors() turns the automatic printing off and
// check_id()/check_ok() throw an H5Error whose message is "WHAT: <the
// library's explanation>", built from the error stack (the API call's
// description and the innermost cause, e.g. "unable to open file: file
// signature not found").
//
// Every identifier the tools open is held by a Handle<Close>, so an exception
// in the middle of an import or export closes everything it opened; an HDF5
// file is only flushed and closed cleanly when all its objects are closed.
//
// Not thread-safe, like the serial HDF5 library itself: every call goes
// through one thread (see pipeline.h).
#pragma once

#include <hdf5.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace mmfs::h5 {

class H5Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Turns off HDF5's automatic error printing for the default error stack.
void silence_hdf5_errors();
// The current error stack as one line (empty when the stack is empty). Clears
// the stack.
std::string hdf5_error_text();
// Throws H5Error("WHAT: <hdf5_error_text()>"), or just WHAT when the stack is empty.
[[noreturn]] void throw_hdf5_error(std::string_view what);

// Identifiers are 64-bit, herr_t is int: two names rather than overloads, so
// a literal never picks the wrong one.
inline hid_t check_id(hid_t id, std::string_view what) {
  if (id < 0) throw_hdf5_error(what);
  return id;
}
inline herr_t check_ok(herr_t status, std::string_view what) {
  if (status < 0) throw_hdf5_error(what);
  return status;
}

// Owns one identifier; closes it with Close (H5Fclose, H5Dclose, ...) unless
// it is negative. Move-only.
template <herr_t (*Close)(hid_t)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  // Takes `id` after checking it: throws H5Error naming WHAT when negative.
  Handle(hid_t id, std::string_view what) : id_(check_id(id, what)) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, -1);
    }
    return *this;
  }
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Closes now (errors from closing are ignored: nothing useful can be done
  // on the way out, and a failed flush shows up in the explicit close).
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = -1;
  }
  // Closes now and reports a failure (a file's final flush).
  void close(std::string_view what) {
    if (id_ < 0) return;
    herr_t status = Close(std::exchange(id_, -1));
    check_ok(status, what);
  }

 private:
  hid_t id_ = -1;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using Plist = Handle<H5Pclose>;
using Attribute = Handle<H5Aclose>;
using Object = Handle<H5Oclose>;

}  // namespace mmfs::h5

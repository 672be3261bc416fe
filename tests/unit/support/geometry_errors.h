// Test helpers: run a callable that must throw GeometryError, and return the
// error's kind or message (failing the test when nothing is thrown).
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "geometry/types.h"

namespace mmfs::geom::testing {

template <class F>
ErrorKind error_of(F&& f) {
  try {
    f();
  } catch (const GeometryError& e) {
    return e.kind();
  }
  FAIL("no GeometryError thrown");
  return ErrorKind::Invalid;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const GeometryError& e) {
    return e.what();
  }
  FAIL("no GeometryError thrown");
  return {};
}

}  // namespace mmfs::geom::testing

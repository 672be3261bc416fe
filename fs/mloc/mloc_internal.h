// Helpers shared by fs/mloc/mloc_image.cc and fs/mloc/mloc_query.cc (not an API).
#pragma once

#include <cstddef>
#include <future>

namespace mmfs::fs::mloc_detail {

// Runs f(i) for i in [0, n) on two threads (this one and one more): chunks
// decode and encode independently, and this machine class has two cores.
// Even i run on this thread and odd i on the other, so f may keep scratch
// per i % 2.
template <class F>
void on_two_threads(std::size_t n, F&& f) {
  if (n < 2) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  auto other = std::async(std::launch::async, [&] {
    for (std::size_t i = 1; i < n; i += 2) f(i);
  });
  for (std::size_t i = 0; i < n; i += 2) f(i);
  other.get();
}

}  // namespace mmfs::fs::mloc_detail

// [fuzz] fs/paths/control_path: mutants of the paths below /.mmfs through
// resolve_control over the built-in geometries. The LBNs and steps in them
// are untrusted numbers handed to the geometry: a refused path gets an errno
// and a reason, never an exception; a resolved one answers with blocks
// inside the device.
#include <catch2/catch.hpp>

#include <cerrno>
#include <memory>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "fs/paths/control_path.h"
#include "geometry/load.h"
#include "tests/unit/support/fuzz_support.h"
#include "tests/unit/support/path_test_support.h"

using namespace mmfs::fs;
using namespace mmfs::testing::fuzz;

using mmfs::fs::testing::split_path;

namespace {

}  // namespace

TEST_CASE("fuzz: resolve_control on mutated paths", "[fuzz][control_path]") {
  std::vector<std::unique_ptr<mmfs::geom::Geometry>> geometries;
  for (const char* name : {"atlas10k3", "mems-g2", "ssd"}) geometries.push_back(mmfs::geom::load_geometry(name));
  Mutator mutator(seed_of("resolve_control"),
                  {"", "geometry", "stats", "errors", "scrub", "boundaries", "boundaries/0", "boundaries/123456",
                   "adjacent/5000", "adjacent/5000/3", "adjacent/0/1", "equivalent/77", "rectangle/100"},
                  {"/", "adjacent", "boundaries", "equivalent", "rectangle"}, 1 << 10);
  Tally tally("resolve_control");
  for (std::size_t i = 0, n = iterations(4000); i < n; ++i) {
    const std::string path = mutator.next();
    const mmfs::geom::Geometry& g = *geometries[i % geometries.size()];
    tally.run(path, [&] {
      auto r = resolve_control(split_path(path), g);
      if (auto* e = std::get_if<PathError>(&r)) {
        tally.failed();
        tally.check(e->error == ENOENT || e->error == EINVAL || e->error == ERANGE || e->error == ENOTDIR ||
                        e->error == ENOTSUP,
                    "an errno outside ENOENT EINVAL ERANGE ENOTDIR ENOTSUP", path);
        tally.check(!e->message.empty(), "an error without a message", path);
        return;
      }
      tally.parsed();
      const ControlNode& node = std::get<ControlNode>(r);
      std::istringstream in(node.content);
      std::uint64_t a = 0, b = 0;
      switch (node.kind) {
        case ControlKind::Boundaries:
          in >> a >> b;
          tally.check(a <= b && b < g.capacity_sectors(), "a track outside the device", path);
          break;
        case ControlKind::Adjacent:
        case ControlKind::Equivalent:
          while (in >> a) tally.check(a < g.capacity_sectors(), "a block outside the device", path);
          break;
        default: break;
      }
    });
  }
  tally.finish();
}

// The daemon's virtual node table (daemon/virtual_nodes.h) and name cache
// (daemon/name_cache.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "daemon/name_cache.h"
#include "daemon/virtual_nodes.h"

using mmfs::daemon::kVirtualBit;
using mmfs::daemon::NameCache;
using mmfs::daemon::VirtualNode;
using mmfs::daemon::VirtualNodes;

TEST_CASE("VirtualNodes: a path keeps its number while the kernel holds it", "[virtual_nodes]") {
  VirtualNodes t;
  VirtualNode a = VirtualNode::of_array(7, 1, "a@");
  const auto root = t.intern(1, "a@", a);
  CHECK((root & kVirtualBit) != 0);
  CHECK(root != kVirtualBit);  // slot 0 is never given out
  CHECK(t.intern(1, "a@", a) == root);  // a second lookup of the same path
  VirtualNode slice = a;
  slice.components = {"slice"};
  const auto s = t.intern(root, "slice", slice);
  CHECK(s != root);
  VirtualNode got;
  REQUIRE(t.get(s, &got));
  CHECK(got.array == 7);
  CHECK(got.components == std::vector<std::string>{"slice"});
  CHECK_FALSE(t.get(7, &got));               // a real inode number
  CHECK_FALSE(t.get(kVirtualBit | 999, &got));  // never given out
  // Two lookups of a@: it lives until both are forgotten.
  t.forget(root, 1);
  CHECK(t.get(root, &got));
  t.forget(root, 1);
  CHECK_FALSE(t.get(root, &got));
  // Its slot serves the next new path; the other node is untouched.
  const auto b = t.intern(1, "b@", VirtualNode::of_array(8, 1, "b@"));
  CHECK(b == root);
  REQUIRE(t.get(b, &got));
  CHECK(got.array == 8);
  REQUIRE(t.get(s, &got));
  CHECK(got.array == 7);
  // Forgetting more than was looked up, or an unknown number, is harmless.
  t.forget(s, 10);
  t.forget(s, 1);
  t.forget(kVirtualBit | 12345, 1);
  CHECK_FALSE(t.get(s, &got));
}

TEST_CASE("VirtualNodes: the same name for another array is another node", "[virtual_nodes]") {
  VirtualNodes t;
  const auto first = t.intern(1, "x@", VirtualNode::of_array(5, 1, "x@"));
  // x was replaced by another array while the kernel held x@.
  const auto second = t.intern(1, "x@", VirtualNode::of_array(6, 1, "x@"));
  CHECK(second != first);
  VirtualNode got;
  REQUIRE(t.get(first, &got));
  CHECK(got.array == 5);
  REQUIRE(t.get(second, &got));
  CHECK(got.array == 6);
  CHECK(VirtualNode::of_directory(9).table);
  CHECK(VirtualNode::of_directory(9).home == 9);
  CHECK(VirtualNode::control().array == 0);
}

TEST_CASE("VirtualNodes: an array's nodes, stable ones, and a name that goes", "[virtual_nodes]") {
  VirtualNodes t;
  // Array 7 reached as a@ and (a hard link) as l@ in directory 1; array 8 as b@.
  const auto a = t.intern(1, "a@", VirtualNode::of_array(7, 1, "a@"));
  VirtualNode zarr = VirtualNode::of_array(7, 1, "a@");
  zarr.components = {"zarr"};
  const auto az = t.intern(a, "zarr", zarr);
  const auto l = t.intern(1, "l@", VirtualNode::of_array(7, 1, "l@"));
  const auto b = t.intern(1, "b@", VirtualNode::of_array(8, 1, "b@"));
  const auto table = t.intern(1, "d@", VirtualNode::of_directory(3));
  auto sorted = [](std::vector<mmfs::fs::Ino> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  CHECK(sorted(t.nodes_of(7)) == sorted({a, az, l}));
  CHECK(t.nodes_of(8) == std::vector<mmfs::fs::Ino>{b});
  CHECK(t.nodes_of(3).empty());  // a directory's views are no array's
  // Stable: only what the daemon marks, and never after the slot is freed.
  CHECK_FALSE(t.stable(az));
  t.set_stable(az, true);
  CHECK(t.stable(az));
  CHECK_FALSE(t.stable(table));
  // a is unlinked: what was reached as a@ is stale, l@ and b@ are untouched.
  CHECK(t.retire(1, "a@") == std::optional<mmfs::fs::Ino>(7));
  VirtualNode got;
  CHECK(t.find(a, &got) == ESTALE);
  CHECK(t.find(az, &got) == ESTALE);
  CHECK_FALSE(t.get(az, &got));
  CHECK(t.find(l, &got) == 0);
  CHECK(t.find(b, &got) == 0);
  CHECK_FALSE(t.retire(1, "a@").has_value());  // nothing held by that name now
  CHECK_FALSE(t.retire(1, "d@").has_value());  // a directory's views: never retired here
  CHECK_FALSE(t.retire(1, "nothing@").has_value());
  // A new a@ (another array now, or the same one again) is a fresh node.
  const auto again = t.intern(1, "a@", VirtualNode::of_array(7, 1, "a@"));
  CHECK(again != a);
  CHECK(t.find(again, &got) == 0);
  // The retired nodes live until the kernel forgets them, then leave nodes_of.
  CHECK(t.nodes_of(7).size() == 4);
  t.forget(az, 1);
  t.forget(a, 1);
  CHECK(sorted(t.nodes_of(7)) == sorted({l, again}));
  t.forget(l, 1);
  t.forget(again, 1);
  CHECK(t.nodes_of(7).empty());
  CHECK(t.find(again, &got) == ENOENT);
}

TEST_CASE("NameCache: paths from the names the kernel used", "[virtual_nodes]") {
  NameCache names;
  CHECK(names.path_of(mmfs::fs::kRootIno) == "/");
  CHECK_FALSE(names.path_of(5));
  names.remember(5, mmfs::fs::kRootIno, "d");
  names.remember(6, 5, "a");
  CHECK(names.path_of(6) == "/d/a");
  names.remember(6, mmfs::fs::kRootIno, "moved");  // a rename (or another hard link)
  CHECK(names.path_of(6) == "/moved");
  CHECK(names.name_of(6)->second == "moved");
  names.remember(8, 9, "orphan");  // its parent was never seen
  CHECK_FALSE(names.path_of(8));
  names.remember(10, 11, "loop");  // a cycle the cache was left with stays bounded
  names.remember(11, 10, "loop");
  CHECK(names.path_of(10).has_value());
}

// The daemon's virtual node table (daemon/virtual_nodes.h) and name cache
// (daemon/name_cache.h).
#include <catch2/catch.hpp>

#include "daemon/name_cache.h"
#include "daemon/virtual_nodes.h"

using mmfs::daemon::kVirtualBit;
using mmfs::daemon::NameCache;
using mmfs::daemon::VirtualNode;
using mmfs::daemon::VirtualNodes;

TEST_CASE("VirtualNodes: a path keeps its number while the kernel holds it", "[virtual_nodes]") {
  VirtualNodes t;
  VirtualNode a = VirtualNode::of_array(7, 1);
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
  const auto b = t.intern(1, "b@", VirtualNode::of_array(8, 1));
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
  const auto first = t.intern(1, "x@", VirtualNode::of_array(5, 1));
  // x was replaced by another array while the kernel held x@.
  const auto second = t.intern(1, "x@", VirtualNode::of_array(6, 1));
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

// The daemon's loaded arrays (daemon/loaded_arrays.h): an array stays loaded
// while anything holds it, the most recently used ones also when nothing
// does, and a forgotten inode is found no more.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "daemon/loaded_arrays.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using mmfs::daemon::LoadedArrays;

TEST_CASE("loaded arrays: the recent ones stay loaded, older ones go when nothing holds them", "[daemon]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  LoadedArrays loaded(2);
  std::vector<Ino> inos;
  for (int i = 0; i < 4; ++i) {
    auto a = create_array(m, "a" + std::to_string(i), make_schema({8}, "float64", "naive"));
    inos.push_back(a->ino());
    loaded.add(a->ino(), a);
  }  // nothing but the registry holds them now
  CHECK(loaded.recent_count() == 2);
  CHECK(loaded.find(inos[0]) == nullptr);  // pushed out of the recent ones, and nobody held it
  CHECK(loaded.find(inos[1]) == nullptr);
  REQUIRE(loaded.find(inos[2]) != nullptr);
  REQUIRE(loaded.find(inos[3]) != nullptr);
  CHECK(loaded.all().size() == 2);

  // A held array stays loaded however old; finding one makes it the most recent.
  auto held = create_array(m, "held", make_schema({8}, "float64", "naive"));
  loaded.add(held->ino(), held);  // recent: held, a3
  CHECK(loaded.peek(inos[2]) == nullptr);  // pushed out, held by nobody
  auto another = create_array(m, "another", make_schema({8}, "float64", "naive"));
  const Ino another_ino = another->ino();
  loaded.add(another_ino, another);  // recent: another, held
  another.reset();
  auto third = create_array(m, "third", make_schema({8}, "float64", "naive"));
  loaded.add(third->ino(), third);  // recent: third, another; held is out of the list but held
  third.reset();
  CHECK(loaded.find(held->ino()) == held);  // recent: held, third
  CHECK(loaded.peek(another_ino) == nullptr);

  // peek does not count as a use.
  LoadedArrays two(1);
  auto x = create_array(m, "x", make_schema({8}, "float64", "naive"));
  auto y = create_array(m, "y", make_schema({8}, "float64", "naive"));
  const Ino xi = x->ino(), yi = y->ino();
  two.add(xi, x);
  two.add(yi, y);
  x.reset();
  y.reset();
  CHECK(two.peek(xi) == nullptr);  // the recent list holds one: y
  REQUIRE(two.peek(yi) != nullptr);

  // A forgotten inode is found no more, even while someone holds its array.
  auto z = create_array(m, "z", make_schema({8}, "float64", "naive"));
  two.add(z->ino(), z);
  two.forget(z->ino());
  CHECK(two.find(z->ino()) == nullptr);
  CHECK(two.recent_count() == 0);
}

TEST_CASE("loaded arrays: after a member failure each idle array is let go once, a held one when it is idle",
          "[daemon]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  LoadedArrays loaded(4);
  auto idle = create_array(m, "idle", make_schema({8}, "float64", "naive"));
  auto held = create_array(m, "held", make_schema({8}, "float64", "naive"));
  const Ino idle_ino = idle->ino(), held_ino = held->ino();
  std::weak_ptr<ArrayFile> idle_weak = idle;
  loaded.add(idle_ino, idle, 0);
  loaded.add(held_ino, held, 0);
  idle.reset();  // only the recent list holds it now

  // No failure since they were loaded: both are found.
  REQUIRE(loaded.find(idle_ino, 0) != nullptr);
  REQUIRE(loaded.find(held_ino, 0) == held);

  // One failure: the idle array is let go (unloaded, not just hidden), the
  // held one is kept as it is.
  CHECK(loaded.find(idle_ino, 1) == nullptr);
  CHECK(idle_weak.expired());
  CHECK(loaded.find(held_ino, 1) == held);
  CHECK(loaded.find(held_ino, 1) == held);  // still held: still kept, and still due

  // Loaded afresh after the failure, it stays, however often it is found.
  auto reloaded = create_array(m, "reloaded", make_schema({8}, "float64", "naive"));
  const Ino reloaded_ino = reloaded->ino();
  loaded.add(reloaded_ino, reloaded, 1);
  reloaded.reset();
  CHECK(loaded.find(reloaded_ino, 1) != nullptr);
  CHECK(loaded.find(reloaded_ino, 1) != nullptr);

  // The held array, once its holder lets go, goes at its next find.
  std::weak_ptr<ArrayFile> held_weak = held;
  held.reset();
  CHECK(loaded.find(held_ino, 1) == nullptr);
  CHECK(held_weak.expired());
  // A second failure lets the reloaded one go too.
  CHECK(loaded.find(reloaded_ino, 2) == nullptr);
  CHECK(loaded.all().empty());
}

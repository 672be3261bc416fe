// The precompiled header of mmfs-unit-tests (tests/meson.build says why).
// System headers only: a header of mmfs here would rebuild every test file
// whenever it changed. Test files still include what they use; this file only
// makes those includes cheap. (No include guard: a PCH is its own main file.)

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <roaring/roaring.hh>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

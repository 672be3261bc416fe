// The Catch2 main() of mmfs-unit-tests; every other tests/unit/<folder>/test_*.cc holds test cases.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

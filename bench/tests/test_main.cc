// The Catch2 main() of mmfs-bench-tests; every other bench/tests/test_*.cc holds test cases.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

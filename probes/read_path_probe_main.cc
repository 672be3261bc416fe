// mmfs-read-path-probe: the read-path probe (read_path_probe.h) in a process
// of its own, run by `mmfs-geom measure` and `mkfs.mmfs -g measure`
// (read_path_client.h, which describes the protocol): the measured
// geometry's JSON on standard input, the result's JSON on standard output.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "probes/read_path_client.h"
#include "probes/read_path_probe.h"

namespace {

constexpr const char* kUsage =
    "usage: mmfs-read-path-probe [--samples N] [--verbose] < GEOMETRY.json\n"
    "Times the daemon's read path on a volume in memory of the geometry (what `mmfs-geom measure`\n"
    "and `mkfs.mmfs -g measure` run; not meant to be run by hand) and prints the result as JSON.\n";

int reply(const nlohmann::json& j, int status) {
  fmt::print("{}\n", j.dump());
  return std::fflush(stdout) == 0 ? status : 1;
}

int fail(int error, const std::string& message) { return reply({{"error", error}, {"message", message}}, 1); }

}  // namespace

int main(int argc, char** argv) {
  mmfs::probes::ReadPathProbeOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--verbose") {
      options.verbose = true;
    } else if (arg == "--samples" && i + 1 < argc) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 1000) {
        fmt::print(stderr, "mmfs-read-path-probe: --samples takes 1..1000, not '{}'\n", argv[i]);
        return 2;
      }
      options.samples = int(n);
    } else if (arg == "--help" || arg == "-h") {
      fmt::print("{}", kUsage);
      return 0;
    } else {
      fmt::print(stderr, "{}", kUsage);
      return 2;
    }
  }
  nlohmann::json geometry;
  try {
    std::ostringstream text;
    text << std::cin.rdbuf();
    geometry = nlohmann::json::parse(text.str());
  } catch (const std::exception& e) {
    return fail(EINVAL, fmt::format("the read-path probe's geometry is not JSON: {}", e.what()));
  }
  mmfs::probes::ReadPathProbeResult result;
  std::string message;
  if (int r = mmfs::probes::probe_read_path(geometry, options, &result, &message)) return fail(r, message);
  return reply({{"read_path", mmfs::probes::read_path_result_to_json(result)}}, 0);
}

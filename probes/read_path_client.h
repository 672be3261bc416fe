// Runs the read-path probe (read_path_probe.h) in a process of its own: the
// probe is the daemon's own code, so it lives in an executable of its own,
// mmfs-read-path-probe (read_path_probe_main.cc), and the programs that
// measure a machine (mkfs.mmfs, mmfs-geom) start it instead of linking the
// daemon.
//
// The protocol: the measured geometry's JSON on the child's standard input;
// `--samples N` and `--verbose` as its arguments (its progress lines go to
// the standard error it shares with the caller); on its standard output one
// JSON object, {"read_path": RESULT} with exit status 0, or {"error": ERRNO,
// "message": TEXT} with exit status 1.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "probes/read_path_probe.h"

namespace mmfs::probes {

inline constexpr const char* kReadPathProbeProgram = "mmfs-read-path-probe";

// A result and its JSON, every field at full precision (the samples are
// rounded where a geometry keeps them, host_probe.cc).
nlohmann::json read_path_result_to_json(const ReadPathProbeResult& result);
ReadPathProbeResult read_path_result_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception

// Where mmfs-read-path-probe is looked for, in order: beside the calling
// executable in the build tree (<its dir>/../probes/), beside it as
// installed (<its dir>/), then the directories of PATH.
std::vector<std::string> read_path_probe_candidates();

// probe_read_path in mmfs-read-path-probe: 0, or an errno with *message
// (the probe's own, or why the program could not be found or run, naming
// where it was looked for).
int run_read_path_probe(const nlohmann::json& geometry, const ReadPathProbeOptions& options,
                        ReadPathProbeResult* out, std::string* message);

}  // namespace mmfs::probes

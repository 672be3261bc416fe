// The markdown of `mmfs-bench modeled`, made from its JSON document (so the
// tables show exactly what the JSON holds): per profile, the modeled ms of
// every workload on every target with its spread and its ratio against the
// best baseline, the papers' per-cell measure for beams and cubes, and the
// bytes read per byte useful.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mmfs::bench {

std::string workload_markdown(const nlohmann::json& doc);

}  // namespace mmfs::bench

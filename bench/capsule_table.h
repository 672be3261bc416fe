// `mmfs-bench capsule`: the MEMS paper's Table 5 (§5.2.6) in modeled time: a
// table of records scanned whole, by one attribute, by two, and 100 records
// of one attribute, in the row-major "normal" layout of 8 KB pages and in
// capsules (layouts/capsule.h), each read planned as the daemon plans it and
// costed by the geometry's service-time model.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mmfs::bench {

struct CapsuleTableOptions {
  std::string profile = "mems-g2";
  std::uint64_t records = 10'000'000;
  std::vector<std::uint32_t> attributes{8, 32, 15, 16};  // bytes per record of a1..a4
  std::uint32_t page_bytes = 8192;   // the normal layout's page
  std::uint32_t page_records = 115;  // records per page (the paper's 115 of 71 bytes)
  std::uint64_t paper_records = 60;  // the paper's records per capsule (its CapsuleResolve is not given)
  std::uint32_t samples = 500;       // random short reads averaged
  std::uint64_t seed = 2003;
};

struct CapsuleTableReport {
  std::string markdown;
  nlohmann::json json;
};

CapsuleTableReport run_capsule_table(const CapsuleTableOptions& options);

}  // namespace mmfs::bench

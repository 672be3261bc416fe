// mmfs-bench freebw: the MEMS paper's §5.1 free-bandwidth experiment (Figure 4,
// Table 4) on the G2 MEMStore: a background scan that reads the whole device
// in the free row-pass slots of a random 4 KB foreground workload
// (geometry/free_bandwidth.h), for each (p, M), beside the paper's minutes.
//
// The simulation counts foreground requests; the paper reports minutes at a
// foreground rate it does not state. Minutes here come from ONE rate for all
// rows: given with --rate, or calibrated so that p = 10, M = 0 reaches 95 % at
// the paper's 1120 minutes. Ratios between rows do not depend on the rate.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "geometry/free_bandwidth.h"

namespace mmfs::bench {

struct FreeBandwidthOptions {
  std::string profile = "mems-g2";
  std::vector<std::uint32_t> p = {10, 20};
  std::vector<std::uint32_t> M = {0, 5};
  std::uint64_t seed = 2003;
  std::uint32_t align = 1;             // foreground starts: multiples of this many sectors
  bool quick = false;                  // a device of 100 cylinders instead of 2500
  double rate = 0.0;                   // foreground requests per second; 0: calibrated on p=10, M=0
  bool one_column_per_square = true;   // a square's tip reads one column per pass (MEMS §2.2)
  std::string command;                 // recorded in the report
};

struct FreeBandwidthRow {
  geom::FreeScanResult result;
  double host_seconds = 0.0;
  bool calibration_only = false;  // run only to calibrate the rate (not asked for)
};

struct FreeBandwidthReport {
  FreeBandwidthOptions options;
  std::vector<FreeBandwidthRow> rows;
  double rate = 0.0;  // foreground requests per second behind every minute figure
  std::string rate_source;
  double host_seconds = 0.0;
  std::string markdown() const;
  nlohmann::json json() const;
};

FreeBandwidthReport run_free_bandwidth(const FreeBandwidthOptions& options);
// DIR/mmfs-bench-freebw.md and .json.
void write_free_bandwidth(const FreeBandwidthReport& report, const std::string& dir);

}  // namespace mmfs::bench

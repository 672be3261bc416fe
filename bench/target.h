// A benchmark target of `mmfs-bench modeled`: one placement of an array on a
// modeled device — an mmfs layout exactly as the daemon builds it, or a model
// of how a library file (h5py, zarr, numpy) would sit on the same disk — that
// turns a selection into the device requests it costs and the modeled time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "layouts/io_plan.h"
#include "layouts/selection.h"

namespace mmfs::bench {

class Target {
 public:
  virtual ~Target() = default;
  // Short name used in the JSON and as a column key ("mmfs-multimap", "contiguous").
  virtual std::string name() const = 0;
  // "mmfs" or "baseline".
  virtual std::string kind() const = 0;
  // Column heading of the markdown tables.
  virtual std::string label() const = 0;
  // The requests the selection needs, with modeled_ms filled in (idle device).
  virtual layouts::IoPlan plan(const layouts::Selection& selection) const = 0;
  // What the placement is (cell, basic cube, extents, unit of a request...).
  virtual nlohmann::json describe() const = 0;
};

}  // namespace mmfs::bench

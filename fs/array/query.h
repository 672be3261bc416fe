// Answering a query view (docs/reference.md §5 `A@/query/COND/...`, `D@/query/...`):
// each atom's rows from its array (index or scan), combined along the
// condition into sure rows and candidates (indexes/evaluate.h), candidates
// checked against the data of every array the condition names, then the
// result in the view's output format. Glue over ArrayFile and indexes/.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fs/array/array_file.h"
#include "fs/array/view_types.h"

namespace mmfs::fs {

struct QueryArrays {
  std::shared_ptr<ArrayFile> self;  // the array of A@ (null for a directory's D@)
  std::map<std::string, std::shared_ptr<ArrayFile>> named;  // every NAME the condition uses
  bool table = false;  // a directory's query: every array is 1-D
};

struct QueryOutcome {
  std::string content;   // the view file's bytes
  nlohmann::json plan;   // index_bytes, data_bytes, candidates, matches, ...; with `model`
                         // also requests and modeled_ms (A@/plan/query/...)
};

// EINVAL: an unnamed atom in a directory query, arrays of different shapes;
// errors of the arrays' reads as they come. `model`: also model the device
// time of what was read (a second pass over the candidates' cells, so only
// for plan views).
int run_query(const QueryView& view, const QueryArrays& arrays, bool model, QueryOutcome* out, std::string* message);

}  // namespace mmfs::fs

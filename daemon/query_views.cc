// Query views of the mounted filesystem (docs/reference.md §5): `A@/query/...` and its
// plan, and a directory's query views `D@/query/COND/...` (served by
// table_stat, daemon/table_ops.cc). The condition's
// names are resolved in the directory that holds A (or in D itself).
#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "daemon/filesystem.h"
#include "fs/array/query.h"

namespace mmfs::daemon {

namespace {
std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int Filesystem::query_content(Ino vino, Ino dir, const std::shared_ptr<fs::ArrayFile>& self,
                              const fs::QueryView& view, bool plan, const Caller& who, QueryCall call,
                              std::string* content, std::uint64_t* size, std::string* message) {
  if (call == QueryCall::Getattr) {  // the file is open: its size is the open's
    std::lock_guard lock(qmu_);
    if (auto it = open_query_sizes_.find(vino); it != open_query_sizes_.end()) {
      *size = it->second;
      return 0;
    }
  }
  fs::QueryArrays arrays;
  arrays.self = self;
  arrays.table = self == nullptr;
  std::uint64_t generations = self ? self->generation() : 0;
  // The kernel checked the path to this view (A's own mode, or D's); the
  // arrays a condition names are reached here, past it. Each must be
  // readable by the caller, and their directory searchable, before any
  // result (a cached one included) is given: else a condition on another
  // user's array would choose which of A's values come back.
  bool searched = false;
  for (const std::string& name : indexes::names(view.condition)) {
    if (name.empty()) continue;
    if (!searched) {
      if (int r = check_searchable(who, dir, message)) return r;
      searched = true;
    }
    auto child = volume_->metadata().lookup(dir, name);
    if (!child) {
      *message = fmt::format("'{}' names no entry of the directory (a condition's NAME is an array beside the "
                             "queried one)",
                             name);
      return ENOENT;
    }
    if (int r = check_access(who, *child, R_OK, name, message)) return r;
    auto schema = stored_schema(*child);
    if (!schema || schema->shape.empty()) {
      *message = fmt::format("'{}' is not an array file", name);
      return EINVAL;
    }
    std::shared_ptr<fs::ArrayFile> array;
    if (int r = array_for(*child, &array, message)) return r;
    generations += array->generation();
    arrays.named[name] = std::move(array);
  }
  const std::string key =
      fmt::format("{}|{}|{}|{}{}", dir, self ? self->ino() : 0, generations, plan ? "plan/" : "", view.spelling);
  const std::int64_t now = steady_ns();
  {
    std::lock_guard lock(qmu_);
    for (auto it = query_results_.begin(); it != query_results_.end();)
      it = now - it->second.at_ns > kQueryResultMs * 1000000 ? query_results_.erase(it) : std::next(it);
    if (auto it = query_results_.find(key); it != query_results_.end()) {
      *size = it->second.content.size();
      if (call == QueryCall::Open) {
        *content = std::move(it->second.content);
        query_results_.erase(it);  // taken: the next open computes afresh
        open_query_sizes_[vino] = *size;
      }
      return 0;
    }
  }
  fs::QueryOutcome outcome;
  try {
    if (int r = fs::run_query(view, arrays, plan, &outcome, message)) return r;
  } catch (const std::bad_alloc&) {
    *message = "the query's result does not fit in memory";
    return ENOMEM;
  }
  std::string result = plan ? outcome.plan.dump() + "\n" : std::move(outcome.content);
  *size = result.size();
  std::lock_guard lock(qmu_);
  // Timed from now, not from when the query started: a long scan's result
  // must still be there for the open that follows its lookup.
  if (call == QueryCall::Lookup) query_results_[key] = QueryResult{std::move(result), steady_ns()};
  if (call == QueryCall::Open) {
    open_query_sizes_[vino] = *size;
    *content = std::move(result);
  }
  return 0;
}

}  // namespace mmfs::daemon

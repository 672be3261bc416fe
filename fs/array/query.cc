#include "fs/array/query.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <fmt/ranges.h>

#include "indexes/disjunctions.h"
#include "indexes/evaluate.h"
#include "indexes/scan.h"
#include "layouts/plod.h"

namespace mmfs::fs {

using indexes::Atom;
using indexes::Bitmap;
using indexes::Estimate;
using indexes::KeySet;

namespace {

// One array the condition touches, with its atoms.
struct Column {
  std::shared_ptr<ArrayFile> array;
  indexes::ValueType type{};
  std::vector<const Atom*> atoms;
  std::vector<KeySet> keys;
  std::string values;  // its elements at the candidate rows
};

// The array a NAME names: the queried one (empty), or one of the directory's.
std::shared_ptr<ArrayFile> array_named(const std::string& name, const QueryArrays& arrays) {
  if (name.empty()) return arrays.self;
  auto it = arrays.named.find(name);
  return it == arrays.named.end() ? nullptr : it->second;
}

std::string render(const QueryView& view, const Bitmap& rows, ArrayFile* self, std::uint64_t universe,
                   QueryCost* cost, int* error, std::string* message) {
  switch (view.output) {
    case QueryView::Output::Count: return fmt::format("{}\n", rows.cardinality());
    case QueryView::Output::Coords: {
      // Little-endian host, as the array bytes; written in place (operator
      // new's storage is aligned for uint64_t).
      std::string out(rows.cardinality() * 8, '\0');
      if (!out.empty()) rows.toUint64Array(reinterpret_cast<std::uint64_t*>(out.data()));
      return out;
    }
    case QueryView::Output::Mask: return indexes::portable_mask(rows, universe);
    case QueryView::Output::Values: {
      std::string out;
      if (int r = self->gather_rows(rows, &out, cost, message)) {
        *error = r;
        return {};
      }
      if (view.plod_bytes) {
        const ArraySchema s = self->schema();
        layouts::apply_plod({reinterpret_cast<std::byte*>(out.data()), out.size()}, s.dtype.itemsize,
                   s.dtype.name == "float64", view.plod_bytes);
      }
      return out;
    }
  }
  return {};
}

}  // namespace

int run_query(const QueryView& view_in, const QueryArrays& arrays, bool model, QueryOutcome* out,
              std::string* message) {
  QueryView view = view_in;
  std::map<const Atom*, KeySet> united;
  indexes::merge_disjunctions(
      &view.condition,
      [&](const std::string& name) -> std::optional<indexes::ValueType> {
        auto array = array_named(name, arrays);
        if (!array) return std::nullopt;
        return array->value_type();
      },
      &united);
  // Every atom's array, and the shape they share.
  std::map<std::string, Column> columns;
  std::vector<std::uint64_t> shape;
  if (arrays.self) shape = arrays.self->shape();
  int err = 0;
  indexes::for_each_atom(view.condition, [&](const Atom& a) {
    if (err) return;
    std::shared_ptr<ArrayFile> array;
    if (a.name.empty()) {
      array = arrays.self;
      if (!array) {
        *message = fmt::format("the atom at position {} names no array: in a directory's query every atom names "
                               "one of its arrays (e.g. K2==1)",
                               a.position);
        err = EINVAL;
        return;
      }
    } else {
      auto it = arrays.named.find(a.name);
      if (it == arrays.named.end()) {
        *message = fmt::format("'{}' is not an array of the directory", a.name);
        err = ENOENT;
        return;
      }
      array = it->second;
    }
    std::vector<std::uint64_t> s = array->shape();
    if (arrays.table && s.size() != 1) {
      *message = fmt::format("'{}' has shape {}: a directory's query needs equal-length 1-D arrays (a table)",
                             a.name, fmt::join(s, ","));
      err = EINVAL;
      return;
    }
    if (shape.empty()) shape = s;
    if (s != shape) {
      *message = fmt::format("'{}' has shape {}, not the query's {}", a.name, fmt::join(s, ","), fmt::join(shape, ","));
      err = EINVAL;
      return;
    }
    Column& c = columns[a.name];
    if (!c.array) {
      c.array = array;
      c.type = array->value_type();
    }
    c.atoms.push_back(&a);
    auto merged = united.find(&a);
    c.keys.push_back(merged != united.end() ? merged->second : indexes::atom_keys(a, c.type));
  });
  if (err) return err;
  if (view.box && !arrays.self) {
    *message = "a box needs an array";
    return EINVAL;
  }
  std::uint64_t rows = 1;
  for (std::uint64_t s : shape) rows *= s;
  // Values lost with a member leave no true answer over them (the index
  // still holds what they were). The box bounds every array alike.
  for (const auto& [name, c] : columns)
    if (int r = c.array->check_query_scope(view.box, message)) return r;
  if (arrays.self)
    if (int r = arrays.self->check_query_scope(view.box, message)) return r;

  // One atom whose bins are all aligned: its count is in the index header
  // (per-bin row counts), no bitmap is read.
  if (view.output == QueryView::Output::Count && !view.box &&
      view.condition.kind == indexes::Condition::Kind::Atom && columns.size() == 1) {
    const Column& c = columns.begin()->second;
    if (auto n = c.array->exact_count(c.keys[0])) {
      out->content = fmt::format("{}\n", *n);
      out->plan = {{"index_bytes", 0}, {"index_bytes_from_device", 0}, {"data_bytes", 0}, {"requests", 0},
                   {"modeled_ms", 0.0}, {"candidates", 0}, {"matches", *n}, {"scanned", false},
                   {"from_header", true}};
      return 0;
    }
  }
  QueryCost cost;
  // One atom's values or coords from an mloc image: matched and answered in
  // one pass. (A plan view takes the general path, whose reads it models.)
  const bool values_out = view.output == QueryView::Output::Values;
  if ((values_out || view.output == QueryView::Output::Coords) && !view.box && !model &&
      view.condition.kind == indexes::Condition::Kind::Atom && columns.size() == 1 &&
      columns.begin()->second.array == arrays.self) {
    std::string answer;
    const int r = arrays.self->mloc_query_output(columns.begin()->second.keys[0], values_out, &answer, &cost, message);
    if (r != ENOTSUP) {
      if (r) return r;
      const ArraySchema s = arrays.self->schema();
      if (values_out && view.plod_bytes)
        layouts::apply_plod({reinterpret_cast<std::byte*>(answer.data()), answer.size()}, s.dtype.itemsize,
                   s.dtype.name == "float64", view.plod_bytes);
      const std::uint64_t matches = answer.size() / (values_out ? s.dtype.itemsize : 8);
      out->plan = {{"index_bytes", 0},  {"index_bytes_from_device", 0}, {"data_bytes", cost.data_bytes},
                   {"index_requests", 0}, {"candidates", 0},              {"matches", matches},
                   {"scanned", false}};
      out->content = std::move(answer);
      return 0;
    }
  }
  std::map<const Atom*, Estimate> estimates;
  for (auto& [name, c] : columns) {
    std::vector<Estimate> est;
    if (int r = c.array->atom_estimates(c.keys, view.box, &est, &cost, message)) return r;
    for (std::size_t i = 0; i < c.atoms.size(); ++i) estimates[c.atoms[i]] = std::move(est[i]);
  }
  // Each atom is a node of its own in the tree: its estimate is used once.
  auto atom_estimate = [&](const Atom& a) { return std::move(estimates.at(&a)); };
  Estimate e;
  std::optional<std::uint64_t> counted;  // a count the estimates decided alone
  if (view.output == QueryView::Output::Count && !view.box) {
    auto r = indexes::combine_for_count(view.condition, rows, atom_estimate);
    if (auto* n = std::get_if<std::uint64_t>(&r)) {
      counted = *n;
    } else {
      e = std::move(std::get<Estimate>(r));
    }
  } else {
    e = indexes::combine(view.condition, rows, atom_estimate);
  }
  if (view.box) {  // a NOT reaches outside the box: bring it back in
    const Bitmap inside = selection_rows(*view.box, shape);
    e.sure &= inside;
    e.maybe &= inside;
  }
  const std::uint64_t candidates = e.maybe.cardinality();
  if (candidates) {
    for (auto& [name, c] : columns)
      if (int r = c.array->gather_rows(e.maybe, &c.values, &cost, message)) return r;
    // The condition on the candidates' values, a column at a time: each
    // atom is one typed scan of its array's values (indexes/scan.h), the
    // tree is set algebra over candidate positions 0..m-1.
    const std::vector<std::uint64_t> maybe = indexes::rows_of(e.maybe);
    const std::uint64_t m = maybe.size();
    std::function<Bitmap(const indexes::Condition&)> matching = [&](const indexes::Condition& c) -> Bitmap {
      using Kind = indexes::Condition::Kind;
      switch (c.kind) {
        case Kind::Atom: {
          const Column& col = columns.at(c.atom.name);
          const std::size_t k = std::size_t(std::find(col.atoms.begin(), col.atoms.end(), &c.atom) - col.atoms.begin());
          Bitmap out;
          indexes::scan_keys(col.type, col.keys[k], reinterpret_cast<const std::byte*>(col.values.data()),
                             std::size_t(m), 0, &out);
          return out;
        }
        case Kind::Not: return indexes::range_bitmap(0, m) - matching(c.children.at(0));
        case Kind::And: {
          Bitmap out = matching(c.children.at(0));
          for (std::size_t i = 1; i < c.children.size() && !out.isEmpty(); ++i) out &= matching(c.children[i]);
          return out;
        }
        case Kind::Or: {
          Bitmap out;
          for (const indexes::Condition& child : c.children) out |= matching(child);
          return out;
        }
      }
      return {};
    };
    const std::vector<std::uint64_t> at = indexes::rows_of(matching(view.condition));
    std::vector<std::uint64_t> hits(at.size());
    for (std::size_t i = 0; i < at.size(); ++i) hits[i] = maybe[at[i]];
    e.sure.addMany(hits.size(), hits.data());
  }
  out->content = counted ? fmt::format("{}\n", *counted) : render(view, e.sure, arrays.self.get(), rows, &cost, &err,
                                                                     message);
  if (err) return err;
  out->plan = {{"index_bytes", cost.index_bytes},
               {"index_bytes_from_device", cost.index_read_bytes},
               {"data_bytes", cost.data_bytes},
               {"index_requests", cost.requests},
               {"candidates", candidates},
               {"matches", counted ? *counted : e.sure.cardinality()},
               {"scanned", cost.scanned}};
  if (!model) return 0;
  // The modeled device time of what was read: the index's requests, then
  // the data's (the cells of the candidates and of the values read, or the
  // scan).
  layouts::IoPlan modeled;
  if (!cost.index_trace.empty()) modeled.batches.push_back(layouts::IoBatch{cost.index_trace});
  for (auto& [name, c] : columns) {
    layouts::IoPlan data;
    if (cost.scanned) {
      data = c.array->scan_plan(view.box);
    } else {
      Bitmap need = e.maybe;
      if (view.output == QueryView::Output::Values && c.array == arrays.self) need |= e.sure;
      if (need.isEmpty()) continue;
      data = c.array->rows_plan(need);
    }
    modeled.batches.insert(modeled.batches.end(), data.batches.begin(), data.batches.end());
  }
  double modeled_ms = 0;
  if (arrays.self || !columns.empty())
    modeled_ms = layouts::model_plan(modeled, (arrays.self ? arrays.self : columns.begin()->second.array)->geometry());
  std::uint64_t requests = 0;
  for (const auto& b : modeled.batches) requests += b.requests.size();
  out->plan["requests"] = requests;
  out->plan["modeled_ms"] = modeled_ms;
  return 0;
}

}  // namespace mmfs::fs

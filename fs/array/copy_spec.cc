#include "fs/array/copy_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <limits>

namespace mmfs::fs {

namespace {

constexpr std::array<std::string_view, 6> kCopyKeys{"order", "cell", "basic_cube", "priority", "chunk", "compress"};

constexpr std::string_view kGrammar =
    "none, or LAYOUT[:KEY=VALUE...] separated by ';' with KEY one of order, cell, basic_cube, priority, chunk, "
    "compress (e.g. naive:order=2,1,0;hilbert:cell=16,16,4)";

SchemaResult fail(int error, std::string message) { return SchemaResult{error, std::move(message)}; }

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// The schema a copy's attributes are parsed into: the array's, its
// placement attributes back to their defaults.
ArraySchema placement_base(const ArraySchema& base) {
  ArraySchema s = base;
  const ArraySchema defaults;
  s.copies.clear();
  s.order.clear();
  s.cell.clear();
  s.basic_cube.clear();
  s.chunk.clear();
  s.priority = defaults.priority;
  s.compress = defaults.compress;
  s.table_part.reset();
  s.members.clear();
  return s;
}

CopySpec spec_of(const ArraySchema& s) {
  CopySpec c;
  c.layout = s.layout;
  c.order = s.order;
  c.cell = s.cell;
  c.basic_cube = s.basic_cube;
  c.priority = s.priority;
  c.chunk = s.chunk;
  c.compress = s.compress;
  return c;
}

// User text in a one-line message: printable ASCII as is, other bytes as
// \xNN (a copy list may hold any byte, and the message goes to .mmfs/errors),
// at most 200 bytes of it.
std::string shown(std::string_view v) {
  std::string out = "'";
  for (std::size_t i = 0; i < v.size() && i < 200; ++i) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c == '\\') out += "\\\\";
    else if (c >= 0x20 && c < 0x7f) out += char(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out + (v.size() > 200 ? "...'" : "'");
}

template <typename T>
std::string joined(const std::vector<T>& v) {
  return fmt::format("{}", fmt::join(v, ","));
}

}  // namespace

SchemaResult parse_copies(const ArraySchema& base, std::string_view text, std::vector<CopySpec>* out) {
  out->clear();
  if (text == "none") return {};
  if (text.empty()) return fail(EINVAL, fmt::format("user.mmfs.copies: an empty value is not a list of copies; "
                                                    "accepted: {}", kGrammar));
  const std::vector<std::string_view> specs = split(text, ';');
  if (specs.size() > kMaxCopies)
    return fail(EINVAL, fmt::format("user.mmfs.copies: {} copies named; at most {} are kept", specs.size(),
                                    kMaxCopies));
  std::vector<CopySpec> copies;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::string where = fmt::format("user.mmfs.copies: copy {}", i + 1);
    // Items are ':'-separated; an item without '=' continues the value
    // before it (compress=zstd:3).
    std::vector<std::string> items;
    for (std::string_view part : split(specs[i], ':')) {
      if (!items.empty() && items.size() > 1 && part.find('=') == std::string_view::npos)
        items.back() += fmt::format(":{}", part);
      else
        items.emplace_back(part);
    }
    ArraySchema s = placement_base(base);
    if (auto r = set_schema_attr(s, "layout", items[0]))
      return fail(r.error, fmt::format("{} ({}): {}", where, shown(specs[i]), r.message));
    std::vector<std::string_view> seen;
    for (std::size_t k = 1; k < items.size(); ++k) {
      const std::string_view item = items[k];
      const std::size_t eq = item.find('=');
      const std::string_view key = item.substr(0, eq);
      if (eq == std::string_view::npos ||
          std::find(kCopyKeys.begin(), kCopyKeys.end(), key) == kCopyKeys.end())
        return fail(EINVAL, fmt::format("{} ({}): {} is not KEY=VALUE with KEY one of order, cell, basic_cube, "
                                        "priority, chunk, compress; accepted: {}",
                                        where, shown(specs[i]), shown(item), kGrammar));
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        return fail(EINVAL, fmt::format("{} ({}): {} is given twice", where, shown(specs[i]), key));
      seen.push_back(key);
      if (auto r = set_schema_attr(s, key, item.substr(eq + 1)))
        return fail(r.error, fmt::format("{} ({}): {}", where, shown(specs[i]), r.message));
    }
    copies.push_back(spec_of(s));
  }
  *out = std::move(copies);
  return {};
}

std::string copies_text(const std::vector<CopySpec>& copies) {
  if (copies.empty()) return "none";
  const CopySpec defaults;
  std::string out;
  for (const CopySpec& c : copies) {
    if (!out.empty()) out += ';';
    out += c.layout;
    if (!c.order.empty()) out += ":order=" + joined(c.order);
    if (!c.cell.empty()) out += ":cell=" + joined(c.cell);
    if (!c.basic_cube.empty()) out += ":basic_cube=" + joined(c.basic_cube);
    if (c.priority != defaults.priority) out += ":priority=" + c.priority;
    if (!c.chunk.empty()) out += ":chunk=" + joined(c.chunk);
    if (c.compress != defaults.compress) out += ":compress=" + c.compress;
  }
  return out;
}

ArraySchema copy_schema(const ArraySchema& s, std::size_t index) {
  const CopySpec& c = s.copies.at(index);
  ArraySchema out = placement_base(s);
  out.layout = c.layout;
  out.order = c.order;
  out.cell = c.cell;
  out.basic_cube = c.basic_cube;
  out.priority = c.priority;
  out.chunk = c.chunk;
  out.compress = c.compress;
  out.members = c.members;
  out.index = "none";
  out.bins.clear();
  out.layout_set = true;
  out.layout_rule.clear();
  return out;
}

SchemaResult check_copies(const ArraySchema& s) {
  for (std::size_t i = 0; i < s.copies.size(); ++i) {
    ArraySchema c = copy_schema(s, i);
    c.bins = s.bins;  // checked with the primary
    if (auto r = validate_schema(c))
      return fail(r.error, fmt::format("user.mmfs.copies: copy {} ({}): {}", i + 1, copies_text({s.copies[i]}),
                                       r.message));
  }
  return {};
}

nlohmann::json encode_copies(const std::vector<CopySpec>& copies) {
  nlohmann::json out = nlohmann::json::array();
  for (const CopySpec& c : copies)
    out.push_back({{"layout", c.layout},
                   {"order", c.order},
                   {"cell", c.cell},
                   {"basic_cube", c.basic_cube},
                   {"priority", c.priority},
                   {"chunk", c.chunk},
                   {"compress", c.compress},
                   {"slot", c.slot}});
  for (std::size_t i = 0; i < copies.size(); ++i)
    if (!copies[i].members.empty()) out[i]["members"] = copies[i].members;
  return out;
}

std::optional<std::vector<CopySpec>> decode_copies(const nlohmann::json& j) {
  if (!j.is_array() || j.size() > kMaxCopies) return std::nullopt;
  auto numbers = [](const nlohmann::json& v, std::uint64_t limit, auto* out) {
    if (!v.is_array()) return false;
    out->clear();
    for (const auto& x : v) {
      if (!x.is_number_unsigned() || x.get<std::uint64_t>() > limit) return false;
      out->push_back(static_cast<typename std::remove_pointer_t<decltype(out)>::value_type>(x.get<std::uint64_t>()));
    }
    return true;
  };
  std::vector<CopySpec> copies;
  for (const auto& o : j) {
    if (!o.is_object() || o.size() != (o.contains("members") ? 9u : 8u)) return std::nullopt;
    CopySpec c;
    try {
      if (o.contains("members") && !decode_members(o.at("members"), &c.members)) return std::nullopt;
      if (!o.at("layout").is_string() || !o.at("priority").is_string() || !o.at("compress").is_string() ||
          !o.at("slot").is_number_unsigned())
        return std::nullopt;
      c.layout = o.at("layout").get<std::string>();
      c.priority = o.at("priority").get<std::string>();
      c.compress = o.at("compress").get<std::string>();
      const std::uint64_t slot = o.at("slot").get<std::uint64_t>();
      if (slot > 255) return std::nullopt;  // 0: not placed yet (set before the shape)
      c.slot = std::uint8_t(slot);
      if (!numbers(o.at("order"), std::numeric_limits<std::uint32_t>::max(), &c.order) ||
          !numbers(o.at("cell"), std::numeric_limits<std::uint64_t>::max(), &c.cell) ||
          !numbers(o.at("basic_cube"), std::numeric_limits<std::uint64_t>::max(), &c.basic_cube) ||
          !numbers(o.at("chunk"), std::numeric_limits<std::uint64_t>::max(), &c.chunk))
        return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    for (const CopySpec& other : copies)
      if (c.slot != 0 && other.slot == c.slot) return std::nullopt;
    copies.push_back(std::move(c));
  }
  return copies;
}

bool decode_members(const nlohmann::json& j, std::vector<std::uint32_t>* out) {
  if (!j.is_array() || j.empty() || j.size() > 65536) return false;
  std::vector<std::uint32_t> members;
  std::vector<bool> seen(65536);  // a search per member was quadratic: 65536 members took 0.6 s
  for (const auto& x : j) {
    if (!x.is_number_unsigned() || x.get<std::uint64_t>() >= 65536) return false;
    const auto m = x.get<std::uint32_t>();
    if (seen[m]) return false;
    seen[m] = true;
    members.push_back(m);
  }
  *out = std::move(members);
  return true;
}

void assign_copy_slots(const std::vector<CopySpec>& current, std::vector<CopySpec>* next) {
  std::vector<bool> matched(current.size(), false);
  for (CopySpec& c : *next) {
    c.slot = 0;
    for (std::size_t i = 0; i < current.size(); ++i)
      if (!matched[i] && current[i].same_placement(c) && current[i].members == c.members) {
        matched[i] = true;
        c.slot = current[i].slot;
        break;
      }
  }
  auto taken = [&](unsigned slot) {
    for (const CopySpec& c : current)
      if (c.slot == slot) return true;
    for (const CopySpec& c : *next)
      if (c.slot == slot) return true;
    return false;
  };
  unsigned free_slot = 1;
  for (CopySpec& c : *next) {
    if (c.slot != 0) continue;
    while (taken(free_slot)) ++free_slot;
    c.slot = std::uint8_t(free_slot);
  }
}

}  // namespace mmfs::fs

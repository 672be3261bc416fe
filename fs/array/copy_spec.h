// user.mmfs.copies (docs/reference.md §4): the text users type, its
// canonical form, its persistent (JSON) form, and the schema each copy is
// placed by. Pure: no I/O.
//
//   copies := 'none' | spec (';' spec)*           at most kMaxCopies specs
//   spec   := LAYOUT (':' KEY '=' VALUE)*         KEY: order cell basic_cube priority chunk compress
//
// A VALUE is parsed exactly as the attribute of that name (so
// `mloc:compress=zstd:3` keeps its ':'), and each copy must satisfy the
// schema's cross-field rules against the array's shape, as the primary's
// attributes do.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/array/array_schema.h"

namespace mmfs::fs {

// Parses `text` for an array whose other attributes are `base`: the copies
// (slots 0: the caller assigns them), or the error set_schema_attr reports.
SchemaResult parse_copies(const ArraySchema& base, std::string_view text, std::vector<CopySpec>* out);
// The canonical text of `copies` ("none" when empty): each layout and the
// keys that are set, in the order of the grammar.
std::string copies_text(const std::vector<CopySpec>& copies);
// The schema copy `index` (0-based in s.copies) is placed by: the array's
// shape, dtype, dims and checksum block with the copy's placement
// attributes; no index, no copies, no table.
ArraySchema copy_schema(const ArraySchema& s, std::size_t index);
// The cross-field rules of every copy against `s` (its shape).
SchemaResult check_copies(const ArraySchema& s);

// Persistent form: an array of objects with every field and the slot.
nlohmann::json encode_copies(const std::vector<CopySpec>& copies);
// nullopt for a malformed record (wrong types, bad values, a slot twice; slot 0:
// copies named before the array was placed).
std::optional<std::vector<CopySpec>> decode_copies(const nlohmann::json& j);

// The persistent form of a member set (ArraySchema::members,
// CopySpec::members): a non-empty array of distinct member numbers below
// 65536. False for anything else.
bool decode_members(const nlohmann::json& j, std::vector<std::uint32_t>* out);

// Gives each copy of `next` a slot: a copy whose placement and member set
// one of `current` has keeps that one's slot (each current copy matched once); the others
// take the lowest slots no current copy holds, so a copy being dropped and
// one being built never share keys in the commit that swaps them.
void assign_copy_slots(const std::vector<CopySpec>& current, std::vector<CopySpec>* next);

}  // namespace mmfs::fs

// The record of an array's copy cells that lag the primary
// (keys::copy_record; docs/on-disk-format.md, "Copies"): per copy with any
// cell behind, its slot (1 byte), the length of its bitmap (4 bytes,
// little-endian) and CRoaring's portable serialization of its cell numbers.
// Beside it, the record of the primary's cells lost with a failed member
// (keys::lost_cells): CRoaring's portable serialization alone.
// Pure: no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <roaring/roaring.hh>

namespace mmfs::fs {

// Slots with an empty bitmap are left out; "" when none has a cell behind.
std::string encode_behind(const std::map<std::uint8_t, Roaring>& behind);
// False for a malformed record (a short entry, slot 0, a slot twice, a
// bitmap that does not decode or whose length disagrees).
bool decode_behind(std::string_view record, std::map<std::uint8_t, Roaring>* out);

// The lost cells' record; "" for none.
std::string encode_lost(const Roaring& cells);
// False for a record that does not decode or holds trailing bytes.
bool decode_lost(std::string_view record, Roaring* out);

}  // namespace mmfs::fs

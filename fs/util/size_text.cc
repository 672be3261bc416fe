#include "fs/util/size_text.h"

#include <cctype>
#include <string>
#include <utility>

namespace mmfs::fs {

std::uint64_t parse_size(std::string_view s) {
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    const auto digit = std::uint64_t(s[i++] - '0');
    if (v > (UINT64_MAX - digit) / 10) return 0;
    v = v * 10 + digit;
  }
  if (i == 0) return 0;
  std::string unit(s.substr(i));
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, int> units[] = {{"", 0},   {"B", 0},   {"K", 10},  {"KIB", 10}, {"M", 20},
                                                      {"MIB", 20}, {"G", 30}, {"GIB", 30}, {"T", 40},  {"TIB", 40},
                                                      {"P", 50},  {"PIB", 50}};
  for (const auto& [name, shift] : units) {
    if (unit != name) continue;
    if (shift && v > (UINT64_MAX >> shift)) return 0;
    return v << shift;
  }
  return 0;
}

}  // namespace mmfs::fs

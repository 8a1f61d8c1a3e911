// ASCII whitespace (space, \t, \n, \r, \f, \v) off both ends of a text: what every parser of model replies and
// recipe values means by "trimmed".
#pragma once

#include <string_view>

namespace temper {

inline bool ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && ascii_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && ascii_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace temper

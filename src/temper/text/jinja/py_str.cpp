// Python str operations on UTF-8 (see py_str.h). Operations that count positions decode to
// UTF-32 first; the rest work on bytes, which is exact for UTF-8.
#include "temper/text/jinja/py_str.h"

#include <utf8proc.h>

#include <algorithm>

#include "temper/text/utf8.h"

namespace temper::text::jinja {

std::u32string py_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = utf8_next(s, i);
    out += c.cp;
    i += c.len;
  }
  return out;
}

std::string py_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

int64_t py_len(std::string_view s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) i += utf8_next(s, i).len;
  return n;
}

std::optional<std::string> py_index(std::string_view s, int64_t i) {
  const std::u32string u = py_decode(s);
  const auto n = static_cast<int64_t>(u.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return py_encode(std::u32string_view(u).substr(i, 1));
}

std::vector<int64_t> py_slice_indices(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                      std::optional<int64_t> step_opt) {
  const int64_t step = step_opt.value_or(1);
  std::vector<int64_t> out;
  auto clamp = [n](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v += n;
    return std::clamp(v, lo, hi);
  };
  if (step > 0) {
    const int64_t b = start ? clamp(*start, 0, n) : 0;
    const int64_t e = stop ? clamp(*stop, 0, n) : n;
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    const int64_t b = start ? clamp(*start, -1, n - 1) : n - 1;
    const int64_t e = stop ? clamp(*stop, -1, n - 1) : -1;
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

bool py_isspace(char32_t cp) {
  return is_python_whitespace(cp);
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string u = py_decode(s);
  const std::u32string set = chars ? py_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : py_isspace(c); };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip_it(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(u[e - 1])) --e;
  }
  return py_encode(std::u32string_view(u).substr(b, e - b));
}

namespace {

std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit, bool reverse) {
  std::u32string u = py_decode(s);
  if (reverse) std::reverse(u.begin(), u.end());
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    while (i < u.size() && py_isspace(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = u.size();
      while (e > i && py_isspace(u[e - 1])) --e;
      std::u32string rest = u.substr(i, e - i);
      if (reverse) std::reverse(rest.begin(), rest.end());
      out.push_back(py_encode(rest));
      break;
    }
    size_t j = i;
    while (j < u.size() && !py_isspace(u[j])) ++j;
    std::u32string piece = u.substr(i, j - i);
    if (reverse) std::reverse(piece.begin(), piece.end());
    out.push_back(py_encode(piece));
    i = j;
  }
  if (reverse) std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit, false);
  if (sep->empty()) return {std::string(s)};  // Python raises; callers refuse it first
  std::vector<std::string> out;
  size_t at = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t hit = s.find(*sep, at);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(at, hit - at));
    at = hit + sep->size();
  }
  out.emplace_back(s.substr(at));
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit, true);
  if (sep->empty()) return {std::string(s)};  // Python raises; callers refuse it first
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s) {
  const std::u32string u = py_decode(s);
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    const char32_t c = u[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    out.push_back(py_encode(std::u32string_view(u).substr(b, i - b)));
    if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
    b = i + 1;
  }
  if (b < u.size()) out.push_back(py_encode(std::u32string_view(u).substr(b)));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` around every code point
    const std::u32string u = py_decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || n < count) {
        out += with;
        ++n;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t at = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t hit = s.find(old, at);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(at, hit - at));
    out.append(with);
    at = hit + old.size();
  }
  out.append(s.substr(at));
  return out;
}

int64_t py_find(std::string_view s, std::string_view x, bool reverse) {
  const size_t hit = reverse ? s.rfind(x) : s.find(x);
  return hit == std::string_view::npos ? -1 : py_len(s.substr(0, hit));
}

int64_t py_count(std::string_view s, std::string_view x) {
  if (x.empty()) return py_len(s) + 1;
  int64_t n = 0;
  for (size_t at = s.find(x); at != std::string_view::npos; at = s.find(x, at + x.size())) ++n;
  return n;
}

namespace {

char32_t to_upper(char32_t c) {
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
char32_t to_lower(char32_t c) {
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
char32_t to_title(char32_t c) {
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}
bool is_cased(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

template <class F>
std::string map_chars(std::string_view s, F f) {
  std::u32string u = py_decode(s);
  for (char32_t& c : u) c = f(c);
  return py_encode(u);
}

}  // namespace

std::string py_upper(std::string_view s) {
  return map_chars(s, to_upper);
}

std::string py_lower(std::string_view s) {
  return map_chars(s, to_lower);
}

std::string py_capitalize(std::string_view s) {
  std::u32string u = py_decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_title(u[i]) : to_lower(u[i]);
  return py_encode(u);
}

std::string py_title(std::string_view s) {
  std::u32string u = py_decode(s);
  bool prev_cased = false;
  for (char32_t& c : u) {
    const bool cased = is_cased(c);
    c = cased ? (prev_cased ? to_lower(c) : to_title(c)) : c;
    prev_cased = cased;
  }
  return py_encode(u);
}

std::string jinja_title(std::string_view s) {
  std::u32string u = py_decode(s);
  auto sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
  bool start = true;
  for (char32_t& c : u) {
    if (sep(c)) {
      start = true;
      continue;
    }
    c = start ? to_upper(c) : to_lower(c);
    start = false;
  }
  return py_encode(u);
}

}  // namespace temper::text::jinja

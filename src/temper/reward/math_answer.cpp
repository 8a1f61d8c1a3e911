#include "temper/reward/math_answer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "temper/core/trim.h"

namespace temper::reward {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

// Index one past the '}' matching the '{' at `open`, or npos.
size_t match_brace(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

// "\text{ cm}" -> "  cm" for the wrapper commands that only carry text.
void unwrap_text_commands(std::string& s) {
  static const char* kCommands[] = {"\\textbf", "\\textrm", "\\text", "\\mathrm", "\\mbox"};
  for (const char* cmd : kCommands) {
    std::string_view c(cmd);
    for (size_t p = s.find(c); p != std::string::npos; p = s.find(c, p)) {
      size_t open = p + c.size();
      if (open >= s.size() || s[open] != '{') {
        p = open;
        continue;
      }
      size_t end = match_brace(s, open);
      if (end == std::string::npos) break;
      std::string inner = " " + s.substr(open + 1, end - open - 2);
      s.replace(p, end - p, inner);
    }
  }
}

// Shared cleanup before number parsing and text comparison.
std::string clean(std::string_view in) {
  std::string s(trim(in));
  replace_all(s, "\xE2\x88\x92", "-");  // U+2212 minus sign
  replace_all(s, "\\$", "");
  s.erase(std::remove(s.begin(), s.end(), '$'), s.end());
  replace_all(s, "\\%", "%");
  for (const char* sp : {"\\!", "\\,", "\\;", "\\:", "\\left", "\\right", "\\displaystyle"}) replace_all(s, sp, "");
  replace_all(s, "\\ ", " ");
  unwrap_text_commands(s);
  std::string_view v = trim(s);
  while (!v.empty() && v.back() == '.') v = trim(v.substr(0, v.size() - 1));
  // One pair of outer braces: "{5}" -> "5".
  if (v.size() >= 2 && v.front() == '{' && match_brace(v, 0) == v.size()) v = trim(v.substr(1, v.size() - 2));
  // A single-letter assignment: "x = 5" -> "5".
  if (v.size() >= 3 && is_alpha(v[0])) {
    size_t i = 1;
    while (i < v.size() && ascii_space(v[i])) ++i;
    if (i < v.size() && v[i] == '=' && (i + 1 >= v.size() || v[i + 1] != '=')) v = trim(v.substr(i + 1));
  }
  return std::string(v);
}

// Optional sign, digits with optional thousands commas (groups of exactly 3), optional fraction, optional exponent.
std::optional<double> parse_plain(std::string_view s) {
  s = trim(s);
  size_t i = 0, n = s.size();
  std::string num;
  if (i < n && (s[i] == '+' || s[i] == '-')) {
    if (s[i] == '-') num += '-';
    ++i;
  }
  size_t int_start = i;
  while (i < n && is_digit(s[i])) num += s[i++];
  size_t first_group = i - int_start, int_digits = first_group;
  if (i < n && s[i] == ',') {
    if (first_group < 1 || first_group > 3) return std::nullopt;
    while (i < n && s[i] == ',') {
      ++i;
      for (int k = 0; k < 3; ++k, ++i) {
        if (i >= n || !is_digit(s[i])) return std::nullopt;
        num += s[i];
      }
      int_digits += 3;
      if (i < n && is_digit(s[i])) return std::nullopt;
    }
  }
  size_t frac_digits = 0;
  if (i < n && s[i] == '.') {
    num += s[i++];
    while (i < n && is_digit(s[i])) num += s[i++], ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return std::nullopt;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    num += s[i++];
    if (i < n && (s[i] == '+' || s[i] == '-')) num += s[i++];
    size_t e0 = i;
    while (i < n && is_digit(s[i])) num += s[i++];
    if (i == e0) return std::nullopt;
  }
  if (i != n) return std::nullopt;
  double v = std::strtod(num.c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

// "{3}{4}" or "34" (LaTeX shorthand \frac34) after \frac.
std::optional<double> parse_frac_args(std::string_view s) {
  s = trim(s);
  std::string_view a, b;
  if (!s.empty() && s[0] == '{') {
    size_t e1 = match_brace(s, 0);
    if (e1 == std::string::npos) return std::nullopt;
    a = s.substr(1, e1 - 2);
    std::string_view rest = trim(s.substr(e1));
    if (rest.empty() || rest[0] != '{' || match_brace(rest, 0) != rest.size()) return std::nullopt;
    b = rest.substr(1, rest.size() - 2);
  } else if (s.size() == 2 && is_digit(s[0]) && is_digit(s[1])) {
    a = s.substr(0, 1);
    b = s.substr(1, 1);
  } else {
    return std::nullopt;
  }
  auto na = parse_plain(a), nb = parse_plain(b);
  if (!na || !nb || *nb == 0) return std::nullopt;
  return *na / *nb;
}

std::optional<double> parse_value(std::string_view s) {
  s = trim(s);
  if (auto v = parse_plain(s)) return v;
  double sign = 1;
  std::string_view t = s;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    sign = t[0] == '-' ? -1 : 1;
    t = trim(t.substr(1));
  }
  for (std::string_view cmd : {"\\dfrac", "\\tfrac", "\\frac"}) {
    if (t.substr(0, cmd.size()) == cmd) {
      auto v = parse_frac_args(t.substr(cmd.size()));
      if (!v) return std::nullopt;
      return sign * *v;
    }
  }
  size_t slash = t.find('/');
  if (slash != std::string_view::npos && t.find('/', slash + 1) == std::string_view::npos) {
    auto a = parse_plain(t.substr(0, slash)), b = parse_plain(t.substr(slash + 1));
    if (a && b && *b != 0) return sign * *a / *b;
  }
  return std::nullopt;
}

std::optional<MathNumber> parse_number_cleaned(std::string_view s, bool allow_unit) {
  MathNumber out;
  s = trim(s);
  if (!s.empty() && s.back() == '%') {
    out.percent = true;
    s = trim(s.substr(0, s.size() - 1));
  }
  if (auto v = parse_value(s)) {
    out.value = *v;
    return out;
  }
  // "18 dollars", "5  cm" (from 5\text{ cm}): a number, then only words.
  size_t sp = s.find_first_of(" \t");
  if (allow_unit && !out.percent && sp != std::string_view::npos) {
    std::string_view rest = trim(s.substr(sp));
    bool words =
        !rest.empty() && std::all_of(rest.begin(), rest.end(), [](char c) { return is_alpha(c) || ascii_space(c); });
    if (words) return parse_number_cleaned(s.substr(0, sp), false);
  }
  return std::nullopt;
}

bool close(double a, double b, const MathEquivOptions& opt) {
  if (a == b) return true;
  double d = std::fabs(a - b);
  return d <= opt.abs_tol || d <= opt.rel_tol * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace

std::optional<std::string> extract_gsm8k(std::string_view text) {
  size_t p = text.rfind("####");
  if (p == std::string_view::npos) return std::nullopt;
  size_t q = p + 4;
  while (q < text.size() && text[q] == '#') ++q;
  size_t e = text.find('\n', q);
  std::string_view rest = trim(text.substr(q, e == std::string_view::npos ? std::string_view::npos : e - q));
  if (rest.empty()) return std::nullopt;
  return std::string(rest);
}

namespace {

// Every '{' of `s` mapped to the position after its matching '}' (npos: unclosed), in one pass: what match_brace
// gives for each, without rescanning the rest of the text per brace (quadratic on many unclosed braces).
std::vector<size_t> brace_ends(std::string_view s) {
  std::vector<size_t> end(s.size(), std::string_view::npos), open;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '{') open.push_back(i);
    if (s[i] == '}' && !open.empty()) end[open.back()] = i + 1, open.pop_back();
  }
  return end;
}

}  // namespace

std::optional<std::string> extract_boxed(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> hits;  // (position, command length)
  for (std::string_view cmd : {"\\boxed", "\\fbox"})
    for (size_t p = text.find(cmd); p != std::string_view::npos; p = text.find(cmd, p + 1))
      hits.emplace_back(p, cmd.size());
  if (hits.empty()) return std::nullopt;
  std::sort(hits.begin(), hits.end(), [](auto a, auto b) { return a.first > b.first; });
  const std::vector<size_t> ends = brace_ends(text);
  for (auto [pos, len] : hits) {
    size_t i = pos + len;
    while (i < text.size() && text[i] == ' ') ++i;
    if (i < text.size() && text[i] == '{') {
      size_t end = ends[i];
      if (end == std::string_view::npos) continue;
      std::string_view inner = trim(text.substr(i + 1, end - i - 2));
      if (!inner.empty()) return std::string(inner);
    } else if (i > pos + len) {  // "\boxed 5"
      size_t e = i;
      while (e < text.size() && !ascii_space(text[e]) && text[e] != '$') ++e;
      if (e > i) return std::string(text.substr(i, e - i));
    }
  }
  return std::nullopt;
}

std::optional<std::string> extract_answer_is(std::string_view text) {
  std::string low(text);
  for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t p = low.rfind("answer is");
  if (p == std::string::npos) return std::nullopt;
  std::string_view rest = text.substr(p + 9);
  size_t e = rest.find('\n');
  if (e != std::string_view::npos) rest = rest.substr(0, e);
  if (auto b = extract_boxed(rest)) return b;
  size_t dot = rest.find(". ");
  if (dot != std::string_view::npos) rest = rest.substr(0, dot);
  rest = trim(rest);
  while (!rest.empty() && (rest.front() == ':' || rest.front() == '*' || ascii_space(rest.front())))
    rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == '.' || rest.back() == '*' || ascii_space(rest.back()))) rest.remove_suffix(1);
  if (rest.empty()) return std::nullopt;
  return std::string(rest);
}

std::optional<std::string> extract_math_answer(std::string_view text) {
  if (auto a = extract_gsm8k(text)) return a;
  if (auto a = extract_boxed(text)) return a;
  return extract_answer_is(text);
}

std::optional<MathNumber> parse_math_number(std::string_view s) {
  return parse_number_cleaned(clean(s), true);
}

std::string normalize_answer_text(std::string_view s) {
  std::string c = clean(s), out;
  for (char ch : c)
    if (!ascii_space(ch)) out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

bool math_answers_equal(std::string_view a, std::string_view b, const MathEquivOptions& opt) {
  auto na = parse_math_number(a), nb = parse_math_number(b);
  if (na && nb) {
    if (close(na->value, nb->value, opt)) return true;  // "50%" == "50" == "50.0"
    if (!opt.percent_as_fraction || na->percent == nb->percent) return false;
    return na->percent ? close(na->value / 100, nb->value, opt) : close(na->value, nb->value / 100, opt);
  }
  std::string ta = normalize_answer_text(a);
  return !ta.empty() && ta == normalize_answer_text(b);
}

}  // namespace temper::reward

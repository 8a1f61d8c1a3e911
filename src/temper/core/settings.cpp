#include "temper/core/settings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "temper/core/error.h"

namespace temper {

namespace {

// The shortest text that reads back to v (0.7, 1e-05, 2).
std::string shortest(double v) {
  char buf[64];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

std::string toml_float(double v, bool single) {
  char buf[64];
  int p = 1;
  for (; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (single ? std::strtof(buf, nullptr) == static_cast<float>(v) : std::strtod(buf, nullptr) == v) break;
  }
  std::string t = buf;
  if (t.find('e') != std::string::npos && std::fabs(v) >= 1e-4 && std::fabs(v) < 1e15) {
    int decimals = std::max(0, p - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    t = buf;
  }
  if (t.find_first_of(".eEn") == std::string::npos) t += ".0";
  return t;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    std::string item = s.substr(b, e - b);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) out.push_back(item);
    b = e + 1;
  }
  return out;
}

std::string join_words(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const std::string& w : v) out += (out.empty() ? std::string() : std::string(sep)) + w;
  return out;
}

std::vector<double> split_numbers(const std::string& text, const std::string& what) {
  std::vector<double> out;
  for (const std::string& x : split_words(text)) {
    char* end = nullptr;
    const double v = std::strtod(x.c_str(), &end);
    TEMPER_CHECK(!x.empty() && end && *end == '\0') << what << ": expected a comma list of numbers, got '" << x << "'";
    out.push_back(v);
  }
  return out;
}

std::string join_numbers(const std::vector<double>& v) {
  std::string out;
  for (double x : v) out += (out.empty() ? "" : ",") + shortest(x);
  return out;
}

void KeyVisitor::operator()(std::string_view key, std::vector<double>& f, std::string_view doc) {
  std::string s = join_numbers(f);
  value(key, s, doc);
  f = split_numbers(s, std::string(key));
}

void KeyVisitor::operator()(std::string_view key, std::vector<std::string>& f, std::string_view doc) {
  std::string s = join_words(f);
  value(key, s, doc);
  f = split_words(s);
}

}  // namespace temper

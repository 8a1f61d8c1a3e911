#include "temper/core/profile.h"

#include <algorithm>
#include <map>

namespace temper {
namespace {
bool g_on = false;
std::map<std::string, double>& buckets() {
  static std::map<std::string, double> b;
  return b;
}
}  // namespace

void profile_enable(bool on) { g_on = on; }
bool profile_enabled() { return g_on; }
void profile_reset() { buckets().clear(); }
void profile_add(const char* name, double s) { buckets()[name] += s; }

std::vector<std::pair<std::string, double>> profile_report() {
  std::vector<std::pair<std::string, double>> v(buckets().begin(), buckets().end());
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second > b.second; });
  return v;
}

}  // namespace temper

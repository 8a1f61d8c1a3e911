#include "temper/app/id_list.h"

#include <sstream>

#include "temper/core/error.h"

namespace temper::app {

std::vector<int32_t> parse_id_list(const std::string& text, const char* what) {
  std::string s = text;
  for (char& c : s)
    if (c == '[' || c == ']' || c == ',' || c == '\n' || c == '\t') c = ' ';
  std::stringstream ss(s);
  std::vector<int32_t> ids;
  std::string w;
  while (ss >> w) {
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(w, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TEMPER_CHECK(used == w.size() && v >= INT32_MIN && v <= INT32_MAX)
        << what << ": '" << w << "' is not a token id (expected 1,2,3 or a JSON list)";
    ids.push_back(static_cast<int32_t>(v));
  }
  TEMPER_CHECK(!ids.empty()) << what << ": no token ids given";
  return ids;
}

}  // namespace temper::app

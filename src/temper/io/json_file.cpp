#include "temper/io/json_file.h"

#include <fstream>
#include <sstream>

#include "temper/core/error.h"

namespace temper::io {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  TEMPER_CHECK(in.good()) << path << ": cannot open";
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    TEMPER_FAIL() << path << ": not valid JSON: " << e.what();
  }
}

}  // namespace temper::io

#include "temper/tasks/jsonl_rows.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "temper/core/error.h"

namespace temper::tasks {

void field_error(const std::string& where, const std::string& field, const std::string& expected, const nlohmann::json* actual) {
  TEMPER_FAIL() << where << ": field '" << field << "': expected " << expected << ", got "
                << (actual ? std::string(actual->type_name()) : std::string("nothing (missing)"));
}

std::string text_field(const nlohmann::json& row, const std::string& where, const char* key, bool required) {
  auto it = row.find(key);
  if (it == row.end()) {
    if (required) field_error(where, key, "a string", nullptr);
    return {};
  }
  if (!it->is_string()) field_error(where, key, "a string", &*it);
  return it->get<std::string>();
}

std::vector<Problem> read_jsonl_rows(const std::string& path, const std::string& expects, const RowParser& parse) {
  std::ifstream in(path);
  TEMPER_CHECK(in.good()) << path << ": cannot open (" << expects << ")";
  const std::string base = std::filesystem::path(path).filename().string();
  std::vector<Problem> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      TEMPER_FAIL() << where << ": not valid JSON: " << e.what();
    }
    if (!row.is_object()) TEMPER_FAIL() << where << ": expected a JSON object, got " << row.type_name();
    out.push_back(parse(row, where, base + ":" + std::to_string(n)));
    if (!out.back().row) out.back().row = std::make_shared<const std::string>(row.dump());
  }
  TEMPER_CHECK(!out.empty()) << path << ": no rows (" << expects << ", one JSON object per line)";
  return out;
}

}  // namespace temper::tasks

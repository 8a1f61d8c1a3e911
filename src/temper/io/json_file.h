// Reading a JSON file with the error every loader gives: the path, and what is wrong.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace temper::io {

nlohmann::json read_json_file(const std::string& path);

}  // namespace temper::io

// Reading problems from JSONL files (tasks "dataset" and "user_sim"): one JSON object per line, blank lines
// skipped; each row is handed to the task's parser with its "file:line" (for errors) and a default id
// "<file name>:<line>"; the Problem gets the row's JSON text (Problem::row, every column, for reward programs
// and judges) unless the parser set one. Errors name the file and line: a file that cannot be opened, a line that is
// not JSON, a file without rows, and (field_error) a field with the expected form and the actual JSON type.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::tasks {

using RowParser = std::function<Problem(const nlohmann::json& row, const std::string& where, const std::string& default_id)>;

// `expects` completes "cannot open (...)" and "no rows (...)": what the task reads, e.g. "task 'dataset' expects a JSONL file".
std::vector<Problem> read_jsonl_rows(const std::string& path, const std::string& expects, const RowParser& parse);

// "file:line: field 'x': expected E, got T" (T: the JSON type, or "nothing (missing)" for null).
[[noreturn]] void field_error(const std::string& where, const std::string& field, const std::string& expected, const nlohmann::json* actual);

// The row's string field `key` ("" when absent and not required); anything else is a field_error.
std::string text_field(const nlohmann::json& row, const std::string& where, const char* key, bool required);

}  // namespace temper::tasks

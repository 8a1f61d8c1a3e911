#include "temper/tasks/dataset.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/reward/math_answer.h"

namespace temper::tasks {
namespace {

using nlohmann::json;

// "file:line: field 'x': expected E, got T"
[[noreturn]] void field_error(const std::string& where, const std::string& field, const std::string& expected,
                              const json* actual) {
  TEMPER_FAIL() << where << ": field '" << field << "': expected " << expected << ", got "
                << (actual ? std::string(actual->type_name()) : std::string("nothing (missing)"));
}

std::string text_field(const json& row, const std::string& where, const char* key, bool required) {
  auto it = row.find(key);
  if (it == row.end()) {
    if (required) field_error(where, key, "a string", nullptr);
    return {};
  }
  if (!it->is_string()) field_error(where, key, "a string", &*it);
  return it->get<std::string>();
}

std::string canonical_prompt(const Problem& p) {
  std::string s = p.prompt;
  for (const Message& m : p.messages) s += "\x1f" + m.role + "\x1e" + m.content;
  return s;
}

Problem parse_row(const json& row, const std::string& where, const std::string& default_id) {
  if (!row.is_object()) TEMPER_FAIL() << where << ": expected a JSON object, got " << row.type_name();
  Problem p;
  bool has_prompt = row.contains("prompt"), has_messages = row.contains("messages");
  if (!has_prompt && !has_messages)
    TEMPER_FAIL() << where << ": expected a field 'prompt' (a string) or 'messages' (a list of {role, content}), "
                  << "got neither";
  if (has_prompt) p.prompt = text_field(row, where, "prompt", true);
  if (has_messages) {
    const json& ms = row["messages"];
    if (!ms.is_array() || ms.empty()) field_error(where, "messages", "a non-empty list of {role, content}", &ms);
    for (size_t i = 0; i < ms.size(); ++i) {
      std::string f = "messages[" + std::to_string(i) + "]";
      if (!ms[i].is_object()) field_error(where, f, "an object {role, content}", &ms[i]);
      Message m;
      m.role = text_field(ms[i], where + ": " + f, "role", true);
      m.content = text_field(ms[i], where + ": " + f, "content", true);
      p.messages.push_back(std::move(m));
    }
    if (!has_prompt) {
      p.prompt = p.messages.back().content;
      for (const Message& m : p.messages)
        if (m.role == "user") p.prompt = m.content;
    }
  }
  auto ans = row.find("answer");
  if (ans == row.end() || !(ans->is_string() || ans->is_number()))
    field_error(where, "answer", "a string or number", ans == row.end() ? nullptr : &*ans);
  p.answer = ans->is_string() ? ans->get<std::string>() : ans->dump();
  p.teacher_response = text_field(row, where, "teacher_response", false);
  // GSM8K's own layout: "answer" holds the worked solution ending in "#### 72".
  if (auto final = reward::extract_gsm8k(p.answer); final && p.answer.find("####") != std::string::npos) {
    if (p.teacher_response.empty()) p.teacher_response = p.answer;
    p.answer = *final;
  }
  if (p.answer.find_first_not_of(" \t\r\n") == std::string::npos) field_error(where, "answer", "a non-empty answer", &*ans);
  if (auto r = row.find("rubric"); r != row.end() && !r->is_null()) p.rubric = r->is_string() ? r->get<std::string>() : r->dump();
  if (auto d = row.find("difficulty"); d != row.end()) {
    if (!d->is_number_integer()) field_error(where, "difficulty", "an integer", &*d);
    p.difficulty = d->get<int>();
  }
  p.id = default_id;
  if (auto id = row.find("id"); id != row.end()) {
    if (id->is_string()) {
      p.id = id->get<std::string>();
    } else if (id->is_number_integer()) {
      p.id = id->dump();
    } else {
      field_error(where, "id", "a string or integer", &*id);
    }
  }
  if (!p.teacher_response.empty()) {
    p.gold_solution = p.teacher_response;
    if (!reward::extract_gsm8k(p.teacher_response)) p.gold_solution += "\n#### " + p.answer;
  } else {
    p.gold_solution = "#### " + p.answer;
  }
  return p;
}

}  // namespace

std::vector<Problem> load_jsonl_problems(const std::string& path) {
  std::ifstream in(path);
  TEMPER_CHECK(in.good()) << path << ": cannot open (task 'dataset' expects a JSONL file)";
  std::string base = std::filesystem::path(path).filename().string();
  std::vector<Problem> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = path + ":" + std::to_string(n);
    json row;
    try {
      row = json::parse(line);
    } catch (const json::exception& e) {
      TEMPER_FAIL() << where << ": not valid JSON: " << e.what();
    }
    out.push_back(parse_row(row, where, base + ":" + std::to_string(n)));
  }
  TEMPER_CHECK(!out.empty()) << path << ": no examples (expected one JSON object per line)";
  return out;
}

void DatasetConfig::validate() const {
  TEMPER_CHECK(!path.empty()) << "task 'dataset': parameter 'path' is required: expected a JSONL file, got nothing";
  TEMPER_CHECK(eval_fraction >= 0 && eval_fraction < 1)
      << "task 'dataset': parameter 'eval_fraction': expected a number in [0, 1), got " << eval_fraction;
  TEMPER_CHECK(eval_path.empty() || eval_fraction == 0)
      << "task 'dataset': give eval_path or eval_fraction, not both (got eval_path='" << eval_path
      << "', eval_fraction=" << eval_fraction << ")";
}

DatasetConfig DatasetConfig::from_params(const TaskParams& params) {
  ParamReader r("dataset", params);
  DatasetConfig c;
  c.path = r.get_string("path", "");
  c.eval_path = r.get_string("eval_path", "");
  c.eval_fraction = r.get_double("eval_fraction", 0, 0, 0.999999);
  r.finish();
  c.validate();
  return c;
}

DatasetTask::DatasetTask(DatasetConfig cfg) : cfg_(std::move(cfg)) {
  cfg_.validate();
  std::vector<Problem> rows = load_jsonl_problems(cfg_.path);
  if (!cfg_.eval_path.empty()) {
    train_ = std::move(rows);
    eval_ = load_jsonl_problems(cfg_.eval_path);
    std::unordered_set<std::string> seen;
    for (const Problem& p : eval_) seen.insert(canonical_prompt(p));
    int64_t overlap = 0;
    for (const Problem& p : train_) overlap += seen.count(canonical_prompt(p));
    if (overlap > 0) {
      TEMPER_LOG(warn) << "task 'dataset': " << overlap << " prompts of " << cfg_.path << " also appear in "
                       << cfg_.eval_path << "; eval is not disjoint from train";
    }
  } else {
    split_by_prompt_hash(std::move(rows), cfg_.eval_fraction, "task 'dataset'", cfg_.path, train_, eval_);
  }
}

void split_by_prompt_hash(std::vector<Problem> rows, double eval_fraction, const std::string& task, const std::string& path,
                          std::vector<Problem>& train, std::vector<Problem>& eval) {
  const auto cut = static_cast<uint64_t>(eval_fraction * 1e6);
  for (Problem& p : rows) (stable_hash(canonical_prompt(p)) % 1000000 < cut ? eval : train).push_back(std::move(p));
  TEMPER_CHECK(!train.empty()) << task << ": eval_fraction=" << eval_fraction << " leaves no rows of " << path << " for training";
}

int64_t DatasetTask::size(Split split) const {
  return static_cast<int64_t>(split == Split::train ? train_.size() : eval_.size());
}

Problem DatasetTask::problem(Split split, uint64_t index) const {
  const auto& rows = split == Split::train ? train_ : eval_;
  TEMPER_CHECK(index < rows.size()) << "task 'dataset': index " << index << " out of range for the "
                                    << split_name(split) << " split of " << rows.size() << " problems";
  return rows[index];
}

std::optional<std::string> DatasetTask::extract_answer(const std::string& completion) const {
  return reward::extract_math_answer(completion);
}

Verdict DatasetTask::verify(const Problem& p, const std::string& completion) const {
  Verdict v;
  v.extracted = extract_answer(completion);
  v.correct = v.extracted && reward::math_answers_equal(*v.extracted, p.answer);
  v.reward = v.correct ? 1.0 : 0.0;
  return v;
}

}  // namespace temper::tasks

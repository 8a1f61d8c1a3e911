#include "temper/tasks/dataset.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/reward/math_answer.h"
#include "temper/tasks/jsonl_rows.h"

namespace temper::tasks {
namespace {

using nlohmann::json;

std::string canonical_prompt(const Problem& p) {
  std::string s = p.prompt;
  for (const Message& m : p.messages) s += "\x1f" + m.role + "\x1e" + m.content;
  return s;
}

Problem parse_row(const json& row, const std::string& where, const std::string& default_id) {
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
  // A rubric: a string as written, or a list of criteria numbered one per line ("1. ...", the spec's layout).
  if (auto r = row.find("rubric"); r != row.end() && !r->is_null()) {
    if (r->is_string()) {
      p.rubric = r->get<std::string>();
    } else if (r->is_array() && !r->empty()) {
      for (size_t i = 0; i < r->size(); ++i) {
        if (!(*r)[i].is_string())
          field_error(where, "rubric[" + std::to_string(i) + "]", "a string (a rubric's criterion)", &(*r)[i]);
        p.rubric += (i ? "\n" : "") + std::to_string(i + 1) + ". " + (*r)[i].get<std::string>();
      }
    } else {
      field_error(where, "rubric", "a string or a non-empty list of strings", &*r);
    }
  }
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
  return read_jsonl_rows(path, "task 'dataset' expects a JSONL file", parse_row);
}

void DatasetConfig::validate(const std::string& task) const {
  TEMPER_CHECK(!path.empty()) << "task '" << task << "': parameter 'path' is required: expected a JSONL file, got nothing";
  TEMPER_CHECK(eval_fraction >= 0 && eval_fraction < 1)
      << "task '" << task << "': parameter 'eval_fraction': expected a number in [0, 1), got " << eval_fraction;
  TEMPER_CHECK(eval_path.empty() || eval_fraction == 0)
      << "task '" << task << "': give eval_path or eval_fraction, not both (got eval_path='" << eval_path
      << "', eval_fraction=" << eval_fraction << ")";
}

DatasetConfig DatasetConfig::from_params(const TaskParams& params, const std::string& task) {
  ParamReader r(task, params);
  DatasetConfig c;
  c.path = r.get_string("path", "");
  c.eval_path = r.get_string("eval_path", "");
  c.eval_fraction = r.get_double("eval_fraction", 0, 0, 0.999999);
  r.finish();
  c.validate(task);
  return c;
}

void load_splits(const DatasetConfig& cfg, const std::string& task, const std::function<std::vector<Problem>(const std::string&)>& load,
                 std::vector<Problem>& train, std::vector<Problem>& eval) {
  cfg.validate(task);
  std::vector<Problem> rows = load(cfg.path);
  if (cfg.eval_path == cfg.path) {  // the file itself evaluated (temper eval --param path=FILE): read once, no overlap
    eval = rows;
    train = std::move(rows);
    return;
  }
  if (!cfg.eval_path.empty()) {
    train = std::move(rows);
    eval = load(cfg.eval_path);
    std::unordered_set<std::string> seen;
    for (const Problem& p : eval) seen.insert(canonical_prompt(p));
    int64_t overlap = 0;
    for (const Problem& p : train) overlap += seen.count(canonical_prompt(p));
    if (overlap > 0) {
      TEMPER_LOG(warn) << "task '" << task << "': " << overlap << " prompts of " << cfg.path << " also appear in " << cfg.eval_path
                       << "; eval is not disjoint from train";
    }
    return;
  }
  const auto cut = static_cast<uint64_t>(cfg.eval_fraction * 1e6);
  for (Problem& p : rows) (stable_hash(canonical_prompt(p)) % 1000000 < cut ? eval : train).push_back(std::move(p));
  TEMPER_CHECK(!train.empty()) << "task '" << task << "': eval_fraction=" << cfg.eval_fraction << " leaves no rows of " << cfg.path
                               << " for training";
}

DatasetTask::DatasetTask(DatasetConfig cfg) : cfg_(std::move(cfg)) { load_splits(cfg_, "dataset", load_jsonl_problems, train_, eval_); }

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

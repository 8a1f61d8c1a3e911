#include "temper/tasks/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/reward/math_answer.h"
#include "temper/tasks/jsonl_rows.h"

namespace temper::tasks {
namespace {

using nlohmann::json;

std::string join_sets(const std::set<std::string>& sets) {
  std::string s;
  for (const std::string& x : sets) s += (s.empty() ? "\"" : ", \"") + x + "\"";
  return s;
}

std::string canonical_prompt(const Problem& p) {
  std::string s = p.prompt;
  for (const Message& m : p.messages) s += "\x1f" + m.role + "\x1e" + m.content;
  return s;
}

// One chat turn of a row: {role, content} with role system, user, assistant or tool (a tool's result, for tool-use
// conversations; a system turn only first).
Message parse_turn(const json& m, const std::string& where, const std::string& f, size_t i) {
  if (!m.is_object()) field_error(where, f, "an object {role, content}", &m);
  Message t;
  t.role = text_field(m, where + ": " + f, "role", true);
  t.content = text_field(m, where + ": " + f, "content", true);
  if (t.role != "system" && t.role != "user" && t.role != "assistant" && t.role != "tool")
    TEMPER_FAIL() << where << ": " << f
                  << ": field 'role': expected \"system\", \"user\", \"assistant\" or \"tool\", got \"" << t.role
                  << "\"";
  if (t.role == "system" && i != 0)
    TEMPER_FAIL() << where << ": " << f
                  << ": a system turn must come first (chat templates put it before the conversation)";
  return t;
}

// A list of chat turns (TRL's conversational form); `field` names it in errors ("messages" or "prompt").
std::vector<Message> parse_turns(const json& ms, const std::string& where, const std::string& field) {
  if (!ms.is_array() || ms.empty()) field_error(where, field, "a non-empty list of {role, content}", &ms);
  std::vector<Message> out;
  for (size_t i = 0; i < ms.size(); ++i)
    out.push_back(parse_turn(ms[i], where, field + "[" + std::to_string(i) + "]", i));
  return out;
}

// A gold completion given as text: `solution` or `completion` (a string, or TRL's conversational completion: a
// list of one assistant turn). Empty when absent.
std::string gold_field(const json& row, const std::string& where, const char* key) {
  auto it = row.find(key);
  if (it == row.end() || it->is_null()) return {};
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_object()) {
    Message m = parse_turn((*it)[0], where, std::string(key) + "[0]", 0);
    if (m.role != "assistant")
      TEMPER_FAIL() << where << ": " << key << "[0]: field 'role': expected \"assistant\" (the completion), got \""
                    << m.role << "\"";
    text = m.content;
  } else {
    field_error(where, key, "a string or a list of one {role: \"assistant\", content}", &*it);
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) field_error(where, key, "a non-empty completion", &*it);
  return text;
}

Problem parse_row(const json& row, const std::string& where, const std::string& default_id) {
  Problem p;
  auto prompt = row.find("prompt"), messages = row.find("messages");
  if (prompt == row.end() && messages == row.end())
    TEMPER_FAIL() << where << ": expected a field 'prompt' (a string) or 'messages' (a list of {role, content}), "
                  << "got neither";
  // TRL's conversational prompt: `prompt` as a list of turns stands for `messages`.
  const bool prompt_turns = prompt != row.end() && prompt->is_array();
  if (prompt_turns && messages != row.end())
    TEMPER_FAIL() << where << ": 'prompt' is a list of turns and 'messages' is given too: expected one of them";
  if (prompt != row.end() && !prompt_turns) {
    if (!prompt->is_string()) field_error(where, "prompt", "a string or a list of {role, content}", &*prompt);
    p.prompt = prompt->get<std::string>();
  }
  // The gold completion, at most one of: a final assistant turn, `solution`, `completion`.
  std::string gold, gold_from;
  auto take_gold = [&](std::string text, const std::string& from) {
    if (text.empty()) return;
    if (!gold_from.empty())
      TEMPER_FAIL() << where << ": two gold completions, " << gold_from << " and " << from << ": expected one of them";
    gold = std::move(text);
    gold_from = from;
  };
  if (prompt_turns || messages != row.end()) {
    const std::string field = prompt_turns ? "prompt" : "messages";
    p.messages = parse_turns(prompt_turns ? *prompt : *messages, where, field);
    if (p.messages.back().role == "assistant") {  // the answer to learn (SFT's target), not part of the prompt
      if (p.messages.back().content.find_first_not_of(" \t\r\n") == std::string::npos)
        TEMPER_FAIL() << where << ": " << field << "[" << p.messages.size() - 1
                      << "]: the final assistant turn (the gold completion) is empty: expected its text";
      take_gold(std::move(p.messages.back().content), "the final assistant turn of '" + field + "'");
      p.messages.pop_back();
    }
    auto user = std::find_if(p.messages.rbegin(), p.messages.rend(), [](const Message& m) { return m.role == "user"; });
    if (user == p.messages.rend())
      TEMPER_FAIL() << where << ": field '" << field << "': expected a user turn (the question), got "
                    << (p.messages.empty() ? "only the final assistant turn" : "none");
    if (p.prompt.empty()) p.prompt = user->content;
  }
  take_gold(gold_field(row, where, "solution"), "'solution'");
  take_gold(gold_field(row, where, "completion"), "'completion'");
  // `answer` is optional (a row scored by the user's own reward, or trained by SFT only); null is absent.
  if (auto ans = row.find("answer"); ans != row.end() && !ans->is_null()) {
    if (!(ans->is_string() || ans->is_number())) field_error(where, "answer", "a string or number", &*ans);
    p.answer = ans->is_string() ? ans->get<std::string>() : ans->dump();
    if (p.answer.find_first_not_of(" \t\r\n") == std::string::npos)
      field_error(where, "answer", "a non-empty answer", &*ans);
  }
  p.teacher_response = text_field(row, where, "teacher_response", false);
  // GSM8K's own layout: "answer" holds the worked solution ending in "#### 72".
  if (auto final = reward::extract_gsm8k(p.answer); final && p.answer.find("####") != std::string::npos) {
    if (p.teacher_response.empty()) p.teacher_response = p.answer;
    p.answer = *final;
  }
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
  // The atomic skills the row uses ([curriculum] counts what its SFT stage covers), and the curriculum set it
  // belongs to (task param train_set; no set: every set).
  if (auto m = row.find("modules"); m != row.end() && !m->is_null()) {
    if (!m->is_array()) field_error(where, "modules", "a list of strings (the atomic skills the row uses)", &*m);
    for (size_t i = 0; i < m->size(); ++i) {
      const json& x = (*m)[i];
      if (!x.is_string() || x.get<std::string>().empty())
        field_error(where, "modules[" + std::to_string(i) + "]", "a non-empty string (a module's name)", &x);
      if (std::find(p.modules.begin(), p.modules.end(), x.get<std::string>()) == p.modules.end())
        p.modules.push_back(x.get<std::string>());
    }
  }
  if (auto st = row.find("set");
      st != row.end() && !st->is_null() && (!st->is_string() || st->get<std::string>().empty()))
    field_error(where, "set", "a non-empty string (the curriculum set the row belongs to, e.g. \"sft\" or \"rl\")",
                &*st);
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
  const std::string close = p.answer.empty() ? "" : "#### " + p.answer;
  if (!gold.empty()) {  // the row's own completion, closed with the answer only where the checker reads none in it
    p.gold_solution = gold;
    if (!close.empty() && !reward::extract_math_answer(gold)) p.gold_solution += "\n" + close;
    if (p.teacher_response.empty()) p.teacher_response = gold;
  } else if (!p.teacher_response.empty()) {
    p.gold_solution = p.teacher_response;
    if (!close.empty() && !reward::extract_gsm8k(p.teacher_response)) p.gold_solution += "\n" + close;
  } else {
    p.gold_solution = close;
  }
  return p;
}

}  // namespace

std::vector<Problem> load_jsonl_problems(const std::string& path) {
  return read_jsonl_rows(path, "task 'dataset' expects a JSONL file", parse_row);
}

void DatasetConfig::validate(const std::string& task) const {
  TEMPER_CHECK(!path.empty()) << "task '" << task
                              << "': parameter 'path' is required: expected a JSONL file, got nothing";
  TEMPER_CHECK(eval_fraction >= 0 && eval_fraction < 1)
      << "task '" << task << "': parameter 'eval_fraction': expected a number in [0, 1), got " << eval_fraction;
  TEMPER_CHECK(!train_set.empty()) << "task '" << task
                                   << "': parameter 'train_set': expected \"all\" or a set's name, got \"\"";
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
  if (task == "dataset") c.train_set = r.get_string("train_set", c.train_set);
  r.finish();
  c.validate(task);
  return c;
}

namespace {

// A directory opens as an empty stream and would read as "no rows": refused naming the parameter.
void check_not_directory(const std::string& task, const std::string& key, const std::string& path) {
  std::error_code ec;
  TEMPER_CHECK(!std::filesystem::is_directory(path, ec))
      << "task '" << task << "': parameter '" << key << "' = '" << path
      << "': is a directory; expected a JSONL file (one JSON object per line)";
}

}  // namespace

void load_splits(const DatasetConfig& cfg, const std::string& task,
                 const std::function<std::vector<Problem>(const std::string&)>& load, std::vector<Problem>& train,
                 std::vector<Problem>& eval) {
  cfg.validate(task);
  check_not_directory(task, "path", cfg.path);
  if (!cfg.eval_path.empty()) check_not_directory(task, "eval_path", cfg.eval_path);
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
      TEMPER_LOG(warn) << "task '" << task << "': " << overlap << " prompts of " << cfg.path << " also appear in "
                       << cfg.eval_path << "; eval is not disjoint from train";
    }
    return;
  }
  const auto cut = static_cast<uint64_t>(cfg.eval_fraction * 1e6);
  for (Problem& p : rows) (stable_hash(canonical_prompt(p)) % 1000000 < cut ? eval : train).push_back(std::move(p));
  TEMPER_CHECK(!train.empty()) << "task '" << task << "': eval_fraction=" << cfg.eval_fraction << " leaves no rows of "
                               << cfg.path << " for training";
}

namespace {

// The `set` field of a row ("" when it has none): checked when the row was read.
std::string set_of(const Problem& p) {
  if (!p.row) return {};
  const json row = json::parse(*p.row);
  auto it = row.find("set");
  return it == row.end() || !it->is_string() ? std::string() : it->get<std::string>();
}

}  // namespace

DatasetTask::DatasetTask(DatasetConfig cfg) : cfg_(std::move(cfg)) {
  load_splits(cfg_, "dataset", load_jsonl_problems, train_, eval_);
  std::set<std::string> modules;
  for (const auto* rows : {&train_, &eval_})
    for (const Problem& p : *rows) modules.insert(p.modules.begin(), p.modules.end());
  inventory_.assign(modules.begin(), modules.end());
  if (cfg_.train_set == "all") return;
  std::vector<Problem> kept;
  std::set<std::string> sets;
  for (Problem& p : train_) {
    const std::string s = set_of(p);
    if (!s.empty()) sets.insert(s);
    if (s.empty() || s == cfg_.train_set) kept.push_back(std::move(p));
  }
  TEMPER_CHECK(!kept.empty() && (sets.empty() || sets.count(cfg_.train_set)))
      << "task 'dataset': parameter 'train_set' = \"" << cfg_.train_set << "\": no training row of " << cfg_.path
      << " has field 'set' = \"" << cfg_.train_set << "\" (rows without 'set' belong to every set); the file's sets: "
      << (sets.empty() ? std::string("none") : join_sets(sets));
  train_ = std::move(kept);
}

std::vector<std::string> DatasetTask::module_inventory() const {
  TEMPER_CHECK(!inventory_.empty())
      << "task 'dataset': " << cfg_.path
      << ": no row has the field 'modules' (a list of the atomic skills the row uses, e.g. \"modules\": [\"add\", "
         "\"carry\"]), which [curriculum] needs to count what its SFT stage covers; add it to the rows";
  return inventory_;
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
  v.correct = v.extracted && !p.answer.empty() && reward::math_answers_equal(*v.extracted, p.answer);
  v.reward = v.correct ? 1.0 : 0.0;
  return v;
}

Answerless find_answerless(const Task& task, Split split) {
  Answerless a;
  const int64_t n = task.size(split);
  for (int64_t i = 0; i < n; ++i) {
    Problem p = task.problem(split, static_cast<uint64_t>(i));
    if (!p.answer.empty()) continue;
    if (a.count++ == 0) a.first_id = p.id;
  }
  return a;
}

void require_answers(const Task& task, const std::string& who, const std::vector<Split>& splits) {
  for (Split split : splits) {
    Answerless a = find_answerless(task, split);
    TEMPER_CHECK(a.count == 0)
        << who << ": " << a.count << " " << split_name(split) << " problem(s) of task '" << task.name()
        << "' have no answer (the first: " << a.first_id
        << "), and the builtin checker would score every completion of them 0: give each row an "
        << "'answer', or score with your own reward ([[reward]] program = [...]) instead of builtin";
  }
}

}  // namespace temper::tasks

#include "temper/app/input_scan.h"

#include <algorithm>
#include <map>
#include <vector>

#include "temper/core/error.h"
#include "temper/tasks/filtered_task.h"

namespace temper::app {

namespace {

struct Measured {
  SplitScan scan;
  std::vector<uint64_t> over;  // indices of the prompts over the limit
  int64_t no_gold = 0;         // ScanOptions::sft: kept rows without a gold solution, and the first one's id
  std::string first_no_gold;
  bool stream = false;
};

Measured measure(const tasks::Task& task, tasks::Split split, const rl::PromptCodec& codec, int64_t limit, bool sft,
                 const ScanOptions& o) {
  Measured m;
  m.scan.limit = limit;
  const int64_t size = task.size(split);
  m.stream = size < 0;
  const int64_t n = m.stream ? o.stream_rows : size;
  for (int64_t i = 0; i < n; ++i) {
    const tasks::Problem p = task.problem(split, static_cast<uint64_t>(i));
    const auto len = static_cast<int64_t>(codec.encode_prompt(p).size());
    ++m.scan.measured;
    if (len > limit) {
      m.over.push_back(static_cast<uint64_t>(i));
      if (len > m.scan.longest_over) m.scan.longest_over = len, m.scan.longest_over_id = p.id;
      continue;
    }
    if (len > m.scan.longest) m.scan.longest = len, m.scan.longest_id = p.id;
    if (!sft) continue;
    if (p.gold_solution.empty()) {
      if (m.no_gold++ == 0) m.first_no_gold = p.id;
      continue;
    }
    // SFT cuts a row at the context (rl/sft.cpp: prompt + gold resized to the context, the loss on the
    // completion tokens that fit), as TRL's max_length does: the row trains on its solution's first part, so it
    // is kept and counted here rather than skipped (its prompt fits: the part cut is the solution's end).
    const int64_t row = len + static_cast<int64_t>(codec.encode_completion(p.gold_solution).size());
    if (row > m.scan.longest_row) m.scan.longest_row = row, m.scan.longest_row_id = p.id;
    if (row > o.context) ++m.scan.cut;
  }
  return m;
}

const char* rows_word(tasks::Split s) {
  return s == tasks::Split::train ? "training prompts" : "held-out prompts";
}

// "longer than rl.max_prompt_tokens (512 tokens" or "longer than the model's context leaves for a completion
// (2047 tokens"; the caller closes the parenthesis.
std::string over_what(int64_t limit, bool from_key) {
  return from_key ? "longer than rl.max_prompt_tokens (" + std::to_string(limit) + " tokens"
                  : "longer than the model's context leaves for a completion (" + std::to_string(limit) + " tokens";
}

std::string longest_over(const SplitScan& s) {
  return "the longest: " + s.longest_over_id + ", " + std::to_string(s.longest_over) + " tokens";
}

// The keys that raise a split's limit.
std::string raise_keys(bool from_key, const ScanOptions& o) {
  if (from_key) return "raise rl.max_prompt_tokens";
  if (!o.context_key.empty()) return "raise " + o.context_key;
  return "shorten those rows (the model's context is fixed; model.system_prompt and model.user_template count too)";
}

}  // namespace

ScanOutcome scan_prompts(std::shared_ptr<const tasks::Task> task, const rl::PromptCodec& codec, const ScanOptions& o) {
  TEMPER_CHECK(task) << o.source << ": no task to scan";
  TEMPER_CHECK(o.policy == "skip" || o.policy == "refuse")
      << o.source << ": task.long_prompts must be \"skip\" or \"refuse\", got '" << o.policy << "'";
  TEMPER_CHECK(o.context >= 2) << o.source << ": the model's context must be >= 2 tokens, got " << o.context;
  const int64_t ctx_limit = o.context - 1;  // a prompt leaves one token at least for the completion
  const bool train_from_key = o.max_prompt_tokens > 0 && o.max_prompt_tokens < ctx_limit;
  ScanOutcome out;
  out.task = task;
  std::map<tasks::Split, std::vector<uint64_t>> left_out;
  std::vector<std::string> said;
  for (tasks::Split split : {tasks::Split::train, tasks::Split::eval}) {
    const bool train = split == tasks::Split::train;
    if (!(train ? o.train : o.eval)) continue;
    const bool from_key = train && train_from_key;
    const int64_t limit = from_key ? o.max_prompt_tokens : ctx_limit;
    Measured m = measure(*task, split, codec, limit, train && o.sft, o);
    SplitScan& s = train ? out.train : out.eval;
    s = m.scan;
    const std::string what = over_what(limit, from_key), fix = raise_keys(from_key, o);
    if (!m.over.empty()) {
      const std::string counted =
          std::to_string(m.over.size()) + " of " +
          (m.stream ? "the first " + std::to_string(m.scan.measured) : std::to_string(m.scan.measured)) + " " +
          rows_word(split);
      TEMPER_CHECK(!m.stream) << o.source << ": " << counted << " are " << what << "; " << longest_over(s)
                              << "); a procedural stream cannot leave rows out: " << fix;
      TEMPER_CHECK(static_cast<int64_t>(m.over.size()) < m.scan.measured)
          << o.source << ": every one of the " << m.scan.measured << " " << rows_word(split) << " is " << what << "; "
          << longest_over(s) << "): nothing would be left (task.long_prompts cannot skip them all); " << fix;
      TEMPER_CHECK(o.policy == "skip") << o.source << ": " << counted << " are " << what << "; " << longest_over(s)
                                       << "); task.long_prompts = \"skip\" leaves them out, or " << fix;
      s.skipped = static_cast<int64_t>(m.over.size());
      said.push_back("skipped " + counted + " " + what + "; " + longest_over(s) + ")");
      left_out[split] = std::move(m.over);
    }
    TEMPER_CHECK(m.no_gold == 0) << o.source << ": sft: " << m.no_gold << " of " << m.scan.measured - s.skipped
                                 << " training rows have no gold solution to imitate (the first: " << m.first_no_gold
                                 << "); give each a solution, completion or answer column (or a final assistant "
                                    "turn), set sft.completions = \"teacher\" with a [teacher], or sft.steps = 0";
    if (s.cut > 0)
      said.push_back("SFT cuts " + std::to_string(s.cut) + " training rows whose prompt + solution pass the context (" +
                     std::to_string(o.context) + " tokens; the longest: " + s.longest_row_id + ", " +
                     std::to_string(s.longest_row) + " tokens) at the context");
  }
  if (!left_out.empty()) out.task = std::make_shared<tasks::FilteredTask>(task, left_out);
  for (size_t i = 0; i < said.size(); ++i) out.message += (i ? "; " : o.source + ": ") + said[i];
  if (!left_out.empty()) out.message += "; task.long_prompts = \"refuse\" stops instead";
  return out;
}

}  // namespace temper::app

// Task "user_sim": a user simulator learns to write a real user's next turn (Turing-RL, spec
// methods-other section 2). Problems come from JSONL conversations ("history", "context", "reply"; optional
// "reasoning", "user", "id"); completions take the paper's format. The task's own verifier is the similarity
// baseline; Turing rewards come from a judge ([rl.turing], rl/methods/turing.h). Eval from eval_path or
// eval_fraction of the train file (by a hash of the prompt), as task "dataset". In detail: above UserSimTask.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "temper/tasks/dataset.h"
#include "temper/tasks/task.h"

namespace temper::tasks {

// A simulator completion, parsed: how many reasoning blocks and "[HUMAN]:" tags it has and the reply.
struct SimReply {
  int reasoning_blocks = 0;            // well-formed "<reasoning>...</reasoning>" blocks
  int stray_tags = 0;                  // unmatched <reasoning> or </reasoning>
  int human_tags = 0;                  // "[HUMAN]:" occurrences
  bool reasoning_after_reply = false;  // a reasoning tag after the (last) "[HUMAN]:"
  bool reasoning_has_alpha = false;    // some reasoning block holds an alphabetic character
  std::string reasoning;               // the first block's text
  std::string reply;                   // after the last "[HUMAN]:" (without one: after the last </reasoning>), trimmed
};
SimReply parse_sim_reply(std::string_view completion);

// Words of a turn, lower-cased, punctuation stripped ("Great, thanks!" -> {"great", "thanks"}).
std::vector<std::string> turn_words(std::string_view s);
// Word counts as the length penalty counts them (whitespace-separated).
int64_t word_count(std::string_view s);

struct UserSimConfig : DatasetConfig {  // path, eval_path, eval_fraction as task "dataset"
  static UserSimConfig from_params(const TaskParams& params);
};

// Every row of a user-simulator JSONL file as a Problem (errors name file:line and the field).
std::vector<Problem> load_user_sim_jsonl(const std::string& path);
// The prompt a simulator sees: its user's earlier turns, then the conversation, then the cue.
std::string user_sim_prompt(const std::vector<std::string>& history, const std::string& context);

// Problems come from JSONL conversations, one object per line:
//   "history"   the user's earlier turns: a list of strings (may be empty)
//   "context"   the conversation so far: a list of {role, content} or a string
//   "reply"     the real next user turn (non-empty string)
//   optional "reasoning" (first-person private reasoning that leads to the reply), "user" (who wrote it:
//   per-user statistics), "id" (string or integer; default "<file>:<line>").
// The completion format (the paper's): "<reasoning>...</reasoning>\n[HUMAN]: <reply>"; the gold solution is
// that, with the row's reasoning (without one: "[HUMAN]: <reply>"). The task's own verifier is the
// similarity baseline: reward = word-level F1 of the parsed reply against the real one (Sim-RL's key-point
// coverage, in miniature), correct = equal after case and space folding.
class UserSimTask : public Task {
 public:
  explicit UserSimTask(UserSimConfig cfg);
  std::string name() const override { return "user_sim"; }
  bool has_answer_lines() const override { return false; }
  bool has_reasoning_states() const override { return false; }
  int64_t size(Split split) const override;
  Problem problem(Split split, uint64_t index) const override;
  Verdict verify(const Problem& p, const std::string& completion) const override;
  std::optional<std::string> extract_answer(const std::string& completion) const override;

 private:
  UserSimConfig cfg_;
  std::vector<Problem> train_, eval_;
};

}  // namespace temper::tasks

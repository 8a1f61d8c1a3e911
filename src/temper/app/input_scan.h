// A run's inputs checked before its first step: every prompt it will send, in tokens (templates applied), the
// training split's against what the context leaves for a completion (or rl.max_prompt_tokens), the held-out
// split's against the context. Rows over are left out and counted (task.long_prompts = "skip": a FilteredTask)
// or the run is refused naming the key that fixes it ("refuse"); a row that would stop RL or evaluation at the
// step that draws it (and every resume after) is found here instead. SFT's rows (prompt + gold solution) are
// measured too. Leaves out prompts that methods build during a step (ZPPO's candidates, REVES's revisions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "temper/rl/prompt_codec.h"
#include "temper/tasks/task.h"

namespace temper::app {

struct ScanOptions {
  int64_t context = 0;             // the model's context: prompt + completion tokens
  int64_t max_prompt_tokens = 0;   // training prompts at most (rl.max_prompt_tokens; 0: what the context leaves)
  std::string context_key;         // the key that raises the context ("model.context" for a preset); "": fixed
  std::string policy = "skip";     // task.long_prompts: "skip" or "refuse"
  std::string source;              // the recipe's name, first in every message
  bool train = true, eval = true;  // the splits scanned
  // SFT imitates the train split's gold solutions: a row without one is refused (it stopped SFT at the step that
  // drew it), and prompt + solution is measured (a row longer than the context is cut there, not skipped: below).
  bool sft = false;
  int64_t stream_rows = 64;  // a procedural stream (size < 0): its first rows stand for it
};

struct SplitScan {
  int64_t measured = 0;  // rows encoded
  int64_t limit = 0;     // tokens a prompt may have
  int64_t skipped = 0;   // rows left out: prompt longer than `limit`
  int64_t longest = 0;   // tokens of the longest kept prompt, and its problem's id
  std::string longest_id;
  int64_t longest_over = 0;  // tokens of the longest prompt left out, and its id
  std::string longest_over_id;
  // ScanOptions::sft (train): prompt + gold solution (end token included) of the longest kept row, and how many
  // kept rows pass the context (SFT trains on the part that fits).
  int64_t longest_row = 0;
  std::string longest_row_id;
  int64_t cut = 0;
};

struct ScanOutcome {
  std::shared_ptr<const tasks::Task> task;  // the task given, or a tasks::FilteredTask without the skipped rows
  SplitScan train, eval;
  std::string message;  // one line for the log when rows were skipped or cut; empty otherwise
};

// Throws temper::Error, the message first naming o.source, when: a prompt is over its limit under "refuse" (naming
// task.long_prompts = "skip" and the key that raises the limit); every row of a scanned split is over (whatever the
// policy: nothing would be left); a procedural stream's first rows have one over (a stream cannot leave rows out);
// under o.sft a kept training row has no gold solution. A split of size 0 is left as it is.
ScanOutcome scan_prompts(std::shared_ptr<const tasks::Task> task, const rl::PromptCodec& codec, const ScanOptions& o);

}  // namespace temper::app

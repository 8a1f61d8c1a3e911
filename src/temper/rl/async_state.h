// The batches [rl.async]'s explorer rolled out ahead of the trainer (each with the weights version it was
// sampled with), and their checkpoint text: a resumed run takes the very completions the uninterrupted one
// would have, so it needs neither the previous version's weights nor a regeneration (the text holds each pending
// batch's problems, prompts and completions: about 16 bytes per generated token, base64). Leaves out the
// explorer (async_explorer.h) and the loop (rl_trainer.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "temper/rollout/engine.h"
#include "temper/tasks/task.h"

namespace temper::rl {

struct ExploredBatch {
  int64_t step = 0;     // the RL step that trains on it (its round 0)
  int64_t version = 0;  // the weights it was sampled with: the trainer's steps done when it was launched
  std::vector<tasks::Problem> problems;       // the round's problems (the task's draws, then methods' extras)
  std::vector<std::vector<int32_t>> prompts;  // request i's prompt tokens: problems[i] encoded
  std::vector<rollout::Completion> done;      // in (request, member) order; empty while the explorer runs it
  double seconds = 0;                         // the explorer's time on it (not saved)
};

// Checkpoint text (trainer_state.json's "async" entry) of batches whose completions are all in.
std::string encode_explored(const std::deque<ExploredBatch>& batches);
std::deque<ExploredBatch> decode_explored(const std::string& text);

}  // namespace temper::rl

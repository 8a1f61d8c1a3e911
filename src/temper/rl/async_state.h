// The batches [rl.async]'s explorer rolled out ahead of the trainer (each with the weights version it was
// sampled with), and their checkpoint text: a resumed run takes the very completions the uninterrupted one
// would have, so it needs neither the previous version's weights nor a regeneration (the text holds each pending
// batch's problems, prompts and completions: about 16 bytes per generated token, base64; with [env] its
// conversations' trajectories, scored, and the source's metrics instead of prompts and completions). Leaves out the
// explorer (async_explorer.h) and the loop (rl_trainer.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/bytes.h"
#include "temper/rl/batch.h"
#include "temper/rollout/engine.h"
#include "temper/tasks/task.h"

namespace temper::rl {

struct ExploredBatch {
  int64_t step = 0;     // the RL step that trains on it (its round 0)
  int64_t version = 0;  // the weights it was sampled with: the trainer's steps done when it was launched
  std::vector<tasks::Problem> problems;       // the round's problems (the task's draws, then methods' extras)
  std::vector<std::vector<int32_t>> prompts;  // request i's prompt tokens: problems[i] encoded
  std::vector<rollout::Completion> done;      // in (request, member) order; empty while the explorer runs it
  // [env]: the conversations instead (ConversationSource::run's trajectories, scored; problem = an index into
  // `problems`) and the source's metrics of their run (env/...); no prompts or completions then.
  std::vector<Trajectory> conversations;
  std::vector<std::pair<std::string, double>> env_metrics;
  double seconds = 0;                         // the explorer's time on it (not saved)
};

// Checkpoint text (trainer_state.json's "async" entry) of batches whose completions are all in: "temper-async-1:"
// without conversations (as before [env] ran with [rl.async]), "temper-async-2:" with them; both decode.
std::string encode_explored(const std::deque<ExploredBatch>& batches);
std::deque<ExploredBatch> decode_explored(const std::string& text);

// A trajectory's verdict (reward, rewards, reward_terms, components, reward_info, correct) as the checkpoint holds it;
// the data-parallel gather of rewards sends the same bytes (rl_trainer.cpp). `what` names the bytes in errors.
void put_verdict(ByteWriter& w, const Trajectory& t);
void get_verdict(ByteReader& r, Trajectory& t, const char* what);

// Pieces of that encoding the explorer ranks' conversation jobs send (async_remote.cpp): a round's problems (a count,
// then each), and its conversations with the source's metrics (ExploredBatch::conversations and env_metrics).
void put_problems(ByteWriter& w, const std::vector<tasks::Problem>& problems);
void get_problems(ByteReader& r, std::vector<tasks::Problem>& out);  // appends
void put_conversations(ByteWriter& w, const std::vector<Trajectory>& conversations,
                       const std::vector<std::pair<std::string, double>>& metrics);
void get_conversations(ByteReader& r, std::vector<Trajectory>& conversations,
                       std::vector<std::pair<std::string, double>>& metrics);  // appends

}  // namespace temper::rl

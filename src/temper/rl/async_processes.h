// [rl.async] with explorer processes (rl.async.explorer_processes = N, one trainer process): Spotlight's
// preemption-tolerant explorers (spotlight/explorer_pool.h, issue 39 item 3) rolling out the language-model loop's
// batches. The trainer starts N programs (`temper train --explorer-fd 3`, each on one Unix socket, in a process group
// of its own) and sends each the run's resolved recipe; each builds the policy as the trainer does (model.path or the
// preset, [lora] and its held base) and a rollout engine of rl.kv_memory_mb, and waits for weights. Per version the
// trainer sends the flat f32 weights (under LoRA the adapters alone) from memory and puts the batch on the pull queue
// in blocks of rl.async.request_prompts requests; an idle explorer pulls a block, rolls it out alone on that
// version's weights and returns its completions, committed as they arrive. An explorer killed (SIGKILL, the
// preemption schedule rl.async.preempt_every_s, or rl.async.kill_steps in tests) loses only the block it held: the
// block goes back to the front of the queue (at most 7 times: an eighth explorer dying on one block ends the run naming
// it), the committed blocks are kept, and a replacement starts rl.async.respawn_delay_s later and gets the current
// version from the trainer's memory (no checkpoint is read). A block's completions depend on its requests, their
// sampling streams and the version's weights only (each is decoded alone: never batched with another block), so a
// run whose explorers were killed and replaced gives the same batches, bit for bit, as one whose were not, whatever
// the explorers' count, threads or timing. Leaves out which requests (rl_trainer.cpp), the explorer program's setup
// (app/train_cmd.cpp) and [env]'s conversations (refused: explorer ranks converse, async_remote.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "temper/model/lora.h"
#include "temper/model/transformer.h"
#include "temper/rl/async_config.h"
#include "temper/rl/async_explorer.h"
#include "temper/rollout/pooled_engine.h"
#include "temper/spotlight/explorer_loop.h"
#include "temper/spotlight/explorer_pool.h"
#include "temper/spotlight/work_queue.h"

namespace temper::rl {

class ProcessExplorer final : public Explorer {
 public:
  // `cmd`: the explorer program and its setup message (app: the recipe); the pool starts cfg.explorer_processes
  // of them now. `trainer_threads`: the trainer's threads while the explorers roll out (they run on the others).
  // `seed`: the preemption schedule's stream.
  ProcessExplorer(spotlight::ExplorerCommand cmd, const AsyncConfig& cfg, int trainer_threads, uint64_t seed);
  ~ProcessExplorer() override;  // stops the explorers (up to 2 s, then SIGKILL)
  void launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) override;
  void launch_conversations(const Transformer& policy, ConversationJob job) override;
  bool in_flight() const override { return in_flight_; }
  // Blocks until every block of the job is committed; throws when a block was dropped (its explorers died `tries`
  // times) or no explorer is alive or coming.
  std::vector<rollout::Completion> wait() override;
  Conversations conversations() override { return {}; }
  double last_job_s() const override { return job_s_; }
  double waited_s() const override { return waited_s_; }
  const std::atomic<int>* trainer_threads() const override { return &trainer_threads_; }
  void launched(int64_t step) override;
  void add_metrics(Metrics& m) override;
  const spotlight::ExplorerPool& pool() const { return *pool_; }

  static constexpr int64_t kFailedStarts = 3;  // explorers dying before set-up with none running: an error
  static constexpr int64_t kTries = 8;  // explorers a block may be handed to (a block killing them all: an error)

 private:
  AsyncConfig cfg_;
  std::atomic<int> trainer_threads_;
  spotlight::WorkQueue queue_{kTries};
  std::unique_ptr<spotlight::ExplorerPool> pool_;
  std::vector<int64_t> begin_;  // the job's blocks: block b holds requests [begin_[b], begin_[b + 1])
  std::vector<float> staging_;  // the version being sent (weights or adapters)
  int64_t version_ = -1;        // the job in flight's version (the queue's step)
  bool in_flight_ = false;
  double launched_at_ = 0, job_s_ = 0, waited_s_ = 0;
  spotlight::PoolStats last_stats_;  // at the previous add_metrics: the step's deaths and joins are the difference
  spotlight::QueueCounters last_counters_;
  std::vector<bool> joined_;  // joins already reported (PoolStats::joins' order)
};

// The explorer program's side: the policy (its weights or adapters replaced by each version the trainer sends) and
// its own rollout engine; a request is a block of rollout requests (async_remote.h's encoding), its result their
// completions (rollout/sharded.h's).
class RolloutScorer final : public spotlight::Scorer {
 public:
  RolloutScorer(std::unique_ptr<Transformer> model, std::unique_ptr<LoraAdapters> lora, int64_t kv_memory_mb,
                rollout::EngineConfig engine);
  int64_t param_count() const override;
  void set_params(std::span<const float> p) override;
  spotlight::Message answer(const spotlight::Message& request) override;

 private:
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<LoraAdapters> lora_;  // attached to model_ (null without [lora])
  rollout::PooledEngine engine_;
};

}  // namespace temper::rl

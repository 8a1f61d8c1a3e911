// [rl.async] with explorer processes (rl.async.explorer_processes = N, one trainer process): Spotlight's
// preemption-tolerant explorers (spotlight/explorer_pool.h, issue 39 item 3) rolling out the language-model loop's
// batches. The trainer starts N programs (`temper train --fd 3`, each on one Unix socket, in a process group of its
// own) and sends each the run's resolved recipe; each builds the policy as the trainer does (without [lora] only
// model.path's structure: every parameter comes with each version; with [lora] the frozen base as the recipe holds
// it) and a rollout engine of rl.kv_memory_mb, and waits for weights. Per version the trainer sends the flat f32
// weights (under LoRA the adapters alone) from memory and puts the batch on the pull queue in blocks of
// rl.async.request_prompts requests; an idle explorer pulls a block, rolls it out alone on that version's weights and
// returns its completions, committed as they arrive. An explorer killed (SIGKILL, the preemption schedule
// rl.async.preempt_every_s, or rl.async.kill_steps in tests) loses only the block it held: the block goes back to the
// front of the queue (a block the eighth explorer dies holding ends the run naming it), the committed blocks are kept,
// and a replacement starts rl.async.respawn_delay_s later and gets the current version from the trainer's memory (no
// checkpoint is read). A block's completions depend on its requests, their sampling streams and the version's weights
// only (each is decoded alone: never batched with another block; and the kernels' bits do not depend on the thread
// count), so a run whose explorers were killed and replaced gives the same batches, bit for bit, as one whose were
// not, whatever the explorers' count or timing. With [env] a block is a block of a round's problems, conversed by an
// explorer through its own environment and source (built from the same [env]) with episodes named and seeded by their
// index in the whole round; the trainer merges the blocks' env/ metrics in block order by the source's rules. Leaves
// out which requests (rl_trainer.cpp) and the explorer program's setup (app/train_explorer.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "temper/env/environment.h"
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
  // Blocks until every block of the job is committed; throws when a block was dropped (kTries explorers died holding
  // it), when no explorer is alive or coming, or when kFailedStarts in a row died setting up and none is running.
  std::vector<rollout::Completion> wait() override;
  const std::atomic<int>* trainer_threads() const override { return &trainer_threads_; }
  void launched(int64_t step) override;
  void add_metrics(Metrics& m) override;

  static constexpr int64_t kFailedStarts = 3;  // explorers in a row dying setting up, none running: an error
  static constexpr int64_t kTries = 8;         // explorers a block may be handed to

 private:
  void launch_blocks(const Transformer& policy, int64_t count,
                     const std::function<std::string(int64_t, int64_t)>& payload);

  AsyncConfig cfg_;
  std::atomic<int> trainer_threads_;
  spotlight::WorkQueue queue_{kTries};
  std::unique_ptr<spotlight::ExplorerPool> pool_;
  std::vector<int64_t> begin_;                  // the job's blocks: block b holds requests [begin_[b], begin_[b + 1])
  int64_t version_ = -1;                        // the job in flight's version (the queue's step)
  const ConversationSource* source_ = nullptr;  // a conversation job's: how the blocks' env/ metrics merge
  double launched_at_ = 0;
  // At the previous add_metrics: the step's deaths, re-queued blocks and lost seconds are the difference.
  int64_t last_deaths_ = 0, last_requeued_ = 0;
  double last_lost_s_ = 0;
  std::vector<bool> joined_;  // joins already reported (PoolStats::joins' order)
};

// The explorer program's side: the policy (its weights or adapters replaced by each version the trainer sends), its
// own rollout engine and, with [env], its own environment and the conversation source that talks to it; a
// request is a block of rollout requests (async_remote.h's encoding), its result their completions
// (rollout/sharded.h's), or a block of a round's problems (encode_conversation_block), its result the block's scored
// conversations and env/ metrics.
class RolloutScorer final : public spotlight::Scorer {
 public:
  RolloutScorer(std::unique_ptr<Transformer> model, std::unique_ptr<LoraAdapters> lora, int64_t kv_memory_mb,
                rollout::EngineConfig engine, std::unique_ptr<env::Environment> env = nullptr,
                std::unique_ptr<ConversationSource> source = nullptr);
  ~RolloutScorer() override;
  int64_t param_count() const override;
  void set_params(std::span<const float> p) override;
  spotlight::Message answer(const spotlight::Message& request) override;

 private:
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<LoraAdapters> lora_;  // attached to model_ (null without [lora])
  rollout::PooledEngine engine_;
  std::unique_ptr<env::Environment> env_;       // [env] (null without)
  std::unique_ptr<ConversationSource> source_;  // talks to env_: destroyed first
};

}  // namespace temper::rl

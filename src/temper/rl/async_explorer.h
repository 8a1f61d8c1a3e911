// The explorer of [rl.async] (async_config.h): a thread that rolls out requests on a snapshot of the policy's
// weights (a second copy of the parameters: 4 bytes each, plus its own KV pool of rl.kv_memory_mb) through its
// own engine while the trainer's thread updates the live weights. One job at a time: launch() copies the
// weights on the caller's thread (so a job's weights are exactly the version it was launched at) and hands the
// requests over (or launch_conversations() a round of [env]'s conversations); wait() returns the completions.
// Under LoRA the snapshot shares the policy's frozen base (its flat f32 buffer and a bf16/int4 held base, read-only: no
// copy) and holds adapters of its own, the only values a launch copies; it rolls out base + adapters unmerged, as the
// policy does. Leaves out which requests (the trainer draws them) and what becomes of the completions (rl_trainer.cpp);
// rollout hooks (the methods that steer decoding are refused).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "temper/core/core_split.h"
#include "temper/model/lora.h"
#include "temper/model/transformer.h"
#include "temper/rl/env_rollout.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/pooled_engine.h"

namespace temper::rl {

// [env]: a round's conversations as an explorer's job: ConversationSource::run(engine, problems, 0, group_size,
// request, context, episode_prefix, offset) on the explorer's engine (RlTrainer::conversation_request and episode_tag
// build the request and the prefix, as for the synchronous loop). The explorer thread converses through `source` under
// `lock` (the trainer's: dynamic sampling's extra rounds converse on the trainer's thread); an explorer rank through
// its own, built from the same [env] (both null there), a block of the round's problems (`offset`: where the block
// starts in the round, 0 for a whole round).
struct ConversationJob {
  std::vector<tasks::Problem> problems;
  int64_t group_size = 0, context = 0;
  rollout::RolloutRequest request;
  std::string episode_prefix;
  int64_t offset = 0;
  ConversationSource* source = nullptr;
  std::mutex* lock = nullptr;
};

// What a conversation job returns: the trajectories, scored, in (problem, member) order (problem indexes the job's
// problems), and the source's metrics of the run (env/...).
struct Conversations {
  std::vector<Trajectory> trajectories;
  Metrics metrics;
};
Conversations run_conversations(const ConversationJob& job, ConversationSource& source, rollout::RolloutEngine& engine);

// What the trainer sees of an explorer: one job at a time, launched with the current weights, waited for. Three
// kinds: a thread in this process (AsyncExplorer), explorer ranks over the communicator (async_remote.h) and explorer
// processes the trainer starts (async_processes.h).
class Explorer {
 public:
  virtual ~Explorer() = default;
  // Starts rolling out `reqs` on `policy`'s weights as they are now (the job's version). No job may be in flight.
  virtual void launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) = 0;
  // Starts `job`'s conversations on `policy`'s weights as they are now; wait() then returns no completions and
  // conversations() the job's output.
  virtual void launch_conversations(const Transformer& policy, ConversationJob job) = 0;
  bool in_flight() const { return in_flight_; }
  // The launched job's completions in (request, member) order; blocks until it is done; rethrows its error.
  virtual std::vector<rollout::Completion> wait() = 0;
  // After wait(): the last conversation job's output, moved out (empty after a list of requests).
  Conversations conversations() { return std::move(conv_); }
  double last_job_s() const { return job_s_; }   // seconds the last finished job generated
  double waited_s() const { return waited_s_; }  // seconds the last wait() blocked
  // The threads the trainer's thread may use now, following the explorer's work where the two share this process's
  // cores (a moving ThreadLimit's count); null where they do not (explorer ranks).
  virtual const std::atomic<int>* trainer_threads() const { return nullptr; }
  // After launch(): the launched batch is step `step`'s (0-based; explorer processes' kill_steps).
  virtual void launched(int64_t /*step*/) {}
  // The explorers' own metrics of the step (explorer processes: their deaths, replacements and joins).
  virtual void add_metrics(Metrics& /*m*/) {}

 protected:
  // What the accessors above read, kept by each kind of explorer.
  bool in_flight_ = false;  // the trainer's view: launched and not yet waited for
  Conversations conv_;      // the last conversation job's output (written by the job, read after wait())
  double job_s_ = 0, waited_s_ = 0;
};

class AsyncExplorer final : public Explorer {
 public:
  // `explorer_threads` and `trainer_threads`: the two threads' shares of the cores while both compute; one that
  // waits (the explorer without a job, the trainer in wait()) lends its share to the other (core/core_split.h).
  AsyncExplorer(const Transformer& policy, int64_t kv_memory_mb, rollout::EngineConfig engine, int explorer_threads,
                int trainer_threads);
  ~AsyncExplorer();  // waits for the job in flight, then ends the thread
  AsyncExplorer(const AsyncExplorer&) = delete;
  AsyncExplorer& operator=(const AsyncExplorer&) = delete;

  // Copies `policy`'s weights (under LoRA: its adapters) into the snapshot and starts rolling out `reqs` on them
  // (launch_conversations: conversing through the job's source on the snapshot's engine). No job may be in flight.
  void launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) override;
  void launch_conversations(const Transformer& policy, ConversationJob job) override;
  std::vector<rollout::Completion> wait() override;
  const std::atomic<int>* trainer_threads() const override { return &split_.threads(kTrainer); }
  const Transformer& snapshot() const { return snap_.model; }

 private:
  // The copy of the policy, with its precision before the engine sizes the KV pool by it. From the first launch
  // with LoRA adapters on the policy, it shares the policy's weights (Transformer::share_weights: the base is
  // frozen, only the adapters train) and holds a copy of the adapters.
  struct Snapshot {
    explicit Snapshot(const Transformer& policy) : model(policy.config()) { model.set_precision(policy.precision()); }
    void follow(const Transformer& policy);  // the policy's weights as they are now
    Transformer model;
    std::unique_ptr<LoraAdapters> lora;    // the adapters' copy (null without LoRA)
    const LoraAdapters* source = nullptr;  // the policy's adapters it copies
  };
  // A job run on the snapshot's engine: what wait() returns.
  using EngineJob = std::function<std::vector<rollout::Completion>(rollout::RolloutEngine&)>;
  void launch_job(const Transformer& policy, EngineJob job);
  void loop();

  static constexpr int kTrainer = 0, kExplorer = 1;  // the sides of split_
  Snapshot snap_;
  rollout::PooledEngine engine_;
  CoreSplit split_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool job_ = false, done_ = false, quit_ = false;
  EngineJob fn_;  // the job handed over
  std::vector<rollout::Completion> out_;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace temper::rl

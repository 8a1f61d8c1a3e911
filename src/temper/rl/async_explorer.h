// The explorer of [rl.async] (async_config.h): a thread that rolls out requests on a snapshot of the policy's
// weights (a second copy of the parameters: 4 bytes each, plus its own KV pool of rl.kv_memory_mb) through its
// own engine while the trainer's thread updates the live weights. One job at a time: launch() copies the
// weights on the caller's thread (so a job's weights are exactly the version it was launched at) and hands the
// requests over (or launch_job() a function of the engine: [env]'s conversations); wait() returns the completions.
// Under LoRA the snapshot shares the policy's frozen base (its flat f32 buffer and a bf16/int4 held base, read-only: no
// copy) and holds adapters of its own, the only values a launch copies; it rolls out base + adapters unmerged, as the
// policy does. Leaves out which requests (the trainer draws them) and what becomes of the completions (rl_trainer.cpp);
// rollout hooks (the methods that steer decoding are refused).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "temper/model/lora.h"
#include "temper/model/transformer.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/pooled_engine.h"

namespace temper::rl {

// A job run on the explorer's engine (its snapshot's weights) instead of a list of requests: what wait() returns.
// [env]'s conversations are one (rl_trainer.cpp: the job keeps its trajectories itself and returns none).
using EngineJob = std::function<std::vector<rollout::Completion>(rollout::RolloutEngine&)>;

// What the trainer sees of an explorer: one job at a time, launched with the current weights, waited for. Two
// kinds: a thread in this process (AsyncExplorer) and explorer ranks over the communicator (async_remote.h).
class Explorer {
 public:
  virtual ~Explorer() = default;
  // Starts rolling out `reqs` on `policy`'s weights as they are now (the job's version). No job may be in flight.
  virtual void launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) = 0;
  // Starts `job` on the explorer's engine holding `policy`'s weights as they are now. Only an explorer in this
  // process runs one (explorer ranks take requests alone: this refuses).
  virtual void launch_job(const Transformer& policy, EngineJob job);
  virtual bool in_flight() const = 0;
  // The launched job's completions in (request, member) order; blocks until it is done; rethrows its error.
  virtual std::vector<rollout::Completion> wait() = 0;
  virtual double last_job_s() const = 0;  // seconds the last finished job generated
  virtual double waited_s() const = 0;    // seconds the last wait() blocked
};

class AsyncExplorer final : public Explorer {
 public:
  // `threads`: the explorer thread's ThreadLimit (core/thread_pool.h).
  AsyncExplorer(const Transformer& policy, int64_t kv_memory_mb, rollout::EngineConfig engine, int threads);
  ~AsyncExplorer();  // waits for the job in flight, then ends the thread
  AsyncExplorer(const AsyncExplorer&) = delete;
  AsyncExplorer& operator=(const AsyncExplorer&) = delete;

  // Copies `policy`'s weights (under LoRA: its adapters) into the snapshot and starts rolling out `reqs` on them
  // (launch_job: running `job` on the snapshot's engine). No job may be in flight.
  void launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) override;
  void launch_job(const Transformer& policy, EngineJob job) override;
  bool in_flight() const override { return in_flight_; }
  std::vector<rollout::Completion> wait() override;
  double last_job_s() const override { return job_s_; }
  double waited_s() const override { return waited_s_; }
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
  void loop();

  Snapshot snap_;
  rollout::PooledEngine engine_;
  int threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool job_ = false, done_ = false, quit_ = false;
  bool in_flight_ = false;  // the trainer's view: launched and not yet waited for
  EngineJob fn_;            // the job handed over
  std::vector<rollout::Completion> out_;
  std::exception_ptr error_;
  double job_s_ = 0, waited_s_ = 0;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace temper::rl

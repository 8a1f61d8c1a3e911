// The rollout engine as a server's generator: one thread owns the model and runs a single
// RolloutEngine::run() for the server's life, with this object as its RunDriver (requests join
// the running batch as they arrive: continuous batching; the thread sleeps while nothing is live)
// and its RolloutHook (each new token goes to its job's queue for streaming; a cancelled job's
// samples stop at their next token). HTTP threads only submit jobs and wait on their queues.
// top_logprobs: the engine records the chosen token's log-prob, not the distribution, so the
// policy's top-k come from one teacher-forced forward over prompt + completion once a sample is
// final (on the engine thread between steps; the same f32 policy, equal to the rollout's log-probs
// within the engine's 1e-5).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/run_driver.h"
#include "temper/serve/generation.h"

namespace temper::serve {

class EngineBackend final : public Backend, private rollout::RunDriver, private rollout::RolloutHook {
 public:
  // The model and pool are used by the engine thread only, from start() to shutdown().
  EngineBackend(Transformer& model, KvPool& pool, rollout::EngineConfig cfg);
  ~EngineBackend() override;

  void start();
  // Refuses new jobs, lets every queued and running one finish, then ends the engine thread.
  void shutdown();

  void submit(std::shared_ptr<GenJob> job) override;
  int64_t steps() const override { return steps_.load(); }
  int64_t jobs_done() const { return jobs_done_.load(); }

 private:
  struct Running {
    std::shared_ptr<GenJob> job;
    int64_t members_left = 0;
    std::vector<size_t> sent;  // tokens already pushed as events, per member
  };
  struct Scoring {  // a final sample whose top-k the next step boundary computes
    std::shared_ptr<GenJob> job;
    std::vector<int32_t> prompt;
    GenEvent done;
  };

  static constexpr int64_t kRequestsPerRun = 4096;
  void loop();
  void fail_running(const std::string& what);
  void score(Scoring& s);
  // RunDriver
  void incoming(std::vector<rollout::RolloutRequest>& add) override;
  void poll(std::vector<rollout::Continuation>& out, bool wait) override;
  bool closed() const override;
  void finished(rollout::Completion& c) override;
  // RolloutHook
  rollout::HookDecision after_token(const rollout::RolloutRequest& req, const rollout::Completion& c) override;
  void after_step(int64_t step) override;

  Transformer& model_;
  KvPool& pool_;
  rollout::RolloutEngine engine_;
  std::thread thread_;

  mutable std::mutex mu_;  // guards pending_ and closing_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenJob>> pending_;
  bool closing_ = false;

  // The engine thread's own state.
  int64_t next_index_ = 0;  // request index the engine gives the next incoming request
  std::map<int64_t, Running> running_;
  std::vector<Scoring> scoring_;
  std::vector<float> logits_;

  std::atomic<int64_t> steps_{0}, jobs_done_{0};
};

}  // namespace temper::serve

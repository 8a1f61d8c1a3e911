// AsyncExplorer (async_explorer.h): the snapshot, its engine and the thread's job hand-over.
#include "temper/rl/async_explorer.h"

#include <algorithm>
#include <chrono>

#include "temper/core/clock.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/model/frozen_base.h"

namespace temper::rl {

AsyncExplorer::AsyncExplorer(const Transformer& policy, int64_t kv_memory_mb, rollout::EngineConfig engine,
                             int explorer_threads, int trainer_threads)
    : snap_(policy),
      engine_(snap_.model, kv_memory_mb, engine, "rl.kv_memory_mb"),
      split_(trainer_threads, explorer_threads),
      thread_([this] { loop(); }) {
  split_.set_working(kExplorer, false);  // no job yet: the trainer has every core
}

AsyncExplorer::~AsyncExplorer() {
  {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait(g, [&] { return !job_ || done_; });
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Conversations run_conversations(const ConversationJob& job, ConversationSource& source,
                                rollout::RolloutEngine& engine) {
  Conversations out;
  out.trajectories = source.run(engine, job.problems, 0, job.group_size, job.request, job.context, job.episode_prefix,
                                static_cast<size_t>(job.offset));
  source.metrics(out.metrics);
  return out;
}

void AsyncExplorer::launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) {
  launch_job(policy, [reqs = std::move(reqs)](rollout::RolloutEngine& e) { return e.run(reqs); });
}

// The job copies its problems and writes conv_ (read by the trainer only after wait()); the source and its lock are
// the trainer's and outlive the explorer.
void AsyncExplorer::launch_conversations(const Transformer& policy, ConversationJob job) {
  TEMPER_CHECK(job.source && job.lock) << "rl.async: the explorer thread's conversation job has no source";
  launch_job(policy, [this, job = std::move(job)](rollout::RolloutEngine& e) {
    std::lock_guard<std::mutex> lock(*job.lock);
    conv_ = run_conversations(job, *job.source, e);
    return std::vector<rollout::Completion>{};
  });
}

void AsyncExplorer::launch_job(const Transformer& policy, EngineJob job) {
  TEMPER_CHECK(!in_flight_) << "rl.async: the explorer's previous job was not collected";
  // The copy runs here, on the trainer's thread before its update: the job's weights are this version exactly.
  snap_.follow(policy);
  {
    std::lock_guard<std::mutex> g(mu_);
    fn_ = std::move(job);
    out_.clear();
    conv_ = {};
    error_ = nullptr;
    job_ = true, done_ = false;
    // From here the trainer keeps to its share. Under mu_, as the explorer's idle mark below: a late idle mark from
    // the previous job can never land after this one.
    split_.set_working(kExplorer, true);
  }
  in_flight_ = true;
  cv_.notify_all();
}

// Without LoRA every weight is copied. With it the base never changes (only the adapters train; a resume loads
// adapters only), so the first launch shares it (a held bf16 / int4 / nf4 base included) and each launch copies the
// adapters alone.
void AsyncExplorer::Snapshot::follow(const Transformer& policy) {
  const LoraAdapters* a = policy.lora();
  if (!a) {
    TEMPER_CHECK(!source) << "rl.async: the policy's LoRA adapters were detached during the run";
    std::copy(policy.params(), policy.params() + policy.flat_size(), model.params());
    model.params_updated();
    return;
  }
  if (a != source) {
    TEMPER_CHECK(!source) << "rl.async: the policy's LoRA adapters were replaced during the run";
    model.share_weights(policy);
    LoraConfig c = a->config();
    c.base = policy.held_base() ? policy.held_base()->format() : LoraBase::f32;  // as shared: attach holds nothing
    lora = std::make_unique<LoraAdapters>(a->model_config(), c);
    model.attach_lora(lora.get());
    source = a;
  }
  std::copy(a->params(), a->params() + a->size(), lora->params());
  model.set_lora_enabled(policy.lora_enabled());
}

std::vector<rollout::Completion> AsyncExplorer::wait() {
  TEMPER_CHECK(in_flight_) << "rl.async: no explorer job to wait for";
  const auto t0 = Clock::now();
  std::unique_lock<std::mutex> g(mu_);
  {
    CoreSplit::Waiting lend(split_, kTrainer);  // the rollout left takes the trainer's cores too
    cv_.wait(g, [&] { return done_; });
  }
  waited_s_ = seconds_since(t0);
  job_ = false, in_flight_ = false;
  if (error_) std::rethrow_exception(error_);
  return std::move(out_);
}

void AsyncExplorer::loop() {
  ThreadLimit limit(split_.threads(kExplorer));  // this thread's kernels, BLAS and oneDNN teams
  for (;;) {
    EngineJob job;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return quit_ || (job_ && !done_); });
      if (quit_) return;
      job = std::move(fn_);
      fn_ = nullptr;
    }
    std::vector<rollout::Completion> out;
    std::exception_ptr error;
    const auto t0 = Clock::now();
    try {
      out = job(engine_.engine());
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      out_ = std::move(out);
      error_ = error;
      job_s_ = seconds_since(t0);
      done_ = true;
      split_.set_working(kExplorer, false);  // done: the trainer's update takes this thread's cores
    }
    cv_.notify_all();
  }
}

}  // namespace temper::rl

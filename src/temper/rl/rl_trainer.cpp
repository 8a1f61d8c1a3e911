// The RL step (rl_trainer.h) as named steps: the step's rounds (rollout, score, methods' hooks, dynamic
// sampling), loss masks, advantages and weights, the update, the step's metrics. The update's loops are
// policy_update.cpp's; the passes lent to methods scorer.cpp's.
#include "temper/rl/rl_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "temper/core/bytes.h"
#include "temper/core/clock.h"
#include "temper/core/error.h"
#include "temper/core/interrupt.h"
#include "temper/core/profile.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/rl/async_processes.h"
#include "temper/rl/async_remote.h"
#include "temper/rl/policy_update.h"
#include "temper/rollout/pooled_engine.h"
#include "temper/rollout/sharded.h"

namespace temper::rl {

void RlConfig::visit(KeyVisitor& v) {
  v("prompts_per_step", prompts_per_step, "problems drawn per RL step");
  v("group_size", group_size, "samples per problem (G)");
  v("max_new", max_new, "completion tokens at most");
  v("max_prompt_tokens", max_prompt_tokens,
    "training prompts longer than this (in tokens, chat template included) are left out before the first step, or "
    "the run refused: task.long_prompts (0: what the model's context leaves for a completion)");
  sampler.visit(v);
  advantage.visit(v);
  loss.max_len = max_new;
  loss.visit(v);
  v("epochs", epochs, "passes over each rollout batch");
  v("mini_batches", mini_batches, "optimiser steps per epoch");
  v("micro_batch", micro_batch, "sequences per forward/backward, sorted by length (0: the whole mini-batch)");
  v("share_prompts", share_prompts, "a group's prompt is held once in the update's forward and backward, no padding");
  v("reuse_activations", reuse_activations,
    "the first optimiser step of each batch takes the rollout's activations instead of a forward (CPU, share_prompts)");
  v("reuse_activations_mb", reuse_activations_mb, "memory for the kept activations (0: a quarter of physical memory)");
  v("dynamic_sampling", dynamic_sampling,
    "DAPO: draw more rounds until the step has prompts_per_step informative groups");
  v("max_resample_rounds", max_resample_rounds, "dynamic_sampling: extra rounds at most");
  v("mask_truncated", mask_truncated, "DAPO overlong masking: completions cut at max_new are left out of the loss");
  v("kv_memory_mb", kv_memory_mb, "the rollout engine's KV cache");
  v("max_seqs", max_seqs, "sequences decoded together at most");
  visit_optimizer(v, optimizer.adamw, optimizer.lr, optimizer.max_grad_norm);
}

// The counts that size the step's buffers (rollout requests, completions, the KV pool, the kept activations) are
// bounded generously, so an absurd one is refused here instead of growing memory until std::bad_alloc.
void RlConfig::validate() const {
  auto within = [](const char* key, int64_t v, int64_t lo, int64_t hi, const char* note = "") {
    TEMPER_CHECK(v >= lo && v <= hi) << "rl." << key << " = " << v << ": expected " << lo << " to " << hi << note;
  };
  constexpr int64_t kMaxMb = int64_t{1} << 24;  // 16 TiB
  within("prompts_per_step", prompts_per_step, 1, 65536);
  within("group_size", group_size, 1, 4096);
  TEMPER_CHECK(prompts_per_step * group_size <= (int64_t{1} << 20))
      << "rl.prompts_per_step x rl.group_size = " << prompts_per_step << " x " << group_size << " = "
      << prompts_per_step * group_size << " sequences a step: expected at most 1048576";
  within("max_new", max_new, 1, kMaxPositions, " (the longest context a model may have)");
  within("max_prompt_tokens", max_prompt_tokens, 0, kMaxPositions, " (0: what the context leaves)");
  TEMPER_CHECK(epochs > 0) << "rl.epochs must be > 0, got " << epochs;
  TEMPER_CHECK(mini_batches > 0) << "rl.mini_batches must be > 0, got " << mini_batches;
  within("micro_batch", micro_batch, 0, int64_t{1} << 20, " (0: the whole mini-batch)");
  within("max_resample_rounds", max_resample_rounds, 0, 1000);
  within("kv_memory_mb", kv_memory_mb, 1, kMaxMb);
  within("reuse_activations_mb", reuse_activations_mb, 0, kMaxMb, " (0: a quarter of the memory)");
  within("max_seqs", max_seqs, 1, int64_t{1} << 20);
  // A group's samples are decoded together: the engine admits a request whole, forking its G sequences from one
  // prefill of the prompt (they share its KV blocks), so a group never spans engine rounds.
  TEMPER_CHECK(max_seqs >= group_size) << "rl.max_seqs = " << max_seqs << " is below rl.group_size = " << group_size
                                       << ": a group's samples are decoded together (they share the prompt's KV "
                                          "blocks); raise rl.max_seqs to "
                                       << group_size << " or more, or lower rl.group_size";
  sampler.validate();
  advantage.validate();
  loss.validate();
  if (async) async->validate();
}

namespace {

// Every method's rollout hook in turn: stop if any asks, forks add up.
class HookChain : public rollout::RolloutHook {
 public:
  explicit HookChain(std::vector<rollout::RolloutHook*> hooks) : hooks_(std::move(hooks)) {}
  rollout::HookDecision after_token(const rollout::RolloutRequest& q, const rollout::Completion& c) override {
    rollout::HookDecision d;
    for (auto* h : hooks_) {
      rollout::HookDecision x = h->after_token(q, c);
      d.stop = d.stop || x.stop;
      if (x.forks > 0 && d.forks == 0) d.fork_forced = std::move(x.fork_forced), d.fork_max_new = x.fork_max_new;
      d.forks += x.forks;  // forks of one token share the first asking hook's forced tokens and cap
    }
    return d;
  }
  void after_step(int64_t s) override {
    for (auto* h : hooks_) h->after_step(s);
  }
  bool empty() const { return hooks_.empty(); }

 private:
  std::vector<rollout::RolloutHook*> hooks_;
};

// Rollout statistics describe the policy's own samples: forks and edits that methods added are left out
// (they are counted in `sequences` and reported by their methods).
struct RolloutStats {
  double rsum = 0, rsq = 0, acc = 0, len_sum = 0, len_max = 0, ent_sum = 0, ent_n = 0, truncated = 0, originals = 0;
  int64_t gen_tokens = 0;
  double adv_n = 0, adv_s = 0, adv_ss = 0;  // per-token advantages in the loss (GraphPO's issue 8 comparison with GRPO)
  std::vector<double> term_sum, term_sq;    // each [[reward]] term's

  RolloutStats(const Batch& b, size_t terms) : term_sum(terms, 0.0), term_sq(terms, 0.0) {
    for (const Trajectory& t : b.traj) {
      if (!t.lineage.off_policy)
        gen_tokens += static_cast<int64_t>(t.tokens.size()) - (t.lineage.parent >= 0 ? t.lineage.fork_pos : 0);
      if (t.lineage.parent >= 0 || t.lineage.off_policy || b.problems[static_cast<size_t>(t.problem)].index < 0)
        continue;
      originals += 1;
      rsum += t.reward;
      rsq += t.reward * t.reward;
      for (size_t k = 0; k < terms && k < t.reward_terms.size(); ++k)
        term_sum[k] += t.reward_terms[k], term_sq[k] += t.reward_terms[k] * t.reward_terms[k];
      acc += t.correct ? 1 : 0;
      len_sum += static_cast<double>(t.tokens.size());
      len_max = std::max(len_max, static_cast<double>(t.tokens.size()));
      for (float e : t.entropy) ent_sum += e, ent_n += 1;
      truncated += t.finish == rollout::FinishReason::length ? 1 : 0;
    }
    for (const Trajectory& t : b.traj)
      for (size_t i = 0; i < t.advantage.size(); ++i)
        if (t.loss_mask[i] > 0) adv_n += 1, adv_s += t.advantage[i], adv_ss += double(t.advantage[i]) * t.advantage[i];
  }
  double adv_var() const { return adv_n > 0 ? std::max(0.0, adv_ss / adv_n - (adv_s / adv_n) * (adv_s / adv_n)) : 0.0; }
};

void set_reward(Trajectory& t, ScoredCompletion&& s) {
  t.reward = s.verdict.reward;
  t.rewards = std::move(s.verdict.rewards);
  t.correct = s.verdict.correct;
  t.reward_terms = std::move(s.terms);
  t.reward_components = std::move(s.components);
  t.reward_info = std::move(s.info);
  t.scored = true;
}

// Data-parallel: a trajectory's reward as a rank sends it (its index, then the checkpoint's verdict bytes).
void put_reward(ByteWriter& w, size_t i, const Trajectory& t) {
  w.put<uint64_t>(i);
  put_verdict(w, t);
}

void get_reward(ByteReader& in, Batch& b, int from) {
  uint64_t i = 0;
  in.get(i);
  TEMPER_CHECK(i < b.traj.size()) << "rl: rank " << from << " sent a verdict for trajectory " << i << " of "
                                  << b.traj.size();
  get_verdict(in, b.traj[i], "rl: a rank's verdicts");
  b.traj[i].scored = true;
}

}  // namespace

RlTrainer::RlTrainer(Transformer& policy, std::shared_ptr<const tasks::Task> task, PromptCodec codec, RlConfig cfg,
                     reward::SafeReward& safe, std::vector<Method*> methods, Transformer* reference)
    : RlTrainer(policy, task, std::move(codec), std::move(cfg), std::make_shared<RewardSet>(task, safe),
                std::move(methods), reference) {}

RlTrainer::RlTrainer(Transformer& policy, std::shared_ptr<const tasks::Task> task, PromptCodec codec, RlConfig cfg,
                     std::shared_ptr<RewardSet> rewards, std::vector<Method*> methods, Transformer* reference)
    : policy_(policy),
      task_(std::move(task)),
      codec_(std::move(codec)),
      cfg_(std::move(cfg)),
      rewards_(std::move(rewards)),
      methods_(std::move(methods)),
      opt_(policy, cfg_.optimizer),
      scorer_(policy, reference, cfg_.micro_batch, cfg_.share_prompts) {
  cfg_.validate();
  TEMPER_CHECK(task_) << "rl: no task";
  TEMPER_CHECK(task_->size(tasks::Split::train) != 0) << "rl: task '" << task_->name() << "' has no training problems";
  TEMPER_CHECK(cfg_.loss.kl_coef == 0 || reference) << "rl: kl_coef > 0 needs a reference model";
  const rollout::EngineConfig ec = rollout_engine_config(cfg_, codec_.token_bytes);
  engine_ = std::make_unique<rollout::PooledEngine>(policy_, cfg_.kv_memory_mb, ec, "rl.kv_memory_mb");
  if (cfg_.async && cfg_.async->on()) {
    check_async();
    if (correct_in_loss()) cfg_.loss.behaviour_cap = cfg_.async->tis_cap;  // the update's correction (update())
    if (!cfg_.async->processes())                                          // explorer processes: use_explorer_processes
      explorer_ =
          std::make_unique<AsyncExplorer>(policy_, cfg_.kv_memory_mb, ec, cfg_.async->explorer_share(num_threads()),
                                          cfg_.async->trainer_share(num_threads()));
  }
  // The rollout's activations are the update's only when both ran on the same weights (not so with [rl.async]).
  if (cfg_.reuse_activations && cfg_.share_prompts && policy_.packed_supported() && !(cfg_.async && cfg_.async->on()))
    kept_ = std::make_unique<KeptActivations>(policy_, engine_->engine(), cfg_.reuse_activations_mb);
  if (cfg_.speculative)
    spec_ = std::make_unique<SpeculativeRollouts>(*cfg_.speculative, policy_, engine_->pool(), engine_->engine(),
                                                  cfg_.sampler);
  lend_methods();
}

void RlTrainer::lend_methods() {
  MethodEnv env;
  env.task = task_;
  env.codec = &codec_;
  env.sampler = cfg_.sampler;
  env.max_new = cfg_.max_new;
  env.group_size = cfg_.group_size;
  env.context = policy_.config().max_position_embeddings;
  env.seed = cfg_.seed;
  env.verify = [this](const tasks::Problem& p, const std::string& text) { return rewards_->verify(p, text, step_); };
  env.generate = [this](const std::vector<rollout::RolloutRequest>& reqs) {
    return rollout::run_sharded(engine_->engine(), reqs, comm_);
  };
  scorer_.lend(env);
  for (Method* m : methods_) m->attach(env);
}

// What [rl.async] cannot run with yet, refused before the first step (rollout hooks: launch_explorer).
void RlTrainer::check_async() const {
  TEMPER_CHECK(!cfg_.speculative) << "[rl.async] with [rl.speculative]: not yet (the drafter would have to follow the "
                                     "explorer's snapshot); remove one";
  TEMPER_CHECK(!policy_.device()) << "[rl.async]: the explorer runs on the CPU so far (model.device is not \"cpu\"); "
                                     "set rl.async.max_staleness = 0 or model.device = \"cpu\"";
  TEMPER_CHECK(policy_.config().rope_scaling.type != kernels::RopeScaling::Type::longrope)
      << "[rl.async] with longrope (Phi-3) rope scaling: not yet (the snapshot would need the policy's planned "
         "factors); set rl.async.max_staleness = 0";
  TEMPER_CHECK(!profile_enabled()) << "[rl.async] with TEMPER_PROFILE=1: the profiler counts one thread (unset it)";
}

void RlTrainer::set_environment(std::unique_ptr<ConversationSource> env) {
  TEMPER_CHECK(!async() || (!explorer_->in_flight() && explored_.empty()))
      << "rl: set the environment before the first step ([rl.async] explores ahead with it)";
  env_ = std::move(env);
}

void RlTrainer::use_explorer_ranks(dist::Communicator& world, dist::Communicator& trainers, int first_explorer) {
  TEMPER_CHECK(async() && step_ == 0 && !explorer_->in_flight())
      << "rl.async.explorer_ranks: needs rl.async.max_staleness > 0, set before the first step";
  explorer_ = std::make_unique<RemoteExplorer>(world, trainers, first_explorer);
  remote_ = true;
  set_communicator(&trainers);
}

rollout::EngineConfig rollout_engine_config(const RlConfig& c, std::function<std::string_view(int32_t)> token_bytes) {
  return {std::min(c.max_seqs, c.prompts_per_step * c.group_size), std::move(token_bytes)};
}

void RlTrainer::use_explorer_processes(spotlight::ExplorerCommand cmd) {
  TEMPER_CHECK(cfg_.async && cfg_.async->processes() && step_ == 0 && !explorer_)
      << "rl.async.explorer_processes: needs rl.async.max_staleness > 0, set before the first step";
  explorer_ = std::make_unique<ProcessExplorer>(std::move(cmd), *cfg_.async, cfg_.async->trainer_share(num_threads()),
                                                mix_seed(static_cast<uint64_t>(cfg_.seed), 0xa57c));
}

void RlTrainer::serve_explorer(dist::Communicator& world) {
  TEMPER_CHECK(async()) << "rl.async.explorer_ranks: an explorer rank needs rl.async.max_staleness > 0";
  explorer_.reset();  // this rank's own thread is not needed: it is the explorer
  rl::serve_explorer(world, 0, policy_, engine_->engine(), env_.get());
}

void RlTrainer::set_communicator(dist::Communicator* comm) {
  TEMPER_CHECK(!async() || remote_ || !comm || comm->size() == 1)
      << "[rl.async] with " << comm->size()
      << " ranks: not yet (one process: an explorer thread beside the trainer); run one process or set "
         "rl.async.max_staleness = 0, or give the explorer its own ranks (rl.async.explorer_ranks)";
  comm_ = comm, opt_.set_communicator(comm), scorer_.set_communicator(comm);
}

std::string RlTrainer::speculative_state() const {
  return spec_ ? spec_->state() : std::string();
}

void RlTrainer::load_speculative_state(const std::string& text) {
  TEMPER_CHECK(spec_) << "rl: the checkpoint has speculative decoding state, but the recipe has no [rl.speculative]";
  spec_->load_state(text);
}

Metrics RlTrainer::step() {
  TEMPER_CHECK(async() || !cfg_.async || !cfg_.async->processes())
      << "rl.async.explorer_processes: the explorers were not started (use_explorer_processes before the first step)";
  auto t_step = Clock::now();
  std::optional<ThreadLimit> split;  // [rl.async]: the trainer's share of the threads, or all while the explorer waits
  if (const std::atomic<int>* live = trainer_threads()) split.emplace(*live);
  begin_step();
  if (async()) explore_ahead();
  Batch& b = batch_;
  int64_t drawn = 0;
  {
    // [rl.async]: never interrupted mid-step (the explorer's job runs on); a stop ends the run after the step.
    InterruptScope rollouts_interruptible(interruptible_ && !async());
    drawn = collect(b);
  }
  for (Trajectory& t : b.traj)
    if (t.version < 0) t.version = step_;
  Metrics async_out;
  if (async()) correct_staleness(b, async_out);
  set_loss_masks(b);
  set_advantages(b);
  set_weights(b);
  auto t_train = Clock::now();
  Metrics upd = update(b);
  double train_s = seconds_since(t_train);
  Metrics out = metrics(b, drawn, upd, train_s, seconds_since(t_step));
  out.insert(out.end(), async_out.begin(), async_out.end());
  if (spec_) spec_->metrics(out, comm_);
  for (Method* m : methods_) m->metrics(out);
  for (Method* m : methods_) m->after_step(out);
  ++step_;
  return out;
}

void RlTrainer::begin_step() {
  batch_ = Batch{};
  batch_.step = step_;
  rollout_s_ = reward_s_ = wait_s_ = 0;
  if (spec_) spec_->begin_step(comm_);
  if (kept_) kept_->begin_step(comm_);  // this step's rollouts keep activations of the weights they run on
}

// [rl.async]: this step's batch and the max_staleness - 1 after it complete (a fresh run rolls them out on its
// current weights, in turn), and the one for step + max_staleness launched on these weights.
void RlTrainer::explore_ahead() {
  collect_explored();
  const int64_t ahead = cfg_.async->max_staleness;
  TEMPER_CHECK(explored_.empty() || explored_.front().step == step_)
      << "rl.async: the explored batches start at step " << explored_.front().step << ", the trainer is at step "
      << step_ << " (a checkpoint's async state from another run?)";
  int64_t next = explored_.empty() ? step_ : explored_.back().step + 1;
  for (; next < step_ + ahead; ++next) {
    launch_explorer(next);
    collect_explored();
  }
  if (next == step_ + ahead && (planned_steps_ < 0 || next < planned_steps_)) launch_explorer(next);
}

// Step `step`'s round-0 problems drawn here (the task's cursor and the methods' hooks stay on this thread), then
// their requests to the explorer with the current weights ([env]: their conversations, as converse() holds them).
void RlTrainer::launch_explorer(int64_t step) {
  ExploredBatch eb;
  eb.step = step;
  eb.version = step_;
  draw_problems(cfg_.prompts_per_step, step, 0, eb.problems);
  RolloutRound rr{step, 0, &eb.problems, 0, nullptr};
  for (Method* m : methods_)
    TEMPER_CHECK(!m->rollout_hook(rr))
        << "[rl.async]: method '" << m->name()
        << "' steers decoding through a rollout hook, which would run on the explorer's thread against stale "
           "weights while its other hooks run on the trainer's; turn its hook off (rl.dre.mode = \"offline\", "
           "rl.graphpo.expansion = \"after\") or set rl.async.max_staleness = 0";
  if (env_) {
    ConversationJob job{.problems = eb.problems,
                        .group_size = cfg_.group_size,
                        .context = policy_.config().max_position_embeddings,
                        .request = conversation_request(step, 0),
                        .episode_prefix = episode_tag(step, 0),
                        .source = env_.get(),
                        .lock = &env_mu_};
    explored_.push_back(std::move(eb));
    explorer_->launch_conversations(policy_, std::move(job));
    explorer_->launched(step);
    return;
  }
  std::vector<rollout::RolloutRequest> reqs = requests(eb.problems, 0, step, 0);
  for (const rollout::RolloutRequest& q : reqs) eb.prompts.push_back(q.prompt);
  explored_.push_back(std::move(eb));
  explorer_->launch(policy_, std::move(reqs));
  explorer_->launched(step);
}

void RlTrainer::collect_explored() {
  if (!explorer_->in_flight()) return;
  ExploredBatch& eb = explored_.back();
  eb.done = explorer_->wait();
  eb.seconds = explorer_->last_job_s();
  wait_s_ += explorer_->waited_s();
  if (env_) {
    Conversations c = explorer_->conversations();
    eb.conversations = std::move(c.trajectories);
    eb.env_metrics = std::move(c.metrics);
  }
}

// Round 0 of an [rl.async] step: the batch explored for it, each trajectory tagged with its weights' version.
void RlTrainer::take_explored(std::vector<Trajectory>& out, std::vector<tasks::Problem>& problems) {
  TEMPER_CHECK(!explored_.empty() && explored_.front().step == step_ &&
               !(explorer_->in_flight() && explored_.size() == 1))
      << "rl.async: no explored batch for step " << step_;
  ExploredBatch eb = std::move(explored_.front());
  explored_.pop_front();
  rollout_s_ += eb.seconds;
  const size_t p0 = problems.size();
  for (tasks::Problem& p : eb.problems) problems.push_back(std::move(p));
  for (rollout::Completion& c : eb.done) {
    const size_t q = static_cast<size_t>(c.request);
    TEMPER_CHECK(q < eb.prompts.size()) << "rl.async: a completion of request " << q << " of " << eb.prompts.size();
    out.push_back(trajectory_from(std::move(c), static_cast<int64_t>(p0 + q), eb.prompts[q], codec_.decode(c.tokens)));
    out.back().version = eb.version;
  }
  if (!env_) return;
  for (Trajectory& t : eb.conversations) {  // [env]: problem and group index the batch's problems
    TEMPER_CHECK(t.problem >= 0 && static_cast<size_t>(t.problem) < eb.problems.size())
        << "rl.async: a conversation of problem " << t.problem << " of " << eb.problems.size();
    t.problem += static_cast<int64_t>(p0), t.group += static_cast<int64_t>(p0);
    t.version = eb.version;
    out.push_back(std::move(t));
  }
  env_metrics_ = std::move(eb.env_metrics);
}

// [rl.async]: one optimiser step per batch and no methods: the correction is the loss's (behaviour_cap: the proximal
// policy is the update's own forward). Otherwise a log-prob pass of the current weights before the methods' hooks
// and the update: old_logprob := pi_prox (so methods that read it, RCSD's student or STARE's surprisal, see the
// policy being trained, as in the synchronous loop), weight := min(pi_prox / pi_behaviour, tis_cap) per token (a
// trajectory a method spliced from stale and fresh tokens gets each its own). Then the staleness metrics.
bool RlTrainer::correct_in_loss() const {
  return methods_.empty() && cfg_.epochs * cfg_.mini_batches == 1;
}

void RlTrainer::correct_staleness(Batch& b, Metrics& out) {
  double lag = 0;
  for (const Trajectory& t : b.traj) lag += static_cast<double>(step_ - t.version);
  out.emplace_back("async_staleness", b.traj.empty() ? 0.0 : lag / static_cast<double>(b.traj.size()));
  out.emplace_back("async_wait_s", wait_s_);
  explorer_->add_metrics(out);
  if (correct_in_loss() || b.traj.empty()) return;
  std::vector<std::vector<int32_t>> prompts, tokens;
  for (const Trajectory& t : b.traj) prompts.push_back(t.prompt), tokens.push_back(t.tokens);
  std::vector<std::vector<float>> prox;
  scorer_.score_batch(prompts, tokens, false, prox, nullptr);
  const double cap = cfg_.async->tis_cap;
  double n = 0, sum = 0, capped = 0;
  std::vector<uint8_t> observed;  // [env]: an environment's appended tokens (not sampled, out of the loss): left as is
  for (size_t i = 0; i < b.traj.size(); ++i) {
    Trajectory& t = b.traj[i];
    if (t.weight.size() != t.tokens.size()) t.weight.assign(t.tokens.size(), 1.f);
    observed.assign(t.tokens.size(), 0);
    t.for_each_appended([&](size_t k) { observed[k] = 1; });
    for (size_t k = 0; k < t.tokens.size(); ++k) {
      if (observed[k]) continue;
      const double rho = std::exp(static_cast<double>(prox[i][k]) - static_cast<double>(t.old_logprob[k]));
      t.weight[k] = static_cast<float>(t.weight[k] * std::min(rho, cap));
      t.old_logprob[k] = prox[i][k];
      n += 1, sum += rho, capped += rho > cap;
    }
  }
  out.emplace_back("async_is_mean", n > 0 ? sum / n : 0.0);
  out.emplace_back("async_is_capped_frac", n > 0 ? capped / n : 0.0);
}

std::string RlTrainer::async_state() {
  if (!async()) return {};
  collect_explored();
  return encode_explored(explored_);
}

void RlTrainer::load_async_state(const std::string& text) {
  TEMPER_CHECK(async()) << "rl: the checkpoint holds batches explored ahead ([rl.async]), but the recipe has no "
                           "[rl.async] with max_staleness > 0; resume with the recipe it was written with";
  TEMPER_CHECK(!explorer_->in_flight() && explored_.empty()) << "rl.async: load the async state before the first step";
  std::deque<ExploredBatch> got = decode_explored(text);
  for (const ExploredBatch& b : got) {
    const bool conversations = !b.conversations.empty() || !b.env_metrics.empty();
    TEMPER_CHECK(env_ ? b.done.empty() && b.prompts.empty() : !conversations)
        << "rl: the checkpoint's batches explored ahead are "
        << (conversations ? "conversations ([env])" : "completions") << ", the recipe " << (env_ ? "has" : "has no")
        << " [env]; resume with the recipe it was written with";
  }
  explored_ = std::move(got);
}

// Rounds: rollout -> after_rollout -> score -> after_reward -> (dynamic sampling) keep only groups
// whose rewards differ, and draw more prompts for the rest.
int64_t RlTrainer::collect(Batch& b) {
  int64_t kept_groups = 0, drawn = 0;
  for (int64_t r = 0; r <= (cfg_.dynamic_sampling ? cfg_.max_resample_rounds : 0); ++r) {
    int64_t want = cfg_.prompts_per_step - kept_groups;
    if (want <= 0) break;
    Batch rb = round(b, want, r);
    drawn += want;
    if (!cfg_.dynamic_sampling) {
      for (Trajectory& t : rb.traj) b.traj.push_back(std::move(t));
      break;
    }
    kept_groups += keep_informative(b, rb);
  }
  return drawn;
}

// One round's trajectories, scored, through the methods' round hooks (b's problems grow by the round's).
Batch RlTrainer::round(Batch& b, int64_t n, int64_t round) {
  Batch rb;
  rb.step = step_;
  rb.problems = std::move(b.problems);
  auto t0 = Clock::now();
  rollout(n, round, rb.traj, rb.problems);
  rollout_s_ += seconds_since(t0);
  for (Method* m : methods_) m->after_rollout(rb);
  t0 = Clock::now();
  score(rb, 0);
  reward_s_ += seconds_since(t0);
  for (Method* m : methods_) m->after_reward(rb);
  b.problems = std::move(rb.problems);
  return rb;
}

// Dynamic sampling: moves rb's trajectories of groups whose rewards differ into b; returns how many task
// groups were kept (problems a method built are extra: they count neither as kept nor as dropped).
int64_t RlTrainer::keep_informative(Batch& b, Batch& rb) {
  std::vector<float> r;
  std::vector<int64_t> g;
  for (const Trajectory& t : rb.traj) {
    r.push_back(static_cast<float>(t.reward));
    g.push_back(t.group);
  }
  std::vector<uint8_t> flags(r.size());
  flag_uniform_groups(r.data(), g.data(), static_cast<int64_t>(r.size()), flags.data());
  std::set<int64_t> kept, task_groups;  // task_groups: groups of task problems (new or replayed)
  for (size_t i = 0; i < flags.size(); ++i) {
    const bool task_problem = b.problems[static_cast<size_t>(rb.traj[i].problem)].index >= 0;
    if (task_problem) task_groups.insert(rb.traj[i].group);
    if (!flags[i]) {
      if (task_problem) kept.insert(rb.traj[i].group);
      b.traj.push_back(std::move(rb.traj[i]));
    }
  }
  b.groups_dropped += static_cast<int64_t>(task_groups.size() - kept.size());
  return static_cast<int64_t>(kept.size());
}

void RlTrainer::rollout(int64_t n, int64_t round, std::vector<Trajectory>& out, std::vector<tasks::Problem>& problems) {
  TEMPER_PROFILE("rollout");
  if (async() && round == 0) return take_explored(out, problems);
  const size_t p0 = draw_problems(n, step_, round, problems);
  if (env_) return converse(p0, round, out, problems);
  std::vector<rollout::RolloutRequest> reqs = requests(problems, p0, step_, round);
  // Data-parallel: this rank rolls out a block of the requests (the rows it will train on); every rank
  // gets all completions.
  const std::vector<int64_t> mine =
      rollout::shard_requests(static_cast<int64_t>(reqs.size()), comm_, rollout::Sharding::blocks);
  if (kept_) kept_->plan(reqs, mine, spec_ ? 2 : 1);
  std::vector<rollout::RolloutHook*> hooks;
  RolloutRound rr{step_, round, &problems, p0, ranks() > 1 ? &mine : nullptr};
  for (Method* m : methods_)
    if (auto* h = m->rollout_hook(rr)) hooks.push_back(h);
  HookChain chain(hooks);
  std::vector<rollout::Completion> done =
      rollout::run_sharded(engine_->engine(), reqs, comm_, chain.empty() ? nullptr : &chain, rollout::Sharding::blocks);
  if (spec_) spec_->observe(engine_->engine().stats(), done);  // this rank's engine statistics of the run
  for (rollout::Completion& c : done)
    out.push_back(trajectory_from(std::move(c), static_cast<int64_t>(p0) + c.request,
                                  reqs[static_cast<size_t>(c.request)].prompt, codec_.decode(c.tokens)));
}

// The round's problems as conversations with the environment: G episodes each, scored by their returns.
void RlTrainer::converse(size_t first, int64_t round, std::vector<Trajectory>& out,
                         const std::vector<tasks::Problem>& problems) {
  TEMPER_CHECK(ranks() == 1) << "rl: [env] rollouts run in one process (data-parallel conversations: not yet)";
  const int64_t ctx = policy_.config().max_position_embeddings;
  std::lock_guard<std::mutex> lock(env_mu_);  // [rl.async]: after the explorer's conversation job, if one runs
  std::vector<Trajectory> got = env_->run(engine_->engine(), problems, first, cfg_.group_size,
                                          conversation_request(step_, round), ctx, episode_tag(step_, round), 0);
  env_metrics_.clear();
  env_->metrics(env_metrics_);
  for (Trajectory& t : got) out.push_back(std::move(t));
}

// The request each conversation of a round starts from (its prompt the environment's) and the episodes' names: one
// definition for the synchronous loop and [rl.async]'s explorer, whose conversations must be the same.
rollout::RolloutRequest RlTrainer::conversation_request(int64_t step, int64_t round) const {
  return rollout::make_request({0}, cfg_.group_size, cfg_.max_new, policy_.config().max_position_embeddings,
                               cfg_.sampler, codec_.stop_ids, round_seed(step, round), 0);
}

std::string RlTrainer::episode_tag(int64_t step, int64_t round) {
  return "s" + std::to_string(step) + "r" + std::to_string(round);
}

uint64_t RlTrainer::round_seed(int64_t step, int64_t round) const {
  return mix_seed(mix_seed(cfg_.seed, static_cast<uint64_t>(step)), static_cast<uint64_t>(round));
}

// The round's problems of RL step `step` appended to `problems`: n new ones from the task, the methods' extra ones in
// the first round, then rewritten by the methods. Returns where they start.
size_t RlTrainer::draw_problems(int64_t n, int64_t step, int64_t round, std::vector<tasks::Problem>& problems) {
  const size_t p0 = problems.size();
  const int64_t size = task_->size(tasks::Split::train);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t idx = cursor_++;
    if (size > 0) idx %= static_cast<uint64_t>(size);
    problems.push_back(task_->problem(tasks::Split::train, idx));
    problems.back().index = static_cast<int64_t>(idx);
  }
  if (round == 0)
    for (Method* m : methods_)
      for (tasks::Problem& p : m->extra_problems(step, n)) problems.push_back(std::move(p));
  for (Method* m : methods_) m->prepare_problems(problems, p0, step, round);
  return p0;
}

// A request of G samples per problem from `first` on; sampling streams from (seed, step, round, index).
std::vector<rollout::RolloutRequest> RlTrainer::requests(const std::vector<tasks::Problem>& problems, size_t first,
                                                         int64_t step, int64_t round) const {
  std::vector<rollout::RolloutRequest> reqs;
  const int64_t ctx = policy_.config().max_position_embeddings;
  const uint64_t seed = round_seed(step, round);
  for (size_t i = 0; first + i < problems.size(); ++i) {
    const tasks::Problem& prob = problems[first + i];
    std::vector<int32_t> prompt = codec_.encode_prompt(prob);
    TEMPER_CHECK(static_cast<int64_t>(prompt.size()) < ctx)
        << "rl: the prompt of problem " << prob.id << " has " << prompt.size() << " tokens, the model's context is "
        << ctx;
    reqs.push_back(rollout::make_request(std::move(prompt), cfg_.group_size, cfg_.max_new, ctx, cfg_.sampler,
                                         codec_.stop_ids, seed,
                                         static_cast<uint64_t>(i) * static_cast<uint64_t>(cfg_.group_size)));
  }
  return reqs;
}

void RlTrainer::score(Batch& b, size_t from) {
  TEMPER_PROFILE("reward");
  std::vector<size_t> todo;
  for (size_t i = from; i < b.traj.size(); ++i)
    if (!b.traj[i].scored) todo.push_back(i);
  const int64_t failures0 = rewards_->failures();
  // Data-parallel: this rank scores every ranks()-th unscored trajectory, as one batch.
  std::vector<size_t> mine;
  std::vector<RewardQuery> qs;
  for (size_t k = static_cast<size_t>(rank()); k < todo.size(); k += static_cast<size_t>(ranks())) {
    const Trajectory& t = b.traj[todo[k]];
    mine.push_back(todo[k]);
    qs.push_back(
        {&b.problems[static_cast<size_t>(t.problem)], &t.text, std::to_string(step_) + "/" + std::to_string(todo[k])});
  }
  std::vector<ScoredCompletion> got = rewards_->score(qs, step_);
  ByteWriter w;  // data-parallel: this rank's verdicts
  for (size_t k = 0; k < mine.size(); ++k) {
    Trajectory& t = b.traj[mine[k]];
    set_reward(t, std::move(got[k]));
    if (ranks() > 1) put_reward(w, mine[k], t);
  }
  if (ranks() > 1) {
    const double here = static_cast<double>(rewards_->failures() - failures0);
    double all = here;
    comm_->allreduce_sum(&all, 1);
    failures_elsewhere_ += all - here;
    std::vector<std::string> parts = comm_->allgather(w.bytes());
    for (int r = 0; r < ranks(); ++r) {
      if (r == rank()) continue;
      ByteReader in(parts[static_cast<size_t>(r)]);
      while (!in.done()) get_reward(in, b, r);
    }
  }
}

// The loss mask first (methods' advantages may take shared tokens out of the loss): every token but forced
// ones and an environment's appended ones (not sampled by the policy) and, with rl.mask_truncated, every token of a
// truncated completion.
void RlTrainer::set_loss_masks(Batch& b) const {
  for (Trajectory& t : b.traj) {
    if (t.loss_mask.size() == t.tokens.size()) continue;  // a method's own
    t.loss_mask.assign(t.tokens.size(), cfg_.mask_truncated && t.finish == rollout::FinishReason::length ? 0.f : 1.f);
    for (int64_t i = t.lineage.forced_pos;
         i < t.lineage.forced_pos + t.lineage.forced && i < static_cast<int64_t>(t.tokens.size()); ++i)
      t.loss_mask[static_cast<size_t>(i)] = 0.f;
    t.for_each_appended([&](size_t k) { t.loss_mask[k] = 0.f; });  // an environment's observations
  }
}

// The methods' advantages, or where none set them the estimator's (rl.advantage) over the batch's rewards; then
// the terms methods add to them.
void RlTrainer::set_advantages(Batch& b) {
  bool replaced = false;
  for (Method* m : methods_) replaced = m->advantages(b) || replaced;
  if (!replaced) estimate_advantages(b);
  for (Method* m : methods_) m->adjust_advantages(b);
}

void RlTrainer::estimate_advantages(Batch& b) {
  const int64_t B = static_cast<int64_t>(b.traj.size());
  if (B == 0) return;
  std::vector<float> r(static_cast<size_t>(B)), a(static_cast<size_t>(B));
  std::vector<int64_t> g(static_cast<size_t>(B)), s(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    r[static_cast<size_t>(i)] = static_cast<float>(b.traj[static_cast<size_t>(i)].reward);
    g[static_cast<size_t>(i)] = b.traj[static_cast<size_t>(i)].group;
    s[static_cast<size_t>(i)] = b.traj[static_cast<size_t>(i)].stratum;
  }
  compute_advantages(cfg_.advantage, r.data(), g.data(), B, a.data(), s.data());
  for (int64_t i = 0; i < B; ++i) {
    Trajectory& t = b.traj[static_cast<size_t>(i)];
    t.advantage.assign(t.tokens.size(), a[static_cast<size_t>(i)]);
  }
}

// Token weights: 1 where no method set them, then the methods' token_weights.
void RlTrainer::set_weights(Batch& b) {
  for (Trajectory& t : b.traj) {
    TEMPER_CHECK(t.advantage.size() == t.tokens.size() && t.loss_mask.size() == t.tokens.size())
        << "rl: a trajectory's advantages or loss mask do not match its tokens";
    if (t.weight.size() != t.tokens.size()) t.weight.assign(t.tokens.size(), 1.f);
  }
  for (Method* m : methods_) m->token_weights(b);
}

// [rl.async] with the correction in the loss (correct_in_loss): old_logprob is the behaviour policy's, and
// cfg_.loss.behaviour_cap (set in the constructor) caps the importance weight.
Metrics RlTrainer::update(Batch& b) {
  TEMPER_PROFILE("update");
  const PolicyUpdateEnv env{cfg_, policy_, opt_, scorer_, kept_ ? &kept_->store() : nullptr, comm_, step_};
  return update_policy(env, b);
}

// The step's metrics: rollout statistics, the update's, throughput and time (the speculative rollouts' and
// the methods' follow).
Metrics RlTrainer::metrics(const Batch& b, int64_t drawn, const Metrics& upd, double train_s, double step_s) const {
  const RolloutStats st(b, rewards_->configs().size());
  Metrics out;
  double n = std::max<double>(1.0, st.originals);
  double mean = st.rsum / n;
  out.emplace_back("reward_mean", mean);
  out.emplace_back("reward_std", std::sqrt(std::max(0.0, st.rsq / n - mean * mean)));
  out.emplace_back("accuracy", st.acc / n);
  out.emplace_back("entropy", st.ent_n > 0 ? st.ent_sum / st.ent_n : 0.0);
  out.emplace_back("response_len_mean", st.len_sum / n);
  out.emplace_back("response_len_max", st.len_max);
  out.emplace_back("truncated_frac", st.truncated / n);
  out.emplace_back("sequences", static_cast<double>(b.traj.size()));
  out.emplace_back("prompts_drawn", static_cast<double>(drawn));
  out.emplace_back("groups_dropped", static_cast<double>(b.groups_dropped));
  out.insert(out.end(), upd.begin(), upd.end());
  out.emplace_back("gen_tokens", static_cast<double>(st.gen_tokens));
  out.emplace_back("adv_token_var", st.adv_var());
  out.emplace_back("rollout_tokens_per_s", rollout_s_ > 0 ? static_cast<double>(st.gen_tokens) / rollout_s_ : 0.0);
  out.emplace_back("rollout_s", rollout_s_);
  out.emplace_back("reward_s", reward_s_);
  out.emplace_back("train_s", train_s);
  out.emplace_back("step_s", step_s);
  out.emplace_back("reward_failures", static_cast<double>(rewards_->failures()) + failures_elsewhere_);
  const std::vector<RewardTermConfig>& terms = rewards_->configs();
  for (size_t k = 0; k < terms.size(); ++k) {
    const double m = st.term_sum[k] / n;
    out.emplace_back("reward/" + terms[k].name, m);
    out.emplace_back("reward/" + terms[k].name + "/std", std::sqrt(std::max(0.0, st.term_sq[k] / n - m * m)));
  }
  if (env_) out.insert(out.end(), env_metrics_.begin(), env_metrics_.end());
  return out;
}

}  // namespace temper::rl

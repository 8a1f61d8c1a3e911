#include "temper/rl/rl_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "temper/core/bytes.h"
#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/core/memory_info.h"
#include "temper/core/profile.h"
#include "temper/core/rng.h"
#include "temper/rl/packed_rows.h"
#include "temper/rl/reused_activations.h"
#include "temper/rollout/sharded.h"

namespace temper::rl {

namespace {

// Log-probs of padded rows (tokens/targets at the packing's stride) from one packed forward, written back
// to their padded positions; positions without a target (a shared prompt's) are left as they were.
void packed_logprobs(Transformer& model, const PackedRows& packed, const int32_t* tok, const int32_t* tgt, float* lp) {
  std::vector<int32_t> xt, xg;
  packed.gather(tok, &xt);
  packed.gather(tgt, &xg);
  std::vector<float> xl(xt.size()), xe(xt.size());
  model.forward_logprobs_packed(xt.data(), xg.data(), packed.segs, xl.data(), xe.data());
  for (size_t n = 0; n < xg.size(); ++n)
    if (xg[n] >= 0) lp[packed.from[n]] = xl[n];
}

}  // namespace

void SpeculativeConfig::visit(KeyVisitor& v) {
  v("gamma", gamma, "a fixed gamma: tokens drafted per cycle (0: the adaptive ladder)");
  v("ladder", control.ladder, "gamma rungs the controller moves between at the measured acceptance");
  control.visit(v);
  v("group", group, "inputs per int4 scale of the drafter (a multiple of 32)");
  v("lag", lag, "the drafter from this many updates earlier (0: this step's weights)");
  v("head", head, "the drafter's LM head: bf16, int4, f32 (the policy's own)", kDraftHeadNames);
  v("vocab", vocab, "the drafter head's tokens: the K most sampled in earlier rollouts (0: every token)");
  if (gamma > 0) {
    TEMPER_CHECK(control.ladder == rollout::SpecConfig{}.ladder || control.ladder == std::vector<int64_t>{gamma})
        << "gives both gamma (fixed) and ladder (adaptive); keep one";
    control.ladder = {gamma};
  }
}

void SpeculativeConfig::validate() const {
  control.validate();
  TEMPER_CHECK(vocab >= 0) << "vocab must be >= 0 (0: every token), got " << vocab;
  TEMPER_CHECK(vocab == 0 || head != DraftHead::f32)
      << "vocab = " << vocab << " needs head = \"bf16\" or \"int4\" (the f32 head is the policy's own, every token)";
  TEMPER_CHECK(group >= 32 && group % 32 == 0) << "group must be a positive multiple of 32, got " << group;
  TEMPER_CHECK(lag >= 0 && lag <= 16) << "lag must be in [0, 16], got " << lag;
}

void RlConfig::visit(KeyVisitor& v) {
  v("prompts_per_step", prompts_per_step, "problems drawn per RL step");
  v("group_size", group_size, "samples per problem (G)");
  v("max_new", max_new, "completion tokens at most");
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

void RlConfig::validate() const {
  TEMPER_CHECK(prompts_per_step > 0) << "rl.prompts_per_step must be > 0, got " << prompts_per_step;
  TEMPER_CHECK(group_size > 0) << "rl.group_size must be > 0, got " << group_size;
  TEMPER_CHECK(max_new > 0) << "rl.max_new must be > 0, got " << max_new;
  TEMPER_CHECK(epochs > 0) << "rl.epochs must be > 0, got " << epochs;
  TEMPER_CHECK(mini_batches > 0) << "rl.mini_batches must be > 0, got " << mini_batches;
  TEMPER_CHECK(micro_batch >= 0) << "rl.micro_batch must be >= 0 (0: whole mini-batch), got " << micro_batch;
  TEMPER_CHECK(max_resample_rounds >= 0) << "rl.max_resample_rounds must be >= 0, got " << max_resample_rounds;
  TEMPER_CHECK(kv_memory_mb > 0) << "rl.kv_memory_mb must be > 0, got " << kv_memory_mb;
  TEMPER_CHECK(reuse_activations_mb >= 0)
      << "rl.reuse_activations_mb must be >= 0 (0: a quarter of the memory), got " << reuse_activations_mb;
  TEMPER_CHECK(max_seqs > 0) << "rl.max_seqs must be > 0, got " << max_seqs;
  sampler.validate();
  advantage.validate();
  loss.validate();
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }


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

}  // namespace

RlTrainer::RlTrainer(Transformer& policy, std::shared_ptr<const tasks::Task> task, PromptCodec codec, RlConfig cfg,
                     reward::SafeReward& safe, std::vector<Method*> methods, Transformer* reference)
    : policy_(policy),
      reference_(reference),
      task_(std::move(task)),
      codec_(std::move(codec)),
      cfg_(std::move(cfg)),
      safe_(safe),
      methods_(std::move(methods)),
      opt_(policy, cfg_.optimizer) {
  cfg_.validate();
  TEMPER_CHECK(task_) << "rl: no task";
  TEMPER_CHECK(task_->size(tasks::Split::train) != 0) << "rl: task '" << task_->name() << "' has no training problems";
  TEMPER_CHECK(cfg_.loss.kl_coef == 0 || reference_) << "rl: kl_coef > 0 needs a reference model";
  const int64_t block = 16;
  const DType kvt = kv_dtype(policy_.precision());  // bf16 rows for a bf16 policy: twice the sequences per MB
  int64_t blocks =
      KvPool::blocks_for_budget(policy_.config(), block, static_cast<size_t>(cfg_.kv_memory_mb) << 20, kvt);
  TEMPER_CHECK(blocks > 0) << "rl.kv_memory_mb = " << cfg_.kv_memory_mb << " holds no KV block of this model";
  pool_ = std::make_unique<KvPool>(policy_.config(), block, blocks, kvt);
  engine_ = std::make_unique<rollout::RolloutEngine>(
      policy_, *pool_, rollout::EngineConfig{std::min(cfg_.max_seqs, cfg_.prompts_per_step * cfg_.group_size), codec_.token_bytes});
  if (cfg_.reuse_activations && cfg_.share_prompts && policy_.packed_supported()) {
    store_ = std::make_unique<ActivationStore>(policy_.act_field_widths());
    engine_->set_activation_store(store_.get());
  }
  if (cfg_.speculative) {
    cfg_.speculative->control.validate();
    drafter_ = std::make_unique<Int4Drafter>(cfg_.speculative->group, cfg_.speculative->lag, cfg_.speculative->head);
    drafter_->set_vocab(cfg_.speculative->vocab);
    spec_ = std::make_unique<rollout::SpecController>(cfg_.speculative->control);
    engine_->set_speculative(drafter_.get(), spec_.get(), [this] { refresh_drafter(); });
  }
  MethodEnv env;
  env.task = task_;
  env.codec = &codec_;
  env.sampler = cfg_.sampler;
  env.max_new = cfg_.max_new;
  env.group_size = cfg_.group_size;
  env.context = policy_.config().max_position_embeddings;
  env.seed = cfg_.seed;
  env.verify = [this](const tasks::Problem& p, const std::string& text) { return tasks::verify_safely(safe_, task_, p, text); };
  env.generate = [this](const std::vector<rollout::RolloutRequest>& reqs) { return rollout::run_sharded(*engine_, reqs, comm_); };
  auto score_with = [](Transformer& model, const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens, std::vector<float>& logp,
                       std::vector<float>& entropy) {
    const int64_t T = static_cast<int64_t>(prompt.size() + tokens.size());
    std::vector<int32_t> tok(prompt), tgt(static_cast<size_t>(T), -1);
    tok.insert(tok.end(), tokens.begin(), tokens.end());
    for (size_t i = 0; i < tokens.size(); ++i) tgt[prompt.size() - 1 + i] = tokens[i];
    std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T));
    model.forward_logprobs(tok.data(), tgt.data(), 1, T, lp.data(), ent.data());
    logp.assign(lp.begin() + static_cast<long>(prompt.size() - 1), lp.begin() + static_cast<long>(prompt.size() - 1 + tokens.size()));
    entropy.assign(ent.begin() + static_cast<long>(prompt.size() - 1), ent.begin() + static_cast<long>(prompt.size() - 1 + tokens.size()));
  };
  env.score_tokens = [this, score_with](const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens, std::vector<float>& logp,
                                        std::vector<float>& entropy) { score_with(policy_, prompt, tokens, logp, entropy); };
  env.score_batch = [this](const std::vector<std::vector<int32_t>>& prompts, const std::vector<std::vector<int32_t>>& tokens, bool initial,
                           std::vector<std::vector<float>>& logp, std::vector<std::vector<float>>* dists) {
    TEMPER_CHECK(!initial || reference_) << "rl: a method scores tokens under the starting policy, but the trainer holds no frozen copy of it";
    TEMPER_CHECK(prompts.size() == tokens.size()) << "rl: score_batch got " << prompts.size() << " prompts for " << tokens.size() << " completions";
    Transformer& model = initial ? *reference_ : policy_;
    const int64_t n = static_cast<int64_t>(prompts.size());
    std::vector<int64_t> off(static_cast<size_t>(n + 1), 0), order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) off[static_cast<size_t>(i + 1)] = off[static_cast<size_t>(i)] + static_cast<int64_t>(tokens[static_cast<size_t>(i)].size());
    auto len = [&](int64_t i) { return prompts[static_cast<size_t>(i)].size() + tokens[static_cast<size_t>(i)].size(); };
    std::iota(order.begin(), order.end(), 0);
    const bool pack = !dists && cfg_.share_prompts && model.packed_supported();
    if (pack)  // rows with equal prompts side by side: a micro-batch holds each prompt once
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return prompts[static_cast<size_t>(a)] < prompts[static_cast<size_t>(b)];
      });
    else  // rows of similar length share a batch
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len(a) < len(b); });
    std::vector<float> flat(static_cast<size_t>(off.back()), 0.f), flat_dist;
    const int64_t V = model.config().vocab_size;
    if (dists) {
      TEMPER_CHECK(V <= kMaxDistillVocab) << "rl: full-vocabulary distributions of a " << V << "-token vocabulary are too large to keep per token (at most "
                                          << kMaxDistillVocab << "; use the sampled-token form)";
      flat_dist.assign(static_cast<size_t>(off.back() * V), 0.f);
    }
    const dist::Range own = dist::shard(n, rank(), ranks());  // data-parallel: this rank's block, then summed
    const int64_t mb = cfg_.micro_batch > 0 ? cfg_.micro_batch : 16;
    for (int64_t r0 = own.begin; r0 < own.end; r0 += mb) {
      const int64_t rows = std::min(mb, own.end - r0);
      int64_t T = 0;
      for (int64_t r = r0; r < r0 + rows; ++r) T = std::max<int64_t>(T, static_cast<int64_t>(len(order[static_cast<size_t>(r)])));
      if (T < 2) continue;
      std::vector<int32_t> tok(static_cast<size_t>(rows * T), 0), tgt(static_cast<size_t>(rows * T), -1);  // right padding: causal rows are unaffected
      for (int64_t r = 0; r < rows; ++r) {
        const auto& p = prompts[static_cast<size_t>(order[static_cast<size_t>(r0 + r)])];
        const auto& c = tokens[static_cast<size_t>(order[static_cast<size_t>(r0 + r)])];
        TEMPER_CHECK(!p.empty()) << "rl: score_batch needs a non-empty prompt";
        std::copy(p.begin(), p.end(), tok.begin() + r * T);
        std::copy(c.begin(), c.end(), tok.begin() + r * T + static_cast<int64_t>(p.size()));
        for (size_t i = 0; i < c.size(); ++i) tgt[static_cast<size_t>(r * T) + p.size() - 1 + i] = c[i];
      }
      if (!dists) {
        std::vector<float> lp(static_cast<size_t>(rows * T)), ent(static_cast<size_t>(rows * T));
        if (pack) {
          std::vector<const std::vector<int32_t>*> ps;
          std::vector<int64_t> lens;
          for (int64_t r = r0; r < r0 + rows; ++r) {
            ps.push_back(&prompts[static_cast<size_t>(order[static_cast<size_t>(r)])]);
            lens.push_back(static_cast<int64_t>(len(order[static_cast<size_t>(r)])));
          }
          packed_logprobs(model, pack_rows(ps, lens, T), tok.data(), tgt.data(), lp.data());
        } else {
          model.forward_logprobs(tok.data(), tgt.data(), rows, T, lp.data(), ent.data());
        }
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = order[static_cast<size_t>(r0 + r)];
          const size_t P = prompts[static_cast<size_t>(i)].size();
          for (size_t k = 0; k < tokens[static_cast<size_t>(i)].size(); ++k)
            flat[static_cast<size_t>(off[static_cast<size_t>(i)]) + k] = lp[static_cast<size_t>(r * T) + P - 1 + k];
        }
        continue;
      }
      std::vector<float> logits(static_cast<size_t>(rows * T * V));
      model.forward_logits(tok.data(), rows, T, logits.data());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = order[static_cast<size_t>(r0 + r)];
        const size_t P = prompts[static_cast<size_t>(i)].size();
        for (size_t k = 0; k < tokens[static_cast<size_t>(i)].size(); ++k) {
          const float* z = logits.data() + static_cast<size_t>(r * T + static_cast<int64_t>(P - 1 + k)) * static_cast<size_t>(V);
          float* d = flat_dist.data() + static_cast<size_t>(off[static_cast<size_t>(i)] + static_cast<int64_t>(k)) * static_cast<size_t>(V);
          float m = z[0];
          for (int64_t v = 1; v < V; ++v) m = std::max(m, z[v]);
          double se = 0;
          for (int64_t v = 0; v < V; ++v) se += std::exp(static_cast<double>(z[v] - m));
          const float lse = m + static_cast<float>(std::log(se));
          for (int64_t v = 0; v < V; ++v) d[v] = z[v] - lse;
          flat[static_cast<size_t>(off[static_cast<size_t>(i)]) + k] = d[tokens[static_cast<size_t>(i)][k]];
        }
      }
    }
    if (dists) {
      if (ranks() > 1) comm_->allreduce_sum(flat_dist.data(), static_cast<int64_t>(flat_dist.size()));
      dists->resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        (*dists)[static_cast<size_t>(i)].assign(flat_dist.begin() + off[static_cast<size_t>(i)] * V, flat_dist.begin() + off[static_cast<size_t>(i + 1)] * V);
    }
    if (ranks() > 1) comm_->allreduce_sum(flat.data(), static_cast<int64_t>(flat.size()));
    logp.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      logp[static_cast<size_t>(i)].assign(flat.begin() + off[static_cast<size_t>(i)], flat.begin() + off[static_cast<size_t>(i + 1)]);
  };
  env.embed = [this](const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply) {
    TEMPER_CHECK(reference_) << "rl: a method embeds replies with the starting policy, but the trainer holds no frozen copy of it";
    TEMPER_CHECK(!reply.empty()) << "rl: an empty reply has no embedding";
    std::vector<int32_t> tok(prompt);
    tok.insert(tok.end(), reply.begin(), reply.end());
    const int64_t T = static_cast<int64_t>(tok.size()), H = reference_->config().hidden_size;
    std::vector<float> h(static_cast<size_t>(T * H)), mean(static_cast<size_t>(H), 0.f);
    reference_->forward_hidden(tok.data(), 1, T, h.data());
    for (int64_t t = static_cast<int64_t>(prompt.size()); t < T; ++t)
      for (int64_t j = 0; j < H; ++j) mean[static_cast<size_t>(j)] += h[static_cast<size_t>(t * H + j)] / static_cast<float>(reply.size());
    return mean;
  };
  env.hidden = [this](const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) {
    TEMPER_CHECK(!tokens.empty()) << "rl: hidden states of an empty completion";
    std::vector<int32_t> tok(prompt);
    tok.insert(tok.end(), tokens.begin(), tokens.end());
    const int64_t T = static_cast<int64_t>(tok.size()), H = policy_.config().hidden_size;
    std::vector<float> h(static_cast<size_t>(T * H));
    policy_.forward_hidden(tok.data(), 1, T, h.data());
    return std::vector<float>(h.begin() + static_cast<long>(prompt.size()) * H, h.end());
  };
  for (Method* m : methods_) m->attach(env);
}

void RlTrainer::rollout(int64_t n, int64_t round, std::vector<Trajectory>& out, std::vector<tasks::Problem>& problems) {
  TEMPER_PROFILE("rollout");
  std::vector<rollout::RolloutRequest> reqs;
  const size_t p0 = problems.size();
  const int64_t ctx = policy_.config().max_position_embeddings;
  const int64_t size = task_->size(tasks::Split::train);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t idx = cursor_++;
    if (size > 0) idx %= static_cast<uint64_t>(size);
    problems.push_back(task_->problem(tasks::Split::train, idx));
    problems.back().index = static_cast<int64_t>(idx);
  }
  if (round == 0)
    for (Method* m : methods_)
      for (tasks::Problem& p : m->extra_problems(step_, n)) problems.push_back(std::move(p));
  for (Method* m : methods_) m->prepare_problems(problems, p0, step_, round);
  for (size_t i = 0; p0 + i < problems.size(); ++i) {
    rollout::RolloutRequest r;
    const tasks::Problem& prob = problems[p0 + i];
    r.prompt = codec_.encode_prompt(prob);
    TEMPER_CHECK(static_cast<int64_t>(r.prompt.size()) < ctx)
        << "rl: the prompt of problem " << prob.id << " has " << r.prompt.size()
        << " tokens, the model's context is " << ctx;
    r.group_size = cfg_.group_size;
    r.max_new = std::min<int64_t>(cfg_.max_new, ctx - static_cast<int64_t>(r.prompt.size()));
    r.sampler = cfg_.sampler;
    r.stop_ids = codec_.stop_ids;
    r.seed = mix_seed(mix_seed(cfg_.seed, static_cast<uint64_t>(step_)), static_cast<uint64_t>(round));
    r.stream = static_cast<uint64_t>(i) * static_cast<uint64_t>(cfg_.group_size);
    reqs.push_back(std::move(r));
  }
  // Data-parallel: this rank rolls out a block of the requests (the rows it will train on); every rank
  // gets all completions.
  const std::vector<int64_t> mine =
      rollout::shard_requests(static_cast<int64_t>(reqs.size()), comm_, rollout::Sharding::blocks);
  if (store_)                 // this rank's requests keep activations while its store's worst-case estimate fits
    for (int64_t j : mine) {  // (speculation's rejected drafts take slots too)
      rollout::RolloutRequest& r = reqs[static_cast<size_t>(j)];
      const int64_t need = static_cast<int64_t>(r.prompt.size()) + r.group_size * r.max_new * (spec_ ? 2 : 1);
      r.keep_activations = store_planned_ + need <= store_->capacity();
      if (r.keep_activations) store_planned_ += need;
    }
  std::vector<rollout::RolloutHook*> hooks;
  RolloutRound rr{step_, round, &problems, p0, ranks() > 1 ? &mine : nullptr};
  for (Method* m : methods_)
    if (auto* h = m->rollout_hook(rr)) hooks.push_back(h);
  HookChain chain(hooks);
  std::vector<rollout::Completion> done =
      rollout::run_sharded(*engine_, reqs, comm_, chain.empty() ? nullptr : &chain, rollout::Sharding::blocks);
  if (spec_) {  // this rank's engine statistics of the run
    const rollout::EngineStats& es = engine_->stats();
    spec_sum_.steps += es.steps;
    spec_sum_.spec_steps += es.spec_steps;
    spec_sum_.spec_cycles += es.spec_cycles;
    spec_sum_.drafted += es.drafted;
    spec_sum_.accepted += es.accepted;
    spec_sum_.decode_tokens += es.decode_tokens;
    if (cfg_.speculative->vocab > 0) {  // every rank sees every completion: the same counts everywhere
      // The share of these tokens inside the head ranked at the step's start (the one the step's first round drafts
      // from, or would have, had speculation turned on), then the counts (a later round's head ranks them too).
      for (const rollout::Completion& c : done) {
        vocab_hits_ += vocabulary_coverage(vocab_ids_, c.tokens) * static_cast<double>(c.tokens.size());
        vocab_tokens_ += static_cast<double>(c.tokens.size());
        drafter_->observe(c.tokens);
      }
    }
  }
  for (rollout::Completion& c : done) {
    Trajectory t;
    t.problem = static_cast<int64_t>(p0) + c.request;
    t.group = t.problem;
    t.member = c.member;
    t.parent = c.parent;
    t.fork_pos = c.fork_pos;
    t.forced = c.forced;
    t.forced_pos = c.forced_pos;
    t.prompt = reqs[static_cast<size_t>(c.request)].prompt;
    t.text = codec_.decode(c.tokens);
    t.tokens = std::move(c.tokens);
    t.sample_logprob = std::move(c.sample_logprob);
    t.old_logprob = std::move(c.policy_logprob);
    t.entropy = std::move(c.entropy);
    t.act_slots = std::move(c.act_slots);
    t.finish = c.finish;
    if (c.parent >= 0) t.tags.push_back("fork");
    out.push_back(std::move(t));
  }
}

void RlTrainer::score(Batch& b, size_t from) {
  TEMPER_PROFILE("reward");
  std::vector<size_t> todo;
  for (size_t i = from; i < b.traj.size(); ++i)
    if (!b.traj[i].scored) todo.push_back(i);
  const int64_t failures0 = safe_.failures();
  ByteWriter w;  // data-parallel: this rank's verdicts (every ranks()-th unscored trajectory)
  for (size_t k = static_cast<size_t>(rank()); k < todo.size(); k += static_cast<size_t>(ranks())) {
    Trajectory& t = b.traj[todo[k]];
    tasks::Verdict v = tasks::verify_safely(safe_, task_, b.problems[static_cast<size_t>(t.problem)], t.text);
    t.reward = v.reward;
    t.rewards = v.rewards;
    t.correct = v.correct;
    t.scored = true;
    if (ranks() > 1) w.put<uint64_t>(todo[k]), w.put(t.reward), w.put(t.rewards), w.put<uint8_t>(t.correct);
  }
  if (ranks() > 1) {
    const double mine = static_cast<double>(safe_.failures() - failures0);
    double all = mine;
    comm_->allreduce_sum(&all, 1);
    failures_elsewhere_ += all - mine;
    std::vector<std::string> parts = comm_->allgather(w.bytes());
    for (int r = 0; r < ranks(); ++r) {
      if (r == rank()) continue;
      ByteReader in(parts[static_cast<size_t>(r)]);
      while (!in.done()) {
        uint64_t i = 0;
        uint8_t correct = 0;
        in.get(i);
        TEMPER_CHECK(i < b.traj.size()) << "rl: rank " << r << " sent a verdict for trajectory " << i << " of " << b.traj.size();
        Trajectory& t = b.traj[i];
        in.get(t.reward), in.get(t.rewards), in.get(correct);
        t.correct = correct != 0;
        t.scored = true;
      }
    }
  }
}

// Before the step's rollouts: the drafter from the current weights (its time counts toward the
// rollout), and once per run the cost model (measured on rank 0, the same on every rank: the
// toggle then decides alike wherever it runs, and a resumed run reads it from the checkpoint).
// With lag 0 the drafter is re-quantized lazily: only in steps whose rollout turns speculation on
// (the engine's on_spec_start), from the same weights an eager refresh would read (they do not change
// during the rollout), so the tokens are the same and steps that never speculate skip the cost.
void RlTrainer::speculative_begin_step() {
  if (!spec_) return;
  spec_sum_ = {};
  vocab_tokens_ = vocab_hits_ = 0;
  if (cfg_.speculative->vocab > 0)
    vocab_ids_ = draft_vocabulary(drafter_->counts(), policy_.config().vocab_size, cfg_.speculative->vocab);
  requant_s_ = 0;
  drafter_fresh_ = false;
  const bool calibrate =
      cfg_.speculative->control.toggle == rollout::SpecToggle::cost && !spec_->cost_model().calibrated();
  if (cfg_.speculative->lag > 0 || calibrate) refresh_drafter();  // lag k keeps a history: one copy per step
  if (calibrate) {
    std::string bytes;
    if (rank() == 0) {
      // Up to 64 rows (a verify of 5 sequences at gamma 11): speculation pays only at small live
      // batches; beyond the last point the times extrapolate linearly.
      const int64_t rows = engine_->config().max_seqs * (cfg_.speculative->control.ladder.back() + 1);
      rollout::SpecCostModel m =
          rollout::calibrate_spec_cost(policy_, *pool_, *drafter_, std::min<int64_t>(rows, 64), 2, cfg_.sampler);
      nlohmann::json j = {{"rows", m.rows},
                          {"policy_s", m.policy_s},
                          {"draft_s", m.draft_s},
                          {"sample_s", m.sample_s},
                          {"dist_s", m.dist_s}};
      bytes = j.dump();
    }
    if (comm_ && comm_->size() > 1) comm_->broadcast(bytes, 0);
    nlohmann::json j = nlohmann::json::parse(bytes);
    spec_->set_cost_model({j["rows"].get<std::vector<double>>(), j["policy_s"].get<std::vector<double>>(),
                           j["draft_s"].get<std::vector<double>>(), j["sample_s"].get<double>(),
                           j["dist_s"].get<double>()});
    if (rank() == 0) {
      const rollout::SpecCostModel& m = spec_->cost_model();
      int64_t breakeven = 0;
      for (int64_t b = 1; b <= engine_->config().max_seqs; ++b)
        if (spec_->turn_on(b)) breakeven = b;
      TEMPER_LOG(info) << "speculative: cost model calibrated: one forward " << m.policy(1) * 1e3 << " ms (policy), "
                 << m.draft(1) * 1e3 << " ms (4-bit drafter, " << drafter_->bytes() / (1 << 20) << " MB); at gamma "
                 << spec_->gamma() << " and accepted length " << spec_->expected_len()
                 << " speculation pays while at most " << breakeven << " sequences are live";
    }
  }
}

void RlTrainer::refresh_drafter() {
  if (drafter_fresh_) return;
  auto t0 = Clock::now();
  drafter_->refresh(policy_);
  requant_s_ += since(t0);
  drafter_fresh_ = true;
}

// After the step's rollouts: acceptance summed over ranks moves the ladder (the same on every rank).
void RlTrainer::speculative_metrics(Metrics& out) {
  if (!spec_) return;
  double v[6] = {static_cast<double>(spec_sum_.spec_cycles), static_cast<double>(spec_sum_.drafted),
                 static_cast<double>(spec_sum_.accepted), static_cast<double>(spec_sum_.spec_steps),
                 static_cast<double>(spec_sum_.steps), static_cast<double>(spec_sum_.decode_tokens)};
  if (comm_ && comm_->size() > 1) comm_->allreduce_sum(v, 6);
  const int64_t gamma = spec_->gamma();
  spec_->end_rollout(static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2]), true);
  out.emplace_back("spec_gamma", static_cast<double>(gamma));
  out.emplace_back("spec_accept_rate", v[1] > 0 ? v[2] / v[1] : 0.0);
  out.emplace_back("spec_accepted_len", v[0] > 0 ? 1.0 + v[2] / v[0] : 0.0);
  out.emplace_back("spec_steps_frac", v[4] > 0 ? v[3] / v[4] : 0.0);  // engine steps that were speculative cycles
  out.emplace_back("spec_requant_s", requant_s_);
  out.emplace_back("spec_drafter_mb", drafter_->ready() ? static_cast<double>(drafter_->bytes()) / (1 << 20) : 0.0);
  if (cfg_.speculative->vocab > 0)  // this step's sampled tokens inside the drafter's head (as ranked at its start)
    out.emplace_back("spec_vocab_coverage", vocab_tokens_ > 0 ? vocab_hits_ / vocab_tokens_ : 1.0);
}

std::string RlTrainer::speculative_state() const {
  if (!spec_) return {};
  const rollout::SpecState& s = spec_->state();
  const rollout::SpecCostModel& m = spec_->cost_model();
  nlohmann::json j = {{"rung", s.rung},
                      {"up", s.up},
                      {"down", s.down},
                      {"accepted_len", s.accepted_len},
                      {"cost",
                       {{"rows", m.rows},
                        {"policy_s", m.policy_s},
                        {"draft_s", m.draft_s},
                        {"sample_s", m.sample_s},
                        {"dist_s", m.dist_s}}}};
  if (cfg_.speculative->vocab > 0) {  // the token counts that rank the drafter's head: [[id, count], ...]
    nlohmann::json counts = nlohmann::json::array();
    const std::vector<uint64_t>& c = drafter_->counts();
    for (size_t t = 0; t < c.size(); ++t)
      if (c[t] > 0) counts.push_back({t, c[t]});
    j["vocab_counts"] = std::move(counts);
  }
  return j.dump();
}

void RlTrainer::load_speculative_state(const std::string& text) {
  TEMPER_CHECK(spec_) << "rl: the checkpoint has speculative decoding state, but the recipe has no [rl.speculative]";
  nlohmann::json j = nlohmann::json::parse(text);
  rollout::SpecState s;
  s.rung = j.at("rung").get<int64_t>();
  s.up = j.at("up").get<int64_t>();
  s.down = j.at("down").get<int64_t>();
  s.accepted_len = j.at("accepted_len").get<double>();
  spec_->set_state(s);
  const nlohmann::json& c = j.at("cost");
  // sample_s and dist_s: 0 in a checkpoint from before they were measured (its predictions are unchanged)
  spec_->set_cost_model({c.at("rows").get<std::vector<double>>(), c.at("policy_s").get<std::vector<double>>(),
                         c.at("draft_s").get<std::vector<double>>(), c.value("sample_s", 0.0), c.value("dist_s", 0.0)});
  if (auto it = j.find("vocab_counts"); it != j.end()) {
    std::vector<uint64_t> counts;
    for (const nlohmann::json& e : *it) {
      const size_t t = e.at(0).get<size_t>();
      TEMPER_CHECK(t < static_cast<size_t>(policy_.config().vocab_size))
          << "rl: the checkpoint's drafter token counts name token " << t << ", past this model's vocabulary of "
          << policy_.config().vocab_size;
      if (t >= counts.size()) counts.resize(t + 1, 0);
      counts[t] = e.at(1).get<uint64_t>();
    }
    drafter_->set_counts(std::move(counts));
  }
}

Metrics RlTrainer::step() {
  auto t_step = Clock::now();
  batch_ = Batch{};
  Batch& b = batch_;
  b.step = step_;
  rollout_s_ = reward_s_ = 0;
  speculative_begin_step();
  if (store_) {  // this step's rollouts keep activations of the weights they run on
    if (store_slots_ < 0) {  // sized once (the communicator is set after construction)
      int64_t bytes = cfg_.reuse_activations_mb << 20;
      if (bytes == 0) bytes = usable_memory_bytes() / 4 / std::max(1, comm_ ? comm_->local_size() : 1);
      store_slots_ = bytes / (store_->slot_floats() * static_cast<int64_t>(sizeof(float)));
    }
    store_->reset(store_slots_, policy_.params_version());
    store_planned_ = 0;
  }
  // Rounds: rollout -> after_rollout -> score -> after_reward -> (dynamic sampling) keep only groups
  // whose rewards differ, and draw more prompts for the rest.
  int64_t kept_groups = 0, drawn = 0;
  for (int64_t round = 0; round <= (cfg_.dynamic_sampling ? cfg_.max_resample_rounds : 0); ++round) {
    int64_t want = cfg_.prompts_per_step - kept_groups;
    if (want <= 0) break;
    Batch rb;
    rb.step = step_;
    rb.problems = std::move(b.problems);
    auto t0 = Clock::now();
    rollout(want, round, rb.traj, rb.problems);
    drawn += want;
    rollout_s_ += since(t0);
    for (Method* m : methods_) m->after_rollout(rb);
    t0 = Clock::now();
    score(rb, 0);
    reward_s_ += since(t0);
    for (Method* m : methods_) m->after_reward(rb);
    b.problems = std::move(rb.problems);
    if (!cfg_.dynamic_sampling) {
      for (Trajectory& t : rb.traj) b.traj.push_back(std::move(t));
      break;
    }
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
    kept_groups += static_cast<int64_t>(kept.size());
  }

  // The loss mask first (methods' advantages may take shared tokens out of the loss), then advantages,
  // then the other per-token fields.
  for (Trajectory& t : b.traj) {
    if (t.loss_mask.size() != t.tokens.size()) {
      t.loss_mask.assign(t.tokens.size(), cfg_.mask_truncated && t.finish == rollout::FinishReason::length ? 0.f : 1.f);
      for (int64_t i = t.forced_pos; i < t.forced_pos + t.forced && i < static_cast<int64_t>(t.tokens.size()); ++i)
        t.loss_mask[static_cast<size_t>(i)] = 0.f;  // forced tokens were not sampled by the policy
    }
  }
  const int64_t B = static_cast<int64_t>(b.traj.size());
  bool replaced = false;
  for (Method* m : methods_) replaced = m->advantages(b) || replaced;
  if (!replaced && B > 0) {
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
  for (Trajectory& t : b.traj) {
    TEMPER_CHECK(t.advantage.size() == t.tokens.size() && t.loss_mask.size() == t.tokens.size())
        << "rl: a trajectory's advantages or loss mask do not match its tokens";
    if (t.weight.size() != t.tokens.size()) t.weight.assign(t.tokens.size(), 1.f);
  }
  for (Method* m : methods_) m->token_weights(b);

  auto t_train = Clock::now();
  Metrics upd = update(b);
  double train_s = since(t_train);

  // Metrics of the step.
  Metrics out;
  // Rollout statistics describe the policy's own samples: forks and edits that methods added are
  // left out (they are counted in `sequences` and reported by their methods).
  double rsum = 0, rsq = 0, acc = 0, len_sum = 0, len_max = 0, ent_sum = 0, ent_n = 0, truncated = 0, originals = 0;
  int64_t gen_tokens = 0;
  for (const Trajectory& t : b.traj) {
    if (!t.off_policy) gen_tokens += static_cast<int64_t>(t.tokens.size()) - (t.parent >= 0 ? t.fork_pos : 0);
    if (t.parent >= 0 || t.off_policy || b.problems[static_cast<size_t>(t.problem)].index < 0) continue;
    originals += 1;
    rsum += t.reward;
    rsq += t.reward * t.reward;
    acc += t.correct ? 1 : 0;
    len_sum += static_cast<double>(t.tokens.size());
    len_max = std::max(len_max, static_cast<double>(t.tokens.size()));
    for (float e : t.entropy) ent_sum += e, ent_n += 1;
    truncated += t.finish == rollout::FinishReason::length ? 1 : 0;
  }
  // Per-token advantage spread over the tokens in the loss (GraphPO's issue 8 comparison with GRPO).
  double adv_n = 0, adv_s = 0, adv_ss = 0;
  for (const Trajectory& t : b.traj)
    for (size_t i = 0; i < t.advantage.size(); ++i)
      if (t.loss_mask[i] > 0) adv_n += 1, adv_s += t.advantage[i], adv_ss += double(t.advantage[i]) * t.advantage[i];
  double n = std::max<double>(1.0, originals);
  double mean = rsum / n;
  out.emplace_back("reward_mean", mean);
  out.emplace_back("reward_std", std::sqrt(std::max(0.0, rsq / n - mean * mean)));
  out.emplace_back("accuracy", acc / n);
  out.emplace_back("entropy", ent_n > 0 ? ent_sum / ent_n : 0.0);
  out.emplace_back("response_len_mean", len_sum / n);
  out.emplace_back("response_len_max", len_max);
  out.emplace_back("truncated_frac", truncated / n);
  out.emplace_back("sequences", static_cast<double>(B));
  out.emplace_back("prompts_drawn", static_cast<double>(drawn));
  out.emplace_back("groups_dropped", static_cast<double>(b.groups_dropped));
  out.insert(out.end(), upd.begin(), upd.end());
  out.emplace_back("gen_tokens", static_cast<double>(gen_tokens));
  out.emplace_back("adv_token_var", adv_n > 0 ? std::max(0.0, adv_ss / adv_n - (adv_s / adv_n) * (adv_s / adv_n)) : 0.0);
  out.emplace_back("rollout_tokens_per_s", rollout_s_ > 0 ? static_cast<double>(gen_tokens) / rollout_s_ : 0.0);
  out.emplace_back("rollout_s", rollout_s_);
  out.emplace_back("reward_s", reward_s_);
  out.emplace_back("train_s", train_s);
  out.emplace_back("step_s", since(t_step));
  out.emplace_back("reward_failures", static_cast<double>(safe_.failures()) + failures_elsewhere_);
  speculative_metrics(out);
  for (Method* m : methods_) m->metrics(out);
  for (Method* m : methods_) m->after_step(out);
  ++step_;
  return out;
}

Metrics RlTrainer::update(Batch& b) {
  TEMPER_PROFILE("update");
  const int64_t B = static_cast<int64_t>(b.traj.size());
  Metrics out;
  if (B == 0) {  // every group was dropped: nothing to learn from this step
    out.emplace_back("updates_skipped", 1);
    return out;
  }
  int64_t T = 2;
  for (const Trajectory& t : b.traj) T = std::max<int64_t>(T, static_cast<int64_t>(t.prompt.size() + t.tokens.size()));
  const size_t N = static_cast<size_t>(B * T);
  std::vector<int32_t> tok(N, 0), tgt(N, -1);
  std::vector<float> mask(N, 0.f), old(N, 0.f), adv(N, 0.f), w(N, 0.f), ref;
  for (int64_t r = 0; r < B; ++r) {
    const Trajectory& t = b.traj[static_cast<size_t>(r)];
    const size_t base = static_cast<size_t>(r * T), P = t.prompt.size();
    std::copy(t.prompt.begin(), t.prompt.end(), tok.begin() + static_cast<long>(base));
    std::copy(t.tokens.begin(), t.tokens.end(), tok.begin() + static_cast<long>(base + P));
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      size_t at = base + P - 1 + i;  // position predicting completion token i
      tgt[at] = t.tokens[i];
      mask[at] = t.loss_mask[i];
      old[at] = t.old_logprob[i];
      adv[at] = t.advantage[i];
      w[at] = t.weight[i];
    }
  }
  if (cfg_.loss.kl_coef > 0) {  // reference log-probs, in micro-batches (data-parallel: this rank's block of rows, then summed)
    ref.assign(N, 0.f);
    std::vector<float> ent(N);
    const dist::Range own = dist::shard(B, rank(), ranks());
    const int64_t mb = cfg_.micro_batch > 0 ? cfg_.micro_batch : B;
    const bool pack_ref = cfg_.share_prompts && reference_->packed_supported();
    for (int64_t r0 = own.begin; r0 < own.end; r0 += mb) {
      int64_t rows = std::min(mb, own.end - r0);
      size_t off = static_cast<size_t>(r0 * T);
      if (!pack_ref) {
        reference_->forward_logprobs(tok.data() + off, tgt.data() + off, rows, T, ref.data() + off, ent.data() + off);
        continue;
      }
      std::vector<const std::vector<int32_t>*> prompts;  // rows of a group are adjacent here (the batch's order)
      std::vector<int64_t> lens;
      for (int64_t r = r0; r < r0 + rows; ++r) {
        const Trajectory& t = b.traj[static_cast<size_t>(r)];
        prompts.push_back(&t.prompt);
        lens.push_back(static_cast<int64_t>(t.prompt.size() + t.tokens.size()));
      }
      packed_logprobs(*reference_, pack_rows(prompts, lens, T), tok.data() + off, tgt.data() + off, ref.data() + off);
    }
    if (ranks() > 1) comm_->allreduce_sum(ref.data(), static_cast<int64_t>(N));
  }
  PolicyLossStats total;
  int64_t applied = 0, skipped = 0, rkl_tokens = 0, positions = 0;
  double rkl_sum = 0;  // KL(pi || teacher) over the positions with a teacher distribution
  double grad_norm_sum = 0, lr = 0;
  std::vector<int64_t> order(static_cast<size_t>(B));
  std::vector<int32_t> mtok, mtgt;
  std::vector<float> mmask, mold, madv, mw, mref, mscale, lp, ent;
  std::vector<int32_t> ctok, ctgt;  // a micro-batch compacted to its own longest row
  std::vector<float> cold, cadv, cw, csc, cref, clp, cent;
  std::vector<int32_t> xtok, xtgt;  // and packed, its shared prompts held once
  std::vector<float> xold, xadv, xw, xsc, xref, xlp, xent;
  std::vector<const float*> xrkl;
  std::vector<int64_t> xslots;  // and the store slots of its rows when the rollout kept them
  int64_t reused = 0, no_gradient = 0;
  const bool pack = cfg_.share_prompts && policy_.packed_supported();
  for (int64_t e = 0; e < cfg_.epochs; ++e) {
    std::iota(order.begin(), order.end(), 0);
    if (cfg_.mini_batches > 1) {  // a seeded shuffle, so mini-batches mix groups
      Rng rng(mix_seed(cfg_.seed, 0x5EEDull), static_cast<uint64_t>(step_ * 1000 + e));
      for (int64_t i = B - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.next_u32() % static_cast<uint64_t>(i + 1)]);
    }
    for (int64_t m = 0; m < cfg_.mini_batches; ++m) {
      int64_t r0 = B * m / cfg_.mini_batches, r1 = B * (m + 1) / cfg_.mini_batches, Bm = r1 - r0;
      if (Bm == 0) continue;
      // Shared prompts: a group's rows together (they share its prompt). Otherwise micro-batches of similar
      // lengths, each cut to its longest row.
      if (pack)
        std::stable_sort(order.begin() + r0, order.begin() + r1, [&](int64_t x, int64_t y) {
          return b.traj[static_cast<size_t>(x)].group < b.traj[static_cast<size_t>(y)].group;
        });
      else if (cfg_.micro_batch > 0 && cfg_.micro_batch < Bm)
        std::stable_sort(order.begin() + r0, order.begin() + r1, [&](int64_t x, int64_t y) {
          const Trajectory& a = b.traj[static_cast<size_t>(x)];
          const Trajectory& c = b.traj[static_cast<size_t>(y)];
          return a.prompt.size() + a.tokens.size() > c.prompt.size() + c.tokens.size();
        });
      // This rank's rows, scaled by the whole mini-batch's normalisers: every ranks()-th of the mini-batch
      // after the length sort (so the shares cost alike), or with shared prompts a block of the
      // group-sorted rows (so a group's rows stay together and its prompt is held once).
      std::vector<int64_t> own;
      LossNorm norm;
      const dist::Range block = dist::shard(Bm, rank(), ranks());
      for (int64_t i = 0; i < Bm; ++i) {
        const int64_t row = order[static_cast<size_t>(r0 + i)];
        LossNorm x = policy_loss_norm(mask.data() + static_cast<size_t>(row * T), 1, T);
        norm.tokens += x.tokens;
        norm.seqs += x.seqs;
        if (pack ? i >= block.begin && i < block.end : i % ranks() == rank()) own.push_back(row);
      }
      if (pack)  // rows whose loss has no gradient (advantage 0: a group's rewards all equal) after the others, so
                 // their micro-batches skip the backward (policy_loss.h, no_gradient); groups stay together
        std::stable_partition(own.begin(), own.end(), [&](int64_t row) {
          for (int64_t t = 0; t < T; ++t)
            if (adv[static_cast<size_t>(row * T + t)] != 0 && mask[static_cast<size_t>(row * T + t)] != 0) return true;
          return false;
        });
      const int64_t Bl = static_cast<int64_t>(own.size());
      const size_t Nm = static_cast<size_t>(Bl * T);
      for (auto* v : {&mmask, &mold, &madv, &mw, &mscale, &lp, &ent}) v->assign(Nm, 0.f);
      mtok.assign(Nm, 0);
      mtgt.assign(Nm, -1);
      if (!ref.empty()) mref.assign(Nm, 0.f);
      for (int64_t i = 0; i < Bl; ++i) {
        size_t src = static_cast<size_t>(own[static_cast<size_t>(i)] * T), dst = static_cast<size_t>(i * T);
        std::copy_n(tok.begin() + static_cast<long>(src), T, mtok.begin() + static_cast<long>(dst));
        std::copy_n(tgt.begin() + static_cast<long>(src), T, mtgt.begin() + static_cast<long>(dst));
        std::copy_n(mask.begin() + static_cast<long>(src), T, mmask.begin() + static_cast<long>(dst));
        std::copy_n(old.begin() + static_cast<long>(src), T, mold.begin() + static_cast<long>(dst));
        std::copy_n(adv.begin() + static_cast<long>(src), T, madv.begin() + static_cast<long>(dst));
        std::copy_n(w.begin() + static_cast<long>(src), T, mw.begin() + static_cast<long>(dst));
        if (!ref.empty()) std::copy_n(ref.begin() + static_cast<long>(src), T, mref.begin() + static_cast<long>(dst));
      }
      policy_loss_scale(cfg_.loss, mmask.data(), Bl, T, norm, mscale.data());
      policy_.zero_grad();
      const int64_t mb = cfg_.micro_batch > 0 ? cfg_.micro_batch : std::max<int64_t>(Bl, 1);
      for (int64_t q0 = 0; q0 < Bl; q0 += mb) {
        int64_t rows = std::min(mb, Bl - q0);
        size_t off = static_cast<size_t>(q0 * T);
        int64_t Tm = T;  // the micro-batch's longest row (padding beyond it carries no loss)
        if (mb < Bl) {
          Tm = 2;
          for (int64_t i = 0; i < rows; ++i) {
            const Trajectory& t = b.traj[static_cast<size_t>(own[static_cast<size_t>(q0 + i)])];
            Tm = std::max<int64_t>(Tm, static_cast<int64_t>(t.prompt.size() + t.tokens.size()));
          }
        }
        const int32_t *ptok = mtok.data() + off, *ptgt = mtgt.data() + off;
        const float *pold = mold.data() + off, *padv = madv.data() + off, *pw = mw.data() + off, *psc = mscale.data() + off;
        const float* pref = ref.empty() ? nullptr : mref.data() + off;
        float *plp = lp.data() + off, *pent = ent.data() + off;
        if (Tm < T) {  // compact rows to stride Tm
          const size_t n = static_cast<size_t>(rows * Tm);
          ctok.resize(n), ctgt.resize(n);
          for (auto* v : {&cold, &cadv, &cw, &csc, &clp, &cent}) v->resize(n);
          if (pref) cref.resize(n);
          for (int64_t i = 0; i < rows; ++i) {
            const size_t src = off + static_cast<size_t>(i * T), dst = static_cast<size_t>(i * Tm);
            std::copy_n(mtok.begin() + static_cast<long>(src), Tm, ctok.begin() + static_cast<long>(dst));
            std::copy_n(mtgt.begin() + static_cast<long>(src), Tm, ctgt.begin() + static_cast<long>(dst));
            std::copy_n(mold.begin() + static_cast<long>(src), Tm, cold.begin() + static_cast<long>(dst));
            std::copy_n(madv.begin() + static_cast<long>(src), Tm, cadv.begin() + static_cast<long>(dst));
            std::copy_n(mw.begin() + static_cast<long>(src), Tm, cw.begin() + static_cast<long>(dst));
            std::copy_n(mscale.begin() + static_cast<long>(src), Tm, csc.begin() + static_cast<long>(dst));
            if (pref) std::copy_n(mref.begin() + static_cast<long>(src), Tm, cref.begin() + static_cast<long>(dst));
          }
          ptok = ctok.data(), ptgt = ctgt.data(), pold = cold.data(), padv = cadv.data(), pw = cw.data(), psc = csc.data();
          pref = pref ? cref.data() : nullptr;
          plp = clp.data(), pent = cent.data();
        }
        // Teacher distributions (full-vocabulary reverse KL): pointers into the trajectories, one per position.
        std::vector<const float*> rkl_rows;
        std::vector<float> rkl_kl;
        if (b.reverse_kl_coef != 0) {
          rkl_rows.assign(static_cast<size_t>(rows * Tm), nullptr);
          rkl_kl.assign(static_cast<size_t>(rows * Tm), 0.f);
          const int64_t V = policy_.config().vocab_size;
          for (int64_t i = 0; i < rows; ++i) {
            const Trajectory& t = b.traj[static_cast<size_t>(own[static_cast<size_t>(q0 + i)])];
            if (t.teacher_logq.empty()) continue;
            TEMPER_CHECK(static_cast<int64_t>(t.teacher_logq.size()) == static_cast<int64_t>(t.tokens.size()) * V)
                << "rl: a trajectory's teacher distributions hold " << t.teacher_logq.size() << " values, expected " << t.tokens.size() << " x " << V;
            for (size_t k = 0; k < t.tokens.size(); ++k)
              rkl_rows[static_cast<size_t>(i * Tm) + t.prompt.size() - 1 + k] = t.teacher_logq.data() + static_cast<int64_t>(k) * V;
          }
        }
        int64_t npos = rows * Tm;  // rows of the forward: padded, or packed
        PackedRows packed;
        bool reuse = false;  // the packed rows' activations from the rollout (no forward)
        if (pack) {  // equal prompts once, no padding: every per-position field follows its row into the packed order
          std::vector<const std::vector<int32_t>*> prompts(static_cast<size_t>(rows));
          std::vector<int64_t> lens(static_cast<size_t>(rows));
          std::vector<const std::vector<int64_t>*> slots_of(static_cast<size_t>(rows));
          for (int64_t i = 0; i < rows; ++i) {
            const Trajectory& t = b.traj[static_cast<size_t>(own[static_cast<size_t>(q0 + i)])];
            prompts[static_cast<size_t>(i)] = &t.prompt;
            slots_of[static_cast<size_t>(i)] = &t.act_slots;
            // The last token predicts nothing and no row reads it: left out (the rollout never forwarded it).
            lens[static_cast<size_t>(i)] =
                static_cast<int64_t>(t.prompt.size() + std::max<size_t>(t.tokens.size(), 1) - 1);
          }
          packed = pack_rows(prompts, lens, Tm);
          npos = packed.size();
          packed.gather(ptok, &xtok);
          packed.gather(ptgt, &xtgt);
          packed.gather(pold, &xold);
          packed.gather(padv, &xadv);
          packed.gather(pw, &xw);
          packed.gather(psc, &xsc);
          if (pref) packed.gather(pref, &xref);
          if (!rkl_rows.empty()) {
            packed.gather(rkl_rows.data(), &xrkl);
            rkl_rows.swap(xrkl);
            rkl_kl.assign(static_cast<size_t>(npos), 0.f);
          }
          xlp.assign(static_cast<size_t>(npos), 0.f), xent.assign(static_cast<size_t>(npos), 0.f);
          ptok = xtok.data(), ptgt = xtgt.data(), pold = xold.data(), padv = xadv.data();
          pw = xw.data(), psc = xsc.data(), pref = pref ? xref.data() : nullptr;
          plp = xlp.data(), pent = xent.data();
          reuse = store_ && policy_.reusable(*store_) && reusable_slots(*store_, packed, ptok, slots_of, Tm, &xslots);
        }
        PolicyLossBatch pb;
        if (!rkl_rows.empty()) {
          pb.rkl_logq = rkl_rows.data();
          pb.rkl_coef = static_cast<float>(b.reverse_kl_coef);
          pb.rkl_out = rkl_kl.data();
        }
        pb.old_logp = pold;
        pb.ref_logp = pref;
        pb.advantage = padv;
        pb.weight = pw;
        pb.scale = psc;
        pb.N = npos;
        positions += npos;
        PolicyLoss loss(cfg_.loss, pb);
        if (loss.no_gradient()) no_gradient += npos;
        if (reuse) {
          policy_.forward_backward_packed(ptok, ptgt, packed.segs, loss, plp, pent, *store_, xslots.data());
          reused += npos;
        } else if (pack)
          policy_.forward_backward_packed(ptok, ptgt, packed.segs, loss, plp, pent);
        else
          policy_.forward_backward(ptok, ptgt, rows, Tm, loss, plp, pent);
        total.merge(policy_loss_forward(cfg_.loss, pb, plp, pent));
        for (size_t n = 0; n < rkl_rows.size(); ++n)
          if (rkl_rows[n] && psc[n] != 0) rkl_sum += rkl_kl[n], ++rkl_tokens;
      }
      OptimizerStep o = opt_.step();
      lr = o.lr;
      if (o.skipped) {
        ++skipped;
        log_write(LogLevel::warn, "rl step " + std::to_string(step_) + ": non-finite loss or gradients (loss " +
                                      std::to_string(total.loss) + "); the update was skipped, the run goes on");
      } else {
        ++applied;
        grad_norm_sum += o.grad_norm;
      }
    }
  }
  if (ranks() > 1) {  // the loss statistics of the whole batch
    double v[11] = {total.loss, total.pg_loss, total.kl_loss, total.entropy_loss, static_cast<double>(total.tokens),
                    static_cast<double>(total.clipped_low), static_cast<double>(total.clipped_high),
                    static_cast<double>(total.dual_clipped), total.ratio_sum, total.kl_sum, total.entropy_sum};
    comm_->allreduce_sum(v, 11);
    double p[3] = {static_cast<double>(positions), static_cast<double>(reused), static_cast<double>(no_gradient)};
    comm_->allreduce_sum(p, 3);
    positions = static_cast<int64_t>(p[0]), reused = static_cast<int64_t>(p[1]),
    no_gradient = static_cast<int64_t>(p[2]);
    total.loss = v[0], total.pg_loss = v[1], total.kl_loss = v[2], total.entropy_loss = v[3];
    total.tokens = static_cast<int64_t>(v[4]), total.clipped_low = static_cast<int64_t>(v[5]);
    total.clipped_high = static_cast<int64_t>(v[6]), total.dual_clipped = static_cast<int64_t>(v[7]);
    total.ratio_sum = v[8], total.kl_sum = v[9], total.entropy_sum = v[10];
  }
  out.emplace_back("loss", total.loss / static_cast<double>(cfg_.epochs * cfg_.mini_batches));
  out.emplace_back("pg_loss", total.pg_loss / static_cast<double>(cfg_.epochs * cfg_.mini_batches));
  out.emplace_back("kl", total.mean_kl());
  out.emplace_back("clip_frac", total.clip_frac());
  out.emplace_back("clip_frac_low", total.clip_frac_low());
  out.emplace_back("clip_frac_high", total.clip_frac_high());
  out.emplace_back("ratio_mean", total.mean_ratio());
  out.emplace_back("grad_norm", applied ? grad_norm_sum / static_cast<double>(applied) : NAN);
  out.emplace_back("lr", lr);
  out.emplace_back("updates", static_cast<double>(applied));
  out.emplace_back("updates_skipped", static_cast<double>(skipped));
  out.emplace_back("train_tokens", static_cast<double>(total.tokens));
  // Rows the update's forward and backward ran over (all epochs, all ranks): prompts, completions and
  // padding, or with share_prompts each shared prompt once and no padding.
  out.emplace_back("train_positions", static_cast<double>(positions));
  // Of those, rows whose forward was skipped: their activations came from the rollout (reuse_activations).
  out.emplace_back("reused_positions", static_cast<double>(reused));
  // And rows whose backward was skipped: their micro-batch's loss has no gradient (every advantage 0, no KL or
  // entropy term), so only their log-probs and entropies were computed.
  out.emplace_back("no_gradient_positions", static_cast<double>(no_gradient));
  if (b.reverse_kl_coef != 0) {
    double v[2] = {rkl_sum, static_cast<double>(rkl_tokens)};
    if (ranks() > 1) comm_->allreduce_sum(v, 2);
    out.emplace_back("reverse_kl", v[1] > 0 ? v[0] / v[1] : 0.0);  // mean over positions and epochs
  }
  return out;
}

}  // namespace temper::rl

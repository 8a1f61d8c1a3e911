#include "temper/rl/evaluate.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "temper/core/error.h"
#include "temper/model/kv_pool.h"
#include "temper/rl/methods/fair.h"
#include "temper/rl/welfare.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/pooled_engine.h"
#include "temper/rollout/self_speculation.h"
#include "temper/rollout/sharded.h"

namespace temper::rl {

void EvalConfig::visit(KeyVisitor& v) {
  v("problems", problems, "held-out problems per evaluation");
  v("samples", samples, "samples per problem (pass@1 and pass@samples)");
  greedy = samples == 1;
  v("greedy", greedy, "greedy decoding (default: with one sample)");
  sampler.visit(v);
  v("max_new", max_new, "completion tokens at most (default rl.max_new)");
  v("revisions", revisions,
    "sequential revision: a wrong attempt comes back with the feedback \"incorrect\" this often");
  v("revision_template", revision.revision_template, "the revision prompt: {question}, {attempt}");
}

// The counts that size the evaluation's requests, completions and KV pool are bounded generously (a task's split
// may hold fewer problems: the evaluation takes those), so an absurd one is refused before anything is drawn.
void EvalConfig::validate() const {
  auto within = [](const char* key, int64_t v, int64_t lo, int64_t hi) {
    TEMPER_CHECK(v >= lo && v <= hi) << key << " = " << v << ": expected " << lo << " to " << hi;
  };
  within("eval.problems", problems, 1, 10000000);
  within("eval.samples", samples, 1, 65536);
  TEMPER_CHECK(problems * samples <= 10000000)
      << "eval.problems x eval.samples = " << problems << " x " << samples << " = " << problems * samples
      << " completions: expected at most 10000000";
  within("eval.max_new", max_new, 1, kMaxPositions);
  within("eval.revisions", revisions, 0, 1000);
  within("rl.kv_memory_mb (the evaluation's KV cache)", kv_memory_mb, 1, int64_t{1} << 24);
  within("rl.max_seqs (the evaluation's batch)", max_seqs, 1, int64_t{1} << 20);
  TEMPER_CHECK(!greedy || samples == 1) << "eval: greedy decoding gives one sample per problem, got samples = "
                                        << samples;
  for (int64_t k : pass_k)
    TEMPER_CHECK(k >= 1 && k <= samples) << "eval.pass_k: k = " << k << " must be in [1, samples = " << samples << "]";
  if (!greedy) sampler.validate();
  TEMPER_CHECK(revisions == 0 || samples == 1)
      << "eval: revisions need one sample per problem, got samples = " << samples;
  if (revisions > 0) revision.validate();
  if (!objectives.empty() || !preference.empty()) {  // the fair method's checks, with its keys
    FairConfig f;
    f.objectives = objectives.empty() ? std::vector<std::string>(preference.size(), "correct") : objectives;
    f.fixed = preference;
    f.ggf = ggf;
    f.prefix = preference_prefix;
    f.validate();
  }
}

double pass_at_k(int64_t n, int64_t c, int64_t k) {
  if (n - c < k) return 1.0;
  double p = 1.0;  // C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
  for (int64_t i = n - c + 1; i <= n; ++i) p *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - p;
}

namespace {

// Counts samples as they finish (a stop token or their max_new) and reports every ~2 s; decides nothing.
class ProgressHook final : public rollout::RolloutHook {
 public:
  ProgressHook(std::function<void(int64_t, int64_t, int64_t)> report, int64_t total)
      : report_(std::move(report)), total_(total), last_(std::chrono::steady_clock::now()) {}
  rollout::HookDecision after_token(const rollout::RolloutRequest& q, const rollout::Completion& c) override {
    ++tokens_;
    if (!c.tokens.empty() && (q.stop_ids.count(c.tokens.back()) || static_cast<int64_t>(c.tokens.size()) >= q.max_new))
      ++done_;
    return {};
  }
  void after_step(int64_t) override {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(2)) return;
    last_ = now;
    report_(std::min(done_, total_), total_, tokens_);
  }

 private:
  std::function<void(int64_t, int64_t, int64_t)> report_;
  int64_t total_, done_ = 0, tokens_ = 0;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

EvalResult evaluate(Transformer& model, std::shared_ptr<const tasks::Task> task, const PromptCodec& codec,
                    const EvalConfig& cfg, reward::SafeReward& safe, dist::Communicator* comm) {
  cfg.validate();
  const int64_t size = task->size(tasks::Split::eval);
  TEMPER_CHECK(size != 0) << "eval: task '" << task->name() << "' has no eval problems";
  const int64_t n = size > 0 ? std::min(cfg.problems, size) : cfg.problems;
  const int64_t ctx = model.config().max_position_embeddings;
  std::vector<tasks::Problem> problems;
  std::vector<rollout::RolloutRequest> reqs;
  rollout::SamplerConfig sampler = cfg.sampler;
  sampler.greedy = cfg.greedy;
  for (int64_t i = 0; i < n; ++i) {
    problems.push_back(task->problem(tasks::Split::eval, static_cast<uint64_t>(i)));
    if (!cfg.preference.empty())
      problems.back() = fair_condition(problems.back(), codec, cfg.preference_prefix, cfg.preference, cfg.ggf);
    std::vector<int32_t> prompt = codec.encode_prompt(problems.back());
    TEMPER_CHECK(static_cast<int64_t>(prompt.size()) < ctx)
        << "eval: the prompt of " << problems.back().id << " has " << prompt.size() << " tokens, context " << ctx;
    reqs.push_back(rollout::make_request(std::move(prompt), cfg.samples, cfg.max_new, ctx, sampler, codec.stop_ids,
                                         cfg.seed, static_cast<uint64_t>(i * cfg.samples)));
  }
  rollout::PooledEngine pooled(model, cfg.kv_memory_mb, rollout::EngineConfig{cfg.max_seqs, codec.token_bytes},
                               "eval.kv_memory_mb");
  KvPool& pool = pooled.pool();
  rollout::RolloutEngine& engine = pooled.engine();
  rollout::SelfSpeculation spec;
  if (cfg.speculative_gamma > 0)
    spec.attach(model, pool, engine, cfg.speculative_gamma, cfg.draft_head, cfg.speculative_toggle);
  std::unique_ptr<ProgressHook> progress;
  if (cfg.progress) progress = std::make_unique<ProgressHook>(cfg.progress, n * cfg.samples);
  std::vector<rollout::Completion> done = rollout::run_sharded(engine, reqs, comm, progress.get());

  EvalResult res;
  if (spec.on()) {
    res.drafted = engine.stats().drafted;
    res.accepted = engine.stats().accepted;
    res.speculative = spec.summary(engine.stats());
  }
  res.problems = n;
  std::vector<int64_t> correct(static_cast<size_t>(n), 0);
  double len = 0, acc = 0, len_correct = 0;
  std::map<int, std::pair<int64_t, int64_t>> diff;  // difficulty -> (samples, correct)
  for (const rollout::Completion& c : done) {
    const tasks::Problem& p = problems[static_cast<size_t>(c.request)];
    std::string text = codec.decode(c.tokens);
    tasks::Verdict v = tasks::verify_safely(safe, task, p, text);
    correct[static_cast<size_t>(c.request)] += v.correct ? 1 : 0;
    acc += v.correct ? 1 : 0;
    len += static_cast<double>(c.tokens.size());
    res.truncated_frac += c.finish == rollout::FinishReason::length ? 1 : 0;
    if (v.correct) len_correct += static_cast<double>(c.tokens.size());
    auto& d = diff[p.difficulty];
    d.first += 1;
    d.second += v.correct ? 1 : 0;
    res.reward_mean += v.reward;
    if (c.member == 0 || cfg.all_examples)
      res.examples.push_back({p.id, p.shown(), text, p.answer, c.member, v.reward, v.correct});
    if (!cfg.objectives.empty()) {
      std::vector<double> o = fair_objectives(cfg.objectives, v.correct, static_cast<int64_t>(c.tokens.size()),
                                              cfg.max_new, text, task.get(), v.rewards);
      res.objective_means.resize(o.size(), 0.0);
      for (size_t j = 0; j < o.size(); ++j) res.objective_means[j] += o[j];
    }
  }
  if (!cfg.objectives.empty()) {
    const size_t D = cfg.objectives.size();
    for (double& x : res.objective_means) x /= static_cast<double>(std::max<size_t>(1, done.size()));
    res.objective_means.resize(D, 0.0);
    std::vector<double> pw(D);
    for (size_t j = 0; j < D; ++j)
      pw[j] = (cfg.preference.empty() ? 1.0 / static_cast<double>(D) : cfg.preference[j]) * res.objective_means[j];
    res.welfare = ggf(cfg.ggf.empty() ? ggf_weights(static_cast<int64_t>(D), "linear") : cfg.ggf, pw);
  }
  res.samples = static_cast<int64_t>(done.size());
  res.accuracy = acc / static_cast<double>(std::max<int64_t>(1, res.samples));
  res.reward_mean /= static_cast<double>(std::max<size_t>(1, done.size()));
  res.mean_len = len / static_cast<double>(std::max<int64_t>(1, res.samples));
  res.truncated_frac /= static_cast<double>(std::max<int64_t>(1, res.samples));
  res.mean_len_correct = acc > 0 ? len_correct / acc : 0.0;
  for (int64_t k : cfg.pass_k) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += pass_at_k(cfg.samples, correct[static_cast<size_t>(i)], k);
    res.pass_at_k[k] = s / static_cast<double>(n);
  }
  for (auto& [d, sc] : diff)
    res.by_difficulty[d] = {sc.first, static_cast<double>(sc.second) / static_cast<double>(sc.first)};
  if (cfg.revisions > 0) {
    ReviseSettings rs;
    rs.rounds = cfg.revisions;
    rs.sampler = cfg.sampler;
    rs.greedy = cfg.greedy;
    rs.max_new = cfg.max_new;
    rs.context = ctx;
    rs.seed = cfg.seed;
    std::vector<RevisionTrace> tr = revise(
        problems, rs, cfg.revision, codec,
        [&](const std::vector<rollout::RolloutRequest>& q) { return rollout::run_sharded(engine, q, comm); },
        [&](const tasks::Problem& p, const std::string& text) { return tasks::verify_safely(safe, task, p, text); });
    res.solved_within = solved_within(tr, cfg.revisions);
  }
  return res;
}

}  // namespace temper::rl

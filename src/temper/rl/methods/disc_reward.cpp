#include "temper/rl/methods/disc_reward.h"

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/rl/method_spec.h"
#include "temper/rl/ngram_features.h"

namespace temper::rl {

void DiscRewardConfig::visit(KeyVisitor& v) {
  v("samples", samples, "problems the head is fitted on (one real and one generated reply each)");
  v("real", real, "the real replies: gold (the task's solutions), teacher (a dataset's teacher_response)",
    kRealRepliesNames);
  v("combine", combine, "replace the task's reward with coef x logit, or add it", kRewardCombineNames);
  v("coef", coef, "the logit's weight (replace: also the KL's weight, rl.kl_coef's default)");
  v("kl", kl,
    "the KL to the starting policy: loss (rl.kl_coef x rl.kl_estimator per token; replace makes k2 the default, the "
    "reverse KL's gradient) or reward (coef x the sequence's sum_t log pi/pi_ref subtracted from the reward: the exact "
    "sequence-level reverse KL; rl.kl_coef 0)",
    kDiscKlNames);
  refit.visit(v);
  head.visit(v);
  features.visit(v);
}

void DiscRewardConfig::validate() const {
  head.validate();
  TEMPER_CHECK(samples >= 2) << "rl.discriminator.samples must be >= 2, got " << samples;
  TEMPER_CHECK(coef > 0) << "rl.discriminator.coef must be > 0, got " << coef;
  refit.validate("rl.discriminator");
  features.validate("rl.discriminator");
}

DiscReward::DiscReward(DiscRewardConfig cfg) : cfg_(std::move(cfg)), head_(cfg_.head, cfg_.refit) {
  cfg_.validate();
}

void DiscReward::attach(const MethodEnv& env) {
  env_ = env;
  if (cfg_.features.needs_model())
    features_ = [this](const tasks::Problem&, const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply,
                       const std::string&) { return env_.embed(prompt, reply); };
  else
    features_ = [dim = cfg_.features.ngram_dim](const tasks::Problem& p, const std::vector<int32_t>&,
                                                const std::vector<int32_t>&, const std::string& text) {
      return ngram_features(text, {p.shown()}, dim);
    };
}

FitStats fit_real_vs_policy(const MethodEnv& env, int64_t samples,
                            const std::function<std::string(const tasks::Problem&)>& real_text,
                            const std::function<std::string(const std::string&)>& view, const ReplyFeatures& features,
                            Discriminator& head, int64_t round) {
  const tasks::Task& task = *env.task;
  const int64_t size = task.size(tasks::Split::train);
  std::vector<rollout::RolloutRequest> reqs;
  std::vector<tasks::Problem> problems;
  std::vector<std::vector<float>> real, gen;
  for (int64_t i = 0; i < samples; ++i) {
    uint64_t idx = static_cast<uint64_t>(round * samples + i);
    if (size > 0) idx %= static_cast<uint64_t>(size);
    tasks::Problem p = task.problem(tasks::Split::train, idx);
    rollout::RolloutRequest r = env.request(env.codec->encode_prompt(p), 1, mix_seed(env.seed, 0xD15Cull),
                                            static_cast<uint64_t>(round * samples + i));
    r.max_new = std::max<int64_t>(1, r.max_new);
    const std::string text = real_text(p);
    std::vector<int32_t> reply = env.codec->encode_completion(text);
    if (!reply.empty()) real.push_back(features(p, r.prompt, reply, text));
    reqs.push_back(std::move(r));
    problems.push_back(std::move(p));
  }
  for (const rollout::Completion& c : env.generate(reqs)) {  // the policy as it stands: p_0 in the first round
    const std::vector<int32_t>& prompt = reqs[static_cast<size_t>(c.request)].prompt;
    const tasks::Problem& p = problems[static_cast<size_t>(c.request)];
    if (!view) {
      if (!c.tokens.empty()) gen.push_back(features(p, prompt, c.tokens, env.codec->decode(c.tokens)));
      continue;
    }
    const std::string text = view(env.codec->decode(c.tokens));
    std::vector<int32_t> seen = env.codec->encode_completion(text);
    if (!seen.empty()) gen.push_back(features(p, prompt, seen, text));
  }
  head.fit(real, gen);
  return {head.accuracy(real, gen), static_cast<int64_t>(real.size()), static_cast<int64_t>(gen.size())};
}

void DiscReward::fit() {
  FitStats f = fit_real_vs_policy(
      env_, cfg_.samples,
      [this](const tasks::Problem& p) {
        const std::string& text = cfg_.real == RealReplies::gold ? p.gold_solution : p.teacher_response;
        TEMPER_CHECK(!text.empty()) << "rl.discriminator: problem " << p.id << " has no "
                                    << (cfg_.real == RealReplies::gold ? "gold solution" : "teacher_response")
                                    << " to serve as a real reply";
        return text;
      },
      nullptr, features_, head_.head(), head_.fits());
  head_.record_fit(f);
}

void DiscReward::after_reward(Batch& b) {
  if (head_.due()) fit();
  reward_sum_ = 0, rewarded_ = 0;
  for (Trajectory& t : b.traj) {
    if (t.tokens.empty()) continue;
    const double r = cfg_.coef * head_.head().reward(
                                     features_(b.problems[static_cast<size_t>(t.problem)], t.prompt, t.tokens, t.text));
    t.reward = cfg_.combine == RewardCombine::replace ? r : t.reward + r;
    reward_sum_ += r, ++rewarded_;
  }
  if (cfg_.kl == DiscKl::reward) subtract_kl(b);
}

// reward -= coef x sum_t (log pi(x_t) - log pi_ref(x_t)) over the completion's sampled tokens (loss mask 1; an
// environment's observations are not the policy's), pi the policy that sampled (Trajectory::old_logprob).
void DiscReward::subtract_kl(Batch& b) {
  std::vector<std::vector<int32_t>> prompts, tokens;
  std::vector<Trajectory*> rows;
  for (Trajectory& t : b.traj)
    if (!t.tokens.empty()) prompts.push_back(t.prompt), tokens.push_back(t.tokens), rows.push_back(&t);
  std::vector<std::vector<float>> ref;
  env_.score_batch(prompts, tokens, /*initial=*/true, ref, nullptr);
  kl_sum_ = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Trajectory& t = *rows[i];
    TEMPER_CHECK(t.old_logprob.size() == t.tokens.size() && ref[i].size() == t.tokens.size())
        << "rl.discriminator.kl = \"reward\": a rollout's sampling log-probs (" << t.old_logprob.size()
        << ") or reference log-probs (" << ref[i].size() << ") do not cover its " << t.tokens.size() << " tokens";
    double kl = 0;
    for (size_t k = 0; k < t.tokens.size(); ++k)
      if (t.loss_mask.empty() || t.loss_mask[k] > 0.f)
        kl += static_cast<double>(t.old_logprob[k]) - static_cast<double>(ref[i][k]);
    t.reward -= cfg_.coef * kl;
    kl_sum_ += kl;
  }
  kl_rows_ = static_cast<int64_t>(rows.size());
}

void DiscReward::metrics(Metrics& m) const {
  m.emplace_back("disc_reward_mean", rewarded_ ? reward_sum_ / static_cast<double>(rewarded_) : 0.0);
  m.emplace_back("disc_fit_accuracy", head_.stats().accuracy);
  m.emplace_back("disc_fit_examples", static_cast<double>(head_.stats().real + head_.stats().gen));
  m.emplace_back("disc_fits", static_cast<double>(head_.fits()));
  if (cfg_.kl == DiscKl::reward)
    m.emplace_back("disc_seq_kl_mean", kl_rows_ ? kl_sum_ / static_cast<double>(kl_rows_) : 0.0);
}

namespace {
// The discriminator's logit estimates log p_data / p_0: KL-regularised RL on it with the reverse KL at beta = coef
// and the raw reward is the distribution-matching point (spec, methods-other section 4; docs/METHODS.md derives it).
// So with replace: no std scaling (it would change the effective beta), RLOO's leave-one-out baseline (GRPO's
// r - mean_g includes the sample itself: an effective beta of G/(G-1)), and the reverse KL: k2 as the per-token
// loss term (k3's gradient is the forward KL(pi_ref || pi)'s), or the sequence's log-ratio in the reward. Added to
// a task's reward there is no such point, and the usual defaults stay.
class DiscRewardSetup final : public MethodSetupOf<DiscRewardConfig> {
  void change_defaults(RecipeDefaults& d) const override {
    if (cfg.kl == DiscKl::reward) d.set("rl.kl_coef", "0.0");  // the KL is in the reward
    if (cfg.combine != RewardCombine::replace) return;
    if (cfg.kl == DiscKl::loss) {
      d.set("rl.kl_coef", toml_float(cfg.coef));
      d.set("rl.kl_estimator", "\"k2\"");
    }
    d.set("rl.scale_rewards", "\"none\"");
    d.set("rl.advantage", "\"rloo\"");
  }
  MethodNeeds needs() const override {
    MethodNeeds n;
    n.reference = cfg.features.needs_model() || cfg.kl == DiscKl::reward;
    return n;
  }
  MethodEffects effects() const override {
    MethodEffects e;
    e.replaces_reward = cfg.combine == RewardCombine::replace;
    e.rewrites_rewards = true;
    e.detail = "combine = \"" + std::string(enum_name(kRewardCombineNames, cfg.combine)) + "\"";
    return e;
  }
  std::unique_ptr<Method> make(const MethodDeps&) const override { return std::make_unique<DiscReward>(cfg); }
};
}  // namespace

const MethodSpec kDiscRewardMethod{
    "discriminator", "rl.discriminator", 30, "discriminator rewards",
    []() -> std::unique_ptr<MethodSetup> { return std::make_unique<DiscRewardSetup>(); }};

}  // namespace temper::rl

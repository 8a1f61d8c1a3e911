#include "temper/rl/methods/turing.h"

#include "temper/core/error.h"
#include "temper/rl/judge_reward.h"
#include "temper/rl/method_spec.h"
#include "temper/rl/methods/disc_reward.h"
#include "temper/rl/ngram_features.h"
#include "temper/tasks/user_sim.h"

namespace temper::rl {

void TuringConfig::visit(KeyVisitor& v) {
  v("judge", judge,
    "scripted (a rule-based judge), discriminator (a head fitted on real conversations) or model (a frozen LLM "
    "judge: judge_model)",
    kTuringJudgeNames);
  v("judge_model", judge_model, "judge = model: the judge, a Hugging Face directory or a GGUF file");
  v("judge_template", judge_template,
    "judge = model: the judge's prompt with {history}, {context}, {a} and {b} (empty: the built-in one)");
  v("judge_max_new", judge_max_new, "judge = model: the judge's longest answer in tokens");
  v("judge_device", judge_device, "judge = model: where the judge runs, \"cpu\" or the policy's \"cuda\"");
  reward.visit(v);
  v("samples", samples, "judge = discriminator: conversations it is fitted on");
  refit.visit(v);
  head.visit(v);
  features.visit(v);
}

void TuringConfig::validate() const {
  reward.validate();
  head.validate();
  TEMPER_CHECK(samples >= 2) << "rl.turing.samples must be >= 2, got " << samples;
  refit.validate("rl.turing");
  features.validate("rl.turing");
  if (judge == TuringJudge::model) {
    TEMPER_CHECK(!judge_model.empty())
        << "rl.turing.judge_model is required for judge = \"model\" (a Hugging Face directory or a GGUF file)";
    TEMPER_CHECK(judge_max_new >= 1) << "rl.turing.judge_max_new must be >= 1, got " << judge_max_new;
    TEMPER_CHECK(judge_device == "cpu" || judge_device == "cuda")
        << "rl.turing.judge_device must be \"cpu\" or \"cuda\", got '" << judge_device << "'";
    JudgeTemplate t(judge_template.empty() ? kModelJudgeTemplate : judge_template, {"history", "context", "a", "b"},
                    "rl.turing.judge_template");
    TEMPER_CHECK(t.uses(2) && t.uses(3)) << "rl.turing.judge_template must contain {a} and {b} (the two candidates)";
  }
}

Turing::Turing(TuringConfig cfg) : cfg_(std::move(cfg)), head_(cfg_.head, cfg_.refit) {
  cfg_.validate();
  if (cfg_.judge == TuringJudge::scripted)
    judge_ = std::make_unique<ScriptedJudge>();
  else if (cfg_.judge == TuringJudge::model)
    ;  // loaded in attach()
  else judge_ = std::make_unique<ClassifierJudge>([this](const tasks::Problem& p, const std::string& t) { return logit(p, t); });
}

void Turing::attach(const MethodEnv& env) {
  env_ = env;
  if (cfg_.judge == TuringJudge::model && !judge_)
    judge_ = std::make_unique<ModelJudge>(
        load_judge_model(cfg_.judge_model, cfg_.judge_device, "rl.turing.judge_model"),
        cfg_.judge_template.empty() ? kModelJudgeTemplate : cfg_.judge_template, cfg_.judge_max_new);
  if (cfg_.features.needs_model())
    features_ = [this](const tasks::Problem&, const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply,
                       const std::string&) { return env_.embed(prompt, reply); };
  else  // the turn itself (the text after "[HUMAN]:") against the user's earlier turns
    features_ = [dim = cfg_.features.ngram_dim](const tasks::Problem& p, const std::vector<int32_t>&,
                                                const std::vector<int32_t>&, const std::string& text) {
      return ngram_features(tasks::parse_sim_reply(text).reply, p.history, dim);
    };
}

// The classifier sees the reply as the format writes it: "[HUMAN]: <turn>".
// Cached per step: the real turn of a conversation is judged against each of its G rollouts, and a frozen
// reference forward per call would repeat.
double Turing::logit(const tasks::Problem& p, const std::string& turn) {
  auto key = std::make_pair(p.id, turn);
  if (auto it = logits_.find(key); it != logits_.end()) return it->second;
  const std::string text = "[HUMAN]: " + turn;
  if (!cfg_.features.needs_model()) return logits_[key] = head_.head().logit(features_(p, {}, {}, text));  // text only
  std::vector<int32_t> ids = env_.codec->encode_completion(text);
  return logits_[key] = head_.head().logit(features_(p, env_.codec->encode_prompt(p), ids, text));
}

void Turing::after_reward(Batch& b) {
  if (cfg_.judge == TuringJudge::discriminator && head_.due()) {
    FitStats f = fit_real_vs_policy(
        env_, cfg_.samples, [](const tasks::Problem& p) { return "[HUMAN]: " + p.answer; },
        [](const std::string& completion) {
          std::string reply = tasks::parse_sim_reply(completion).reply;
          return reply.empty() ? std::string() : "[HUMAN]: " + reply;
        },
        features_, head_.head(), head_.fits());
    head_.record_fit(f);
  }
  logits_.clear();
  s_sum_ = reward_sum_ = format_sum_ = length_sum_ = 0;
  judged_ = fooled_ = zero_ = n_ = 0;
  std::vector<const tasks::Problem*> problems;
  std::vector<const std::string*> texts;
  for (Trajectory& t : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    TEMPER_CHECK(!p.answer.empty()) << "rl.turing: problem " << p.id << " has no real reply (use task user_sim)";
    problems.push_back(&p);
    texts.push_back(&t.text);
  }
  std::vector<TuringReward> rs = turing_rewards(*judge_, problems, texts, cfg_.reward);
  for (size_t i = 0; i < b.traj.size(); ++i) {
    const TuringReward& r = rs[i];
    b.traj[i].reward = r.total;
    ++n_;
    reward_sum_ += r.total;
    if (r.hard_zero) {
      ++zero_;
      continue;
    }
    ++judged_;
    s_sum_ += r.s;
    fooled_ += r.s >= 4 ? 1 : 0;
    format_sum_ += r.format;
    length_sum_ += r.length;
  }
}

void Turing::metrics(Metrics& m) const {
  auto mean = [](double s, int64_t n) { return n ? s / static_cast<double>(n) : 0.0; };
  m.emplace_back("turing_reward_mean", mean(reward_sum_, n_));
  m.emplace_back("turing_s_mean", mean(s_sum_, judged_));
  m.emplace_back("turing_judged_human", mean(static_cast<double>(fooled_), judged_));
  m.emplace_back("turing_format_mean", mean(format_sum_, judged_));
  m.emplace_back("turing_length_penalty", mean(length_sum_, judged_));
  m.emplace_back("turing_hard_zero", mean(static_cast<double>(zero_), n_));
  if (cfg_.judge == TuringJudge::model && judge_)  // judgements without a rating in 1..7 (counted as 4), so far
    m.emplace_back("turing_judge_failures", static_cast<double>(judge_->failures()));
  if (cfg_.judge == TuringJudge::discriminator) {
    m.emplace_back("turing_judge_fit_accuracy", head_.stats().accuracy);
    m.emplace_back("turing_judge_fits", static_cast<double>(head_.fits()));
  }
}

namespace {
class TuringSetup final : public MethodSetupOf<TuringConfig> {
  void validate(const RunSettings& run) const override {
    cfg.validate();
    TEMPER_CHECK(run.task_name == "user_sim")
        << "rewards user simulators: expected task.name = \"user_sim\", got '" << run.task_name << "'";
  }
  MethodNeeds needs() const override {
    MethodNeeds n;
    n.reference = cfg.judge == TuringJudge::discriminator && cfg.features.needs_model();
    return n;
  }
  MethodEffects effects() const override {
    MethodEffects e;
    e.replaces_reward = true;
    e.rewrites_rewards = true;
    e.detail = "judge = \"" + std::string(enum_name(kTuringJudgeNames, cfg.judge)) + "\"";
    return e;
  }
  std::unique_ptr<Method> make(const MethodDeps&) const override { return std::make_unique<Turing>(cfg); }
};
}  // namespace

const MethodSpec kTuringMethod{"turing", "rl.turing", 20, "Turing-style rewards for user simulators",
                               []() -> std::unique_ptr<MethodSetup> { return std::make_unique<TuringSetup>(); }};

}  // namespace temper::rl

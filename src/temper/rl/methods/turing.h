// Turing rewards for user simulators (spec methods-other section 2; Wang et al. 2026, "Learning User
// Simulators with Turing Rewards"): each rollout's reply and the real next turn go to a pairwise judge
// (rl/pairwise_judge.h) in hash-fixed order; the reward is the clipped, shaped rating of
// rl/turing_reward.h. Reads the task's user_sim fields (Problem::history, context, answer = the real turn).
// The judges ("scripted" or "discriminator") and the optional refit: above Turing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "temper/rl/discriminator.h"
#include "temper/rl/method.h"
#include "temper/rl/refitted_head.h"
#include "temper/rl/reply_features.h"
#include "temper/rl/turing_reward.h"

namespace temper::rl {

struct MethodSpec;

enum class TuringJudge { scripted, discriminator, model };
inline constexpr EnumNames<TuringJudge, 3> kTuringJudgeNames{{{TuringJudge::scripted, "scripted"},
                                                              {TuringJudge::discriminator, "discriminator"},
                                                              {TuringJudge::model, "model"}}};

struct TuringConfig {
  TuringJudge judge = TuringJudge::scripted;
  TuringRewardConfig reward;
  DiscriminatorConfig head;   // judge = discriminator
  int64_t samples = 256;      // judge = discriminator: conversations it is fitted on
  RefitConfig refit;          // judge = discriminator: fits in all, steps between them
  ReplyFeatureConfig features;  // judge = discriminator: what the head reads
  std::string judge_model;      // judge = model: a Hugging Face directory or GGUF file
  std::string judge_template;   // judge = model: "" = kModelJudgeTemplate
  int64_t judge_max_new = 32;   // judge = model
  std::string judge_device = "cpu";
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// Judges: "scripted" (the paper's rubric measured against the user's history), "model" (the paper's frozen LLM
// judge: judge_model rates each pair 1..7, greedily, all of a step's pairs in one batch; rl/pairwise_judge.h
// ModelJudge; loaded when the method attaches) or "discriminator" (a
// real-vs-generated head on the frozen reference model's embeddings of the reply, or with features = "ngrams"
// on hashed character n-grams of the turn and the user's history (rl/reply_features.h), fitted at the first
// step on `samples` training conversations against the policy as RL starts, then frozen and checkpointed; with
// embeddings the trainer then holds a frozen copy of the starting weights). The judge is frozen, as in the
// paper (no GAN loop), unless `rounds` > 1: the spec's optional refit, a fresh head every `refit_every` steps
// against the policy as it stands then (rl/refitted_head.h).
class Turing : public Method {
 public:
  explicit Turing(TuringConfig cfg);
  std::string name() const override { return "turing"; }
  void attach(const MethodEnv& env) override;
  void after_reward(Batch& b) override;
  void metrics(Metrics& m) const override;
  void after_step(const Metrics&) override { head_.step_done(); }
  std::string save_state() const override { return head_.save("turing_judge"); }
  void load_state(const std::string& s) override { head_.load(s, "turing_judge"); }

 private:
  double logit(const tasks::Problem& p, const std::string& turn);
  std::map<std::pair<std::string, std::string>, double> logits_;  // (problem id, turn) -> this step's logit
  TuringConfig cfg_;
  MethodEnv env_;
  ReplyFeatures features_;
  RefittedHead head_;
  std::unique_ptr<PairwiseJudge> judge_;
  // this step's rollouts: sum of s, s >= 4 ("cannot tell" or better), reward, format, length, hard zeros
  double s_sum_ = 0, reward_sum_ = 0, format_sum_ = 0, length_sum_ = 0;
  int64_t judged_ = 0, fooled_ = 0, zero_ = 0, n_ = 0;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kTuringMethod;

}  // namespace temper::rl

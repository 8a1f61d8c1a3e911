// Discriminator rewards (spec methods-other section 4, the LLM form; Beltran-Velez et al. 2026): a head
// fitted to tell the real replies (gold solutions or dataset teacher responses) from the policy's own as
// it starts (p_0), then frozen, turns each rollout's reply into a reward (coef x its clipped logit,
// replacing the task's reward or added to it). With rl.kl_coef = 1 the KL-regularised optimum is the
// real distribution. The fit, the features and the refitting rounds: above DiscReward.
#pragma once

#include <functional>
#include <string>

#include "temper/rl/discriminator.h"
#include "temper/rl/method.h"
#include "temper/rl/refitted_head.h"
#include "temper/rl/reply_features.h"

namespace temper::rl {

struct MethodSpec;

enum class RealReplies { gold, teacher };  // the task's solutions, or a dataset's teacher_response
inline constexpr EnumNames<RealReplies, 2> kRealRepliesNames{
    {{RealReplies::gold, "gold"}, {RealReplies::teacher, "teacher"}}};
enum class RewardCombine { replace, add };  // the task's reward replaced by coef x logit, or the logit added
inline constexpr EnumNames<RewardCombine, 2> kRewardCombineNames{
    {{RewardCombine::replace, "replace"}, {RewardCombine::add, "add"}}};

// Where the KL to the starting policy goes (docs/METHODS.md, discriminator-guided RL: why the reverse KL at beta 1 is
// the distribution-matching point): loss, the trainer's per-token rl.kl_estimator term with rl.kl_coef = coef (k2
// by default here: its gradient is the reverse KL's, token by token); reward, the sequence's log-ratio
// sum_t (log pi - log pi_ref) over the sampled tokens subtracted from the reward, times coef (the exact
// sequence-level reverse-KL gradient with the advantage's baseline; rl.kl_coef 0).
enum class DiscKl { loss, reward };
inline constexpr EnumNames<DiscKl, 2> kDiscKlNames{{{DiscKl::loss, "loss"}, {DiscKl::reward, "reward"}}};

struct DiscRewardConfig {
  DiscriminatorConfig head;
  int64_t samples = 256;  // problems the head is fitted on (one real and one generated reply each)
  RealReplies real = RealReplies::gold;
  RewardCombine combine = RewardCombine::replace;
  double coef = 1.0;
  DiscKl kl = DiscKl::loss;
  RefitConfig refit;
  ReplyFeatureConfig features;
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// Fits `head` on `samples` training problems (cycling when the split is smaller): each one's real reply
// (real_text, encoded as a completion) against the policy's own reply to it as the policy stands (p_0),
// both read by `features` after the problem's prompt. `view` rewrites a decoded completion to the
// part the classifier sees (null: the completion's tokens as sampled, and their decoded text). Returns the head's
// accuracy on its fitting set and the class counts. Round k (0, 1, ...) takes problems k x samples onwards and its
// own sample streams.
FitStats fit_real_vs_policy(const MethodEnv& env, int64_t samples,
                            const std::function<std::string(const tasks::Problem&)>& real_text,
                            const std::function<std::string(const std::string&)>& view, const ReplyFeatures& features,
                            Discriminator& head, int64_t round = 0);

// At the first step, `samples` training problems are answered by the policy as it starts (p_0) and by the
// real replies (their gold solutions or dataset teacher responses); a discriminator head is fitted on
// the frozen reference model's mean final hidden states (rl/discriminator.h), or with features = "ngrams" on
// hashed character n-grams of the reply with the question as context (rl/reply_features.h), and frozen. Each rollout's
// reward becomes coef x its clipped logit (replace), or is added to the task's reward (add). With the reverse KL
// at weight coef the KL-regularised optimum is the real distribution (balanced classes make the logit
// log p_real / p_0): with replace, the defaults are rl.kl_coef = coef, rl.kl_estimator = "k2", rl.advantage = "rloo"
// and rl.scale_rewards = "none" (kl = "loss"), or the KL in the reward (kl = "reward", rl.kl_coef 0). The head is
// checkpointed, so a resume does not refit it on a later policy. Refitting rounds (the spec's `rounds`; one by default,
// the theory-clean choice at kl_coef 1): with rounds R > 1 a fresh head is fitted again every `refit_every` steps on
// the real replies against the policy as it stands then (p_k), on the next `samples` training problems, R fits in all;
// the reward uses the latest head.
class DiscReward : public Method {
 public:
  explicit DiscReward(DiscRewardConfig cfg);
  std::string name() const override { return "discriminator"; }
  void attach(const MethodEnv& env) override;
  void after_reward(Batch& b) override;
  void after_step(const Metrics&) override { head_.step_done(); }
  void metrics(Metrics& m) const override;
  std::string save_state() const override { return head_.save("disc_reward"); }
  void load_state(const std::string& s) override { head_.load(s, "disc_reward"); }
  const Discriminator& head() const { return head_.head(); }

 private:
  void fit();
  void subtract_kl(Batch& b);  // kl = "reward"
  DiscRewardConfig cfg_;
  MethodEnv env_;
  ReplyFeatures features_;
  RefittedHead head_;
  double reward_sum_ = 0, kl_sum_ = 0;
  int64_t rewarded_ = 0, kl_rows_ = 0;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kDiscRewardMethod;

}  // namespace temper::rl

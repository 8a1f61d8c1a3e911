// STARE (Luo et al. 2026, arXiv 2606.19236; ../shared/specs/methods-llm-rl.md section 1): hold the
// policy's token-mean entropy near a target by reweighting a few "entropy-critical" tokens of the
// clipped surrogate: the top P by surprisal among the positive-advantage tokens (variant C2: also among
// the negative ones), when a controller says so each step. Leaves out: the reference code's
// per-micro-batch selection.
#pragma once

#include <cstdint>
#include <string>

#include "temper/rl/method.h"

namespace temper::rl {

struct MethodSpec;

enum class StareVariant { o1, c2 };
enum class StareControl { gate, adaptive, band };
inline constexpr EnumNames<StareVariant, 2> kStareVariantNames{{{StareVariant::o1, "o1"}, {StareVariant::c2, "c2"}}};
inline constexpr EnumNames<StareControl, 3> kStareControlNames{
    {{StareControl::gate, "gate"}, {StareControl::adaptive, "adaptive"}, {StareControl::band, "band"}}};

struct StareConfig {
  StareVariant variant = StareVariant::o1;
  double top_ratio = 0.10;       // P: share of each sign subset that is entropy-critical
  double w = 1.1;                // weight on L+ (positive advantage, high surprisal)
  double m = 0.9;                // weight on L- (C2)
  double target_entropy = 0.3;   // H_tgt, nats, token-mean over the step's loss tokens
  StareControl control = StareControl::gate;
  double alpha = 0.01;           // adaptive: step of the sign rule
  double w_max = 1.5, m_min = 0.5;  // adaptive and band: bounds of W and M
  double band = 0.05;            // band: half-width relative to the target (no action inside)
  double kp = 1.0, ki = 0.25;    // band: gains on the relative error (H_tgt - H) / H_tgt
  double smooth = 0.0;           // band: the controller reads an EMA of entropy, H_s = smooth*H_s + (1-smooth)*H
                                 // (0 = the step's value; per-step entropy is noisy, ~10% of a tiny model's target)
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// The weights in force for one step.
struct StareWeights {
  bool active = false;
  double w = 1, m = 1;
};

// A controller decides each step, from the token-mean entropy of the pre-update policy, whether (and how
// strongly) to reweight:
//   gate      the released code's bang-bang gate: reweight while entropy < target;
//   adaptive  the gate plus the code's optional sign rule W += alpha*sign(H_tgt - H), M -= ... (bounded);
//   band      hold entropy within +/- band*target with a bounded proportional-integral rule on W (and M),
//             optionally on an exponential moving average of the entropy (`smooth`).
// The controller's state (checkpointed as text).
class StareController {
 public:
  explicit StareController(const StareConfig& cfg);
  StareWeights update(double entropy);  // once per step, before the update
  const StareWeights& current() const { return cur_; }
  double integral() const { return integral_; }
  double smoothed() const { return ema_; }  // the band controller's input after the last update
  int64_t steps() const { return steps_; }
  int64_t active_steps() const { return active_steps_; }
  std::string save() const;
  void load(const std::string& text);

 private:
  StareConfig cfg_;
  StareWeights cur_;
  double adapt_w_, adapt_m_;  // adaptive mode's running W, M
  double integral_ = 0;
  double ema_ = -1;  // band: smoothed entropy (< 0: no step yet)
  int64_t steps_ = 0, active_steps_ = 0;
};

struct StareSelection {
  int64_t positive = 0, negative = 0;  // loss tokens with A > 0 / A < 0
  int64_t selected_positive = 0, selected_negative = 0;
};

// weight[n] = 1, except W on the top k+ = max(1, ceil(P |T+|)) tokens of T+ = {mask > 0, A > 0} by
// surprisal = -logp (raising rare tokens raises entropy), and (C2) M on the top k- of T- likewise. Not active
// or P = 0: all 1. Selection runs over the whole step batch (the recommended packing-invariant scope; with one
// mini-batch per step, the STARE recipe, it is the loss's batch). Ties: lower index first.
// Surprisal comes from the rollout's policy log-probs (the pre-update policy: equal to the training
// forward's within 1e-5).
StareSelection stare_token_weights(const StareConfig& cfg, const StareWeights& sw, const float* mask,
                                   const float* advantage, const float* logp, int64_t N, float* weight);

class Stare : public Method {
 public:
  explicit Stare(const StareConfig& cfg) : cfg_(cfg), ctl_(cfg) { cfg_.validate(); }
  std::string name() const override { return "stare"; }
  void token_weights(Batch& b) override;
  void metrics(Metrics& m) const override;
  std::string save_state() const override { return ctl_.save(); }
  void load_state(const std::string& s) override { ctl_.load(s); }
  const StareController& controller() const { return ctl_; }

 private:
  StareConfig cfg_;
  StareController ctl_;
  double entropy_ = 0;
  StareSelection last_;
  int64_t tokens_ = 0;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kStareMethod;

}  // namespace temper::rl

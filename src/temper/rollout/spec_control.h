// When to speculate and with how many draft tokens (EfficientRollout's system side): a one-way toggle
// per rollout (modes `cost`, the paper's, `threshold` and `always`), a cost model of measured forward
// times (calibrate_spec_cost) in place of the paper's roofline, and a draft-length ladder moved between
// training rollouts by the acceptance. In detail: above SpecToggle, SpecCostModel and SpecController.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/rollout/sampler.h"

namespace temper {
class Transformer;
class KvPool;
class Int4Drafter;
}  // namespace temper

namespace temper::rollout {

// The toggle, per rollout and one-way: decoding starts plain; once nothing waits to be admitted
// (the ramp guard: the engine knows every request up front, so the prefill ramp is over when its
// queue has drained; the paper's guard of 32 live sequences serves vLLM's arriving requests),
// speculation turns on as soon as the cost model predicts a speed-up >= 1 + margin for the current
// live batch, and stays on until the rollout ends. Modes: `cost` (the paper's), `threshold`
// (n_active <= B*), `always`.
enum class SpecToggle { cost, threshold, always };
inline constexpr EnumNames<SpecToggle, 3> kSpecToggleNames{
    {{SpecToggle::cost, "cost"}, {SpecToggle::threshold, "threshold"}, {SpecToggle::always, "always"}}};

struct SpecConfig {
  std::vector<int64_t> ladder{5, 7, 9, 11};  // one rung: a fixed gamma
  double alpha_up = 0.94, alpha_down = 0.85;
  int64_t persistence = 2;
  SpecToggle toggle = SpecToggle::cost;
  double margin = 0.05;    // cost: speculate when the predicted speed-up >= 1 + margin
  int64_t threshold = 8;   // threshold: speculate when n_active <= threshold
  void validate() const;
  void visit(KeyVisitor& v);  // every key but the ladder (gamma or ladder: SpeculativeConfig)
};

// The cost model: the measured time of one forward over n rows for the policy and for the
// drafter, at n = 1, 2, 4, ... (linear between points), calibrated once at start-up
// (calibrate_spec_cost). Predicted speed-up of a cycle for B live sequences:
// L * T_policy(B) / (gamma * T_draft(B) + T_policy(B * (gamma + 1))), L the mean accepted length
// (tokens per sequence per cycle) of the previous rollout, gamma at cold start. This is the
// paper's L / (gamma r + v) with its roofline replaced by measured times (on CPU the weights-bound
// regime is wide and the roofline's constants are not known).
struct SpecCostModel {
  std::vector<double> rows, policy_s, draft_s;  // measured points (rows ascending)
  // Host seconds per row beyond the forwards: a plain step's draw (Sampler::sample), and a speculative cycle's
  // dense distribution and draw (Sampler::distribution + sample_dense) for every draft and every verified position.
  // 0 in a cost model from before they were measured.
  double sample_s = 0, dist_s = 0;
  bool calibrated() const { return !rows.empty(); }
  double policy(double n) const;  // seconds for one forward over n rows
  double draft(double n) const;
  // L x (policy(B) + B sample_s) / (gamma (draft(B) + B dist_s) + policy(B (gamma + 1)) + B (gamma + 1) dist_s).
  double speedup(int64_t B, int64_t gamma, double L) const;
};

// Times forward_paged of the policy and the drafter over 1, 2, 4, ... max_rows rows (the best of
// `repeats`), on a scratch sequence in the pool (released after), and the sampler's per-row work on those logits
// (`sampler`: the run's settings, which it depends on).
SpecCostModel calibrate_spec_cost(Transformer& model, KvPool& pool, const Int4Drafter& drafter, int64_t max_rows,
                                  int repeats = 3, const SamplerConfig& sampler = {});

struct SpecState {  // what a checkpoint keeps for an exact resume
  int64_t rung = 0, up = 0, down = 0;
  double accepted_len = 0;  // mean accepted length of the last rollout (0: none yet)
};

// The draft-length ladder, between training rollouts: gamma in {5, 7, 9, 11}; up one rung after
// `persistence` consecutive rollouts with token-weighted acceptance >= alpha_up, down after as
// many <= alpha_down; any other rollout resets both counts.
class SpecController {
 public:
  explicit SpecController(SpecConfig c);
  const SpecConfig& config() const { return cfg_; }
  int64_t gamma() const { return cfg_.ladder[static_cast<size_t>(st_.rung)]; }
  double expected_len() const { return st_.accepted_len > 0 ? st_.accepted_len : static_cast<double>(gamma()); }
  void set_cost_model(SpecCostModel m) { cost_ = std::move(m); }
  const SpecCostModel& cost_model() const { return cost_; }
  // Should a rollout with n_active live sequences (ramp guard passed, nothing queued) turn speculation on?
  bool turn_on(int64_t n_active) const;
  double predicted_speedup(int64_t n_active) const;
  // After a rollout: its draft totals (summed over ranks). Updates the accepted length the toggle
  // predicts with; a training rollout (ladder = true) also moves the ladder. No cycles: no change.
  void end_rollout(int64_t cycles, int64_t drafted, int64_t accepted, bool ladder = true);
  const SpecState& state() const { return st_; }
  void set_state(const SpecState& s);

 private:
  SpecConfig cfg_;
  SpecCostModel cost_;
  SpecState st_;
};

}  // namespace temper::rollout

// The tabular training loop (see trainer.h).
#include "temper/tabular/trainer.h"

#include "temper/core/error.h"
#include "temper/tabular/ground_truth.h"
#include "temper/tabular/hypervolume.h"
#include "temper/tabular/pareto_q.h"
#include "temper/tabular/scalar_q.h"

namespace temper::tabular {

TabularTrainer::TabularTrainer(const ProductMdp& p, const TabularConfig& c, std::vector<double> truth)
    : p_(p), c_(c), truth_(std::move(truth)), rng_(static_cast<uint64_t>(c.seed), 0, 0) {
  c_.validate();
  if (c_.pareto()) {
    learner_ = std::make_unique<ParetoQ>(
        p, ParetoConfig{static_cast<float>(c_.gamma), c_.nd_cap, c_.nd_epsilon, c_.reference});
  } else {
    learner_ = std::make_unique<ScalarQ>(
        p, ScalarConfig{static_cast<float>(c_.gamma), static_cast<float>(c_.alpha), c_.weights, c_.max_episode_steps});
  }
  if (!truth_.empty()) truth_hv_ = hypervolume(std::span<const double>(truth_), p.D, c_.reference);
  s_ = p.world.start;
  u_ = p.u0;
}

void TabularTrainer::step() {
  int64_t a;
  if (c_.epsilon > 0 && rng_.uniform_f64() < c_.epsilon)
    a = rng_.next_u32() % p_.A();
  else
    a = learner_->greedy(s_, u_, rng_);
  learner_->observe(s_, u_, a, c_.counterfactual());
  const ProductMdp::Step st = p_.step(s_, u_, a);
  s_ = st.s2;
  u_ = st.u2;
  ++t_;
  ++steps_;
  if (st.terminal || t_ == c_.max_episode_steps) {
    s_ = p_.world.start;
    u_ = p_.u0;
    t_ = 0;
    ++episodes_;
  }
}

Metrics TabularTrainer::evaluate() const {
  const std::vector<double> f = front();
  const double hv = hypervolume(std::span<const double>(f), p_.D, c_.reference);
  Metrics m{{"hypervolume", hv},
            {"front_size", static_cast<double>(f.size() / p_.D)},
            {"episodes", static_cast<double>(episodes_)},
            {"updates", static_cast<double>(learner_->updates())},
            {"stored", static_cast<double>(learner_->stored_points())}};
  if (!truth_.empty()) {
    const FrontMatch fm = match_fronts(f, truth_, p_.D, kFrontTolerance);
    m.push_back({"hv_ratio", truth_hv_ > 0 ? hv / truth_hv_ : 0.0});
    m.push_back({"recovered", static_cast<double>(fm.recovered)});
    m.push_back({"spurious", static_cast<double>(fm.spurious)});
    m.push_back({"worst", fm.worst});
  }
  return m;
}

Snapshot TabularTrainer::save() const {
  Snapshot out;
  learner_->save(out);
  out.state["rng_offset"] = rng_.offset();
  out.state["position"] = {s_, u_, t_};
  out.state["steps"] = steps_;
  out.state["episodes"] = episodes_;
  return out;
}

void TabularTrainer::load(const Snapshot& in) {
  learner_->load(in);
  rng_ = Rng(static_cast<uint64_t>(c_.seed), 0, in.state.at("rng_offset").get<uint64_t>());
  const std::vector<int64_t> pos = in.state.at("position").get<std::vector<int64_t>>();
  TEMPER_CHECK(pos.size() == 3 && pos[0] >= 0 && pos[0] < p_.S() && pos[1] >= 0 && pos[1] < p_.U)
      << "tabular checkpoint: position is not a (state, machine state, step) of this world and machine";
  s_ = pos[0];
  u_ = pos[1];
  t_ = pos[2];
  steps_ = in.state.at("steps").get<int64_t>();
  episodes_ = in.state.at("episodes").get<int64_t>();
}

}  // namespace temper::tabular

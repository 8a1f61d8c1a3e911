#include "temper/flow/flow_grpo.h"

#include <cmath>

#include "temper/core/error.h"

namespace temper::flow {

void FlowGrpoConfig::visit(KeyVisitor& v) {
  v("group", group, "SDE samples per class label in a group");
  v("groups", groups, "groups per RL step");
  v.choice("advantage", advantage, "loo: reward minus the others' mean (unbiased) | std: Flow-GRPO's std-scaled",
           {"loo", "std"});
  v("kl_to_go", kl_to_go, "the later steps' KL in each step's advantage (false: Flow-GRPO's loss)");
}

void FlowGrpoConfig::validate() const {
  TEMPER_CHECK(group >= 2) << "rl.grpo.group: expected >= 2 (the baseline needs the others), got " << group;
  TEMPER_CHECK(groups >= 1) << "rl.grpo.groups: expected >= 1, got " << groups;
  TEMPER_CHECK(advantage == "loo" || advantage == "std")
      << "rl.grpo.advantage: expected \"loo\" or \"std\", got '" << advantage << "'";
}

namespace {
// Velocities of every step's states at once: rows (k, i) = (x_k[i], t_k, y[i]) for k < steps.
struct StepRows {
  std::vector<float> x, t, v;
  std::vector<int32_t> y;
};
StepRows step_rows(const SdeConfig& sde, const SdeTrajectory& tr) {
  StepRows r;
  const int64_t n = tr.steps * tr.B;
  r.x.assign(tr.x.begin(), tr.x.begin() + n * tr.dim);
  r.t.resize(static_cast<size_t>(n));
  r.y.resize(static_cast<size_t>(n));
  r.v.resize(static_cast<size_t>(n * tr.dim));
  for (int64_t k = 0; k < tr.steps; ++k) {
    const SdeStep st = sde_step(sde, k);
    for (int64_t i = 0; i < tr.B; ++i) {
      r.t[static_cast<size_t>(k * tr.B + i)] = static_cast<float>(st.t);
      r.y[static_cast<size_t>(k * tr.B + i)] = tr.y[static_cast<size_t>(i)];
    }
  }
  return r;
}

// Leave-one-out means within consecutive groups of `g`: out[i] = mean of the group's other values.
std::vector<double> loo_mean(const std::vector<double>& a, int64_t g) {
  std::vector<double> out(a.size());
  for (size_t s = 0; s < a.size(); s += static_cast<size_t>(g)) {
    double sum = 0;
    for (size_t i = s; i < s + static_cast<size_t>(g); ++i) sum += a[i];
    for (size_t i = s; i < s + static_cast<size_t>(g); ++i) out[i] = (sum - a[i]) / static_cast<double>(g - 1);
  }
  return out;
}
}  // namespace

std::vector<double> path_step_kl(VelocityModel& policy, VelocityModel& base, const SdeConfig& sde,
                                 const SdeTrajectory& tr) {
  StepRows r = step_rows(sde, tr), b = r;
  const int64_t n = tr.steps * tr.B, d = tr.dim;
  policy.forward(r.x.data(), r.t.data(), r.y.data(), n, r.v.data(), false);
  base.forward(b.x.data(), b.t.data(), b.y.data(), n, b.v.data(), false);
  std::vector<double> kl(static_cast<size_t>(n), 0.0);
  for (int64_t k = 0; k < tr.steps; ++k) {
    const SdeStep st = sde_step(sde, k);
    const double c = st.cv * st.cv / (2 * st.s * st.s);
    for (int64_t i = 0; i < tr.B; ++i)
      for (int64_t j = 0; j < d; ++j) {
        const size_t e = static_cast<size_t>((k * tr.B + i) * d + j);
        const double dv = static_cast<double>(r.v[e]) - b.v[e];
        kl[static_cast<size_t>(k * tr.B + i)] += c * dv * dv;
      }
  }
  return kl;
}

FlowGrpoStats flow_grpo_grad(VelocityModel& policy, VelocityModel& base, const SdeConfig& sde, const SdeTrajectory& tr,
                             const std::vector<double>& rewards, double beta, const FlowGrpoConfig& c, float* grad) {
  c.validate();
  const int64_t B = tr.B, d = tr.dim, S = tr.steps, n = S * B;
  TEMPER_CHECK(static_cast<int64_t>(rewards.size()) == B && B % c.group == 0)
      << "flow grpo: " << rewards.size() << " rewards for " << B << " samples in groups of " << c.group;
  StepRows r = step_rows(sde, tr), b = r;
  policy.forward(r.x.data(), r.t.data(), r.y.data(), n, r.v.data(), true);
  base.forward(b.x.data(), b.t.data(), b.y.data(), n, b.v.data(), false);
  // Per-step KLs and the KL still to come after each step.
  std::vector<double> kl(static_cast<size_t>(n), 0.0);
  for (int64_t k = 0; k < S; ++k) {
    const SdeStep st = sde_step(sde, k);
    const double ck = st.cv * st.cv / (2 * st.s * st.s);
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < d; ++j) {
        const size_t e = static_cast<size_t>((k * B + i) * d + j);
        const double dv = static_cast<double>(r.v[e]) - b.v[e];
        kl[static_cast<size_t>(k * B + i)] += ck * dv * dv;
      }
  }
  FlowGrpoStats stats;
  std::vector<double> adv(static_cast<size_t>(B));
  const std::vector<double> base_r = loo_mean(rewards, c.group);
  for (int64_t i = 0; i < B; ++i) {
    adv[static_cast<size_t>(i)] = rewards[static_cast<size_t>(i)] - base_r[static_cast<size_t>(i)];
    stats.reward += rewards[static_cast<size_t>(i)] / static_cast<double>(B);
    for (int64_t k = 0; k < S; ++k) stats.kl += kl[static_cast<size_t>(k * B + i)] / static_cast<double>(B);
  }
  if (c.advantage == "std") {  // Flow-GRPO: (r - mean) / std within the group
    for (int64_t s = 0; s < B; s += c.group) {
      double m = 0, m2 = 0;
      for (int64_t i = s; i < s + c.group; ++i)
        m += rewards[static_cast<size_t>(i)], m2 += rewards[static_cast<size_t>(i)] * rewards[static_cast<size_t>(i)];
      m /= static_cast<double>(c.group);
      const double sd = std::sqrt(std::max(m2 / static_cast<double>(c.group) - m * m, 0.0));
      for (int64_t i = s; i < s + c.group; ++i)
        adv[static_cast<size_t>(i)] = (rewards[static_cast<size_t>(i)] - m) / (sd + 1e-4);
    }
  }
  stats.objective = stats.reward - beta * stats.kl;
  // KL to go after step k, and its leave-one-out group mean per step.
  std::vector<double> togo(static_cast<size_t>(n), 0.0);
  if (c.kl_to_go)
    for (int64_t i = 0; i < B; ++i)
      for (int64_t k = S - 2; k >= 0; --k)
        togo[static_cast<size_t>(k * B + i)] =
            togo[static_cast<size_t>((k + 1) * B + i)] + kl[static_cast<size_t>((k + 1) * B + i)];
  std::vector<float> dv(static_cast<size_t>(n * d));
  const double inv_b = 1 / static_cast<double>(B);
  for (int64_t k = 0; k < S; ++k) {
    const SdeStep st = sde_step(sde, k);
    const double s2 = st.s * st.s;
    const std::vector<double> g_k(togo.begin() + k * B, togo.begin() + (k + 1) * B);
    const std::vector<double> b_k = loo_mean(g_k, c.group);
    const float* x = tr.at(k);
    const float* next = tr.at(k + 1);
    for (int64_t i = 0; i < B; ++i) {
      const double q = adv[static_cast<size_t>(i)] - beta * (g_k[static_cast<size_t>(i)] - b_k[static_cast<size_t>(i)]);
      double logp_sq = 0;
      for (int64_t j = 0; j < d; ++j) {
        const size_t e = static_cast<size_t>((k * B + i) * d + j);
        const double mean = st.cx * x[i * d + j] + st.cv * r.v[e];
        const double dlogp_dv = st.cv * (next[i * d + j] - mean) / s2;  // d log N(next; mean, s^2) / d v
        const double dkl_dv = st.cv * st.cv * (static_cast<double>(r.v[e]) - b.v[e]) / s2;
        dv[e] = static_cast<float>(inv_b * (-q * dlogp_dv + beta * dkl_dv));
        logp_sq += (next[i * d + j] - mean) * (next[i * d + j] - mean);
      }
      const double logp = -0.5 * logp_sq / s2;  // up to a constant: the surrogate's value only
      stats.loss += inv_b * (-q * logp + beta * kl[static_cast<size_t>(k * B + i)]);
    }
  }
  policy.backward(dv.data(), grad);
  return stats;
}

}  // namespace temper::flow

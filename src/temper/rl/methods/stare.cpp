#include "temper/rl/methods/stare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <sstream>
#include <vector>

#include "temper/core/error.h"
#include "temper/rl/method_spec.h"

namespace temper::rl {

void StareConfig::visit(KeyVisitor& v) {
  v("variant", variant, "o1 (weight W on the positive-advantage critical tokens), c2 (also M on the negative ones)",
    kStareVariantNames);
  v("top_ratio", top_ratio, "P: share of each sign subset that is entropy-critical (top by surprisal)");
  v("w", w, "W: weight on the positive-advantage critical tokens");
  v("m", m, "M: weight on the negative-advantage critical tokens (c2)");
  v("target_entropy", target_entropy, "H_tgt: the token-mean entropy to hold, nats");
  v("control", control, "gate (reweight while entropy < target), adaptive (gate + sign rule), band (PI rule)",
    kStareControlNames);
  v("alpha", alpha, "adaptive: step of the sign rule on W and M");
  v("w_max", w_max, "adaptive and band: upper bound of W");
  v("m_min", m_min, "adaptive and band: lower bound of M");
  v("band", band, "band: half-width relative to the target (no action inside)");
  v("kp", kp, "band: proportional gain on the relative error");
  v("smooth", smooth, "band: EMA factor of the entropy the controller reads (0: the step's value)");
  v("ki", ki, "band: integral gain");
}

void StareConfig::validate() const {
  TEMPER_CHECK(top_ratio >= 0 && top_ratio <= 1) << "rl.stare.top_ratio must be in [0, 1], got " << top_ratio;
  TEMPER_CHECK(w > 0 && std::isfinite(w)) << "rl.stare.w must be > 0, got " << w;
  TEMPER_CHECK(m > 0 && std::isfinite(m)) << "rl.stare.m must be > 0, got " << m;
  TEMPER_CHECK(target_entropy >= 0 && std::isfinite(target_entropy))
      << "rl.stare.target_entropy must be >= 0 (nats), got " << target_entropy;
  TEMPER_CHECK(alpha >= 0) << "rl.stare.alpha must be >= 0, got " << alpha;
  TEMPER_CHECK(w_max >= 1 && std::isfinite(w_max)) << "rl.stare.w_max must be >= 1, got " << w_max;
  TEMPER_CHECK(m_min > 0 && m_min <= 1) << "rl.stare.m_min must be in (0, 1], got " << m_min;
  TEMPER_CHECK(band >= 0 && band < 1) << "rl.stare.band must be in [0, 1), got " << band;
  TEMPER_CHECK(kp >= 0 && ki >= 0 && std::isfinite(kp) && std::isfinite(ki))
      << "rl.stare.kp and rl.stare.ki must be >= 0, got " << kp << ", " << ki;
  TEMPER_CHECK(smooth >= 0 && smooth < 1) << "rl.stare.smooth must be in [0, 1), got " << smooth;
  TEMPER_CHECK(control != StareControl::band || target_entropy > 0) << "rl.stare.control = \"band\" needs target_entropy > 0";
}

StareController::StareController(const StareConfig& cfg) : cfg_(cfg), adapt_w_(cfg.w), adapt_m_(cfg.m) {}

StareWeights StareController::update(double H) {
  ++steps_;
  StareWeights s;
  const bool c2 = cfg_.variant == StareVariant::c2;
  switch (cfg_.control) {
    case StareControl::gate:
      s.active = H < cfg_.target_entropy;
      s.w = cfg_.w;
      s.m = c2 ? cfg_.m : 1.0;
      break;
    case StareControl::adaptive: {
      double sign = H < cfg_.target_entropy ? 1.0 : H > cfg_.target_entropy ? -1.0 : 0.0;
      adapt_w_ = std::clamp(adapt_w_ + cfg_.alpha * sign, 1.0, cfg_.w_max);
      adapt_m_ = std::clamp(adapt_m_ - cfg_.alpha * sign, cfg_.m_min, 1.0);
      s.active = H < cfg_.target_entropy;
      s.w = adapt_w_;
      s.m = c2 ? adapt_m_ : 1.0;
      break;
    }
    case StareControl::band: {
      ema_ = ema_ < 0 ? H : cfg_.smooth * ema_ + (1.0 - cfg_.smooth) * H;
      double e = (cfg_.target_entropy - ema_) / cfg_.target_entropy;  // > 0: entropy too low
      double ee = std::abs(e) <= cfg_.band ? 0.0 : e;               // no action inside the band
      double imax = cfg_.ki > 0 ? (cfg_.w_max - 1.0) / cfg_.ki : 0.0;
      integral_ = std::clamp(integral_ + ee, 0.0, imax);           // anti-windup: W never asks below 1
      double u = cfg_.kp * ee + cfg_.ki * integral_;
      s.w = std::clamp(1.0 + u, 1.0, cfg_.w_max);
      s.m = c2 ? std::clamp(1.0 - u, cfg_.m_min, 1.0) : 1.0;
      s.active = s.w > 1.0 || s.m < 1.0;
      break;
    }
  }
  active_steps_ += s.active ? 1 : 0;
  cur_ = s;
  return s;
}

std::string StareController::save() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "active=%d\nw=%.17g\nm=%.17g\nadapt_w=%.17g\nadapt_m=%.17g\nintegral=%.17g\nema=%.17g\nsteps=%lld\nactive_steps=%lld\n",
                cur_.active ? 1 : 0, cur_.w, cur_.m, adapt_w_, adapt_m_, integral_, ema_, static_cast<long long>(steps_),
                static_cast<long long>(active_steps_));
  return buf;
}

void StareController::load(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  for (const char* k : {"active", "w", "m", "adapt_w", "adapt_m", "integral", "ema", "steps", "active_steps"})
    TEMPER_CHECK(kv.count(k)) << "stare: the checkpointed controller state has no '" << k << "'";
  cur_.active = kv["active"] == "1";
  cur_.w = std::stod(kv["w"]);
  cur_.m = std::stod(kv["m"]);
  adapt_w_ = std::stod(kv["adapt_w"]);
  adapt_m_ = std::stod(kv["adapt_m"]);
  integral_ = std::stod(kv["integral"]);
  ema_ = std::stod(kv["ema"]);
  steps_ = std::stoll(kv["steps"]);
  active_steps_ = std::stoll(kv["active_steps"]);
}

namespace {

// Indices of the top k of `idx` by surprisal (ties: lower index first), written with weight w.
void select_top(std::vector<int64_t>& idx, const float* logp, double ratio, double w, float* weight, int64_t* count) {
  if (idx.empty() || ratio <= 0) return;
  int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ratio * static_cast<double>(idx.size()) - 1e-9)));
  k = std::min<int64_t>(k, static_cast<int64_t>(idx.size()));
  auto more_surprising = [&](int64_t a, int64_t b) {
    float sa = -logp[a], sb = -logp[b];
    return sa != sb ? sa > sb : a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), more_surprising);
  for (int64_t i = 0; i < k; ++i) weight[idx[static_cast<size_t>(i)]] = static_cast<float>(w);
  *count = k;
}

}  // namespace

StareSelection stare_token_weights(const StareConfig& cfg, const StareWeights& sw, const float* mask,
                                   const float* advantage, const float* logp, int64_t N, float* weight) {
  StareSelection s;
  std::vector<int64_t> pos, neg;
  for (int64_t n = 0; n < N; ++n) {
    weight[n] = 1.f;
    if (mask[n] <= 0) continue;
    if (advantage[n] > 0) pos.push_back(n);
    else if (advantage[n] < 0) neg.push_back(n);
  }
  s.positive = static_cast<int64_t>(pos.size());
  s.negative = static_cast<int64_t>(neg.size());
  if (!sw.active) return s;
  select_top(pos, logp, cfg.top_ratio, sw.w, weight, &s.selected_positive);
  if (cfg.variant == StareVariant::c2) select_top(neg, logp, cfg.top_ratio, sw.m, weight, &s.selected_negative);
  return s;
}

void Stare::token_weights(Batch& b) {
  // The controller's input: token-mean entropy of the pre-update policy over the loss tokens.
  std::vector<float> mask, adv, lp, w;
  double hsum = 0;
  for (const Trajectory& t : b.traj) {
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      mask.push_back(t.loss_mask[i]);
      adv.push_back(t.advantage[i]);
      lp.push_back(t.old_logprob[i]);
      if (t.loss_mask[i] > 0) hsum += t.entropy[i];
    }
  }
  double msum = std::accumulate(mask.begin(), mask.end(), 0.0);
  entropy_ = msum > 0 ? hsum / msum : 0.0;
  StareWeights sw = ctl_.update(entropy_);
  w.resize(mask.size());
  last_ = stare_token_weights(cfg_, sw, mask.data(), adv.data(), lp.data(), static_cast<int64_t>(mask.size()), w.data());
  tokens_ = static_cast<int64_t>(msum);
  size_t at = 0;
  for (Trajectory& t : b.traj)
    for (size_t i = 0; i < t.tokens.size(); ++i, ++at) t.weight[i] *= w[at];
}

void Stare::metrics(Metrics& m) const {
  const StareWeights& s = ctl_.current();
  m.emplace_back("stare_entropy", entropy_);
  m.emplace_back("stare_active", s.active ? 1.0 : 0.0);
  if (cfg_.control == StareControl::band) m.emplace_back("stare_entropy_smoothed", ctl_.smoothed());
  m.emplace_back("stare_w", s.w);
  m.emplace_back("stare_m", s.m);
  m.emplace_back("stare_active_frac", ctl_.steps() ? static_cast<double>(ctl_.active_steps()) / static_cast<double>(ctl_.steps()) : 0.0);
  m.emplace_back("stare_selected_frac", tokens_ ? static_cast<double>(last_.selected_positive + last_.selected_negative) /
                                                      static_cast<double>(tokens_)
                                                : 0.0);
}

namespace {
class StareSetup final : public MethodSetupOf<StareConfig> {
  std::unique_ptr<Method> make(const MethodDeps&) const override { return std::make_unique<Stare>(cfg); }
  // Token weights over the loss tokens: an environment's observations are out of the loss, so out of it.
  std::string conversation_refusal() const override { return {}; }
};
}  // namespace

const MethodSpec kStareMethod{"stare", "rl.stare", 90, "STARE: entropy-stable token reweighting",
                              []() -> std::unique_ptr<MethodSetup> { return std::make_unique<StareSetup>(); }};

}  // namespace temper::rl

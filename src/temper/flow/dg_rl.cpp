#include "temper/flow/dg_rl.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/flow/flow_matching.h"
#include "temper/flow/fm_train.h"

namespace temper::flow {

void DgRlConfig::visit(KeyVisitor& v) {
  v.choice("method", method, "grpo (policy gradient on SDE paths) | rwfm (reward-weighted flow matching) | fm",
           {"grpo", "rwfm", "fm"});
  v("beta", beta, "the KL weight (1: the distribution-matching point)");
  v("steps", steps, "RL steps");
  v("lr", lr, "AdamW learning rate");
  v("weight_decay", weight_decay, "AdamW weight decay");
  v("max_grad_norm", max_grad_norm, "gradient clipping (<= 0: none)");
  v("batch", batch, "rwfm / fm: samples per step");
  v("pool", pool, "rwfm: base samples weighted per round");
  v("p_uncond", p_uncond, "fm: label dropout for classifier-free guidance");
  v("ode_steps", ode_steps, "rwfm: ODE steps of the base samples (the discriminator's and the pool's)");
  v("seed", seed, "the RL draws");
}

void DgRlConfig::visit_sections(KeyVisitor& sde_v, KeyVisitor& grpo_v, KeyVisitor& disc_v) {
  sde_v("steps", sde.steps, "SDE sampler steps");
  sde_v("noise", sde.noise, "Flow-GRPO's noise level a");
  grpo.visit(grpo_v);
  disc.visit(disc_v);
}

void DgRlConfig::validate() const {
  TEMPER_CHECK(method == "grpo" || method == "rwfm" || method == "fm")
      << "rl.method: expected \"grpo\", \"rwfm\" or \"fm\", got '" << method << "'";
  TEMPER_CHECK(beta > 0) << "rl.beta: expected > 0, got " << beta;
  TEMPER_CHECK(ode_steps >= 1) << "rl.ode_steps: expected >= 1, got " << ode_steps;
  TEMPER_CHECK(steps >= 0 && lr > 0 && batch >= 1 && pool >= 2)
      << "rl.steps >= 0, rl.lr > 0, rl.batch >= 1 and rl.pool >= 2 expected, got " << steps << ", " << lr << ", "
      << batch << ", " << pool;
  TEMPER_CHECK(sde.steps >= 1 && sde.noise > 0)
      << "rl.sde.steps >= 1 and rl.sde.noise > 0 expected, got " << sde.steps << " and " << sde.noise;
  TEMPER_CHECK(sde.cfg == 1.0) << "rl: guidance-free sampling only (the reward and the KL are the unguided model's)";
  grpo.validate();
  disc.validate();
}

DgRl::DgRl(VelocityModel& policy, VelocityModel& base, const DataSource& data, const Features& f, DgRlConfig c)
    : policy_(policy),
      base_(base),
      data_(data),
      features_(f),
      cfg_(std::move(c)),
      disc_(cfg_.disc),
      opt_(policy.param_count()) {
  cfg_.validate();
  TEMPER_CHECK(policy.param_count() == base.param_count() && policy.dim() == data.dim())
      << "dg-rl: the policy (" << policy.param_count() << " parameters, dim " << policy.dim() << ") and the base ("
      << base.param_count() << ") or the data (dim " << data.dim() << ") do not match";
  opt_.cfg.weight_decay = static_cast<float>(cfg_.weight_decay);
}

std::vector<int32_t> DgRl::labels(int64_t n, uint64_t seed) const {
  return data_.labels(n, seed);  // the labels of real draws: the data's class frequencies
}

std::vector<double> DgRl::rewards(const std::vector<float>& x, const std::vector<int32_t>& y) const {
  return disc_.rewards(embed_all(features_, x), y);
}

std::vector<float> DgRl::generate(VelocityModel& gen, const std::vector<int32_t>& y, uint64_t seed) {
  const auto n = static_cast<int64_t>(y.size());
  if (cfg_.method == "grpo") {  // the policy is the SDE sampler
    const SdeTrajectory tr = sample_sde(gen, y.data(), n, cfg_.sde, seed);
    compute_ += static_cast<double>(n * cfg_.sde.steps);
    return std::vector<float>(tr.sample(), tr.sample() + n * data_.dim());
  }
  OdeConfig oc;  // rwfm fine-tunes the velocity field, whose samples are the ODE's
  oc.steps = cfg_.ode_steps;
  const std::vector<float> z = initial_noise(n, gen.dim(), seed);
  compute_ += static_cast<double>(n * oc.steps);
  return sample_ode(gen, z.data(), y.data(), n, oc);
}

DiscFitStats DgRl::refit(VelocityModel& gen, int64_t round) {
  const int64_t heads = cfg_.disc.per_class ? data_.classes() : 1, n = cfg_.disc.samples * heads;
  const uint64_t seed = mix_seed(static_cast<uint64_t>(cfg_.seed), 1000 + static_cast<uint64_t>(round));
  std::vector<float> real;
  std::vector<int32_t> real_y;
  data_.sample(n, mix_seed(seed, 1), real, real_y);
  const std::vector<float> gen_x = generate(gen, real_y, mix_seed(seed, 2));
  last_fit_ = disc_.fit(embed_all(features_, real), real_y, embed_all(features_, gen_x), real_y, features_.dim(),
                        data_.classes());
  ++fits_;
  if (cfg_.method == "rwfm") draw_pool(gen, round);
  return last_fit_;
}

void DgRl::draw_pool(VelocityModel& gen, int64_t round) {
  const uint64_t seed = mix_seed(static_cast<uint64_t>(cfg_.seed), 2000 + static_cast<uint64_t>(round));
  pool_y_ = labels(cfg_.pool, mix_seed(seed, 1));
  pool_x_ = generate(gen, pool_y_, mix_seed(seed, 2));
  const std::vector<double> r = rewards(pool_x_, pool_y_);
  // w_i = exp(r_i / beta), self-normalised to mean 1 (per class label: each label's samples keep its share).
  std::vector<double> w(r.size(), 0.0);
  const int64_t classes = data_.classes();
  for (int64_t c = 0; c < classes; ++c) {
    double top = -INFINITY, sum = 0;
    int64_t count = 0;
    for (size_t i = 0; i < r.size(); ++i)
      if (pool_y_[i] == c) top = std::max(top, r[i] / cfg_.beta);
    for (size_t i = 0; i < r.size(); ++i)
      if (pool_y_[i] == c) w[i] = std::exp(r[i] / cfg_.beta - top), sum += w[i], ++count;
    for (size_t i = 0; i < r.size(); ++i)
      if (pool_y_[i] == c) w[i] *= static_cast<double>(count) / sum;
  }
  pool_w_.assign(w.begin(), w.end());
  set_pool_ess();
}

void DgRl::set_pool_ess() {
  double num = 0, den = 0;
  for (float w : pool_w_) num += w, den += static_cast<double>(w) * w;
  pool_ess_ = pool_w_.empty() ? 0.0 : num * num / den / static_cast<double>(pool_w_.size());
}

std::vector<std::pair<std::string, std::vector<float>>> DgRl::state_tensors() const {
  std::vector<std::pair<std::string, std::vector<float>>> t;
  if (disc_.fitted()) t = disc_.tensors("disc");
  if (!pool_w_.empty()) {
    t.emplace_back("pool.x", pool_x_);
    t.emplace_back("pool.y", std::vector<float>(pool_y_.begin(), pool_y_.end()));
    t.emplace_back("pool.w", pool_w_);
  }
  return t;
}

void DgRl::restore(const TensorLookup& tensor, const Counters& c) {
  fits_ = c.fits, compute_ = c.compute, last_fit_.accuracy = c.fit_accuracy;
  if (fits_ > 0) {
    std::vector<std::pair<std::string, std::vector<float>>> head;
    for (const char* n : {"disc.mean", "disc.inv_sd", "disc.head"}) head.emplace_back(n, tensor(n));
    disc_.load(head, "disc");
  }
  if (cfg_.method == "rwfm" && fits_ > 0) {
    pool_x_ = tensor("pool.x");
    const std::vector<float>& y = tensor("pool.y");
    pool_y_.assign(y.begin(), y.end());
    pool_w_ = tensor("pool.w");
    set_pool_ess();
  }
}

Metrics DgRl::step(int64_t step) {
  if (fits_ == 0 && cfg_.method != "fm") refit(base_, 0);  // round 0: against the base
  const int64_t k = cfg_.disc.refit_every;
  if (k > 0 && step > 1 && (step - 1) % k == 0 && cfg_.method != "fm") refit(policy_, (step - 1) / k);
  Metrics m;
  if (cfg_.method == "grpo")
    m = grpo_step(step);
  else if (cfg_.method == "rwfm")
    m = rwfm_step(step);
  else
    m = fm_step(step);
  m.emplace_back("disc_fits", static_cast<double>(fits_));
  m.emplace_back("disc_accuracy", last_fit_.accuracy);
  m.emplace_back("compute", compute_);
  return m;
}

Metrics DgRl::grpo_step(int64_t step) {
  const int64_t G = cfg_.grpo.group, B = G * cfg_.grpo.groups;
  const uint64_t seed = mix_seed(static_cast<uint64_t>(cfg_.seed), static_cast<uint64_t>(step));
  const std::vector<int32_t> group_labels = labels(cfg_.grpo.groups, mix_seed(seed, 1));
  std::vector<int32_t> y(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) y[static_cast<size_t>(i)] = group_labels[static_cast<size_t>(i / G)];
  const SdeTrajectory tr = sample_sde(policy_, y.data(), B, cfg_.sde, mix_seed(seed, 2));
  const std::vector<float> x(tr.sample(), tr.sample() + B * data_.dim());
  const std::vector<double> r = rewards(x, y);
  grad_.assign(static_cast<size_t>(policy_.param_count()), 0.f);
  const FlowGrpoStats st = flow_grpo_grad(policy_, base_, cfg_.sde, tr, r, cfg_.beta, cfg_.grpo, grad_.data());
  const double norm =
      opt_.update(policy_.params().data(), grad_.data(), static_cast<float>(cfg_.lr), cfg_.max_grad_norm);
  compute_ += static_cast<double>(B * cfg_.sde.steps * 5);  // sample, policy forward + backward (x2), base forward
  return {{"reward", st.reward}, {"kl", st.kl}, {"objective", st.objective}, {"loss", st.loss}, {"grad_norm", norm}};
}

Metrics DgRl::rwfm_step(int64_t step) {
  const uint64_t seed = mix_seed(static_cast<uint64_t>(cfg_.seed), static_cast<uint64_t>(step));
  const int64_t B = cfg_.batch, d = data_.dim(), n = static_cast<int64_t>(pool_w_.size());
  std::vector<float> x0(static_cast<size_t>(B * d)), w(static_cast<size_t>(B));
  std::vector<int32_t> y(static_cast<size_t>(B));
  Rng rng(mix_seed(seed, 1));
  double reward = 0;
  for (int64_t i = 0; i < B; ++i) {
    const auto j = static_cast<int64_t>(rng.uniform_f64() * static_cast<double>(n)) % n;
    std::copy(pool_x_.begin() + j * d, pool_x_.begin() + (j + 1) * d, x0.begin() + i * d);
    y[static_cast<size_t>(i)] = pool_y_[static_cast<size_t>(j)];
    w[static_cast<size_t>(i)] = pool_w_[static_cast<size_t>(j)];
    reward += pool_w_[static_cast<size_t>(j)];
  }
  const double p_uncond = data_.classes() > 1 ? cfg_.p_uncond : 0.0;
  const FmDraw dr = fm_draw(B, d, y.data(), policy_.classes(), p_uncond, mix_seed(seed, 2));
  FmBatch b;
  b.B = B, b.x0 = x0.data(), b.y = dr.y.data(), b.t = dr.t.data(), b.eps = dr.eps.data(), b.w = w.data();
  grad_.assign(static_cast<size_t>(policy_.param_count()), 0.f);
  const double loss = fm_loss_grad(policy_, b, grad_.data());
  const double norm =
      opt_.update(policy_.params().data(), grad_.data(), static_cast<float>(cfg_.lr), cfg_.max_grad_norm);
  compute_ += static_cast<double>(B * 3);
  return {
      {"loss", loss}, {"grad_norm", norm}, {"pool_ess", pool_ess_}, {"batch_weight", reward / static_cast<double>(B)}};
}

Metrics DgRl::fm_step(int64_t step) {
  FmTrainConfig c;
  c.batch = cfg_.batch, c.lr = cfg_.lr, c.weight_decay = cfg_.weight_decay, c.max_grad_norm = cfg_.max_grad_norm;
  c.p_uncond = cfg_.p_uncond, c.seed = static_cast<int64_t>(mix_seed(static_cast<uint64_t>(cfg_.seed), 3000));
  const FmStepStats st = fm_train_step(policy_, opt_, data_, c, step, grad_);
  compute_ += static_cast<double>(cfg_.batch * 3);
  return {{"loss", st.loss}, {"grad_norm", st.grad_norm}};
}

}  // namespace temper::flow

#include "temper/control/body.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::control {

namespace {
constexpr float kTwoPi = 6.28318530717958648f;
inline float clip1(float x) {
  return std::min(1.f, std::max(-1.f, x));
}
}  // namespace

BodyKind body_kind_from(const std::string& name, const std::string& where) {
  if (name == "point_mass") return BodyKind::point_mass;
  if (name == "second_order") return BodyKind::second_order;
  if (name == "second_order_slow") return BodyKind::second_order_slow;
  if (name == "leg") return BodyKind::leg;
  TEMPER_FAIL() << where << ": body '" << name << "' is not one of point_mass, second_order, second_order_slow, leg";
}

const char* body_kind_name(BodyKind k) {
  switch (k) {
    case BodyKind::point_mass:
      return "point_mass";
    case BodyKind::second_order:
      return "second_order";
    case BodyKind::second_order_slow:
      return "second_order_slow";
    case BodyKind::leg:
      return "leg";
  }
  return "?";
}

float default_init_log_std(BodyKind k) {
  return k == BodyKind::leg ? -1.f : -0.5f;
}

std::unique_ptr<Body> make_body(BodyKind kind, float lag_max) {
  TEMPER_CHECK(lag_max == 0.f || kind == BodyKind::point_mass)
      << "make_body: lag_max is the point mass's option, not the " << body_kind_name(kind) << "'s";
  switch (kind) {
    case BodyKind::point_mass:
      return std::make_unique<PointMass>(lag_max);
    case BodyKind::second_order:
      return std::make_unique<SecondOrder>(10);
    case BodyKind::second_order_slow:
      return std::make_unique<SecondOrder>(20);
    case BodyKind::leg:
      return std::make_unique<Leg>();
  }
  TEMPER_FAIL() << "make_body: unknown body kind " << static_cast<int>(kind);
}

std::vector<std::pair<std::string, std::vector<float>*>> Body::state() {
  std::vector<std::pair<std::string, std::vector<float>*>> s = {{"px", &px_}, {"py", &py_}, {"vx", &vx_}, {"vy", &vy_}};
  for (auto& e : own_state()) s.push_back(e);
  return s;
}

void Body::reset(int64_t n) {
  n_ = n;
  for (auto& [name, v] : state()) v->assign(static_cast<size_t>(n), 0.f);
}

void PointMass::randomize(uint64_t seed, uint64_t episode) {
  constexpr uint64_t kLagKey = 0x6c6167;  // "lag"
  for (int64_t i = 0; i < n_; ++i)
    lag_[i] = lag_max_ > 0 ? lag_max_ * Rng(mix_seed(seed, kLagKey), mix_seed(episode, uint64_t(i))).uniform() : 0.f;
}

void PointMass::step(const float* a) {
  for (int64_t i = 0; i < n_; ++i) {
    float ax = a[2 * i], ay = a[2 * i + 1], norm = std::sqrt(ax * ax + ay * ay);
    float s = norm > kMaxSpeed ? kMaxSpeed / norm : 1.f;
    float k = lag_[i] > 0 ? 1.f - std::exp(-kPeriod / lag_[i]) : 1.f;
    vx_[i] += k * (ax * s - vx_[i]);
    vy_[i] += k * (ay * s - vy_[i]);
    px_[i] += kPeriod * vx_[i];
    py_[i] += kPeriod * vy_[i];
  }
}

void PointMass::observe(float* obs) const {
  for (int64_t i = 0; i < n_; ++i) {
    float* o = obs + 4 * i;
    o[0] = 0.25f * px_[i], o[1] = 0.25f * py_[i], o[2] = vx_[i], o[3] = vy_[i];
  }
}

std::vector<std::pair<std::string, std::vector<float>*>> SecondOrder::own_state() {
  return {{"ivx", &ivx_}, {"ivy", &ivy_}, {"fx", &fx_}, {"fy", &fy_}};
}

void SecondOrder::step(const float* a) {
  const float k = p_.dt / p_.lag, inv_m = 1.f / p_.mass, inv_vs = 1.f / p_.coulomb_vs;
  const float inv_period = 1.f / static_cast<float>(control_period());
  for (int64_t i = 0; i < n_; ++i) {
    float cx = p_.max_force * clip1(a[2 * i]), cy = p_.max_force * clip1(a[2 * i + 1]);
    float x0 = px_[i], y0 = py_[i];
    for (int s = 0; s < substeps_; ++s) {
      fx_[i] += k * (cx - fx_[i]);
      fy_[i] += k * (cy - fy_[i]);
      float axl = (fx_[i] - p_.viscous * ivx_[i] - p_.coulomb * std::tanh(ivx_[i] * inv_vs)) * inv_m;
      float ayl = (fy_[i] - p_.viscous * ivy_[i] - p_.coulomb * std::tanh(ivy_[i] * inv_vs)) * inv_m;
      ivx_[i] += p_.dt * axl;
      ivy_[i] += p_.dt * ayl;
      px_[i] += p_.dt * ivx_[i];
      py_[i] += p_.dt * ivy_[i];
    }
    vx_[i] = (px_[i] - x0) * inv_period;
    vy_[i] = (py_[i] - y0) * inv_period;
  }
}

void SecondOrder::observe(float* obs) const {
  const float inv_f = 1.f / p_.max_force;
  for (int64_t i = 0; i < n_; ++i) {
    float* o = obs + 6 * i;
    o[0] = 0.25f * px_[i], o[1] = 0.25f * py_[i], o[2] = vx_[i], o[3] = vy_[i];
    o[4] = fx_[i] * inv_f, o[5] = fy_[i] * inv_f;
  }
}

float Leg::speed_at(float f) const {
  float r = f / p_.f_c, amp = p_.a0 / (1.f + r * r);
  auto x = [&](float q) { return p_.l1 * std::sin(q) + p_.l2 * std::sin(q - p_.knee); };
  return f * (x(amp) - x(-amp));
}

std::vector<std::pair<std::string, std::vector<float>*>> Leg::own_state() {
  return {{"heading", &heading_}, {"phase", &phase_}, {"freq", &freq_}};
}

void Leg::step(const float* a) {
  const float kf = p_.dt / p_.tau_f, max_turn = p_.turn_rate * p_.dt;
  const float inv_period = 1.f / static_cast<float>(control_period());
  for (int64_t i = 0; i < n_; ++i) {
    float ax = a[2 * i], ay = a[2 * i + 1], norm = std::sqrt(ax * ax + ay * ay);
    float f_cmd = p_.f_max * std::min(norm, 1.f);
    float h_cmd = norm > 1e-6f ? std::atan2(ay, ax) : heading_[i];
    float x0 = px_[i], y0 = py_[i];
    for (int s = 0; s < kSubsteps; ++s) {
      freq_[i] += kf * (f_cmd - freq_[i]);
      float dh = std::remainder(h_cmd - heading_[i], kTwoPi);
      heading_[i] = std::remainder(heading_[i] + std::min(max_turn, std::max(-max_turn, dh)), kTwoPi);
      phase_[i] = std::fmod(phase_[i] + kTwoPi * freq_[i] * p_.dt, kTwoPi);
      float v = speed_at(freq_[i]) * (1.f + p_.ripple * std::sin(2.f * phase_[i]));
      px_[i] += p_.dt * v * std::cos(heading_[i]);
      py_[i] += p_.dt * v * std::sin(heading_[i]);
    }
    vx_[i] = (px_[i] - x0) * inv_period;
    vy_[i] = (py_[i] - y0) * inv_period;
  }
}

void Leg::observe(float* obs) const {
  for (int64_t i = 0; i < n_; ++i) {
    float* o = obs + 9 * i;
    o[0] = 0.25f * px_[i], o[1] = 0.25f * py_[i], o[2] = vx_[i], o[3] = vy_[i];
    o[4] = std::cos(heading_[i]), o[5] = std::sin(heading_[i]), o[6] = freq_[i] / p_.f_max;
    o[7] = std::cos(phase_[i]), o[8] = std::sin(phase_[i]);
  }
}

}  // namespace temper::control

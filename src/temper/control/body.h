// Bodies for the control environments (issue 40; spec section 7): N bodies stepped together by one step(),
// their state held as struct of arrays. Every body moves in the plane and exposes the world-frame position and
// the mean velocity over its last control period (dp / period), which is what a task scores. What an action
// means, the internal state and the observation are each body's own. All start at rest at the origin.
// Bodies: point_mass (the simplified agent: the action is the velocity), second_order (force through a lagging
// actuator on a mass with viscous and Coulomb friction), second_order_slow (the same at twice the control
// period), leg (a 2-link leg abstraction: speed a nonlinear, non-monotone function of gait frequency).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace temper::control {

enum class BodyKind { point_mass, second_order, second_order_slow, leg };
BodyKind body_kind_from(const std::string& name, const std::string& where);
const char* body_kind_name(BodyKind k);
// The initial log-std of a Gaussian policy's action noise on a body (control.init_log_std when a recipe does not
// set it): -0.5 (std 0.61) where the whole unit action range is useful; -1.0 (std 0.37) on the leg, whose useful
// range is |a| <= ~0.68 (speed peaks near 2.7 of f_max = 4 Hz, then falls): at std 0.61 the noise spans that whole
// range and flips the heading command, so PPO spent its low-level budget shrinking it (seen in a probe whose numbers
// were not recorded; the leg's evidence in docs/METHODS.md "Meta-knowledge transfer" runs at -1.0).
float default_init_log_std(BodyKind k);

class Body {
 public:
  virtual ~Body() = default;
  virtual BodyKind kind() const = 0;
  virtual int64_t obs_dim() const = 0;      // the body's own observation (without time)
  static constexpr int64_t kActionDim = 2;  // every body takes a 2-vector per step
  virtual double control_period() const = 0;
  virtual void step(const float* action) = 0;  // action [N, 2]: one control period for all N bodies
  virtual void observe(float* obs) const = 0;  // obs [N, obs_dim]
  void reset(int64_t n);                       // n bodies at rest at the origin
  // Per-episode draws of a body's own parameters (Philox per (seed, episode, env)); none by default.
  virtual void randomize(uint64_t /*seed*/, uint64_t /*episode*/) {}
  int64_t size() const { return n_; }
  const std::vector<float>& px() const { return px_; }
  const std::vector<float>& py() const { return py_; }
  const std::vector<float>& vx() const { return vx_; }
  const std::vector<float>& vy() const { return vy_; }
  // Every state array by name (what a checkpoint keeps); each holds N values.
  std::vector<std::pair<std::string, std::vector<float>*>> state();

 protected:
  virtual std::vector<std::pair<std::string, std::vector<float>*>> own_state() = 0;
  int64_t n_ = 0;
  std::vector<float> px_, py_, vx_, vy_;
};

// lag_max (point mass only): each episode draws each point mass's velocity lag uniformly in [0, lag_max] seconds.
std::unique_ptr<Body> make_body(BodyKind kind, float lag_max = 0.f);

// Direct velocity control: the commanded velocity is the action, its norm clipped to kMaxSpeed; v = the command
// (lag 0), or v += (1 - exp(-period / lag)) (command - v) when the episode drew a lag (a randomised simplified
// agent: the same kinematics, a response that is not instant); p += v * period.
class PointMass : public Body {
 public:
  static constexpr float kMaxSpeed = 2.f, kPeriod = 0.1f;
  explicit PointMass(float lag_max = 0.f) : lag_max_(lag_max) {}
  void randomize(uint64_t seed, uint64_t episode) override;
  BodyKind kind() const override { return BodyKind::point_mass; }
  int64_t obs_dim() const override { return 4; }  // 0.25 p, v
  double control_period() const override { return kPeriod; }
  void step(const float* action) override;
  void observe(float* obs) const override;

 private:
  std::vector<std::pair<std::string, std::vector<float>*>> own_state() override { return {{"lag", &lag_}}; }
  float lag_max_;
  std::vector<float> lag_;
};

// m dv/dt = f - c v - mu tanh(v / v_s) per axis; the actuator force lags its command: df/dt = (F a - f) / tau,
// a clipped to [-1, 1] per axis. Semi-implicit Euler at 10 ms; the action is held for the control period.
struct SecondOrderParams {
  float mass = 1.f, viscous = 1.5f, coulomb = 0.2f, coulomb_vs = 0.05f, max_force = 3.5f, lag = 0.15f;
  float dt = 0.01f;
};
class SecondOrder : public Body {
 public:
  using Params = SecondOrderParams;
  explicit SecondOrder(int substeps = 10, Params p = {}) : p_(p), substeps_(substeps) {}
  BodyKind kind() const override { return substeps_ == 10 ? BodyKind::second_order : BodyKind::second_order_slow; }
  int64_t obs_dim() const override { return 6; }  // 0.25 p, v, f / F
  double control_period() const override { return p_.dt * substeps_; }
  void step(const float* action) override;
  void observe(float* obs) const override;
  const Params& params() const { return p_; }

 private:
  std::vector<std::pair<std::string, std::vector<float>*>> own_state() override;
  Params p_;
  int substeps_;
  std::vector<float> ivx_, ivy_, fx_, fy_;  // instantaneous velocity, actuator force
};

// A 2-link leg abstraction. The action's norm sets the gait frequency command (f_max * min(|a|, 1)), its
// direction the heading command. Frequency lags its command (tau_f), heading turns toward its command at most
// turn_rate. Hip swing amplitude A(f) = A0 / (1 + (f / f_c)^2) (stride shortens as frequency rises); the stride
// is the foot's travel x(A) - x(-A), x(q) = l1 sin q + l2 sin(q - knee); speed = f * stride * (1 + ripple
// sin 2 phi): about 1.75 m/s at best near f = 2.7 Hz, slower both below and above.
struct LegParams {
  float l1 = 0.6f, l2 = 0.6f, knee = 0.4f, a0 = 0.6f, f_c = 2.5f, f_max = 4.f, tau_f = 0.2f;
  float turn_rate = 4.f, ripple = 0.1f, dt = 0.01f;
};
class Leg : public Body {
 public:
  using Params = LegParams;
  explicit Leg(Params p = {}) : p_(p) {}
  BodyKind kind() const override { return BodyKind::leg; }
  int64_t obs_dim() const override { return 9; }  // 0.25 p, v, cos/sin heading, f / f_max, cos/sin phase
  double control_period() const override { return p_.dt * kSubsteps; }
  void step(const float* action) override;
  void observe(float* obs) const override;
  float speed_at(float f) const;  // the cycle-mean speed at gait frequency f (without ripple)
  const Params& params() const { return p_; }
  static constexpr int kSubsteps = 10;

 private:
  std::vector<std::pair<std::string, std::vector<float>*>> own_state() override;
  Params p_;
  std::vector<float> heading_, phase_, freq_;
};

}  // namespace temper::control

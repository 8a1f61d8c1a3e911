// Scalarised Q-learning / QRM (see scalar_q.h).
#include "temper/tabular/scalar_q.h"

#include <algorithm>

#include "temper/core/error.h"

namespace temper::tabular {

ScalarQ::ScalarQ(const ProductMdp& p, ScalarConfig c) : Learner(p), c_(std::move(c)) {
  TEMPER_CHECK(static_cast<int>(c_.weights.size()) == p.D)
      << "scalarised Q-learning: " << c_.weights.size() << " weights for " << p.D << " objectives";
  w_.assign(c_.weights.begin(), c_.weights.end());
  q_.assign(p.S() * p.U * p.A(), 0.f);
}

void ScalarQ::update(int64_t s, int64_t u, int64_t a) {
  const ProductMdp::Step st = p_.step(s, u, a);
  float target = 0;
  for (int d = 0; d < p_.D; ++d) target += w_[d] * st.r[d];
  if (!st.terminal) {
    float best = q(st.s2, st.u2, 0);
    for (int64_t b = 1; b < p_.A(); ++b) best = std::max(best, q(st.s2, st.u2, b));
    target += c_.gamma * best;
  }
  float& v = q_[(s * p_.U + u) * p_.A() + a];
  v += c_.alpha * (target - v);
}

int64_t ScalarQ::greedy(int64_t s, int64_t u, Rng& rng) const {
  std::vector<int64_t> best{0};
  for (int64_t a = 1; a < p_.A(); ++a) {
    if (q(s, u, a) > q(s, u, best[0]))
      best = {a};
    else if (q(s, u, a) == q(s, u, best[0]))
      best.push_back(a);
  }
  return best.size() == 1 ? best[0] : best[rng.next_u32() % best.size()];
}

std::vector<double> ScalarQ::front() const {
  std::vector<double> ret(p_.D, 0.0);
  int64_t s = p_.world.start, u = p_.u0;
  double disc = 1;
  for (int64_t t = 0; t < c_.max_steps && !p_.terminal[u]; ++t) {
    int64_t a = 0;
    for (int64_t b = 1; b < p_.A(); ++b)
      if (q(s, u, b) > q(s, u, a)) a = b;
    const ProductMdp::Step st = p_.step(s, u, a);
    for (int d = 0; d < p_.D; ++d) ret[d] += disc * st.r[d];
    disc *= c_.gamma;
    s = st.s2;
    u = st.u2;
  }
  return ret;
}

void ScalarQ::save(Snapshot& out) const {
  out.tensors.push_back({"q.values", q_});
  out.state["updates"] = updates_;
}

void ScalarQ::load(const Snapshot& in) {
  const std::vector<float>& q = in.tensor("q.values");
  TEMPER_CHECK(q.size() == q_.size()) << "tabular checkpoint: q.values has " << q.size() << " values; this world "
                                      << "and machine need " << q_.size();
  q_ = q;
  updates_ = in.state.at("updates").get<int64_t>();
}

}  // namespace temper::tabular

// Pareto Q-learning's tables and updates (see pareto_q.h).
#include "temper/tabular/pareto_q.h"

#include "temper/core/error.h"
#include "temper/tabular/hypervolume.h"
#include "temper/tabular/pareto.h"

namespace temper::tabular {

ParetoQ::ParetoQ(const ProductMdp& p, ParetoConfig c) : Learner(p), c_(std::move(c)) {
  TEMPER_CHECK(static_cast<int>(c_.reference.size()) == p.D)
      << "Pareto Q-learning: the reference point has " << c_.reference.size() << " values, the machines " << p.D
      << " objectives";
  const int64_t n = p.S() * p.U * p.A();
  counts_.assign(n, 0);
  rbar_.assign(n * p.D, 0.f);
  nd_.assign(n, {});
}

std::vector<float> ParetoQ::qset(int64_t s, int64_t u, int64_t a) const {
  const int D = p_.D;
  const int64_t i = index(s, u, a);
  const float* r = &rbar_[i * D];
  if (nd_[i].empty()) return {r, r + D};
  std::vector<float> q(nd_[i].size());
  for (size_t k = 0; k < q.size(); k += D)
    for (int d = 0; d < D; ++d) q[k + d] = r[d] + c_.gamma * nd_[i][k + d];
  return q;
}

void ParetoQ::update(int64_t s, int64_t u, int64_t a) {
  const int D = p_.D;
  const ProductMdp::Step st = p_.step(s, u, a);
  const int64_t i = index(s, u, a);
  const int64_t n = ++counts_[i];
  for (int d = 0; d < D; ++d) rbar_[i * D + d] += (st.r[d] - rbar_[i * D + d]) / static_cast<float>(n);
  if (st.terminal) {
    nd_[i].clear();
    return;
  }
  const std::vector<float> set = pareto_prune_epsilon<float>(front_at(st.s2, st.u2), D, c_.nd_epsilon);
  nd_[i] = pareto_prune_cap<float>(set, D, c_.nd_cap);
}

double ParetoQ::action_value(int64_t s, int64_t u, int64_t a) const {
  return hypervolume(std::span<const float>(qset(s, u, a)), p_.D, c_.reference);
}

int64_t ParetoQ::greedy(int64_t s, int64_t u, Rng& rng) const {
  std::vector<int64_t> best;
  double top = -1;
  for (int64_t a = 0; a < p_.A(); ++a) {
    const double v = action_value(s, u, a);
    if (v > top) {
      top = v;
      best.clear();
    }
    if (v == top) best.push_back(a);
  }
  return best.size() == 1 ? best[0] : best[rng.next_u32() % best.size()];
}

std::vector<float> ParetoQ::front_at(int64_t s, int64_t u) const {
  std::vector<float> all;
  for (int64_t a = 0; a < p_.A(); ++a) {
    const std::vector<float> q = qset(s, u, a);
    all.insert(all.end(), q.begin(), q.end());
  }
  return pareto_filter<float>(all, p_.D);
}

std::vector<double> ParetoQ::front() const {
  const std::vector<float> f = front_at(p_.world.start, p_.u0);
  return {f.begin(), f.end()};
}

int64_t ParetoQ::stored_points() const {
  int64_t n = 0;
  for (const auto& v : nd_) n += static_cast<int64_t>(v.size()) / p_.D;
  return n;
}

void ParetoQ::save(Snapshot& out) const {
  std::vector<float> sizes(nd_.size()), values;
  for (size_t i = 0; i < nd_.size(); ++i) {
    sizes[i] = static_cast<float>(nd_[i].size() / p_.D);  // at most the cap or the union of A sets: exact in f32
    values.insert(values.end(), nd_[i].begin(), nd_[i].end());
  }
  out.tensors.push_back({"pql.rbar", rbar_});
  out.tensors.push_back({"pql.nd_sizes", std::move(sizes)});
  out.tensors.push_back({"pql.nd_values", std::move(values)});
  out.state["counts"] = counts_;
  out.state["updates"] = updates_;
}

void ParetoQ::load(const Snapshot& in) {
  const std::vector<float>& rbar = in.tensor("pql.rbar");
  const std::vector<float>& sizes = in.tensor("pql.nd_sizes");
  const std::vector<float>& values = in.tensor("pql.nd_values");
  TEMPER_CHECK(rbar.size() == rbar_.size() && sizes.size() == nd_.size())
      << "tabular checkpoint: pql.rbar has " << rbar.size() << " values and pql.nd_sizes " << sizes.size()
      << "; this world and machine need " << rbar_.size() << " and " << nd_.size();
  const std::vector<int64_t> counts = in.state.at("counts").get<std::vector<int64_t>>();
  TEMPER_CHECK(counts.size() == counts_.size()) << "tabular checkpoint: counts has " << counts.size() << " entries, "
                                                << "expected " << counts_.size();
  size_t off = 0;
  for (size_t i = 0; i < nd_.size(); ++i) {
    const size_t n = static_cast<size_t>(sizes[i]) * p_.D;
    TEMPER_CHECK(off + n <= values.size()) << "tabular checkpoint: pql.nd_values is shorter than pql.nd_sizes says";
    nd_[i].assign(values.begin() + off, values.begin() + off + n);
    off += n;
  }
  TEMPER_CHECK(off == values.size()) << "tabular checkpoint: pql.nd_values is longer than pql.nd_sizes says";
  rbar_ = rbar;
  counts_ = counts;
  updates_ = in.state.at("updates").get<int64_t>();
}

}  // namespace temper::tabular

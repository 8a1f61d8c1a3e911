// What the trainer asks of a tabular learner over the product (s, u): an update of (s, u, a) from the step's
// outcome, for the visited machine state only (learning on the cross-product) or for every non-terminal joint
// machine state (QRM's counterfactual experience), a greedy action, the current estimate of the front at
// (start, u0), and the tables as named tensors plus JSON for checkpoints (bitwise restore).
#pragma once

#include <cstdint>

#include "temper/core/rng.h"
#include "temper/core/state_snapshot.h"
#include "temper/tabular/product.h"

namespace temper::tabular {

using Snapshot = StateSnapshot;  // the tables as named tensors, the counters as JSON

class Learner {
 public:
  virtual ~Learner() = default;
  // Updates (s, u, a) for u = the visited joint machine state, or for every non-terminal one.
  void observe(int64_t s, int64_t u, int64_t a, bool counterfactual);
  virtual void update(int64_t s, int64_t u, int64_t a) = 0;
  // The best action at (s, u); ties broken uniformly by rng (no draw without a tie).
  virtual int64_t greedy(int64_t s, int64_t u, Rng& rng) const = 0;
  // The estimated front at (start, u0): [n, D] (one point for a scalarised learner).
  virtual std::vector<double> front() const = 0;
  virtual int64_t stored_points() const = 0;  // vectors (or values) the tables hold: the memory the method costs
  virtual void save(Snapshot& out) const = 0;
  virtual void load(const Snapshot& in) = 0;
  int64_t updates() const { return updates_; }

 protected:
  explicit Learner(const ProductMdp& p) : p_(p) {}
  const ProductMdp& p_;
  int64_t updates_ = 0;
};

}  // namespace temper::tabular

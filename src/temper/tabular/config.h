// The recipe of a tabular run ([tabular], [tabular.grid], [tabular.graph], [[tabular.machines]]): which world
// and machines (built-in by name, or given in the recipe), which learner, and its settings; and the product
// they make. Declared once through visit(KeyVisitor&) (core/settings.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/tabular/product.h"

namespace temper::tabular {

// pqlrm: Pareto Q-learning with counterfactual updates over every joint machine state; pql: Pareto Q-learning on
// the cross-product (visited state only); qrm: scalarised Q-learning with counterfactual updates; ql: scalarised
// Q-learning on the cross-product.
enum class Method { pqlrm, pql, qrm, ql };
inline constexpr EnumNames<Method, 4> kMethodNames{
    {{Method::pqlrm, "pqlrm"}, {Method::pql, "pql"}, {Method::qrm, "qrm"}, {Method::ql, "ql"}}};

struct TabularConfig {
  std::string world = "office";     // a built-in world, "grid" ([tabular.grid]) or "graph" ([tabular.graph])
  std::string machine = "office3";  // a built-in machine set, or "custom" ([[tabular.machines]])
  Method method = Method::pqlrm;
  int64_t steps = 100000;            // environment steps
  int64_t max_episode_steps = 100;   // an episode is cut after this many steps (then restarts at the start)
  int64_t eval_every = 1000;         // steps between metric rows
  int64_t checkpoint_every = 20000;  // steps between checkpoints (and one at the end)
  int64_t seed = 0;
  double gamma = 0.95, epsilon = 0.8;  // PQL learns its sets off-policy: 0.2 stalls at 2 of 7 office points
  int64_t nd_cap = 64;
  double nd_epsilon = 0.0;
  double alpha = 1.0;                // scalarised methods' step size
  std::vector<double> reference;     // hypervolume reference point; empty: -0.1 on every objective
  std::vector<double> weights;       // scalarised methods' weights; empty: 1 on every objective
  bool truth = true;                 // compute the true front (metrics hv_ratio, recovered, spurious) when small
  int64_t truth_max_states = 50000;  // the largest product (S x U) the true front is computed for

  GridSpec grid;
  GraphSpec graph;
  std::vector<MachineSpec> machines;

  void visit(KeyVisitor& v);  // [tabular]
  void validate() const;
  bool pareto() const { return method == Method::pqlrm || method == Method::pql; }
  bool counterfactual() const { return method == Method::pqlrm || method == Method::qrm; }
};

void visit_grid(GridSpec& g, KeyVisitor& v);        // [tabular.grid]
void visit_graph(GraphSpec& g, KeyVisitor& v);      // [tabular.graph]
void visit_machine(MachineSpec& m, KeyVisitor& v);  // one [[tabular.machines]]

// The world and machines the config names, as a product; the reference point and weights filled to D.
ProductMdp build_product(TabularConfig& c);

}  // namespace temper::tabular

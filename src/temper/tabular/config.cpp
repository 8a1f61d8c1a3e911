// The tabular recipe's keys and the product they name (see config.h).
#include "temper/tabular/config.h"

#include "temper/core/error.h"

namespace temper::tabular {

void TabularConfig::visit(KeyVisitor& v) {
  v("world", world,
    "a built-in world (office, office_small, corridor), grid ([tabular.grid]) or graph ([tabular.graph])");
  v("machine", machine, "a built-in machine set (office2, office3, office4, *_split) or custom ([[tabular.machines]])");
  v("method", method, "pqlrm, pql (cross-product), qrm (scalarised, counterfactual), ql (scalarised)", kMethodNames);
  v("steps", steps, "environment steps");
  v("max_episode_steps", max_episode_steps, "steps after which an episode restarts at the start");
  v("eval_every", eval_every, "steps between metric rows");
  v("checkpoint_every", checkpoint_every, "steps between checkpoints (one is also written at the end)");
  v("seed", seed, "exploration seed");
  v("gamma", gamma, "discount");
  v("epsilon", epsilon, "probability of a uniformly random action");
  v("nd_cap", nd_cap, "most vectors an ND set keeps (crowding-distance pruning; 0: no cap)");
  v("nd_epsilon", nd_epsilon, "epsilon-dominance pruning of ND sets (0: off)");
  v("alpha", alpha, "step size of the scalarised methods");
  v("reference", reference, "hypervolume reference point, one value per objective (empty: -0.1 each)");
  v("weights", weights, "scalarisation weights of qrm / ql (empty: 1 each)");
  v("truth", truth, "compute the true front by set value iteration (metrics hv_ratio, recovered, spurious)");
  v("truth_max_states", truth_max_states, "largest product (states x machine states) the true front is computed for");
}

void TabularConfig::validate() const {
  TEMPER_CHECK(steps > 0) << "tabular.steps: expected > 0, got " << steps;
  TEMPER_CHECK(max_episode_steps > 0) << "tabular.max_episode_steps: expected > 0, got " << max_episode_steps;
  TEMPER_CHECK(eval_every > 0) << "tabular.eval_every: expected > 0, got " << eval_every;
  TEMPER_CHECK(checkpoint_every > 0) << "tabular.checkpoint_every: expected > 0, got " << checkpoint_every;
  TEMPER_CHECK(gamma > 0 && gamma < 1) << "tabular.gamma: expected in (0, 1), got " << gamma;
  TEMPER_CHECK(epsilon >= 0 && epsilon <= 1) << "tabular.epsilon: expected in [0, 1], got " << epsilon;
  TEMPER_CHECK(nd_cap >= 0) << "tabular.nd_cap: expected >= 0 (0: no cap), got " << nd_cap;
  TEMPER_CHECK(nd_epsilon >= 0) << "tabular.nd_epsilon: expected >= 0, got " << nd_epsilon;
  TEMPER_CHECK(alpha > 0 && alpha <= 1) << "tabular.alpha: expected in (0, 1], got " << alpha;
}

void visit_grid(GridSpec& g, KeyVisitor& v) {
  v.strings("rows", g.rows, "the map, one string per row: '#' wall, '.' free, 'A' start, other characters events");
  v.strings("legend", g.legend, "event cells: [\"c=coffee\", \"o=office\"]");
}

void visit_graph(GraphSpec& g, KeyVisitor& v) {
  v("states", g.states, "number of states");
  v("actions", g.actions, "number of actions");
  v("start", g.start, "the start state");
  v.strings("events", g.events, "the event names");
  v.strings("transitions", g.transitions, "\"s a s2\" or \"s a s2 event1,event2\", every (s, a) once");
}

void visit_machine(MachineSpec& m, KeyVisitor& v) {
  v("name", m.name, "the machine's name");
  v.strings("objectives", m.objectives, "names of the reward vector's components");
  v.strings("states", m.states, "state names; the first is the initial state");
  v.strings("terminal", m.terminal, "states that end the episode for this machine");
  v.strings("edges", m.edges, "\"FROM CONDITION TO [r1,r2]\": CONDITION is '*' or events joined by '&', maybe '!'");
}

ProductMdp build_product(TabularConfig& c) {
  World w = c.world == "grid"    ? world_from_grid(c.grid, "grid")
            : c.world == "graph" ? world_from_graph(c.graph, "graph")
                                 : builtin_world(c.world);
  std::vector<RewardMachine> ms;
  if (c.machine == "custom") {
    TEMPER_CHECK(!c.machines.empty()) << "tabular.machine = \"custom\" needs at least one [[tabular.machines]]";
    for (const MachineSpec& m : c.machines) ms.push_back(parse_machine(m));
  } else {
    ms = builtin_machines(c.machine);
  }
  ProductMdp p = make_product(std::move(w), std::move(ms));
  if (c.reference.empty()) c.reference.assign(p.D, -0.1);
  if (c.weights.empty()) c.weights.assign(p.D, 1.0);
  TEMPER_CHECK(static_cast<int>(c.reference.size()) == p.D)
      << "tabular.reference: " << c.reference.size() << " values, the machines have " << p.D << " objectives ("
      << join_words(p.objectives, ", ") << ")";
  TEMPER_CHECK(static_cast<int>(c.weights.size()) == p.D)
      << "tabular.weights: " << c.weights.size() << " values, the machines have " << p.D << " objectives ("
      << join_words(p.objectives, ", ") << ")";
  return p;
}

}  // namespace temper::tabular

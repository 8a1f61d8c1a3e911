// The world x reward-machines product, compiled to tables (see product.h).
#include "temper/tabular/product.h"

#include <algorithm>
#include <deque>

#include "temper/core/error.h"

namespace temper::tabular {
namespace {

struct BoundEdge {
  uint32_t require = 0, forbid = 0;
};

uint32_t bind_events(const std::vector<std::string>& evs, const RewardMachine& m, const RmEdge& e, const World& w) {
  uint32_t mask = 0;
  for (const std::string& ev : evs) {
    const int i = w.event_index(ev);
    TEMPER_CHECK(i >= 0) << "machine '" << m.name << "': edge '" << e.text << "': unknown event '" << ev << "' (world '"
                         << w.name << "' has events: " << w.event_list() << ")";
    mask |= 1u << i;
  }
  return mask;
}

// One machine's table over the label alphabet: next[u * L + l], reward[(u * L + l) * D_m + d].
struct MachineTable {
  std::vector<int64_t> next;
  std::vector<double> reward;
};

MachineTable compile_machine(const RewardMachine& m, const World& w, const std::vector<uint32_t>& labels) {
  std::vector<BoundEdge> bound;
  for (const RmEdge& e : m.edges) bound.push_back({bind_events(e.require, m, e, w), bind_events(e.forbid, m, e, w)});
  const int64_t n = static_cast<int64_t>(m.states.size()), L = static_cast<int64_t>(labels.size());
  const size_t D = m.objectives.size();
  MachineTable t;
  t.next.resize(n * L);
  t.reward.assign(n * L * D, 0.0);
  for (int64_t u = 0; u < n; ++u)
    for (int64_t l = 0; l < L; ++l) {
      t.next[u * L + l] = u;  // no firing edge (and every terminal state): stay, reward 0
      const RmEdge* fired = nullptr;
      for (size_t k = 0; k < m.edges.size(); ++k) {
        const RmEdge& e = m.edges[k];
        if (e.from != u || (labels[l] & bound[k].require) != bound[k].require || (labels[l] & bound[k].forbid))
          continue;
        TEMPER_CHECK(!fired || (fired->to == e.to && fired->reward == e.reward))
            << "machine '" << m.name << "': edges '" << fired->text << "' and '" << e.text << "' both fire on events "
            << w.label_text(labels[l]) << " with different outcomes (make the conditions exclusive, e.g. with !event)";
        fired = &e;
        t.next[u * L + l] = e.to;
        for (size_t d = 0; d < D; ++d) t.reward[(u * L + l) * D + d] = e.reward[d];
      }
    }
  return t;
}

// Every terminal state of machine m is reached by some run of the world from (start, initial state).
void check_terminals_reachable(const RewardMachine& m, const MachineTable& t, const ProductMdp& p) {
  const int64_t n = static_cast<int64_t>(m.states.size()), S = p.S(), A = p.A();
  std::vector<uint8_t> seen(S * n, 0);
  std::deque<std::pair<int64_t, int64_t>> q{{p.world.start, 0}};
  seen[p.world.start * n] = 1;
  std::vector<uint8_t> reached(n, 0);
  while (!q.empty()) {
    const auto [s, u] = q.front();
    q.pop_front();
    reached[u] = 1;
    if (m.terminal[u]) continue;
    for (int64_t a = 0; a < A; ++a) {
      const int64_t s2 = p.world.step(s, a), u2 = t.next[u * p.L + p.label_id[s * A + a]];
      if (!seen[s2 * n + u2]) {
        seen[s2 * n + u2] = 1;
        q.push_back({s2, u2});
      }
    }
  }
  for (int64_t u = 0; u < n; ++u)
    TEMPER_CHECK(!m.terminal[u] || reached[u])
        << "machine '" << m.name << "': terminal state '" << m.states[u] << "' is unreachable: no run of world '"
        << p.world.name << "' from its start produces the events leading there";
}

}  // namespace

std::string ProductMdp::state_name(int64_t u) const {
  std::string out;
  int64_t rest = u;
  for (size_t i = 0; i < machines.size(); ++i) {
    const int64_t n = static_cast<int64_t>(machines[i].states.size());
    out += (i ? "|" : "") + machines[i].states[rest % n];
    rest /= n;
  }
  return out;
}

ProductMdp make_product(World world, std::vector<RewardMachine> machines) {
  TEMPER_CHECK(!machines.empty()) << "world '" << world.name << "': no reward machine";
  ProductMdp p;
  p.world = std::move(world);
  p.machines = std::move(machines);
  const int64_t SA = p.S() * p.A();
  p.label_id.resize(SA);
  for (int64_t i = 0; i < SA; ++i) {
    int64_t l = 0;
    while (l < static_cast<int64_t>(p.labels.size()) && p.labels[l] != p.world.label[i]) ++l;
    if (l == static_cast<int64_t>(p.labels.size())) p.labels.push_back(p.world.label[i]);
    p.label_id[i] = static_cast<int32_t>(l);
  }
  p.L = static_cast<int64_t>(p.labels.size());
  std::vector<MachineTable> tables;
  bool any_terminal = false;
  p.U = 1;
  for (const RewardMachine& m : p.machines) {
    tables.push_back(compile_machine(m, p.world, p.labels));
    check_terminals_reachable(m, tables.back(), p);
    for (uint8_t t : m.terminal) any_terminal = any_terminal || t;
    p.objectives.insert(p.objectives.end(), m.objectives.begin(), m.objectives.end());
    p.U *= static_cast<int64_t>(m.states.size());
    TEMPER_CHECK(p.U <= (1 << 20)) << "world '" << p.world.name << "': the machines' joint states exceed 2^20";
  }
  TEMPER_CHECK(any_terminal) << "world '" << p.world.name << "': no machine has a terminal state, so no episode ends "
                             << "(give at least one machine a terminal state)";
  p.D = static_cast<int>(p.objectives.size());
  p.u_next.resize(p.U * p.L);
  p.u_reward.resize(p.U * p.L * p.D);
  p.terminal.resize(p.U);
  for (int64_t u = 0; u < p.U; ++u) {
    bool term = true;
    for (int64_t l = 0; l < p.L; ++l) {
      int64_t rest = u, radix = 1, u2 = 0, d0 = 0;
      for (size_t i = 0; i < p.machines.size(); ++i) {
        const RewardMachine& m = p.machines[i];
        const int64_t n = static_cast<int64_t>(m.states.size()), ui = rest % n,
                      Dm = static_cast<int64_t>(m.objectives.size());
        rest /= n;
        if (l == 0 && std::find(m.terminal.begin(), m.terminal.end(), 1) != m.terminal.end())
          term = term && m.terminal[ui];
        u2 += tables[i].next[ui * p.L + l] * radix;
        radix *= n;
        for (int64_t d = 0; d < Dm; ++d)
          p.u_reward[(u * p.L + l) * p.D + d0 + d] = static_cast<float>(tables[i].reward[(ui * p.L + l) * Dm + d]);
        d0 += Dm;
      }
      p.u_next[u * p.L + l] = u2;
    }
    p.terminal[u] = term ? 1 : 0;
  }
  return p;
}

}  // namespace temper::tabular

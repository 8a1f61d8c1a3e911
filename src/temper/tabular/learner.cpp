// The shared part of the tabular learners: which machine states a step updates (see learner.h).
#include "temper/tabular/learner.h"

namespace temper::tabular {

void Learner::observe(int64_t s, int64_t u, int64_t a, bool counterfactual) {
  if (!counterfactual) {
    update(s, u, a);
    ++updates_;
    return;
  }
  for (int64_t v = 0; v < p_.U; ++v)
    if (!p_.terminal[v]) {
      update(s, v, a);
      ++updates_;
    }
}

}  // namespace temper::tabular

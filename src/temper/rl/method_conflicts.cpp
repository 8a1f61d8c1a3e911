// The conflict checks between enabled methods (rl/method_spec.h): each pair whose effects would silently
// undo one side is refused with both sections, the setting that causes it and the way out.
#include "temper/core/error.h"
#include "temper/rl/method_spec.h"

namespace temper::rl {

namespace {

std::string side(const EnabledMethod& m, const std::string& detail) {  // "[rl.dre] with mode = \"online\""
  return "[" + std::string(m.spec->section) + "]" + (detail.empty() ? "" : " with " + detail);
}

}  // namespace

void check_method_conflicts(const std::vector<EnabledMethod>& methods) {
  for (size_t i = 0; i < methods.size(); ++i) {
    const MethodEffects a = methods[i].setup->effects();
    for (size_t j = i + 1; j < methods.size(); ++j) {
      const MethodEffects b = methods[j].setup->effects();
      const std::string sa = side(methods[i], a.detail), sb = side(methods[j], b.detail);
      TEMPER_CHECK(!(a.replaces_reward && b.replaces_reward))
          << sa << " and " << sb << " both set the reward; choose one (rl.turing.judge = \"discriminator\" for both)";
      TEMPER_CHECK(!(a.combines_rewards && b.replaces_reward) && !(b.combines_rewards && a.replaces_reward))
          << sa << " and " << sb << ": one combines the task's rewards, the other replaces the reward it combined; "
          << "use [rl.discriminator] combine = \"add\" or drop one";
      TEMPER_CHECK(!(a.sets_advantages && b.sets_advantages))
          << sa << " and " << sb << " both set the advantages; use [rl.rcsd] combine = \"add\" or drop one";
      TEMPER_CHECK(!(a.rewrites_rewards && b.appends_after_reward))
          << sb << " appends trajectories after " << sa << " has set the round's rewards, so they would miss it; "
          << "use [rl.zppo] mode = \"buffer\" or [rl.dre] mode = \"online\" (their groups then come from the rollout), "
             "or drop one";
      TEMPER_CHECK(!(a.forks_rollouts && b.forks_rollouts))
          << side(methods[i], a.fork_detail.empty() ? a.detail : a.fork_detail) << " and "
          << side(methods[j], b.fork_detail.empty() ? b.detail : b.fork_detail)
          << " both fork rollouts (a fork would carry the other's forced tokens); "
          << "use [rl.dre] mode = \"offline\" or [rl.graphpo] reallocate = false";
    }
  }
}

}  // namespace temper::rl

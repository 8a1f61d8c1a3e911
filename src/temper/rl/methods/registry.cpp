#include "temper/rl/methods/registry.h"

#include "temper/rl/methods/disc_reward.h"
#include "temper/rl/methods/dre.h"
#include "temper/rl/methods/fair.h"
#include "temper/rl/methods/graphpo.h"
#include "temper/rl/methods/rcsd.h"
#include "temper/rl/methods/reves.h"
#include "temper/rl/methods/stare.h"
#include "temper/rl/methods/turing.h"
#include "temper/rl/methods/zppo.h"

namespace temper::rl {

namespace {

// One line per method; the hook order is each spec's `order`, not this list's.
const MethodSpec* const kMethods[] = {
    &kFairMethod, &kTuringMethod,  &kDiscRewardMethod, &kRevesMethod, &kZppoMethod,
    &kDreMethod,  &kGraphPoMethod, &kRcsdMethod,       &kStareMethod,
};

}  // namespace

std::span<const MethodSpec* const> method_table() {
  return kMethods;
}

}  // namespace temper::rl

// A discriminator head on a refitting schedule (discriminator rewards, the Turing reward's discriminator judge):
// fitted at the first step and, with rounds R > 1, again every `refit_every` steps against the policy as it
// stands then, R fits in all (the spec's `rounds`; one by default). Holds the head, the steps and fits so far and
// the last fit's statistics, and writes them into checkpoints.
#pragma once

#include <cstdint>
#include <string>

#include "temper/core/settings.h"
#include "temper/rl/discriminator.h"

namespace temper::rl {

struct RefitConfig {
  int64_t rounds = 1;                               // fits of the head in all
  int64_t refit_every = 0;                          // steps between fits (rounds > 1)
  void validate(const std::string& section) const;  // errors name section.rounds / section.refit_every
  void visit(KeyVisitor& v);
};

// A fit's accuracy on its own fitting set and its class counts.
struct FitStats {
  double accuracy = 0;
  int64_t real = 0, gen = 0;
};

class RefittedHead {
 public:
  RefittedHead(DiscriminatorConfig head, RefitConfig refit) : head_(head), refit_(refit) {}
  // A fit is due: never fitted, or the steps done reached the next round's (every round of a step sees one head).
  bool due() const { return !head_.fitted() || (fits_ < refit_.rounds && steps_ >= fits_ * refit_.refit_every); }
  Discriminator& head() { return head_; }
  const Discriminator& head() const { return head_; }
  int64_t fits() const { return fits_; }  // also the round index of the next fit
  const FitStats& stats() const { return stats_; }
  void record_fit(const FitStats& s) { stats_ = s, ++fits_; }
  void step_done() { ++steps_; }
  // "<tag> <steps> <fits> <accuracy> <real> <gen>" then the head's text; empty before the first fit. load also
  // takes a bare head (checkpoints from before refitting rounds: one fit).
  std::string save(const std::string& tag) const;
  void load(const std::string& text, const std::string& tag);

 private:
  Discriminator head_;
  RefitConfig refit_;
  int64_t steps_ = 0, fits_ = 0;
  FitStats stats_;
};

}  // namespace temper::rl

// REVES, revision- and verification-augmented training (Liu et al. 2026, arXiv 2606.18910;
// ../shared/specs/methods-llm-rl.md section 4). Every `refresh_every` steps the current policy runs the
// revise loop on `seeds` fresh training problems; its recoveries (wrong first, right within R revisions)
// become revision and verification prompts, drawn each step as extra groups beside the new questions:
// ordinary single-turn GRPO on the union. The records in detail: above Reves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/rl/method.h"
#include "temper/rl/revision.h"

namespace temper::rl {

struct MethodSpec;

struct RevesConfig {
  int64_t rounds = 8;          // R: revisions per seed problem during augmentation
  int64_t seeds = 64;          // seed problems per augmentation
  int64_t refresh_every = 50;  // steps between augmentations (the first at step 0)
  double aug_ratio = 0.5;      // augmented prompts per new prompt each step
  bool verification = true;
  bool rebalance = true;
  RevisionConfig revision;
  uint64_t seed = 0;
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// One augmented prompt: the train problem it derives from, its kind and the attempt it shows.
struct RevesRecord {
  int64_t index = 0;
  bool verification = false;
  bool label = false;  // verification: whether the attempt is correct
  std::string attempt;
};

// The records of one seed problem's revise trace (empty unless it failed first and recovered).
std::vector<RevesRecord> reves_records(int64_t index, const RevisionTrace& trace, bool verification);

// Every `refresh_every` steps (an "epoch" of a procedural task) the current policy runs the revise loop on
// `seeds` fresh training problems: a first attempt, and for a wrong one up to R revision rounds with the binary
// feedback "incorrect". Only recoveries (wrong first, right within R) produce records: a revision prompt per
// round (the question, the previous attempt, the feedback; checked by the question's own checker) and a
// verification prompt per revised attempt ("is this correct?", checked against the attempt's true label:
// (turns-1) False and one True). With `rebalance`, first-try-correct attempts add True verification prompts up
// to the False count (the spec's recommendation against label imbalance). The records are prompts, never
// targets: each step draws aug_ratio x prompts_per_step of them as extra groups beside the new questions,
// sampled fresh and rewarded by their checkers: ordinary single-turn GRPO on the union.
class Reves : public Method {
 public:
  explicit Reves(const RevesConfig& cfg) : cfg_(cfg) { cfg_.validate(); }
  std::string name() const override { return "reves"; }
  void attach(const MethodEnv& env) override { env_ = env; }
  std::vector<tasks::Problem> extra_problems(int64_t step, int64_t new_problems) override;
  void after_rollout(Batch& b) override;
  void after_reward(Batch& b) override;
  void metrics(Metrics& m) const override;
  std::string save_state() const override;
  void load_state(const std::string& s) override;
  const std::vector<RevesRecord>& pool() const { return pool_; }
  tasks::Problem build(const RevesRecord& r) const;

 private:
  void augment(int64_t step);
  RevesConfig cfg_;
  MethodEnv env_;
  std::vector<RevesRecord> pool_;
  struct Aug {  // the last augmentation
    int64_t seeds = 0, first_correct = 0, recovered = 0, turns = 0;
  } aug_;
  struct StepCounts {
    int64_t drawn = 0, rev = 0, rev_correct = 0, ver = 0, ver_correct = 0;
  } n_;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kRevesMethod;

}  // namespace temper::rl

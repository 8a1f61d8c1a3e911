// How a method joins a run: each method's folder exports one MethodSpec (its name, recipe section, place
// in the hook order and its settings); rl/methods/registry.cpp lists them in one table, and `temper train`
// loops over that table, never naming a method. docs/ARCHITECTURE.md "Adding a method" walks through one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "temper/core/settings.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/method.h"
#include "temper/rl/rl_trainer.h"
#include "temper/rl/sft.h"

namespace temper::rl {

// The run's settings a method may set defaults in before they are read (fair: eval's objectives and the SFT
// prompts' preference; REVES: eval's revision prompt).
struct RunSettings {
  RlConfig& rl;
  SftConfig& sft;
  EvalConfig& eval;
  const std::string& task_name;
  uint64_t seed = 0;
};

// Defaults a method sets in other sections (ZPPO: rl.epochs = 4), as TOML literals; the recipe's own
// values win, and two methods setting one key differently is refused.
class RecipeDefaults {
 public:
  virtual ~RecipeDefaults() = default;
  virtual void set(const std::string& key, const std::string& literal) = 0;
};

// What a method needs from the trainer.
struct MethodNeeds {
  bool reference = false;  // the frozen copy of the policy as RL started
  bool teacher = false;    // a [teacher]
};

// What a method does on the shared road, for the conflict checks (check_method_conflicts).
struct MethodEffects {
  bool replaces_reward = false;       // writes each trajectory's reward, dropping the task's
  bool combines_rewards = false;      // reads the task's reward vector and writes the scalar from it
  bool sets_advantages = false;       // advantages() returns true: rl.advantage and rl.scale_rewards go unused
  bool forks_rollouts = false;        // its rollout hook forks sequences
  bool rewrites_rewards = false;      // its after_reward sets or changes rewards (it must see every trajectory)
  bool appends_after_reward = false;  // its after_reward appends trajectories (scored by itself)
  std::string detail;                 // the setting that causes them, for messages ("combine = \"replace\"")
  std::string fork_detail;            // the setting that makes it fork, when another one causes the rest
};

// What a method is built with.
struct MethodDeps {
  std::shared_ptr<Teacher> teacher;  // null without a [teacher]
  uint64_t seed = 0;                 // the run's seed
};

// One method's settings, read from its recipe section.
class MethodSetup {
 public:
  virtual ~MethodSetup() = default;
  virtual void visit(KeyVisitor& v) = 0;  // its keys (the section's prefix is the spec's)
  virtual void validate(const RunSettings& run) const = 0;
  virtual void change_defaults(RecipeDefaults&) const {}  // before the other sections are read
  virtual void configure(RunSettings&) const {}           // the same, for settings that are not recipe keys
  virtual void check_task(const tasks::Task&) const {}    // once the task is made, before the model loads
  virtual MethodNeeds needs() const { return {}; }
  virtual MethodEffects effects() const { return {}; }
  // Why the method cannot run on multi-turn conversations ([env]: observations inside the completion,
  // prompts the environment writes); empty when it can. RunConfig refuses the run with this reason.
  virtual std::string conversation_refusal() const {
    return "it reads or rewrites single completions and their prompts (not written for conversations)";
  }
  virtual std::unique_ptr<Method> make(const MethodDeps& deps) const = 0;
};

// The usual setup: the config struct's own keys and validation.
template <class Config>
class MethodSetupOf : public MethodSetup {
 public:
  void visit(KeyVisitor& v) override { cfg.visit(v); }
  void validate(const RunSettings&) const override { cfg.validate(); }
  Config cfg;

 protected:
  // The settings with the run's seed, for a method whose config carries one (its sampling streams).
  Config seeded(const MethodDeps& deps) const {
    Config c = cfg;
    c.seed = deps.seed;
    return c;
  }
};

struct MethodSpec {
  std::string_view name;                              // the method's name: logs, checkpoint state, the hook order
  std::string_view section;                           // its recipe section ("rl.stare"): the section turns it on
  int order = 0;                                      // its place in the hook order: lower runs first
  std::string_view summary;                           // one line for `temper train --list-keys`
  std::unique_ptr<MethodSetup> (*setup)() = nullptr;  // its settings at their defaults
};

// A method the recipe turned on.
struct EnabledMethod {
  const MethodSpec* spec = nullptr;
  std::unique_ptr<MethodSetup> setup;
};

// Refuses combinations that would silently lose one side (two methods replacing the reward, a reward
// replaced under one that combines the task's rewards, two setting the advantages, two forking rollouts,
// trajectories appended after a method rewrote the rewards, so that they miss it), naming both and the way
// out. `methods` in hook order.
void check_method_conflicts(const std::vector<EnabledMethod>& methods);

}  // namespace temper::rl

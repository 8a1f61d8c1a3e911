// A training run's settings, read from a recipe. Every section is declared once (core/settings.h): the
// recipe reader, the resolved config.toml and `temper train --list-keys` (the tables in recipes/README.md)
// all read the same declarations. Methods come from the table of methods (rl/methods/registry.h): a
// section turns one on, and the run never names a method.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "temper/app/recipe.h"
#include "temper/env/environment.h"
#include "temper/model/lora.h"
#include "temper/rl/curriculum.h"
#include "temper/rl/env_rollout.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/method_spec.h"
#include "temper/rl/reward_set.h"
#include "temper/rl/rl_trainer.h"
#include "temper/rl/sft.h"
#include "temper/rl/teacher.h"
#include "temper/tasks/task.h"

namespace temper::app {

struct ModelSection {
  std::string path, preset, precision = "f32", device = "cpu", prompt_format = "auto", system_prompt, user_template;
  int64_t context = 0;
  uint64_t seed = 0;
  bool recompute = false;  // per-layer activation recompute in the training passes (Transformer::set_recompute)
  void visit(KeyVisitor& v);
};

struct TaskSection {
  std::string name = "arithmetic";
  tasks::TaskParams params;     // [task.params]: the task's own (tasks/*.cpp read them)
  double reward_timeout_s = 30;  // a verification running longer scores 0 (0: no limit)
  rl::VerifierIsolation reward_isolation = rl::VerifierIsolation::thread;
  std::string long_prompts = "skip";  // over-long prompts: skip (counted) or refuse (app/input_scan.h)
  void visit(KeyVisitor& v);
};

// A stage's length and learning-rate shape (in [sft] and [rl]; [curriculum] sets the steps).
struct StageSection {
  int64_t steps = 0;
  std::string schedule = "cosine";
};

struct TeacherSection {
  std::string source;  // "" (none), gold, dataset, model
  std::string path;
  rl::ModelTeacherConfig model;
  void visit(KeyVisitor& v);
};

// [env]: rollouts as conversations with an environment (multi-turn, tools) instead of single completions.
struct EnvSection {
  env::EnvOptions options;           // kind, program, workers, timeouts, env; [env.params] the environment's own
  rl::EnvRolloutConfig rollout;      // max_turns, turn_max_new, threads, failure_reward
  std::string tool_format = "auto";  // the model's tool-call syntax (text/tool_calls.h)
  std::string mode = "steps";  // steps: temper drives the turns; client: the agent drives (agent/client_rollout.h)
  void visit(KeyVisitor& v);
};

// [lora]: train low-rank adapters on a frozen base (model/lora.h) instead of every weight.
struct LoraSection {
  LoraConfig config;
  std::vector<std::string> targets = {"q", "k", "v", "o"};  // read into config.targets
  std::string init;  // a PEFT adapter directory to start from ("": fresh adapters, B = 0)
  void visit(KeyVisitor& v);
};

struct RunSection {
  std::string out;
  int64_t checkpoint_every = 0, keep_last = 2, samples_every = 10, samples_per_step = 4, threads = 0;
  bool shard_optimizer = false;  // data-parallel ZeRO-1 (model/optimizer.h)
  bool shard_gradients = false;  // ZeRO-2: the gradients too (implies shard_optimizer)
  void visit(KeyVisitor& v);
};

struct HeldoutSection {
  std::string task;          // [eval.heldout]: a second task evaluated beside the training task's
  tasks::TaskParams params;  // its eval split (the train task's params, overridden by eval.heldout.params)
};

struct RunConfig {
  ModelSection model;
  TaskSection task;
  std::optional<rl::CurriculumConfig> curriculum;  // [curriculum]: the stages' steps and sets from a budget
  rl::CurriculumPlan plan;
  StageSection sft_stage, rl_stage;
  rl::SftConfig sft;
  rl::RlConfig rl;
  std::vector<rl::EnabledMethod> methods;  // in hook order
  std::vector<rl::RewardTermConfig> rewards;  // [[reward]] terms; empty: the task's verifier alone
  TeacherSection teacher;
  int64_t eval_every = 0;
  rl::EvalConfig eval;
  std::optional<HeldoutSection> heldout;
  std::optional<EnvSection> env;  // [env]
  std::optional<LoraSection> lora;  // [lora]
  RunSection run;
  int64_t sft_steps() const { return sft_stage.steps; }
  int64_t rl_steps() const { return rl_stage.steps; }
  std::string hook_order() const;  // the enabled methods' names in hook order, comma separated
};

// Reads every section (unknown keys are left for Recipe::check_all_read); `methods` is the table of methods.
RunConfig read_run_config(Recipe& r, std::span<const rl::MethodSpec* const> methods);

// Every section and key with its default and doc, as Markdown (`temper train --list-keys`).
std::string list_keys_markdown(std::span<const rl::MethodSpec* const> methods);

}  // namespace temper::app

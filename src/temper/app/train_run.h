// `temper train`'s run (app/train_cmd.h): the run's state as members, set up and run as named steps, one file per
// part: train_cmd.cpp the order of the steps and the loop (stops, after each step, the end), train_run_setup.cpp the
// task, environment, rewards and trainers, train_run_model.cpp the policy (loading, LoRA, weights across ranks, the
// memory plan), train_run_dir.cpp the run directory and what is written into it, train_run_state.cpp checkpoints,
// resume and held-out evaluation. Internal to app/.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "temper/app/checkpoint.h"
#include "temper/app/learning_watch.h"
#include "temper/app/recipe.h"
#include "temper/app/run_config.h"
#include "temper/app/run_dir.h"
#include "temper/app/run_lock.h"
#include "temper/app/train_cmd.h"
#include "temper/dist/communicator.h"
#include "temper/env/environment.h"
#include "temper/io/hf_model_dir.h"
#include "temper/model/frozen_base.h"
#include "temper/model/lora.h"
#include "temper/model/transformer.h"
#include "temper/report/metrics_sink.h"
#include "temper/report/progress.h"
#include "temper/reward/safe_reward.h"
#include "temper/rl/env_rollout.h"
#include "temper/rl/method.h"
#include "temper/rl/prompt_codec.h"
#include "temper/rl/reward_set.h"
#include "temper/rl/rl_trainer.h"
#include "temper/rl/sft.h"
#include "temper/rl/teacher.h"
#include "temper/spotlight/explorer_loop.h"
#include "temper/spotlight/explorer_pool.h"
#include "temper/tasks/task.h"
#include "temper/text/tokenizer.h"

namespace temper::app {

// One `temper train` call: the run's state as members, set up and run as named steps. Data-parallel under
// mpirun every rank runs it; rank 0 alone writes the run directory (config, metrics, samples, checkpoints,
// report) and prints; the others train in step with it.
int serve_explorer_process(const TrainOptions& o);  // `temper train --fd N` (train_explorer.cpp)

class TrainRun {
 public:
  TrainRun(const TrainOptions& o, Recipe recipe);
  int run();
  // An [rl.async] explorer process (train_explorer.cpp): the policy as the trainer loads it and its rollout engine.
  std::unique_ptr<spotlight::Scorer> explorer_scorer();

 private:
  void choose_threads();
  void inspect_run_dir();
  void check_resume_changes();
  void create_run_dir();
  void make_task();
  void start_env();
  void load_policy();
  void attach_lora();
  Transformer* reference() const;  // the KL reference: a frozen copy, or (LoRA) the policy's base
  void make_stage_tasks();
  void make_rewards();
  void make_trainers();
  void resume();
  void plan_memory();
  void scan_inputs();
  void open_sinks();
  void make_rl();
  spotlight::ExplorerCommand explorer_command() const;  // [rl.async] explorer processes: this program, the recipe
  std::unique_ptr<rl::ConversationSource> conversation_source();
  void sync_weights();
  void check_held_bases_agree(const FrozenBase& held);  // refuses a rank whose base differs from rank 0's
  double evaluate(int64_t step);
  bool eval_due(int64_t step) const;
  void restore_eval_history();
  TrainState capture(bool rl_stage) const;
  void checkpoint(bool rl_stage) { write_checkpoint(capture(rl_stage), rl_stage); }
  void write_checkpoint(TrainState st, bool rl_stage);
  bool stop_agreed();              // a signal (or another rank's) or --stop-after: every rank the same answer
  bool after_step(bool rl_stage);  // true: stop here
  void stop_interrupted();         // a signal abandoned a rollout or an evaluation: checkpoint what is complete
  void train_loop();
  bool run_sft();  // true: stopped
  bool run_rl();
  void write_samples(const rl::Batch& b);
  void finish();

  const TrainOptions& o_;
  Recipe recipe_;
  RunConfig cfg_;
  std::string run_dir_, resume_from_, config_text_, device_, curriculum_json_;
  RunDirKind dir_kind_ = RunDirKind::fresh;
  std::vector<ConfigChange> changes_;         // --resume --allow-changes: what the given settings change
  std::unique_ptr<RunLock> lock_;             // rank 0: DIR/.lock for the process's life
  dist::Communicator& comm_ = dist::group();  // the trainers' ranks with [rl.async] explorer ranks
  bool root_ = comm_.is_root() && !dist::role().explorer && o_.explorer_fd < 0;
  std::shared_ptr<const tasks::Task> task_, sft_task_, rl_task_, heldout_;
  int64_t max_prompt_ = 1, max_sft_row_ = 0;  // tokens: the longest training prompt kept, SFT row (scan_inputs)
  int64_t max_eval_prompt_ = 0;               // tokens: the longest held-out prompt evaluated (0: no evaluation)
  std::unique_ptr<Transformer> policy_, reference_;
  std::unique_ptr<LoraAdapters> lora_;  // [lora]: trained on the frozen base
  bool weights_sent_ = false;           // an explorer process sent every parameter: model.path's structure only
  std::shared_ptr<const text::Tokenizer> tok_;
  std::vector<int32_t> eos_ids_;
  int32_t bos_id_ = -1;
  io::HfExportOptions ex_;
  rl::PromptCodec codec_;
  std::unique_ptr<reward::SafeReward> safe_;
  std::shared_ptr<rl::RewardSet> rewards_;  // [[reward]] terms (the task's verifier without)
  std::shared_ptr<rl::Teacher> teacher_;
  std::unique_ptr<rl::SftTrainer> sft_;
  std::unique_ptr<env::Environment> env_;  // [env]: outlives the RL trainer that talks to it
  std::unique_ptr<rl::RlTrainer> rlt_;
  std::vector<std::unique_ptr<rl::Method>> methods_;  // in hook order
  TrainState st_;
  TrainState before_step_;      // an interruptible RL step's state before it (what a stop mid-rollout checkpoints)
  bool in_rl_step_ = false;     // inside rlt_->step()
  bool interruptible_ = false;  // one process: a stop abandons rollouts and evaluations (ranks finish the step)
  int64_t checkpointed_step_ = -1;
  bool dir_created_ = false;
  report::MetricsFanout sinks_;
  std::unique_ptr<report::SamplesJsonl> samples_;
  std::unique_ptr<report::Progress> progress_;
  std::unique_ptr<LearningWatch> watch_;  // says it when RL cannot learn
  double first_eval_ = NAN, last_eval_ = NAN, sft_end_eval_ = NAN;
};

}  // namespace temper::app

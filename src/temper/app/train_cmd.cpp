#include "temper/app/train_cmd.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>

#include "temper/app/checkpoint.h"
#include "temper/app/codec.h"
#include "temper/app/fault_injection.h"
#include "temper/app/input_scan.h"
#include "temper/app/judge_setup.h"
#include "temper/app/learning_watch.h"
#include "temper/app/model_source.h"
#include "temper/app/quickstart.h"
#include "temper/app/recipe.h"
#include "temper/app/run_config.h"
#include "temper/app/run_dir.h"
#include "temper/app/run_lock.h"
#include "temper/app/run_memory.h"
#if TEMPER_WITH_SERVE
#include "temper/agent/client_rollout.h"
#include "temper/app/served_model.h"
#endif
#include "temper/core/error.h"
#include "temper/core/interrupt.h"
#include "temper/core/memory_info.h"
#include "temper/core/profile.h"
#include "temper/core/stop_signals.h"
#include "temper/core/thread_pool.h"
#include "temper/dist/communicator.h"
#include "temper/io/atomic_file.h"
#include "temper/io/peft_adapter.h"
#include "temper/model/frozen_base.h"
#include "temper/report/html_report.h"
#include "temper/report/metrics_sink.h"
#include "temper/report/progress.h"
#include "temper/report/tensorboard.h"
#include "temper/rl/async_remote.h"
#include "temper/rl/curriculum.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/methods/fair.h"
#include "temper/rl/methods/registry.h"
#include "temper/rl/rl_trainer.h"
#include "temper/rl/sft.h"
#include "temper/rl/teacher.h"
#include "temper/tasks/dataset.h"

namespace fs = std::filesystem;

namespace temper::app {

namespace {

std::atomic<int> g_signal{0};  // the first SIGINT/SIGTERM (StopSignals' thread sets it)

}  // namespace

// Data-parallel: what this rank sent through collectives during the step and the time they took
// (waiting for slower ranks included).
void add_comm_metrics(rl::Metrics& m, const dist::Communicator& comm, int64_t bytes0, double s0) {
  if (comm.size() == 1) return;
  m.emplace_back("comm_mb", static_cast<double>(comm.bytes_sent() - bytes0) / (1 << 20));
  m.emplace_back("comm_s", comm.seconds() - s0);
}

namespace {

// One `temper train` call: the run's state as members, set up and run as named steps. Data-parallel under
// mpirun every rank runs it; rank 0 alone writes the run directory (config, metrics, samples, checkpoints,
// report) and prints; the others train in step with it.
class TrainRun {
 public:
  TrainRun(const TrainOptions& o, Recipe recipe);
  int run();

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
  std::unique_ptr<rl::ConversationSource> conversation_source();
  void sync_weights();
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
  bool root_ = comm_.is_root() && !dist::role().explorer;
  std::shared_ptr<const tasks::Task> task_, sft_task_, rl_task_, heldout_;
  int64_t max_prompt_ = 1, max_sft_row_ = 0;  // tokens: the longest training prompt kept, SFT row (scan_inputs)
  std::unique_ptr<Transformer> policy_, reference_;
  std::unique_ptr<LoraAdapters> lora_;  // [lora]: trained on the frozen base
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

// The recipe: a file, the built-in quickstart, or the resumed run's resolved config; then --set and --device.
// A recipe given beside --resume stands in for the run's config (and is compared with it: check_resume_changes).
Recipe load_recipe(const TrainOptions& o) {
  Recipe recipe = !o.recipe.empty()   ? Recipe::load(o.recipe)
                  : !o.resume.empty() ? Recipe::load(recorded_config(o.resume))
                                      : Recipe::parse(quickstart_recipe(), "<built-in quickstart>");
  for (const std::string& s : o.sets) recipe.set(s);
  if (!o.device.empty()) recipe.set("model.device=\"" + o.device + "\"");
  return recipe;
}

TrainRun::TrainRun(const TrainOptions& o, Recipe recipe) : o_(o), recipe_(std::move(recipe)) {
  cfg_ = read_run_config(recipe_, rl::method_table());
  recipe_.check_all_read();
  run_dir_ = !o.resume.empty() ? o.resume : !o.out.empty() ? o.out : cfg_.run.out;
  config_text_ = recipe_.resolved_toml();
  interruptible_ = comm_.size() == 1;
}

// Everything is read and checked (recipe, run directory, task, model, rewards, memory, prompts) before the run
// directory is created or changed: a refusal leaves nothing behind. Then the steps; a stop request ends them
// with a checkpoint (after the step, or at once when it abandons rollouts or an evaluation).
int TrainRun::run() {
  choose_threads();
  inspect_run_dir();
  make_task();
  start_env();
  load_policy();
  attach_lora();
  if (cfg_.env) conversation_source();  // the chat template and tool format checked before any step (then dropped)
  make_stage_tasks();
  scan_inputs();
  make_rewards();
  make_trainers();
  resume();
  if (dist::role().explorer) {  // [rl.async] explorer rank: serves the trainers' jobs until they stop
    if (!rlt_) make_rl();
    rlt_->serve_explorer(dist::world());
    return 0;
  }
  plan_memory();
  if (stop_agreed()) {  // a signal while loading: nothing written yet
    if (root_) std::fprintf(stderr, "temper train: stopped by signal %d before the run started\n", g_signal.load());
    return 0;
  }
  create_run_dir();
  try {
    open_sinks();
    train_loop();
  } catch (const Interrupted&) {
    stop_interrupted();
  } catch (const std::bad_alloc&) {
    throw;                             // "out of memory" with the memory plan's hint (main)
  } catch (const std::exception& e) {  // temper::Error, or a filesystem error (a full disk)
    TEMPER_FAIL() << e.what() << "\n(nothing is lost: continue the run with temper train --resume " << run_dir_
                  << (latest_checkpoint(run_dir_).empty() ? ", which starts it over: it has no checkpoint yet)"
                                                          : " from its newest checkpoint)");
  }
  return 0;
}

void TrainRun::train_loop() {
  restore_eval_history();
  if (run_sft() || run_rl()) return;
  finish();
}

void TrainRun::choose_threads() {
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); n && std::atoi(n) > 1) {
    TEMPER_CHECK(dist::mpi_available())
        << "temper train was started by mpirun with " << n
        << " ranks, but this temper was built without MPI (install libopenmpi-dev: scripts/bootstrap, then rebuild)";
  }
  if (o_.threads > 0)
    set_num_threads(o_.threads);
  else if (cfg_.run.threads > 0)
    set_num_threads(static_cast<int>(cfg_.run.threads));
  else if (comm_.local_size() > 1 && !std::getenv("TEMPER_THREADS")) {  // ranks on one machine share its cores
    const int share = std::max(1, default_num_threads() / comm_.local_size()), bound = cores_bound();
    if (bound < share && root_)
      std::fprintf(stderr,
                   "temper train: warning: mpirun bound each rank to %d core(s) of the %d it could use; "
                   "run with --bind-to none, or --map-by slot:PE=%d\n",
                   bound, share, share);
    set_num_threads(std::max(1, std::min(share, bound)));
  }
}

// The run directory, read only: new (refused if it holds a run), resumed from its newest checkpoint (verified),
// or started over (a run that never wrote a checkpoint); rank 0 decides for every rank (a shared filesystem).
void TrainRun::inspect_run_dir() {
  if (root_) {
    dir_kind_ = app::inspect_run_dir(run_dir_);
    if (o_.resume.empty()) {
      TEMPER_CHECK(dir_kind_ == RunDirKind::fresh)
          << run_dir_
          << (dir_kind_ == RunDirKind::checkpointed
                  ? ": already holds a run; continue it with --resume "
                  : ": already holds a run that stopped before its first checkpoint; start it over with --resume ")
          << run_dir_ << " or choose another --out";
    } else {
      TEMPER_CHECK(dir_kind_ != RunDirKind::fresh)
          << run_dir_ << ": no run to resume (no config.toml, no checkpoint); start one with --out " << run_dir_;
      if (dir_kind_ == RunDirKind::checkpointed) resume_from_ = choose_resume_checkpoint(run_dir_, o_.fallback);
      check_resume_changes();
    }
  }
  comm_.broadcast(resume_from_, 0);
}

// --resume keeps the run's resolved config: a recipe, --set or --device that changes it is refused unless
// --allow-changes, and then listed in history.jsonl.
void TrainRun::check_resume_changes() {
  const std::string recorded = recorded_config(run_dir_);
  Recipe before = Recipe::load(recorded);
  read_run_config(before, rl::method_table());
  changes_ = config_changes(before.resolved(), recipe_.resolved());
  TEMPER_CHECK(changes_.empty() || o_.allow_changes)
      << "--resume " << run_dir_ << ": the given " << (o_.recipe.empty() ? "settings" : "recipe and settings")
      << " change the run's config (" << recorded << "): " << describe_changes(changes_)
      << ". A resumed run keeps its config; add --allow-changes to apply these (recorded in " << run_dir_
      << "/history.jsonl), or drop them";
}

// Everything checked: the directory is created (or cleared for a start-over) and locked, the config written.
void TrainRun::create_run_dir() {
  if (root_) {
    fs::create_directories(run_dir_);
    lock_ = std::make_unique<RunLock>(run_dir_);  // before anything is written: a second train on it is refused
    dir_created_ = true;
    nlohmann::json event = {{"event", resume_from_.empty() ? (o_.resume.empty() ? "start" : "restart") : "resume"},
                            {"step", st_.step},
                            {"pid", static_cast<int64_t>(getpid())}};
    if (!resume_from_.empty()) {
      if (int64_t n = remove_partial_checkpoints(run_dir_))
        std::fprintf(stderr, "temper train: removed %lld partial checkpoint(s) left by a crash\n",
                     static_cast<long long>(n));
      std::fprintf(stderr, "temper train: resuming %s from %s (step %lld)\n", run_dir_.c_str(), resume_from_.c_str(),
                   static_cast<long long>(st_.step));
      event["checkpoint"] = fs::path(resume_from_).filename().string();
      if (o_.fallback)
        for (const std::string& n : set_aside_newer_checkpoints(run_dir_, st_.step)) {
          std::fprintf(stderr, "temper train: --fallback: damaged checkpoint %s moved to %s/damaged/\n", n.c_str(),
                       run_dir_.c_str());
          event["set_aside"].push_back(n);
        }
    } else if (!o_.resume.empty()) {
      clear_run_outputs(run_dir_);
      std::fprintf(stderr, "temper train: %s stopped before its first checkpoint: starting it over from step 0\n",
                   run_dir_.c_str());
    }
    if (!changes_.empty()) {
      nlohmann::json list = nlohmann::json::array();
      for (const ConfigChange& c : changes_) list.push_back({{"key", c.key}, {"before", c.before}, {"after", c.after}});
      event["changes"] = list;
      std::fprintf(stderr, "temper train: --allow-changes: %s\n", describe_changes(changes_).c_str());
    }
    append_history(run_dir_, event);
    io::write_text_atomic((fs::path(run_dir_) / "config.toml").string(), config_text_);
    if (!curriculum_json_.empty())
      io::write_text_atomic((fs::path(run_dir_) / "curriculum.json").string(), curriculum_json_);
    std::fprintf(stderr, "%s\n", recipe_.resolved_toml(/*given_only=*/true).c_str());
    if (!cfg_.methods.empty())
      std::fprintf(stderr, "temper train: methods in hook order: %s\n", cfg_.hook_order().c_str());
    if (comm_.size() > 1)
      std::fprintf(stderr, "temper train: data-parallel over %d ranks (%s), %d thread(s) per rank\n", comm_.size(),
                   comm_.backend(), num_threads());
  }
  comm_.barrier();
}

// The task first: a recipe error in it is reported before a model is loaded.
void TrainRun::make_task() {
  task_ = tasks::make_task(cfg_.task.name, cfg_.task.params);
  for (const rl::EnabledMethod& m : cfg_.methods) {
    try {
      m.setup->check_task(*task_);
    } catch (const Error& e) {
      TEMPER_FAIL() << recipe_.source() << ": " << e.what();
    }
  }
  if (cfg_.heldout) heldout_ = tasks::make_task(cfg_.heldout->task, cfg_.heldout->params);
}

// [env]: the environment started before the model loads (a worker that cannot start stops the run here,
// naming its command).
void TrainRun::start_env() {
  if (!cfg_.env) return;
  // [rl.async] explorer ranks: comm_ is the explorers' group, each rank conversing its block of a round alone.
  TEMPER_CHECK(comm_.size() == 1 || dist::role().explorer)
      << "[env]: multi-turn rollouts run in one process (data-parallel: not yet; [rl.async] explorer ranks converse)";
  env_ = env::make_environment(cfg_.env->options);
  env_->start();
}

// Model and tokenizer: a built-in shape with random weights and the byte-level tokenizer (the quickstart's own
// models, or a real model's shape for measuring steps on a GPU), or a model path; on its device.
void TrainRun::load_policy() {
  const ModelSection& m = cfg_.model;
  // [lora] base = "bf16" / "int4": the block products are held as they load or are drawn (the f32 model is never
  // whole; attach_lora's hold_base then finds the base held).
  const LoraBase held = cfg_.lora ? cfg_.lora->config.base : LoraBase::f32;
  if (m.path.empty()) {
    const std::string presets = join_words({std::begin(kTrainPresets), std::end(kTrainPresets)}, ", ");
    TEMPER_CHECK(std::find(std::begin(kTrainPresets), std::end(kTrainPresets), m.preset) != std::end(kTrainPresets))
        << recipe_.source() << ": model.preset must be one of " << presets << " when model.path is empty, got '"
        << m.preset << "'";
    ModelConfig mc = model_config_preset(m.preset);
    if (m.context > 0) mc.max_position_embeddings = m.context;
    policy_ = std::make_unique<Transformer>(mc);
    policy_->plan_held_base(held);
    policy_->init_random(m.seed);
    tok_ = std::make_shared<text::Tokenizer>(byte_tokenizer());
    eos_ids_ = {tok_->eos_id()};
  } else {
    LoadedModel lm = load_model(m.path, held);
    policy_ = std::move(lm.model);
    tok_ = lm.tokenizer;
    eos_ids_ = lm.eos_ids;
    bos_id_ = lm.bos_id;
    TEMPER_CHECK(tok_) << m.path << ": no tokenizer (tokenizer.json or GGUF tokenizer metadata) — RL needs one";
  }
  policy_->set_precision(m.precision == "bf16" ? kernels::Precision::bf16 : kernels::Precision::f32);
  policy_->set_recompute(m.recompute);  // model.recompute: training passes keep only each layer's input
  sync_weights();
  // In a data-parallel run "cuda" means this rank's local GPU.
  device_ = m.device;
  if (comm_.size() > 1 && device_ == "cuda")
    device_ = "cuda:" + std::to_string(dist::local_rank() % std::max(1, cuda_devices()));
  if (device_ != "cpu") attach_device(*policy_, device_);
  ex_.eos_ids = eos_ids_;
  ex_.bos_id = bos_id_;
  ex_.tokenizer_json_text = tok_->to_hf_json();
  ex_.tokenizer_config_json_text = tok_->to_hf_config_json();
  codec_ = make_codec(tok_, eos_ids_, m.prompt_format, m.system_prompt, m.user_template);
}

// [lora]: adapters on the frozen base, fresh (B = 0: the policy starts as the base) or from a PEFT directory
// whose config must be the recipe's.
void TrainRun::attach_lora() {
  if (!cfg_.lora) return;
  const LoraSection& l = *cfg_.lora;
  if (l.init.empty()) {
    lora_ = std::make_unique<LoraAdapters>(policy_->config(), l.config);
    lora_->init(cfg_.model.seed);
  } else {
    lora_ = io::read_peft_adapter(l.init, policy_->config());
    const LoraConfig& c = lora_->config();
    TEMPER_CHECK(c.rank == l.config.rank && c.alpha == l.config.alpha && c.targets == l.config.targets &&
                 c.use_rslora == l.config.use_rslora)
        << recipe_.source() << ": lora.init = " << l.init << " holds adapters of rank " << c.rank << ", alpha "
        << c.alpha << " on other targets or scale than [lora] gives (rank " << l.config.rank << ", alpha "
        << l.config.alpha << "); make [lora] match the adapter";
    // An adapter trained on a bf16 / int4 base continues on that base only (the values it was fitted to); an f32
    // run may start from any adapter (as load_peft_adapter_weights rules on resume).
    const LoraBase trained = io::read_peft_adapter_config(l.init).base;
    TEMPER_CHECK(l.config.base == LoraBase::f32 || trained == l.config.base)
        << recipe_.source() << ": lora.init = " << l.init << " was trained on a " << lora_base_name(trained)
        << " base; the recipe's is " << lora_base_name(l.config.base) << " (lora.base)";
    lora_->set_base(l.config.base);
  }
  if (comm_.size() > 1) comm_.broadcast(lora_->params(), lora_->size(), 0);
  policy_->attach_lora(lora_.get());
  policy_->set_base_frozen(true);
  if (root_)
    std::fprintf(stderr,
                 "temper train: LoRA r=%lld alpha=%g on %zu product(s) per layer: %lld trainable parameters "
                 "(%.2f%% of %lld)%s\n",
                 static_cast<long long>(lora_->rank()), lora_->config().alpha, lora_->config().targets.size(),
                 static_cast<long long>(lora_->size()),
                 100.0 * static_cast<double>(lora_->size()) / static_cast<double>(policy_->num_params()),
                 static_cast<long long>(policy_->num_params()), l.init.empty() ? "" : (", from " + l.init).c_str());
}

Transformer* TrainRun::reference() const {
  return reference_ ? reference_.get() : lora_ ? policy_.get() : nullptr;
}

// Every rank starts from rank 0's weights (initialisation and loading are deterministic; this makes it so
// regardless of the filesystem or the build), except a bf16/int4 base held as it loaded: each rank holds what it
// read from model.path, which must be the same file on every node.
void TrainRun::sync_weights() {
  if (comm_.size() == 1) return;
  if (const FrozenBase* held = policy_->held_base()) {  // held as loaded: each rank quantised the same weights
    for (const ParamEntry& e : policy_->layout().entries())
      if (!held->covers(e.offset, e.numel())) comm_.broadcast(policy_->params() + e.offset, e.numel(), 0);
  } else {
    comm_.broadcast(policy_->params(), policy_->flat_size(), 0);
  }
  policy_->params_updated();
  if (lora_) comm_.broadcast(lora_->params(), lora_->size(), 0);
}

// [curriculum]: each stage its own set, and the SFT stage's module coverage counted before any training.
void TrainRun::make_stage_tasks() {
  sft_task_ = rl_task_ = task_;
  if (!cfg_.curriculum) return;
  const rl::CurriculumConfig& cc = *cfg_.curriculum;
  const rl::CurriculumPlan& plan = cfg_.plan;
  tasks::TaskParams sp = cfg_.task.params, rp = cfg_.task.params;
  sp["train_set"] = cc.sft_set;
  rp["train_set"] = cc.rl_set;
  sft_task_ = tasks::make_task(cfg_.task.name, sp);
  rl_task_ = tasks::make_task(cfg_.task.name, rp);
  TEMPER_CHECK(!sft_task_->module_inventory().empty())
      << recipe_.source() << ": [curriculum] needs a compositional task that names its modules (compose), got '"
      << cfg_.task.name << "'";
  rl::Coverage cov = rl::count_coverage(*sft_task_, std::min<int64_t>(plan.sft_prompts, 200000));
  if (root_) {
    std::fprintf(stderr, "temper train: curriculum %lld:%lld in %s over %lld: %s\n",
                 static_cast<long long>(cc.sft_parts), static_cast<long long>(cc.rl_parts),
                 std::string(enum_name(rl::kBudgetUnitNames, cc.budget)).c_str(), static_cast<long long>(cc.total),
                 plan.describe().c_str());
    std::fprintf(stderr, "temper train: SFT set '%s' covers %s\n", cc.sft_set.c_str(), cov.describe().c_str());
    nlohmann::json j;
    j["ratio"] = {cc.sft_parts, cc.rl_parts};
    j["budget"] = std::string(enum_name(rl::kBudgetUnitNames, cc.budget));
    j["total"] = cc.total;
    j["sft"] = {
        {"set", cc.sft_set}, {"steps", plan.sft_steps}, {"prompts", plan.sft_prompts}, {"updates", plan.sft_updates}};
    j["rl"] = {
        {"set", cc.rl_set}, {"steps", plan.rl_steps}, {"prompts", plan.rl_prompts}, {"updates", plan.rl_updates}};
    j["coverage"] = {{"problems", cov.problems}, {"modules", cov.count}, {"missing", cov.missing}};
    curriculum_json_ = j.dump(2) + "\n";  // written with the run directory
  }
  TEMPER_CHECK(cov.missing.empty() || !cc.require_coverage || plan.sft_prompts == 0)
      << recipe_.source() << ": the SFT stage never shows module(s) " << join_words(cov.missing, ", ") << " in its "
      << cov.problems
      << " problems; raise curriculum.total or the SFT share, or set curriculum.require_coverage = false (a "
         "deliberately "
         "held-out module)";
}

// The reward: the task's verifier and the [[reward]] terms, started now (reward programs' workers answer their
// greeting) so that one that cannot run stops the run before its first step.
void TrainRun::make_rewards() {
  reward::SafeRewardOptions safe_opt;
  safe_opt.timeout_s = cfg_.task.reward_timeout_s;
  safe_ = std::make_unique<reward::SafeReward>(safe_opt);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> env = {"TEMPER_RUN_DIR=" + fs::absolute(run_dir_).string(),
                                  "TEMPER_RANK=" + std::to_string(comm_.rank())};
  if (!ec) env.push_back("TEMPER_BIN=" + self.string());
  const bool builtin = cfg_.rewards.empty() || std::any_of(cfg_.rewards.begin(), cfg_.rewards.end(),
                                                           [](const rl::RewardTermConfig& t) { return t.builtin; });
  try {
    // Rows without an answer score 0 under the task's checker whatever the completion: refused where it scores
    // (RL with a builtin term; held-out evaluation, which always uses it).
    // With [env] the environment scores the conversations, and held-out evaluation is skipped.
    if (builtin && cfg_.rl_steps() > 0 && !cfg_.env) tasks::require_answers(*rl_task_, "rl", {tasks::Split::train});
    if (!cfg_.env)
      tasks::require_answers(*task_, "eval (held-out evaluation scores with the task's checker)", {tasks::Split::eval});
    rewards_ = std::make_shared<rl::RewardSet>(rl_task_, *safe_, cfg_.rewards, install_judges(device_), env,
                                               cfg_.task.reward_isolation);
    rewards_->start();
  } catch (const Error& e) {
    TEMPER_FAIL() << recipe_.source() << ": " << e.what();
  }
}

// The teacher, the SFT trainer, the frozen reference and the methods (the RL trainer waits for RL).
void TrainRun::make_trainers() {
  const ModelSection& m = cfg_.model;
  if (cfg_.teacher.source == "gold")
    teacher_ = rl::make_gold_teacher();
  else if (cfg_.teacher.source == "dataset")
    teacher_ = rl::make_dataset_teacher();
  else if (cfg_.teacher.source == "model") {
    LoadedModel tm = load_model(cfg_.teacher.path);
    TEMPER_CHECK(tm.tokenizer) << cfg_.teacher.path
                               << ": the teacher has no tokenizer (tokenizer.json or GGUF tokenizer metadata)";
    rl::PromptCodec tc = make_codec(tm.tokenizer, tm.eos_ids, m.prompt_format, m.system_prompt, m.user_template);
    auto mt = std::make_shared<rl::ModelTeacher>(std::move(tm.model), std::move(tc), cfg_.teacher.model);
    mt->set_communicator(&comm_);
    teacher_ = mt;
  }
  sft_ = std::make_unique<rl::SftTrainer>(*policy_, sft_task_, codec_, cfg_.sft, teacher_.get());
  sft_->trainer().optimizer().set_communicator(&comm_);
  if (lora_) sft_->trainer().optimizer().train_adapters(lora_.get());
  TEMPER_CHECK(!cfg_.run.shard_optimizer || device_ == "cpu")
      << recipe_.source() << ": run.shard_optimizer runs on the CPU (model.device = \"" << device_
      << "\": not yet); set it false";
  if (cfg_.run.shard_optimizer && comm_.size() > 1) sft_->trainer().optimizer().set_sharded(true);
  // The frozen copy of the policy as RL starts: the KL term's reference, and what methods read as the starting
  // policy (discriminator embeddings, RCSD's initial teacher); on a device it runs there too (a KL of 0 at first).
  const bool needs_reference =
      cfg_.rl.loss.kl_coef > 0 || std::any_of(cfg_.methods.begin(), cfg_.methods.end(),
                                              [](const rl::EnabledMethod& e) { return e.setup->needs().reference; });
  if (needs_reference && !lora_) reference_ = std::make_unique<Transformer>(policy_->config());
  if (reference_ && device_ != "cpu") attach_device(*reference_, device_);
  for (const rl::EnabledMethod& e : cfg_.methods) methods_.push_back(e.setup->make({teacher_, m.seed}));
}

// [env]: temper runs the turns (EnvRollout), or the user's agent does through a loopback OpenAI endpoint.
std::unique_ptr<rl::ConversationSource> TrainRun::conversation_source() {
  const EnvSection& e = *cfg_.env;
  if (e.mode == "steps")
    return std::make_unique<rl::EnvRollout>(
        *env_, make_conversation_codec(tok_, eos_ids_, cfg_.model.system_prompt, e.tool_format), e.rollout);
#if TEMPER_WITH_SERVE
  agent::ClientRolloutConfig cc;
  cc.threads = e.rollout.threads;
  cc.failure_reward = e.rollout.failure_reward;
  const ModelConfig& mc = policy_->config();
  return std::make_unique<agent::ClientRollout>(
      *env_, make_served_model("policy", tok_, eos_ids_, "", e.tool_format, mc, cfg_.rl.max_seqs, 0), cc);
#else
  TEMPER_FAIL() << recipe_.source() << ": env.mode = \"client\" needs temper built with cpp-httplib "
                << "(scripts/bootstrap installs libcpp-httplib-dev)";
#endif
}

void TrainRun::make_rl() {
  if (reference_) reference_->set_precision(policy_->precision());
  std::vector<rl::Method*> ms;
  for (auto& m : methods_) ms.push_back(m.get());
  rlt_ = std::make_unique<rl::RlTrainer>(*policy_, rl_task_, codec_, cfg_.rl, rewards_, ms, reference());
  if (dist::role().first_explorer == 0)
    rlt_->set_communicator(&comm_);
  else if (!dist::role().explorer)  // [rl.async] explorer ranks: comm_ is the trainers' group
    rlt_->use_explorer_ranks(dist::world(), comm_, dist::role().first_explorer);
  if (lora_) rlt_->optimizer().train_adapters(lora_.get());
  if (cfg_.run.shard_optimizer && comm_.size() > 1) rlt_->optimizer().set_sharded(true);
  rlt_->set_interruptible(interruptible_);
  rlt_->set_planned_steps(cfg_.rl_steps());  // [rl.async]: nothing explored past the last step
  if (env_) rlt_->set_environment(conversation_source());
}

// Resume: weights, the optimiser of the stage, cursors, the methods' state.
void TrainRun::resume() {
  if (resume_from_.empty()) return;
  st_ = read_train_state(resume_from_);
  if (st_.stage == "rl") {
    make_rl();
    load_checkpoint(resume_from_, *policy_, &rlt_->optimizer(), reference_.get(), lora_.get());
    rlt_->restore(st_.rl_steps, st_.rl_cursor);
    if (auto it = st_.methods.find("speculative"); it != st_.methods.end()) rlt_->load_speculative_state(it->second);
    if (auto it = st_.methods.find("async"); it != st_.methods.end()) rlt_->load_async_state(it->second);
    for (auto& m : methods_) {
      auto it = st_.methods.find(m->name());
      TEMPER_CHECK(it != st_.methods.end() || m->save_state().empty())
          << resume_from_ << "/trainer_state.json: no state for method '" << m->name()
          << "' (the checkpoint was written without it; resume with the recipe it was written with)";
      if (it != st_.methods.end()) m->load_state(it->second);
    }
  } else {
    load_checkpoint(resume_from_, *policy_, &sft_->trainer().optimizer(), nullptr, lora_.get());
    sft_->restore(st_.sft_cursor);
  }
  sync_weights();
  checkpointed_step_ = st_.step;
}

// Every prompt the run sends, in tokens, before the first step (app/input_scan.h): training prompts longer than
// the context leaves for a completion (or rl.max_prompt_tokens) and held-out ones are left out and counted
// (task.long_prompts = "skip") or refused naming the key that fixes it (they used to stop the run at the step
// that drew them); SFT rows without a gold solution are refused. The stages' tasks and the evaluated ones become
// the filtered ones. [env]: the task's prompts stand for the environment's first ones; evaluation is skipped.
void TrainRun::scan_inputs() {
  ScanOptions o;
  o.context = policy_->config().max_position_embeddings;
  o.max_prompt_tokens = cfg_.rl_steps() > 0 ? cfg_.rl.max_prompt_tokens : 0;
  o.context_key = cfg_.model.path.empty() ? "model.context" : "";
  o.policy = cfg_.task.long_prompts;
  o.source = recipe_.source();
  const bool rl = cfg_.rl_steps() > 0, sft = cfg_.sft_steps() > 0, sft_gold = sft && !cfg_.sft.teacher_completions,
             eval = !cfg_.env;
  std::vector<std::string> said;
  auto scan = [&](std::shared_ptr<const tasks::Task>& t, bool train, bool held_out, bool gold) {
    o.train = train, o.eval = held_out, o.sft = gold;
    ScanOutcome s = scan_prompts(t, codec_, o);
    t = s.task;
    if (!s.message.empty()) said.push_back(s.message);
    return s;
  };
  if (!cfg_.curriculum) {
    const ScanOutcome s = scan(task_, rl || sft, eval, sft_gold);
    sft_task_ = rl_task_ = task_;
    max_prompt_ = s.train.longest, max_sft_row_ = s.train.longest_row;
  } else {  // each stage its own set; held-out problems from the task
    const ScanOutcome r = scan(rl_task_, rl, false, false), f = scan(sft_task_, sft, false, sft_gold);
    if (eval) scan(task_, false, true, false);
    max_prompt_ = std::max(r.train.longest, f.train.longest), max_sft_row_ = f.train.longest_row;
  }
  if (heldout_ && eval) scan(heldout_, false, true, false);
  if (root_)
    for (const std::string& m : said) std::fprintf(stderr, "temper train: %s\n", m.c_str());
}

// Memory plan: weights, gradients, AdamW moments, the KV pool, and the activation arena reserved now for the
// largest micro-batch (SFT rows of prompt + gold, RL rows of prompt + max_new; scan_inputs measured the prompts
// and the SFT rows; with teacher completions the first 64 golds stand for the rest).
void TrainRun::plan_memory() {
  const int64_t ctx = policy_->config().max_position_embeddings;
  const int64_t max_prompt = std::max<int64_t>(1, max_prompt_);
  int64_t max_gold = 1;
  const int64_t tsize = sft_task_->size(tasks::Split::train);
  for (uint64_t i = 0;
       cfg_.sft_steps() > 0 && max_sft_row_ == 0 && i < 64 && (tsize < 0 || static_cast<int64_t>(i) < tsize); ++i) {
    tasks::Problem p = sft_task_->problem(tasks::Split::train, i);
    if (!p.gold_solution.empty())
      max_gold = std::max<int64_t>(max_gold, static_cast<int64_t>(codec_.encode_completion(p.gold_solution).size()));
  }
  int64_t tokens = 1, seq = 1;
  if (cfg_.sft_steps() > 0) {
    seq = std::min(ctx, max_sft_row_ > 0 ? max_sft_row_ : max_prompt + max_gold);
    int64_t rows =
        cfg_.sft.train.micro_batch > 0 ? std::min(cfg_.sft.train.micro_batch, cfg_.sft.batch) : cfg_.sft.batch;
    tokens = rows * seq;
  }
  if (cfg_.rl_steps() > 0) {
    int64_t T = std::min(ctx, max_prompt + cfg_.rl.max_new), batch = cfg_.rl.prompts_per_step * cfg_.rl.group_size;
    int64_t rows = cfg_.rl.micro_batch > 0 ? std::min(cfg_.rl.micro_batch, batch) : batch;
    tokens = std::max(tokens, rows * T);
    seq = std::max(seq, T);
  }
  RunMemoryFacts f;  // checked before the arena is reserved: a run that cannot fit is refused, not killed
  f.device = device_, f.precision = policy_->precision(), f.tokens = tokens, f.seq = seq;
  f.ranks = comm_.size(), f.local_ranks = comm_.local_size(), f.reference = reference_ != nullptr;
  f.lora = lora_.get(), f.print = root_, f.source = recipe_.source();
  check_run_memory(cfg_, policy_->config(), f);
  policy_->plan(std::max(tokens, seq), seq);
}

// Sinks (rank 0 writes; a resume truncates them to the checkpoint's step) and the progress line.
void TrainRun::open_sinks() {
  const std::string mpath = (fs::path(run_dir_) / "metrics.jsonl").string(),
                    spath = (fs::path(run_dir_) / "samples.jsonl").string();
  if (!root_) {
  } else if (resume_from_.empty()) {
    sinks_.add(report::JsonlMetrics::create(mpath));
    sinks_.add(std::make_unique<report::TensorBoardWriter>(run_dir_));
    samples_ = report::SamplesJsonl::create(spath);
  } else {
    sinks_.add(report::JsonlMetrics::resume_after_step(mpath, st_.step));
    report::TensorBoardWriter::Options to;
    to.resumed_from_step = st_.step;
    sinks_.add(std::make_unique<report::TensorBoardWriter>(run_dir_, to));
    samples_ = report::SamplesJsonl::resume_after_step(spath, st_.step);
  }
  static std::ostream quiet(nullptr);  // other ranks: no progress line
  report::ProgressOptions po;
  if (!root_) po.out = &quiet, po.tty = 0;
  progress_ = std::make_unique<report::Progress>(cfg_.sft_steps() + cfg_.rl_steps(), st_.step, po);
}

// Held-out evaluation (every rank generates its share), the held-out family beside it.
double TrainRun::evaluate(int64_t step) {
  if (cfg_.env) {  // conversations: the env/ metrics of each step stand for it
    if (step == 0 && root_)
      progress_->message(
          "[env]: held-out evaluation of conversations is not there yet; env/solved and env/turns "
          "report each step");
    return NAN;
  }
  if (task_->size(tasks::Split::eval) == 0) {  // a dataset without eval_path or eval_fraction: said once
    if (step == 0 && root_)
      progress_->message(
          "no held-out problems (task.params.eval_path or eval_fraction gives some): evaluation is "
          "skipped");
    return NAN;
  }
  InterruptScope abandon_on_stop(interruptible_);
  fault_signal(step, "eval");
  rl::EvalResult e = rl::evaluate(*policy_, task_, codec_, cfg_.eval, *safe_, &comm_);
  report::MetricValues v = {
      {"eval_accuracy", e.accuracy}, {"eval_len_mean", e.mean_len}, {"eval_len_correct_mean", e.mean_len_correct}};
  for (auto& [k, p] : e.pass_at_k) v.emplace_back("eval_pass_at_" + std::to_string(k), p);
  for (auto& [d, x] : e.by_difficulty) v.emplace_back("eval_accuracy_d" + std::to_string(d), x.second);
  if (!e.solved_within.empty())
    v.emplace_back("eval_revised_accuracy", e.solved_within.back());  // within eval.revisions
  for (size_t k = 0; k < e.objective_means.size(); ++k)
    v.emplace_back("eval_" + rl::fair_metric_name(cfg_.eval.objectives[k]), e.objective_means[k]);
  if (!e.objective_means.empty()) v.emplace_back("eval_welfare", e.welfare);
  if (heldout_) {
    rl::EvalResult h = rl::evaluate(*policy_, heldout_, codec_, cfg_.eval, *safe_, &comm_);
    v.emplace_back("heldout_accuracy", h.accuracy);
    v.emplace_back("heldout_len_mean", h.mean_len);
  }
  sinks_.write(step, "eval", v);
  char line[160];
  std::snprintf(line, sizeof line,
                "eval @ step %lld: accuracy %.3f over %lld held-out problems (mean length %.1f tokens)",
                static_cast<long long>(step), e.accuracy, static_cast<long long>(e.problems), e.mean_len);
  progress_->message(line);
  if (std::isnan(first_eval_)) first_eval_ = e.accuracy;
  last_eval_ = e.accuracy;
  return e.accuracy;
}

// The trainers' state after the last complete step.
TrainState TrainRun::capture(bool rl_stage) const {
  TrainState st = st_;
  st.stage = rl_stage ? "rl" : "sft";
  if (!rl_stage) st.sft_cursor = sft_->cursor();
  if (rl_stage) {
    st.rl_steps = rlt_->steps_done();
    st.rl_cursor = rlt_->cursor();
    st.methods.clear();
    for (auto& m : methods_)
      if (std::string state = m->save_state(); !state.empty()) st.methods[m->name()] = state;
    if (std::string state = rlt_->speculative_state(); !state.empty()) st.methods["speculative"] = state;
    if (std::string state = rlt_->async_state(); !state.empty()) st.methods["async"] = state;  // batches explored ahead
  }
  const Optimizer& opt = rl_stage ? rlt_->optimizer() : sft_->trainer().optimizer();
  st.opt_steps = opt.steps_done();
  st.opt_skipped = opt.skipped();
  return st;
}

void TrainRun::write_checkpoint(TrainState st, bool rl_stage) {
  Optimizer& opt = rl_stage ? rlt_->optimizer() : sft_->trainer().optimizer();
  opt.gather_moments(0);  // a sharded optimiser's full moments to the writer (every rank takes part)
  if (!root_) return;
  st_.stage = st.stage;
  sinks_.flush();
  samples_->flush();
  std::string dir = (fs::path(run_dir_) / "checkpoints" / ("step-" + std::to_string(st.step))).string();
  save_checkpoint(dir, *policy_, ex_, &opt, rl_stage ? reference_.get() : nullptr, st, config_text_,
                  fault_kill_in_checkpoint(st.step), lora_.get());
  opt.drop_gathered();
  prune_checkpoints(run_dir_, cfg_.run.keep_last);
  checkpointed_step_ = st.step;
  progress_->message("checkpoint " + dir);
}

// Evaluations run at step 0, every eval.every steps, at the end of SFT when RL follows, and at the end.
bool TrainRun::eval_due(int64_t step) const {
  const int64_t sft = cfg_.sft_steps(), total = sft + cfg_.rl_steps();
  return step == 0 || (cfg_.eval_every > 0 && step % cfg_.eval_every == 0) || (sft > 0 && step == sft && total > sft) ||
         step == total;
}

// The run's evaluations so far, from metrics.jsonl (for the summary: "at the start" is the run's, not this
// process's), and the one due at this step when a stop abandoned it (or the run is new): run first. Every rank
// follows rank 0's answer.
void TrainRun::restore_eval_history() {
  std::string missing = "0";
  if (root_) {
    std::map<int64_t, double> done;
    const fs::path m = fs::path(run_dir_) / "metrics.jsonl";
    if (!resume_from_.empty() && fs::exists(m))
      for (const report::MetricsRow& r : report::read_metrics_jsonl(m.string()))
        for (const auto& [k, v] : r.values)
          if (r.kind == "eval" && k == "eval_accuracy") done[r.step] = v;
    const int64_t sft = cfg_.sft_steps();
    if (auto it = done.find(0); it != done.end()) first_eval_ = it->second;
    if (auto it = done.find(sft); it != done.end() && sft > 0) sft_end_eval_ = it->second;
    if (!done.empty()) last_eval_ = done.rbegin()->second;
    missing = eval_due(st_.step) && !done.count(st_.step) ? "1" : "0";
  }
  comm_.broadcast(missing, 0);
  if (missing == "1") {
    double a = evaluate(st_.step);
    if (st_.step == cfg_.sft_steps() && cfg_.sft_steps() > 0) sft_end_eval_ = a;
  }
}

// A stop: the first signal (any rank's) or --stop-after; ranks agree so that they stop after the same step.
bool TrainRun::stop_agreed() {
  bool stop = interrupt_requested() || (o_.stop_after > 0 && st_.step >= o_.stop_after);
  if (comm_.size() > 1) {
    double any = stop ? 1 : 0;
    comm_.allreduce_max(&any, 1);
    stop = any > 0;
  }
  return stop;
}

// After each step: evaluation when due, then the checkpoint (every N steps, at the end, or when asked to stop):
// everything a step writes is written before its checkpoint, so a resume from it repeats nothing and misses
// nothing. A stop that arrives while the checkpoint is written ends the run right after it.
bool TrainRun::after_step(bool rl_stage) {
  const bool last = st_.step == cfg_.sft_steps() + cfg_.rl_steps();
  if (eval_due(st_.step)) {
    double a = evaluate(st_.step);
    if (!rl_stage && st_.sft_steps == cfg_.sft_steps() && cfg_.rl_steps() > 0) sft_end_eval_ = a;
  }
  bool stop = stop_agreed();
  if ((cfg_.run.checkpoint_every > 0 && st_.step % cfg_.run.checkpoint_every == 0) || last || stop) {
    checkpoint(rl_stage);
    if (!stop && !last) stop = stop_agreed();
  }
  if (stop && !last && root_) {
    progress_->finish();
    const int sig = g_signal.load();
    std::fprintf(
        stderr,
        "temper train: stopped %s after step %lld; checkpoint written. Continue with: temper train --resume %s\n",
        sig                                              ? ("by signal " + std::to_string(sig)).c_str()
        : o_.stop_after > 0 && st_.step >= o_.stop_after ? "(--stop-after)"
                                                         : "(another rank was signalled)",
        static_cast<long long>(st_.step), run_dir_.c_str());
  }
  return stop && !last;
}

// A signal abandoned an RL step's rollouts or an evaluation (one process only): the last complete step is
// checkpointed (an RL step's state from before it; an evaluation is run again on resume) unless it already is.
void TrainRun::stop_interrupted() {
  if (!root_) return;
  progress_->finish();
  const char* what = in_rl_step_ ? "the rollouts of step" : "the evaluation at step";
  const int64_t shown = in_rl_step_ ? st_.step + 1 : st_.step;
  if (st_.step > 0 && checkpointed_step_ != st_.step)
    write_checkpoint(in_rl_step_ ? before_step_ : capture(rlt_ != nullptr), rlt_ != nullptr);
  std::fprintf(stderr,
               "temper train: stopped by signal %d during %s %lld (abandoned: it runs again on resume); %s. "
               "Continue with: temper train --resume %s\n",
               g_signal.load(), what, static_cast<long long>(shown),
               st_.step == 0 ? "no step was complete, the run starts over"
                             : ("checkpoint step-" + std::to_string(st_.step) + " holds the run").c_str(),
               run_dir_.c_str());
}

bool TrainRun::run_sft() {
  while (st_.sft_steps < cfg_.sft_steps()) {
    const int64_t comm_bytes = comm_.bytes_sent();
    const double comm_s = comm_.seconds();
    rl::Metrics m = sft_->step();
    ++st_.step;
    fault_signal(st_.step, "end");
    ++st_.sft_steps;
    m.emplace_back("rss_mb", resident_mib());
    add_comm_metrics(m, comm_, comm_bytes, comm_s);
    sinks_.write(st_.step, "sft", m);
    progress_->update(st_.step, m);
    if (after_step(false)) return true;
  }
  return false;
}

bool TrainRun::run_rl() {
  if (cfg_.rl_steps() == 0) return false;
  if (!rlt_) {
    if (reference_) {  // the frozen KL reference: the policy as RL starts
      std::copy(policy_->params(), policy_->params() + policy_->flat_size(), reference_->params());
      reference_->params_updated();
    }
    make_rl();
  }
  watch_ = std::make_unique<LearningWatch>(cfg_.rl.max_new);
  while (rlt_->steps_done() < cfg_.rl_steps()) {
    const int64_t comm_bytes = comm_.bytes_sent();
    const double comm_s = comm_.seconds();
    if (interruptible_) before_step_ = capture(true);
    in_rl_step_ = true;
    fault_signal(st_.step + 1, "rollout");
    rl::Metrics m = rlt_->step();
    in_rl_step_ = false;
    ++st_.step;
    fault_signal(st_.step, "end");
    m.emplace_back("rss_mb", resident_mib());
    add_comm_metrics(m, comm_, comm_bytes, comm_s);
    sinks_.write(st_.step, "train", m);
    for (const std::string& w : watch_->observe(rlt_->steps_done(), m))
      if (root_) progress_->message("temper train: " + w);
    if (samples_ && cfg_.run.samples_every > 0 && rlt_->steps_done() % cfg_.run.samples_every == 0)
      write_samples(rlt_->last_batch());
    progress_->update(st_.step, m);
    if (after_step(true)) return true;
  }
  return false;
}

// The first sample of each of the first groups (one per prompt), then more of each if there are fewer groups;
// then one sample of each kind of prompt a method built (ZPPO's candidate questions, REVES's revisions: ids
// "<id>#<kind>", after the task's groups), so the report shows what the policy was asked.
void TrainRun::write_samples(const rl::Batch& b) {
  const size_t n = b.traj.size(), per_step = static_cast<size_t>(cfg_.run.samples_per_step);
  const size_t stride =
      std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(cfg_.rl.group_size), n / std::max<size_t>(1, per_step)));
  std::set<const rl::Trajectory*> written;
  auto write_sample = [&](const rl::Trajectory& t) {
    if (!written.insert(&t).second) return;
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    report::Sample s;
    s.step = st_.step;
    s.prompt = p.shown();
    s.completion = t.text;
    s.reward = t.reward;
    s.answer = p.answer;
    s.correct = t.correct;
    for (size_t k = 0; k < t.reward_terms.size() && k < cfg_.rewards.size(); ++k)
      s.terms.emplace_back(cfg_.rewards[k].name, t.reward_terms[k]);
    s.components = t.reward_components;
    s.info = t.reward_info;
    samples_->write(s);
  };
  for (size_t i = 0; i < std::min(per_step, n); ++i) write_sample(b.traj[(i * stride) % n]);
  std::set<std::string> kinds;
  for (const rl::Trajectory& t : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    const size_t hash = p.id.rfind('#');
    if (p.index >= 0 || t.lineage.parent >= 0 || hash == std::string::npos || !kinds.insert(p.id.substr(hash)).second)
      continue;
    write_sample(t);
  }
}

void TrainRun::finish() {
  progress_->finish();
  if (!root_) return;
  if (profile_enabled()) {  // TEMPER_PROFILE=1: seconds in each phase over the whole run (scopes nest)
    std::fprintf(stderr, "temper train: profile (seconds over the run; nested phases overlap):");
    for (auto& [k, v] : profile_report()) std::fprintf(stderr, " %s %.3f", k.c_str(), v);
    std::fprintf(stderr, "\n");
  }
  std::string html = report::write_html_report(run_dir_);
  if (std::isnan(first_eval_)) {
    std::fprintf(stderr, "temper train: done, %lld steps (no held-out evaluation). Report: %s\n",
                 static_cast<long long>(st_.step), html.c_str());
    return;
  }
  std::fprintf(stderr, "temper train: done, %lld steps. Held-out accuracy: %.3f at the start",
               static_cast<long long>(st_.step), first_eval_);
  if (!std::isnan(sft_end_eval_)) std::fprintf(stderr, ", %.3f after SFT (RL starts)", sft_end_eval_);
  std::fprintf(stderr, ", %.3f at the end. Report: %s\n", last_eval_, html.c_str());
}

}  // namespace

int train(const TrainOptions& o) {
  if (o.list_keys) {
    std::fputs(list_keys_markdown(rl::method_table()).c_str(), stdout);
    return 0;
  }
  if (const char* p = std::getenv("TEMPER_PROFILE"); p && std::string(p) == "1") profile_enable(true);
  // First, before any thread exists (OpenMP's team, MPI's, the BLAS's inherit the mask): SIGINT/SIGTERM are taken
  // on one waiting thread, never by a handler interrupting library code (a handler during oneDNN's sgemm
  // corrupted its heap). The first asks for a stop; more (a burst, a second Ctrl-C) change nothing.
  StopSignals signals;
  signals.start(
      [](int sig) {
        g_signal = sig;
        request_interrupt();
        std::fprintf(stderr, "\ntemper train: %s: stopping (a checkpoint is written first; SIGKILL abandons it)\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
      },
      [](int) {});
  Recipe recipe = load_recipe(o);
  rl::enter_async_roles(Recipe(recipe).get_int("rl.async.explorer_ranks", 0));  // before TrainRun takes its group
  TrainRun run(o, std::move(recipe));
  return run.run();
}

}  // namespace temper::app

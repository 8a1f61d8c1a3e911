// TrainRun (train_run.h): the task and its stages, the prompts scanned, the environment, the rewards, the
// trainers and methods.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "temper/app/codec.h"
#include "temper/app/input_scan.h"
#include "temper/app/judge_setup.h"
#include "temper/app/model_source.h"
#include "temper/app/train_run.h"
#if TEMPER_WITH_SERVE
#include "temper/agent/client_rollout.h"
#include "temper/app/served_model.h"
#endif
#include "temper/core/error.h"
#include "temper/rl/curriculum.h"
#include "temper/tasks/dataset.h"

namespace fs = std::filesystem;

namespace temper::app {

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
  // A procedural stream is measured on its first rows: as many as an evaluation sends (up to 4096), so the memory
  // plan knows the longest held-out prompt; past that it keeps the evaluation's whole KV pool.
  o.stream_rows = std::max<int64_t>(o.stream_rows, std::min<int64_t>(cfg_.eval.problems, 4096));
  bool eval_unmeasured = false;
  auto scan = [&](std::shared_ptr<const tasks::Task>& t, bool train, bool held_out, bool gold) {
    o.train = train, o.eval = held_out, o.sft = gold;
    if (held_out && t->size(tasks::Split::eval) < 0 && cfg_.eval.problems > o.stream_rows) eval_unmeasured = true;
    ScanOutcome s = scan_prompts(t, codec_, o);
    t = s.task;
    if (!s.message.empty()) said.push_back(s.message);
    return s;
  };
  if (!cfg_.curriculum) {
    const ScanOutcome s = scan(task_, rl || sft, eval, sft_gold);
    sft_task_ = rl_task_ = task_;
    max_prompt_ = s.train.longest, max_sft_row_ = s.train.longest_row, max_eval_prompt_ = s.eval.longest;
  } else {  // each stage its own set; held-out problems from the task
    const ScanOutcome r = scan(rl_task_, rl, false, false), f = scan(sft_task_, sft, false, sft_gold);
    if (eval) max_eval_prompt_ = scan(task_, false, true, false).eval.longest;
    max_prompt_ = std::max(r.train.longest, f.train.longest), max_sft_row_ = f.train.longest_row;
  }
  if (heldout_ && eval) max_eval_prompt_ = std::max(max_eval_prompt_, scan(heldout_, false, true, false).eval.longest);
  if (eval_unmeasured) max_eval_prompt_ = 0;  // not known: the plan keeps the evaluation's whole pool
  if (root_)
    for (const std::string& m : said) std::fprintf(stderr, "temper train: %s\n", m.c_str());
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
  if (cfg_.run.shard_optimizer && comm_.size() > 1)
    sft_->trainer().optimizer().set_sharded(true, cfg_.run.shard_gradients);
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
  if (cfg_.run.shard_optimizer && comm_.size() > 1) rlt_->optimizer().set_sharded(true, cfg_.run.shard_gradients);
  rlt_->set_interruptible(interruptible_);
  rlt_->set_planned_steps(cfg_.rl_steps());  // [rl.async]: nothing explored past the last step
  if (env_) rlt_->set_environment(conversation_source());
  if (cfg_.rl.async && cfg_.rl.async->processes() && !dist::role().explorer)
    rlt_->use_explorer_processes(explorer_command());
}

}  // namespace temper::app

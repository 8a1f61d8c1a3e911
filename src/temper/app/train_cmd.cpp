#include "temper/app/train_cmd.h"

#include <sched.h>

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
#include "temper/app/model_source.h"
#include "temper/app/quickstart.h"
#include "temper/app/recipe.h"
#include "temper/core/error.h"
#include "temper/core/profile.h"
#include "temper/core/thread_pool.h"
#include "temper/dist/communicator.h"
#include "temper/io/atomic_file.h"
#include "temper/report/html_report.h"
#include "temper/report/metrics_sink.h"
#include "temper/report/progress.h"
#include "temper/report/tensorboard.h"
#include "temper/rl/curriculum.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/methods/disc_reward.h"
#include "temper/rl/methods/dre.h"
#include "temper/rl/methods/fair.h"
#include "temper/rl/methods/graphpo.h"
#include "temper/rl/methods/rcsd.h"
#include "temper/rl/methods/reves.h"
#include "temper/rl/methods/stare.h"
#include "temper/rl/methods/turing.h"
#include "temper/rl/methods/zppo.h"
#include "temper/rl/rl_trainer.h"
#include "temper/rl/sft.h"
#include "temper/rl/teacher.h"

namespace fs = std::filesystem;

namespace temper::app {

namespace {

std::atomic<int> g_signal{0};
extern "C" void on_signal(int s) { g_signal = s; }

struct RunConfig {
  std::string model_path, preset, precision, prompt_format, system_prompt, user_template, device;
  int64_t context = 0;
  uint64_t seed = 0;
  std::string task_name;
  tasks::TaskParams task_params;
  double reward_timeout_s = 0;  // task.reward_timeout_s: a verification running longer scores 0 (0: no limit)
  int64_t sft_steps = 0, rl_steps = 0;
  std::optional<rl::CurriculumConfig> curriculum;  // [curriculum]: the stages' steps and sets from a budget
  rl::CurriculumPlan plan;
  rl::SftConfig sft;
  rl::RlConfig rl;
  std::optional<rl::StareConfig> stare;
  std::optional<rl::DreConfig> dre;
  std::optional<rl::ZppoConfig> zppo;
  std::optional<rl::RevesConfig> reves;
  std::optional<rl::FairConfig> fair;
  std::optional<rl::RcsdConfig> rcsd;
  std::optional<rl::DiscRewardConfig> disc;
  std::optional<rl::TuringConfig> turing;
  std::optional<rl::GraphPoConfig> graphpo;
  struct Teacher {
    std::string source;  // "" (none), gold, dataset, model
    std::string path;
    rl::ModelTeacherConfig model;
  } teacher;
  int64_t eval_every = 0;
  rl::EvalConfig eval;
  std::string heldout_task;            // [eval.heldout]: a second task evaluated beside the training task's
  tasks::TaskParams heldout_params;    // eval split (the train task's params, overridden by eval.heldout.params)
  std::string out;
  int64_t checkpoint_every = 0, keep_last = 2, samples_every = 10, samples_per_step = 4, threads = 0;
};

OptimizerConfig read_optimizer(Recipe& r, const std::string& sec, double lr, double min_ratio, double wd, int64_t steps) {
  OptimizerConfig o;
  o.lr.peak = r.get_double(sec + ".lr", lr);
  o.lr.warmup_steps = r.get_int(sec + ".warmup", 0);
  std::string sched = r.get_choice(sec + ".schedule", "cosine", {"cosine", "constant"});
  o.lr.total_steps = sched == "cosine" ? steps : 0;
  o.lr.min_ratio = r.get_double(sec + ".min_lr_ratio", min_ratio);
  o.adamw.weight_decay = static_cast<float>(r.get_double(sec + ".weight_decay", wd));
  o.adamw.beta1 = static_cast<float>(r.get_double(sec + ".beta1", 0.9));
  o.adamw.beta2 = static_cast<float>(r.get_double(sec + ".beta2", 0.999));
  o.adamw.eps = static_cast<float>(r.get_double(sec + ".adam_eps", 1e-8));
  o.max_grad_norm = r.get_double(sec + ".max_grad_norm", 1.0);
  TEMPER_CHECK(o.lr.peak > 0 && o.lr.warmup_steps >= 0) << r.source() << ": " << sec << ".lr must be > 0 and warmup >= 0";
  return o;
}

rollout::SamplerConfig read_sampler(Recipe& r, const std::string& sec) {
  rollout::SamplerConfig s;
  s.temperature = static_cast<float>(r.get_double(sec + ".temperature", 1.0));
  s.top_p = static_cast<float>(r.get_double(sec + ".top_p", 1.0));
  s.top_k = r.get_int(sec + ".top_k", 0);
  s.min_p = static_cast<float>(r.get_double(sec + ".min_p", 0.0));
  return s;
}

// A comma list of numbers under `key` ("" = none).
std::vector<double> number_list(Recipe& r, const std::string& key) { return parse_numbers(r.get_string(key, ""), r.source() + ": " + key); }

RunConfig read_config(Recipe& r) {
  RunConfig c;
  c.model_path = r.get_string("model.path", "");
  c.preset = r.get_string("model.preset", c.model_path.empty() ? "quickstart" : "");
  c.context = r.get_int("model.context", 0);  // a preset's context (prompt + completion tokens); 0: the preset's
  TEMPER_CHECK(c.context == 0 || (c.context >= 16 && c.context <= 65536 && c.model_path.empty()))
      << r.source() << ": model.context sets a preset's context: expected 16..65536 with model.preset (not model.path), got " << c.context;
  c.precision = r.get_choice("model.precision", "f32", {"f32", "bf16"});
  c.device = r.get_string("model.device", "cpu");
  TEMPER_CHECK(device_name_valid(c.device)) << r.source() << ": model.device: expected \"cpu\", \"cuda\", \"cuda:N\" or "
                                            << "\"mirror\", got '" << c.device << "'";
  c.prompt_format = r.get_choice("model.prompt_format", "auto", {"auto", "raw", "chat"});
  c.system_prompt = r.get_string("model.system_prompt", "");
  c.user_template = r.get_string("model.user_template", "");
  c.seed = static_cast<uint64_t>(r.get_int("model.seed", 0));
  c.task_name = r.get_string("task.name", "arithmetic");
  c.task_params = r.get_table("task.params.");
  c.reward_timeout_s = r.get_double("task.reward_timeout_s", 0.0);
  TEMPER_CHECK(std::isfinite(c.reward_timeout_s) && c.reward_timeout_s >= 0)
      << r.source() << ": task.reward_timeout_s must be >= 0 seconds (0: no limit), got " << c.reward_timeout_s;

  // ZPPO's recipe (spec, methods-llm-rl section 3, steps 6-7; the "default 4"), for its baselines too (the
  // buffer, the teacher injected: the paper's GRPO-dagger runs in the same pipeline): batch-level normalisation over
  // the groups whose rewards differ, 4 update epochs per batch, clip-higher eps_high 0.28, no KL. A recipe that sets
  // any of these keeps its own.
  const bool zppo_on = r.get_bool("rl.zppo.enabled", r.has_prefix("rl.zppo."));
  const int64_t default_epochs = zppo_on ? 4 : 1;
  c.sft.batch = r.get_int("sft.batch", 32);
  if (r.has_prefix("curriculum.")) {  // the steps of both stages follow from the budget and the ratio
    TEMPER_CHECK(!r.has("sft.steps") && !r.has("rl.steps"))
        << r.source() << ": [curriculum] sets sft.steps and rl.steps from curriculum.total and curriculum.ratio; remove "
        << (r.has("sft.steps") ? "sft.steps" : "rl.steps");
    rl::CurriculumConfig cc;
    rl::CurriculumConfig::parse_ratio(r.get_string("curriculum.ratio", "4:1"), cc.sft_parts, cc.rl_parts);
    cc.budget = r.get_choice("curriculum.budget", cc.budget, {"prompts", "steps"});
    cc.total = r.get_int("curriculum.total", 0);
    cc.sft_set = r.get_string("curriculum.sft_set", cc.sft_set);
    cc.rl_set = r.get_string("curriculum.rl_set", cc.rl_set);
    cc.require_coverage = r.get_bool("curriculum.require_coverage", cc.require_coverage);
    TEMPER_CHECK(!c.task_params.count("train_set"))
        << r.source() << ": [curriculum] chooses the task's train_set per stage (curriculum.sft_set, curriculum.rl_set); remove task.params.train_set";
    c.plan = rl::plan_curriculum(cc, c.sft.batch, r.get_int("rl.prompts_per_step", 8),
                                 r.get_int("rl.epochs", default_epochs) * r.get_int("rl.mini_batches", 1));
    c.sft_steps = c.plan.sft_steps;
    c.rl_steps = c.plan.rl_steps;
    c.curriculum = cc;
  } else {
    c.sft_steps = r.get_int("sft.steps", 0);
  }
  c.sft.train.micro_batch = r.get_int("sft.micro_batch", 0);
  OptimizerConfig so = read_optimizer(r, "sft", 1e-3, 0.1, 0.0, c.sft_steps);
  c.sft.train.adamw = so.adamw;
  c.sft.train.lr = so.lr;
  c.sft.train.max_grad_norm = so.max_grad_norm;
  c.sft.candidates.rate = r.get_double("sft.candidate_rate", 0.0);
  c.sft.candidates.tmpl = r.get_string("sft.candidate_template", c.sft.candidates.tmpl);
  c.sft.candidates.tokens = r.get_int("sft.candidate_tokens", c.sft.candidates.tokens);
  c.sft.teacher_completions = r.get_choice("sft.completions", "gold", {"gold", "teacher"}) == "teacher";
  if (r.get_bool("sft.distill.enabled", r.has_prefix("sft.distill."))) {
    rl::DistillConfig d;
    d.top_k = r.get_int("sft.distill.top_k", d.top_k);
    d.kl_weight = r.get_double("sft.distill.kl_weight", d.kl_weight);
    d.ce_weight = r.get_double("sft.distill.ce_weight", d.ce_weight);
    c.sft.distill = d;
  }
  c.sft.seed = c.seed;

  if (!c.curriculum) c.rl_steps = r.get_int("rl.steps", 0);
  rl::RlConfig& q = c.rl;
  q.prompts_per_step = r.get_int("rl.prompts_per_step", 8);
  q.group_size = r.get_int("rl.group_size", 8);
  q.max_new = r.get_int("rl.max_new", 64);
  q.sampler = read_sampler(r, "rl");
  std::string est = r.get_choice("rl.advantage", "grpo", {"grpo", "dr_grpo", "rloo"});
  q.advantage.estimator = est == "grpo" ? rl::AdvantageEstimator::grpo
                          : est == "dr_grpo" ? rl::AdvantageEstimator::dr_grpo : rl::AdvantageEstimator::rloo;
  // The discriminator's logit estimates log p_data / p_0: KL-regularised RL on it with beta = 1 and the raw reward (no
  // std scaling, which would change the effective beta) is the distribution-matching point (spec, methods-other
  // section 4). With [rl.discriminator] replacing the reward by coef x logit, the defaults are beta = coef and no
  // scaling (the same point); added to a task's reward there is no such point, and the usual defaults stay.
  const bool disc_on = r.get_bool("rl.discriminator.enabled", r.has_prefix("rl.discriminator."));
  const bool disc_match =
      disc_on && r.get_choice("rl.discriminator.combine", "replace", {"replace", "add"}) == "replace";
  const double disc_coef = disc_match ? r.get_double("rl.discriminator.coef", 1.0) : 0.0;
  // Defaults: none where the discriminator's logit is the reward (its matching point), ZPPO's batch_active with
  // [rl.zppo], else group scaling for GRPO and none for the other estimators.
  std::string sc = r.get_choice("rl.scale_rewards",
                                disc_match      ? "none"
                                : zppo_on       ? "batch_active"
                                : est == "grpo" ? "group"
                                                : "none",
                                {"group", "batch", "batch_active", "none"});
  q.advantage.scale = sc == "group"          ? rl::RewardScale::group
                      : sc == "batch"        ? rl::RewardScale::batch
                      : sc == "batch_active" ? rl::RewardScale::batch_active
                                             : rl::RewardScale::none;
  q.advantage.eps = r.get_double("rl.advantage_eps", 1e-4);
  q.loss.eps_low = r.get_double("rl.eps_low", 0.2);
  q.loss.eps_high = r.get_double("rl.eps_high", zppo_on ? 0.28 : 0.2);
  q.loss.dual_clip = r.get_double("rl.dual_clip", 0.0);
  q.loss.kl_coef = r.get_double("rl.kl_coef", disc_match ? disc_coef : 0.0);
  std::string kl = r.get_choice("rl.kl_estimator", "k3", {"k1", "k2", "k3"});
  q.loss.kl_estimator = kl == "k1" ? rl::KlEstimator::k1 : kl == "k2" ? rl::KlEstimator::k2 : rl::KlEstimator::k3;
  q.loss.ent_coef = r.get_double("rl.ent_coef", 0.0);
  std::string agg = r.get_choice("rl.loss_agg", "token_mean", {"token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"});
  q.loss.agg = agg == "token_mean" ? rl::LossAgg::token_mean
               : agg == "seq_mean_token_mean" ? rl::LossAgg::seq_mean_token_mean : rl::LossAgg::seq_mean_token_sum_norm;
  q.loss.max_len = r.get_int("rl.loss_max_len", q.max_new);
  q.loss.skip_no_gradient = r.get_bool("rl.skip_no_gradient", true);
  q.epochs = r.get_int("rl.epochs", default_epochs);
  q.mini_batches = r.get_int("rl.mini_batches", 1);
  q.micro_batch = r.get_int("rl.micro_batch", q.micro_batch);
  q.share_prompts = r.get_bool("rl.share_prompts", q.share_prompts);
  q.reuse_activations = r.get_bool("rl.reuse_activations", q.reuse_activations);
  q.reuse_activations_mb = r.get_int("rl.reuse_activations_mb", q.reuse_activations_mb);
  q.dynamic_sampling = r.get_bool("rl.dynamic_sampling", false);
  q.max_resample_rounds = r.get_int("rl.max_resample_rounds", 3);
  q.mask_truncated = r.get_bool("rl.mask_truncated", false);
  q.kv_memory_mb = r.get_int("rl.kv_memory_mb", 256);
  q.max_seqs = r.get_int("rl.max_seqs", 64);
  q.optimizer = read_optimizer(r, "rl", 1e-5, 1.0, 0.0, c.rl_steps);
  q.seed = c.seed;
  // EfficientRollout: speculative rollouts with a 4-bit drafter of the policy.
  if (r.get_bool("rl.speculative.enabled", r.has_prefix("rl.speculative."))) {
    rl::SpeculativeConfig sp;
    rollout::SpecConfig& k = sp.control;
    if (r.has("rl.speculative.gamma")) {
      TEMPER_CHECK(!r.has("rl.speculative.ladder")) << r.source() << ": [rl.speculative] gives both gamma (fixed) and ladder (adaptive); keep one";
      k.ladder = {r.get_int("rl.speculative.gamma", 5)};
    } else {
      k.ladder = r.get_int_list("rl.speculative.ladder", k.ladder);
    }
    k.alpha_up = r.get_double("rl.speculative.alpha_up", k.alpha_up);
    k.alpha_down = r.get_double("rl.speculative.alpha_down", k.alpha_down);
    k.persistence = r.get_int("rl.speculative.persistence", k.persistence);
    std::string tg = r.get_choice("rl.speculative.toggle", "cost", {"cost", "threshold", "always"});
    rollout::spec_toggle_from_name(tg, &k.toggle);
    k.margin = r.get_double("rl.speculative.margin", k.margin);
    k.threshold = r.get_int("rl.speculative.threshold", k.threshold);
    sp.group = r.get_int("rl.speculative.group", sp.group);
    sp.lag = r.get_int("rl.speculative.lag", sp.lag);
    sp.head = draft_head_named(r.get_choice("rl.speculative.head", "bf16", {"bf16", "int4", "f32"}), "rl.speculative.head");
    sp.vocab = r.get_int("rl.speculative.vocab", sp.vocab);
    try {
      k.validate();
      TEMPER_CHECK(sp.vocab >= 0) << "vocab must be >= 0 (0: every token), got " << sp.vocab;
      TEMPER_CHECK(sp.vocab == 0 || sp.head != DraftHead::f32)
          << "vocab = " << sp.vocab
          << " needs head = \"bf16\" or \"int4\" (the f32 head is the policy's own, every token)";
      TEMPER_CHECK(sp.group >= 32 && sp.group % 32 == 0) << "group must be a positive multiple of 32, got " << sp.group;
      TEMPER_CHECK(sp.lag >= 0 && sp.lag <= 16) << "lag must be in [0, 16], got " << sp.lag;
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": [rl.speculative]: " << e.what();
    }
    q.speculative = sp;
  }
  // Methods: a section turns one on ([rl.stare], [rl.dre]); `enabled = false` keeps its settings but off.
  if (r.get_bool("rl.stare.enabled", r.has_prefix("rl.stare."))) {
    rl::StareConfig s;
    s.variant = r.get_choice("rl.stare.variant", "o1", {"o1", "c2"}) == "c2" ? rl::StareVariant::c2 : rl::StareVariant::o1;
    s.top_ratio = r.get_double("rl.stare.top_ratio", s.top_ratio);
    s.w = r.get_double("rl.stare.w", s.w);
    s.m = r.get_double("rl.stare.m", s.m);
    s.target_entropy = r.get_double("rl.stare.target_entropy", s.target_entropy);
    std::string ctl = r.get_choice("rl.stare.control", "gate", {"gate", "adaptive", "band"});
    s.control = ctl == "gate" ? rl::StareControl::gate : ctl == "adaptive" ? rl::StareControl::adaptive : rl::StareControl::band;
    s.alpha = r.get_double("rl.stare.alpha", s.alpha);
    s.w_max = r.get_double("rl.stare.w_max", s.w_max);
    s.m_min = r.get_double("rl.stare.m_min", s.m_min);
    s.band = r.get_double("rl.stare.band", s.band);
    s.kp = r.get_double("rl.stare.kp", s.kp);
    s.smooth = r.get_double("rl.stare.smooth", s.smooth);
    s.ki = r.get_double("rl.stare.ki", s.ki);
    s.validate();
    c.stare = s;
  }
  if (r.get_bool("rl.dre.enabled", r.has_prefix("rl.dre."))) {
    rl::DreConfig d;
    std::string mode = r.get_choice("rl.dre.mode", "online", {"online", "offline", "measure"});
    d.mode = mode == "online" ? rl::DreMode::online : mode == "offline" ? rl::DreMode::offline : rl::DreMode::measure;
    std::string comp = r.get_choice("rl.dre.compose", "add_and_prefer", {"add_beside", "add_and_prefer", "replace"});
    d.compose = comp == "add_beside" ? rl::DreCompose::add_beside
                : comp == "replace"  ? rl::DreCompose::replace : rl::DreCompose::add_and_prefer;
    d.delta = r.get_double("rl.dre.delta", d.delta);
    d.min_tail = r.get_int("rl.dre.min_tail", d.min_tail);
    d.answer_budget = r.get_int("rl.dre.answer_budget", d.answer_budget);
    d.max_edits_per_group = r.get_int("rl.dre.max_edits_per_group", d.max_edits_per_group);
    d.seed = c.seed;
    d.validate();
    c.dre = d;
  }

  if (zppo_on) {
    rl::ZppoConfig z;
    std::string mode = r.get_choice("rl.zppo.mode", "zppo", {"zppo", "buffer", "inject"});
    z.mode = mode == "zppo" ? rl::ZppoMode::zppo : mode == "buffer" ? rl::ZppoMode::buffer : rl::ZppoMode::inject;
    z.hard_threshold = r.get_double("rl.zppo.hard_threshold", z.hard_threshold);
    z.capacity = r.get_int("rl.zppo.capacity", z.capacity);
    z.replay_ratio = r.get_double("rl.zppo.replay_ratio", z.replay_ratio);
    z.aug_ratio = r.get_double("rl.zppo.aug_ratio", z.aug_ratio);
    z.bcq = r.get_bool("rl.zppo.bcq", z.bcq);
    z.ncq = r.get_bool("rl.zppo.ncq", z.ncq);
    z.teacher_samples = r.get_int("rl.zppo.teacher_samples", z.teacher_samples);
    z.group_size = r.get_int("rl.zppo.group_size", z.group_size);
    z.candidate_tokens = r.get_int("rl.zppo.candidate_tokens", z.candidate_tokens);
    z.match_candidates = r.get_bool("rl.zppo.match_candidates", z.match_candidates);
    z.ncq_traces = r.get_int("rl.zppo.ncq_traces", z.ncq_traces);
    z.bcq_template = r.get_string("rl.zppo.bcq_template", z.bcq_template);
    z.ncq_template = r.get_string("rl.zppo.ncq_template", z.ncq_template);
    z.seed = c.seed;
    z.validate();
    c.zppo = z;
  }
  if (r.get_bool("rl.reves.enabled", r.has_prefix("rl.reves."))) {
    rl::RevesConfig v;
    v.rounds = r.get_int("rl.reves.rounds", v.rounds);
    v.seeds = r.get_int("rl.reves.seeds", v.seeds);
    v.refresh_every = r.get_int("rl.reves.refresh_every", v.refresh_every);
    v.aug_ratio = r.get_double("rl.reves.aug_ratio", v.aug_ratio);
    v.verification = r.get_bool("rl.reves.verification", v.verification);
    v.rebalance = r.get_bool("rl.reves.rebalance", v.rebalance);
    v.revision.revision_template = r.get_string("rl.reves.revision_template", v.revision.revision_template);
    v.revision.verification_template = r.get_string("rl.reves.verification_template", v.revision.verification_template);
    v.revision.attempt_tokens = r.get_int("rl.reves.attempt_tokens", v.revision.attempt_tokens);
    v.seed = c.seed;
    v.validate();
    c.reves = v;
  }
  if (r.get_bool("rl.rcsd.enabled", r.has_prefix("rl.rcsd."))) {
    rl::RcsdConfig d;
    d.combine = r.get_choice("rl.rcsd.combine", d.combine, {"replace", "add"});
    d.coef = r.get_double("rl.rcsd.coef", d.coef);
    d.clip = r.get_double("rl.rcsd.clip", d.clip);
    d.tmpl = r.get_string("rl.rcsd.template", d.tmpl);
    d.teacher = r.get_choice("rl.rcsd.teacher", d.teacher, {"policy", "initial"});
    d.mode = r.get_choice("rl.rcsd.mode", d.mode, {"sampled", "reverse_kl"});
    try {
      d.validate();
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": " << e.what();
    }
    c.rcsd = d;
  }
  if (disc_on) {
    rl::DiscRewardConfig d;
    d.samples = r.get_int("rl.discriminator.samples", d.samples);
    d.real = r.get_choice("rl.discriminator.real", d.real, {"gold", "teacher"});
    d.combine = r.get_choice("rl.discriminator.combine", d.combine, {"replace", "add"});
    d.coef = r.get_double("rl.discriminator.coef", d.coef);
    d.refit.rounds = r.get_int("rl.discriminator.rounds", d.refit.rounds);
    d.refit.refit_every = r.get_int("rl.discriminator.refit_every", d.refit.refit_every);
    d.head.clip = r.get_double("rl.discriminator.clip", d.head.clip);
    d.head.epochs = r.get_int("rl.discriminator.epochs", d.head.epochs);
    d.head.lr = r.get_double("rl.discriminator.lr", d.head.lr);
    d.head.l2 = r.get_double("rl.discriminator.l2", d.head.l2);
    d.features.kind = r.get_choice("rl.discriminator.features", d.features.kind, {"embedding", "ngrams"});
    d.features.ngram_dim = r.get_int("rl.discriminator.ngram_dim", d.features.ngram_dim);
    try {
      d.validate();
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": " << e.what();
    }
    c.disc = d;
  }
  if (r.get_bool("rl.turing.enabled", r.has_prefix("rl.turing."))) {
    rl::TuringConfig t;
    t.judge = r.get_choice("rl.turing.judge", t.judge, {"scripted", "discriminator"});
    t.reward.scale = r.get_double("rl.turing.scale", t.reward.scale);
    t.reward.cap = r.get_int("rl.turing.cap", t.reward.cap);
    t.reward.format_bonus = r.get_double("rl.turing.format_bonus", t.reward.format_bonus);
    t.reward.reasoning = r.get_bool("rl.turing.reasoning", t.reward.reasoning);
    t.samples = r.get_int("rl.turing.samples", t.samples);
    t.refit.rounds = r.get_int("rl.turing.rounds", t.refit.rounds);
    t.refit.refit_every = r.get_int("rl.turing.refit_every", t.refit.refit_every);
    t.head.epochs = r.get_int("rl.turing.epochs", t.head.epochs);
    t.head.lr = r.get_double("rl.turing.lr", t.head.lr);
    t.head.l2 = r.get_double("rl.turing.l2", t.head.l2);
    t.features.kind = r.get_choice("rl.turing.features", t.features.kind, {"embedding", "ngrams"});
    t.features.ngram_dim = r.get_int("rl.turing.ngram_dim", t.features.ngram_dim);
    try {
      t.validate();
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": " << e.what();
    }
    TEMPER_CHECK(c.task_name == "user_sim") << r.source() << ": [rl.turing] rewards user simulators: expected task.name = \"user_sim\", got '"
                                            << c.task_name << "'";
    TEMPER_CHECK(!c.disc) << r.source() << ": [rl.turing] and [rl.discriminator] both set the reward; choose one (rl.turing.judge = \"discriminator\" for both)";
    c.turing = t;
  }
  if (r.get_bool("rl.graphpo.enabled", r.has_prefix("rl.graphpo."))) {
    rl::GraphPoConfig g;
    g.graph.merge = r.get_bool("rl.graphpo.merge", g.graph.merge);
    g.graph.pool = r.get_double("rl.graphpo.pool", g.graph.pool);
    g.graph.efficiency = r.get_double("rl.graphpo.efficiency", g.graph.efficiency);
    g.expand_budget = r.get_int("rl.graphpo.expand_budget", g.expand_budget);
    g.reallocate = r.get_bool("rl.graphpo.reallocate", g.reallocate);
    g.equivalence = r.get_choice("rl.graphpo.equivalence", "state", {"state", "embedding"}) == "embedding" ? rl::Equivalence::embedding
                                                                                                    : rl::Equivalence::state;
    g.similarity = r.get_double("rl.graphpo.similarity", g.similarity);
    try {
      g.validate();
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": " << e.what();
    }
    TEMPER_CHECK(!c.rcsd || c.rcsd->combine == "add") << r.source() << ": [rl.graphpo] and [rl.rcsd] with combine = \"replace\" both set the advantages; use combine = \"add\"";
    c.graphpo = g;
  }
  if (r.get_bool("rl.fair.enabled", r.has_prefix("rl.fair."))) {
    rl::FairConfig f;
    f.objectives = tasks::split_list(r.get_string("rl.fair.objectives", "correct,brevity"));
    f.ggf = number_list(r, "rl.fair.ggf");
    f.fixed = number_list(r, "rl.fair.preference");
    f.grid = r.get_int("rl.fair.grid", f.grid);
    f.concentration = number_list(r, "rl.fair.concentration");
    f.preferences_per_step = r.get_int("rl.fair.preferences_per_step", 0);
    f.prefix = r.get_string("rl.fair.prefix", f.prefix);
    f.welfare = r.get_choice("rl.fair.welfare", f.welfare, {"ggf", "linear"});
    f.sft_targets = r.get_choice("rl.fair.sft_targets", f.sft_targets, {"same", "preference"});
    try {
      f.validate();
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": " << e.what();
    }
    c.fair = f;
    // Evaluation measures the objectives at the balanced (or the fixed) preference; temper eval --preference for others.
    c.eval.objectives = f.objectives;
    if (!f.fixed.empty()) c.eval.preference = f.fixed;  // a fixed trade-off: evaluated there
    else c.eval.preference.assign(f.objectives.size(), 1.0 / static_cast<double>(f.objectives.size()));
    c.eval.preference_prefix = f.prefix;
    c.eval.ggf = f.ggf;
    // SFT prompts carry sampled preferences too; with sft_targets = "preference" the targets follow them.
    c.sft.condition = [f, seed = c.seed](tasks::Problem p, uint64_t i, const rl::PromptCodec& codec) {
      std::vector<double> w = f.fixed.empty() ? rl::fair_sample_grid(static_cast<int64_t>(f.objectives.size()), f.grid, seed ^ 0x5F7ull, 0, i) : f.fixed;
      return rl::fair_sft_example(p, codec, f, w, seed, i);
    };
  }
  // The teacher ([teacher]): the methods that use one ask for it.
  c.teacher.source = r.get_choice("teacher.source", "", {"", "gold", "dataset", "model"});
  c.teacher.path = r.get_string("teacher.path", "");
  c.teacher.model.sampler = read_sampler(r, "teacher");
  c.teacher.model.max_new = r.get_int("teacher.max_new", q.max_new);
  c.teacher.model.kv_memory_mb = r.get_int("teacher.kv_memory_mb", q.kv_memory_mb);
  c.teacher.model.max_seqs = r.get_int("teacher.max_seqs", q.max_seqs);
  TEMPER_CHECK(c.teacher.source != "model" || !c.teacher.path.empty())
      << r.source() << ": teacher.source = \"model\" needs teacher.path (a Hugging Face directory or a GGUF file)";
  TEMPER_CHECK(c.teacher.source == "model" || c.teacher.path.empty())
      << r.source() << ": teacher.path is set but teacher.source is '" << c.teacher.source << "' (set source = \"model\")";
  TEMPER_CHECK(!c.sft.distill || c.teacher.source == "model")
      << r.source() << ": [sft.distill] needs a teacher model: [teacher] source = \"model\" with path = ...";
  TEMPER_CHECK(!c.sft.teacher_completions || !c.teacher.source.empty())
      << r.source() << ": sft.completions = \"teacher\" needs a [teacher]";
  const bool needs_teacher = c.zppo && (c.zppo->mode == rl::ZppoMode::inject || (c.zppo->mode == rl::ZppoMode::zppo && c.zppo->bcq));
  TEMPER_CHECK(!needs_teacher || !c.teacher.source.empty())
      << r.source() << ": [rl.zppo] mode \"" << (c.zppo && c.zppo->mode == rl::ZppoMode::inject ? "inject" : "zppo")
      << "\" needs a teacher: add [teacher] with source = \"gold\" (the task's solutions), \"dataset\" (teacher_response) or \"model\" (path = ...)";

  c.eval_every = r.get_int("eval.every", 0);
  if (r.has_prefix("eval.heldout.")) {
    c.heldout_task = r.get_string("eval.heldout.task", c.task_name);
    c.heldout_params = c.heldout_task == c.task_name ? c.task_params : tasks::TaskParams{};
    for (auto& [k, v] : r.get_table("eval.heldout.params.")) c.heldout_params[k] = v;
  }
  c.eval.problems = r.get_int("eval.problems", 100);
  c.eval.samples = r.get_int("eval.samples", 1);
  c.eval.greedy = r.get_bool("eval.greedy", c.eval.samples == 1);
  c.eval.sampler = read_sampler(r, "eval");
  c.eval.max_new = r.get_int("eval.max_new", q.max_new);
  c.eval.pass_k = {1};
  if (c.eval.samples > 1) c.eval.pass_k.push_back(c.eval.samples);
  c.eval.seed = c.seed;
  c.eval.kv_memory_mb = q.kv_memory_mb;
  c.eval.revisions = r.get_int("eval.revisions", 0);
  if (c.reves) c.eval.revision = c.reves->revision;  // the same prompts at test time
  c.eval.revision.revision_template = r.get_string("eval.revision_template", c.eval.revision.revision_template);

  c.out = r.get_string("run.out", "runs/" + (c.model_path.empty() ? c.preset : fs::path(c.model_path).stem().string()) + "-" + c.task_name);
  c.checkpoint_every = r.get_int("run.checkpoint_every", 0);
  c.keep_last = r.get_int("run.keep_last", 2);
  c.samples_every = r.get_int("run.samples_every", 10);
  c.samples_per_step = r.get_int("run.samples_per_step", 4);
  c.threads = r.get_int("run.threads", 0);
  TEMPER_CHECK(c.sft_steps >= 0 && c.rl_steps >= 0) << r.source() << ": sft.steps and rl.steps must be >= 0";
  TEMPER_CHECK(c.sft_steps + c.rl_steps > 0) << r.source() << ": nothing to do: sft.steps and rl.steps are both 0";
  TEMPER_CHECK(c.keep_last >= 1) << r.source() << ": run.keep_last must be >= 1, got " << c.keep_last;
  if (c.rl_steps > 0) q.validate();
  c.sft.validate();
  c.eval.validate();
  return c;
}

// The cores this process may run on (mpirun binds ranks to cores by default).
int cores_bound() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return default_num_threads();
  return std::max(1, CPU_COUNT(&set));
}

double rss_mb() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages = 0, rss = 0;
  int n = std::fscanf(f, "%ld %ld", &pages, &rss);
  std::fclose(f);
  return n == 2 ? static_cast<double>(rss) * 4096.0 / (1 << 20) : 0;
}

}  // namespace

// Data-parallel: what this rank sent through collectives during the step and the time they took
// (waiting for slower ranks included).
void add_comm_metrics(rl::Metrics& m, const dist::Communicator& comm, int64_t bytes0, double s0) {
  if (comm.size() == 1) return;
  m.emplace_back("comm_mb", static_cast<double>(comm.bytes_sent() - bytes0) / (1 << 20));
  m.emplace_back("comm_s", comm.seconds() - s0);
}

int train(const TrainOptions& o) {
  if (const char* p = std::getenv("TEMPER_PROFILE"); p && std::string(p) == "1") profile_enable(true);
  // The recipe: a file, the built-in quickstart, or the resumed run's resolved config.
  Recipe recipe = !o.resume.empty() ? Recipe::load((fs::path(o.resume) / "config.toml").string())
                  : o.recipe.empty() ? Recipe::parse(quickstart_recipe(), "<built-in quickstart>")
                                     : Recipe::load(o.recipe);
  for (const std::string& s : o.sets) recipe.set(s);
  if (!o.device.empty()) recipe.set("model.device=\"" + o.device + "\"");
  RunConfig cfg = read_config(recipe);
  recipe.check_all_read();
  const std::string run_dir = !o.resume.empty() ? o.resume : !o.out.empty() ? o.out : cfg.out;

  // Data-parallel under mpirun: every rank runs this function; rank 0 alone writes the run directory
  // (config, metrics, samples, checkpoints, report) and prints; the others train in step with it.
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); n && std::atoi(n) > 1) {
    TEMPER_CHECK(dist::mpi_available()) << "temper train was started by mpirun with " << n
                                        << " ranks, but this temper was built without MPI (install libopenmpi-dev: scripts/bootstrap, then rebuild)";
  }
  dist::Communicator& comm = dist::world();
  const bool root = comm.is_root();
  if (o.threads > 0) set_num_threads(o.threads);
  else if (cfg.threads > 0) set_num_threads(static_cast<int>(cfg.threads));
  else if (comm.local_size() > 1 && !std::getenv("TEMPER_THREADS")) {  // ranks on one machine share its cores
    const int share = std::max(1, default_num_threads() / comm.local_size()), bound = cores_bound();
    if (bound < share && root)
      std::fprintf(stderr, "temper train: warning: mpirun bound each rank to %d core(s) of the %d it could use; "
                           "run with --bind-to none, or --map-by slot:PE=%d\n", bound, share, share);
    set_num_threads(std::max(1, std::min(share, bound)));
  }

  std::string resume_from;
  const std::string config_text = recipe.resolved_toml();
  if (root) {
    if (!o.resume.empty()) {
      resume_from = latest_checkpoint(run_dir);
      TEMPER_CHECK(!resume_from.empty()) << run_dir << ": no checkpoint to resume from (checkpoints/step-N with trainer_state.json)";
    } else {
      TEMPER_CHECK(latest_checkpoint(run_dir).empty() && !fs::exists(fs::path(run_dir) / "metrics.jsonl"))
          << run_dir << ": already holds a run; continue it with --resume " << run_dir << " or choose another --out";
    }
    fs::create_directories(run_dir);
    io::write_text_atomic((fs::path(run_dir) / "config.toml").string(), config_text);
    std::fprintf(stderr, "%s\n", config_text.c_str());
    if (comm.size() > 1)
      std::fprintf(stderr, "temper train: data-parallel over %d ranks (%s), %d thread(s) per rank\n", comm.size(), comm.backend(),
                   num_threads());
  }
  comm.broadcast(resume_from, 0);  // the checkpoint rank 0 chose (the run directory is on a shared filesystem)

  // The task first: a recipe error in it is reported before a model is loaded.
  std::shared_ptr<const tasks::Task> task = tasks::make_task(cfg.task_name, cfg.task_params);
  if (cfg.fair) {
    try {
      rl::check_objectives(cfg.fair->objectives, *task);
    } catch (const Error& e) {
      TEMPER_FAIL() << recipe.source() << ": rl.fair.objectives: " << e.what();
    }
  }

  // Model and tokenizer.
  std::unique_ptr<Transformer> policy;
  std::shared_ptr<const text::Tokenizer> tok;
  std::vector<int32_t> eos_ids;
  int32_t bos_id = -1;
  if (cfg.model_path.empty()) {
    // A built-in shape with random weights and the byte-level tokenizer: the quickstart's own models,
    // or a real model's shape (qwen2.5-0.5b, smollm2-135m) for measuring steps on a GPU.
    TEMPER_CHECK(cfg.preset == "quickstart" || cfg.preset == "quickstart-large" || cfg.preset == "qwen2.5-0.5b" ||
                 cfg.preset == "smollm2-135m")
        << recipe.source() << ": model.preset must be \"quickstart\", \"quickstart-large\", \"qwen2.5-0.5b\" or "
        << "\"smollm2-135m\" when model.path is empty, got '" << cfg.preset << "'";
    ModelConfig mc = model_config_preset(cfg.preset);
    if (cfg.context > 0) mc.max_position_embeddings = cfg.context;
    policy = std::make_unique<Transformer>(mc);
    policy->init_random(cfg.seed);
    tok = std::make_shared<text::Tokenizer>(byte_tokenizer());
    eos_ids = {tok->eos_id()};
  } else {
    LoadedModel lm = load_model(cfg.model_path);
    policy = std::move(lm.model);
    tok = lm.tokenizer;
    eos_ids = lm.eos_ids;
    bos_id = lm.bos_id;
    TEMPER_CHECK(tok) << cfg.model_path << ": no tokenizer (tokenizer.json or GGUF tokenizer metadata) — RL needs one";
  }
  policy->set_precision(cfg.precision == "bf16" ? kernels::Precision::bf16 : kernels::Precision::f32);
  // Every rank starts from rank 0's weights (initialisation and loading are deterministic; this makes
  // it so regardless of the filesystem or the build).
  auto sync_weights = [&] {
    if (comm.size() == 1) return;
    comm.broadcast(policy->params(), policy->flat_size(), 0);
    policy->params_updated();
  };
  sync_weights();
  // The policy's passes on a device; in a data-parallel run "cuda" means this rank's local GPU.
  std::string device = cfg.device;
  if (comm.size() > 1 && device == "cuda") device = "cuda:" + std::to_string(dist::local_rank() % std::max(1, cuda_devices()));
  if (device != "cpu") attach_device(*policy, device);
  io::HfExportOptions ex;
  ex.eos_ids = eos_ids;
  ex.bos_id = bos_id;
  ex.tokenizer_json_text = tok->to_hf_json();
  ex.tokenizer_config_json_text = tok->to_hf_config_json();

  std::shared_ptr<const tasks::Task> sft_task = task, rl_task = task;  // [curriculum]: each stage its own set
  if (cfg.curriculum) {
    tasks::TaskParams sp = cfg.task_params, rp = cfg.task_params;
    sp["train_set"] = cfg.curriculum->sft_set;
    rp["train_set"] = cfg.curriculum->rl_set;
    sft_task = tasks::make_task(cfg.task_name, sp);
    rl_task = tasks::make_task(cfg.task_name, rp);
    TEMPER_CHECK(!sft_task->module_inventory().empty())
        << recipe.source() << ": [curriculum] needs a compositional task that names its modules (compose), got '" << cfg.task_name << "'";
    // Coverage of the SFT stage, counted on the problems it will draw, before any training.
    rl::Coverage cov = rl::count_coverage(*sft_task, std::min<int64_t>(cfg.plan.sft_prompts, 200000));
    if (root) {
      std::fprintf(stderr, "temper train: curriculum %lld:%lld in %s over %lld: %s\n", static_cast<long long>(cfg.curriculum->sft_parts),
                   static_cast<long long>(cfg.curriculum->rl_parts), cfg.curriculum->budget.c_str(),
                   static_cast<long long>(cfg.curriculum->total), cfg.plan.describe().c_str());
      std::fprintf(stderr, "temper train: SFT set '%s' covers %s\n", cfg.curriculum->sft_set.c_str(), cov.describe().c_str());
      nlohmann::json j;
      j["ratio"] = {cfg.curriculum->sft_parts, cfg.curriculum->rl_parts};
      j["budget"] = cfg.curriculum->budget;
      j["total"] = cfg.curriculum->total;
      j["sft"] = {{"set", cfg.curriculum->sft_set}, {"steps", cfg.plan.sft_steps}, {"prompts", cfg.plan.sft_prompts}, {"updates", cfg.plan.sft_updates}};
      j["rl"] = {{"set", cfg.curriculum->rl_set}, {"steps", cfg.plan.rl_steps}, {"prompts", cfg.plan.rl_prompts}, {"updates", cfg.plan.rl_updates}};
      j["coverage"] = {{"problems", cov.problems}, {"modules", cov.count}, {"missing", cov.missing}};
      io::write_text_atomic((fs::path(run_dir) / "curriculum.json").string(), j.dump(2) + "\n");
    }
    TEMPER_CHECK(cov.missing.empty() || !cfg.curriculum->require_coverage || cfg.plan.sft_prompts == 0)
        << recipe.source() << ": the SFT stage never shows module(s) " << [&] { std::string m; for (auto& x : cov.missing) m += (m.empty() ? "" : ", ") + x; return m; }()
        << " in its " << cov.problems << " problems; raise curriculum.total or the SFT share, or set curriculum.require_coverage = false"
           " (a deliberately held-out module)";
  }
  std::shared_ptr<const tasks::Task> heldout;
  if (!cfg.heldout_task.empty()) heldout = tasks::make_task(cfg.heldout_task, cfg.heldout_params);
  rl::PromptCodec codec = make_codec(tok, eos_ids, cfg.prompt_format, cfg.system_prompt, cfg.user_template);
  reward::SafeRewardOptions safe_opt;
  safe_opt.timeout_s = cfg.reward_timeout_s;
  reward::SafeReward safe(safe_opt);

  std::shared_ptr<rl::Teacher> teacher;
  if (cfg.teacher.source == "gold") teacher = rl::make_gold_teacher();
  else if (cfg.teacher.source == "dataset") teacher = rl::make_dataset_teacher();
  else if (cfg.teacher.source == "model") {
    LoadedModel tm = load_model(cfg.teacher.path);
    TEMPER_CHECK(tm.tokenizer) << cfg.teacher.path << ": the teacher has no tokenizer (tokenizer.json or GGUF tokenizer metadata)";
    rl::PromptCodec tc = make_codec(tm.tokenizer, tm.eos_ids, cfg.prompt_format, cfg.system_prompt, cfg.user_template);
    auto mt = std::make_shared<rl::ModelTeacher>(std::move(tm.model), std::move(tc), cfg.teacher.model);
    mt->set_communicator(&comm);
    teacher = mt;
  }
  rl::SftTrainer sft(*policy, sft_task, codec, cfg.sft, teacher.get());
  sft.trainer().optimizer().set_communicator(&comm);
  std::unique_ptr<Transformer> reference;
  // The frozen copy of the policy as RL starts: the KL term's reference, and what methods read as the
  // starting policy (discriminator embeddings, RCSD's initial teacher).
  const bool needs_reference =
      cfg.rl.loss.kl_coef > 0 || (cfg.disc && cfg.disc->features.needs_model()) ||
      (cfg.turing && cfg.turing->judge == "discriminator" && cfg.turing->features.needs_model()) ||
      (cfg.rcsd && cfg.rcsd->teacher == "initial");
  if (needs_reference) reference = std::make_unique<Transformer>(policy->config());
  // On a device the reference runs there too: the same numerics as the policy (a KL of 0 at the start).
  if (reference && device != "cpu") attach_device(*reference, device);
  std::unique_ptr<rl::RlTrainer> rlt;
  std::vector<std::unique_ptr<rl::Method>> methods;  // in hook order
  if (cfg.dre) methods.push_back(std::make_unique<rl::Dre>(*cfg.dre));
  if (cfg.graphpo) methods.push_back(std::make_unique<rl::GraphPo>(*cfg.graphpo));  // the advantages, before RCSD adds to them
  if (cfg.rcsd) methods.push_back(std::make_unique<rl::Rcsd>(*cfg.rcsd));  // before STARE: its weights read the advantages' signs
  if (cfg.stare) methods.push_back(std::make_unique<rl::Stare>(*cfg.stare));
  if (cfg.zppo) methods.insert(methods.begin(), std::make_unique<rl::Zppo>(*cfg.zppo, teacher));
  if (cfg.reves) methods.insert(methods.begin(), std::make_unique<rl::Reves>(*cfg.reves));
  if (cfg.disc) methods.insert(methods.begin(), std::make_unique<rl::DiscReward>(*cfg.disc));  // first: others shape its reward
  if (cfg.turing) methods.insert(methods.begin(), std::make_unique<rl::Turing>(*cfg.turing));
  if (cfg.fair) methods.insert(methods.begin(), std::make_unique<rl::Fair>(*cfg.fair));  // first: the preference is in the prompt
  auto make_rl = [&] {
    if (reference) reference->set_precision(policy->precision());
    std::vector<rl::Method*> ms;
    for (auto& m : methods) ms.push_back(m.get());
    rlt = std::make_unique<rl::RlTrainer>(*policy, rl_task, codec, cfg.rl, safe, ms, reference.get());
    rlt->set_communicator(&comm);
  };

  // Resume: weights, the optimiser of the stage, cursors.
  TrainState st;
  if (!resume_from.empty()) {
    st = read_train_state(resume_from);
    if (st.stage == "rl") {
      make_rl();
      load_checkpoint(resume_from, *policy, &rlt->optimizer(), reference.get());
      rlt->restore(st.rl_steps, st.rl_cursor);
      if (auto it = st.methods.find("speculative"); it != st.methods.end()) rlt->load_speculative_state(it->second);
      for (auto& m : methods) {
        auto it = st.methods.find(m->name());
        TEMPER_CHECK(it != st.methods.end() || m->save_state().empty())
            << resume_from << "/trainer_state.json: no state for method '" << m->name()
            << "' (the checkpoint was written without it; resume with the recipe it was written with)";
        if (it != st.methods.end()) m->load_state(it->second);
      }
    } else {
      load_checkpoint(resume_from, *policy, &sft.trainer().optimizer(), nullptr);
      sft.restore(st.sft_cursor);
    }
    sync_weights();
    if (root) {
      if (int64_t n = remove_partial_checkpoints(run_dir))
        std::fprintf(stderr, "temper train: removed %lld partial checkpoint(s) left by a crash\n", static_cast<long long>(n));
      std::fprintf(stderr, "temper train: resuming %s from %s (step %lld)\n", run_dir.c_str(), resume_from.c_str(),
                   static_cast<long long>(st.step));
    }
  }

  // Memory plan: weights, gradients, AdamW moments, the KV pool, and the activation arena reserved
  // now for the largest micro-batch (SFT rows of prompt + gold, RL rows of prompt + max_new; the
  // longest of the first 64 training problems stands for the rest).
  {
    int64_t max_prompt = 1, max_gold = 1;
    const int64_t tsize = task->size(tasks::Split::train);
    for (uint64_t i = 0; i < 64 && (tsize < 0 || static_cast<int64_t>(i) < tsize); ++i) {
      tasks::Problem p = task->problem(tasks::Split::train, i);
      max_prompt = std::max<int64_t>(max_prompt, static_cast<int64_t>(codec.encode_prompt(p).size()));
      if (cfg.sft_steps > 0 && !p.gold_solution.empty())
        max_gold = std::max<int64_t>(max_gold, static_cast<int64_t>(codec.encode_completion(p.gold_solution).size()));
    }
    const int64_t ctx = policy->config().max_position_embeddings;
    int64_t tokens = 1, seq = 1;
    if (cfg.sft_steps > 0) {
      seq = std::min(ctx, max_prompt + max_gold);
      int64_t rows = cfg.sft.train.micro_batch > 0 ? std::min(cfg.sft.train.micro_batch, cfg.sft.batch) : cfg.sft.batch;
      tokens = rows * seq;
    }
    if (cfg.rl_steps > 0) {
      int64_t T = std::min(ctx, max_prompt + cfg.rl.max_new), batch = cfg.rl.prompts_per_step * cfg.rl.group_size;
      int64_t rows = cfg.rl.micro_batch > 0 ? std::min(cfg.rl.micro_batch, batch) : batch;
      tokens = std::max(tokens, rows * T);
      seq = std::max(seq, T);
    }
    policy->plan(std::max(tokens, seq), seq);
    double params_mb = static_cast<double>(policy->flat_size()) * 4 / (1 << 20);
    double act_mb = static_cast<double>(policy->activation_bytes()) / (1 << 20);
    double total = params_mb * 4 + static_cast<double>(cfg.rl_steps > 0 ? cfg.rl.kv_memory_mb : 0) + act_mb +
                   (reference ? params_mb : 0);
    if (root)
      std::fprintf(stderr,
                 "temper train: %s, %lld parameters; memory plan: weights %.1f MB, grads %.1f MB, AdamW %.1f MB, "
                 "KV cache %lld MB, activations %.1f MB (micro-batches of up to %lld tokens)%s; total ~%.0f MB\n",
                 policy->config().summary().c_str(), static_cast<long long>(policy->num_params()), params_mb, params_mb,
                 2 * params_mb, static_cast<long long>(cfg.rl_steps > 0 ? cfg.rl.kv_memory_mb : 0), act_mb,
                 static_cast<long long>(tokens), reference ? ", KL reference (a weights copy)" : "", total);
  }

  // Sinks.
  const std::string mpath = (fs::path(run_dir) / "metrics.jsonl").string(), spath = (fs::path(run_dir) / "samples.jsonl").string();
  report::MetricsFanout sinks;
  std::unique_ptr<report::SamplesJsonl> samples;
  if (!root) {  // rank 0 writes
  } else if (resume_from.empty()) {
    sinks.add(report::JsonlMetrics::create(mpath));
    sinks.add(std::make_unique<report::TensorBoardWriter>(run_dir));
    samples = report::SamplesJsonl::create(spath);
  } else {
    sinks.add(report::JsonlMetrics::resume_after_step(mpath, st.step));
    report::TensorBoardWriter::Options to;
    to.resumed_from_step = st.step;
    sinks.add(std::make_unique<report::TensorBoardWriter>(run_dir, to));
    samples = report::SamplesJsonl::resume_after_step(spath, st.step);
  }
  const int64_t total = cfg.sft_steps + cfg.rl_steps;
  static std::ostream quiet(nullptr);  // other ranks: no progress line
  report::ProgressOptions po;
  if (!root) po.out = &quiet, po.tty = 0;
  report::Progress progress(total, st.step, po);

  double first_eval = NAN, last_eval = NAN, sft_end_eval = NAN;
  int64_t last_eval_step = -1;
  auto run_eval = [&](int64_t step) {
    rl::EvalResult e = rl::evaluate(*policy, task, codec, cfg.eval, safe, &comm);  // every rank generates its share
    report::MetricValues v = {{"eval_accuracy", e.accuracy}, {"eval_len_mean", e.mean_len}, {"eval_len_correct_mean", e.mean_len_correct}};
    for (auto& [k, p] : e.pass_at_k) v.emplace_back("eval_pass_at_" + std::to_string(k), p);
    for (auto& [d, x] : e.by_difficulty) v.emplace_back("eval_accuracy_d" + std::to_string(d), x.second);
    if (!e.solved_within.empty()) v.emplace_back("eval_revised_accuracy", e.solved_within.back());  // within eval.revisions
    for (size_t k = 0; k < e.objective_means.size(); ++k)
      v.emplace_back("eval_" + rl::fair_metric_name(cfg.eval.objectives[k]), e.objective_means[k]);
    if (!e.objective_means.empty()) v.emplace_back("eval_welfare", e.welfare);
    if (heldout) {  // the held-out family: same settings, its own eval split
      rl::EvalResult h = rl::evaluate(*policy, heldout, codec, cfg.eval, safe, &comm);
      v.emplace_back("heldout_accuracy", h.accuracy);
      v.emplace_back("heldout_len_mean", h.mean_len);
    }
    sinks.write(step, "eval", v);
    char line[160];
    std::snprintf(line, sizeof line, "eval @ step %lld: accuracy %.3f over %lld held-out problems (mean length %.1f tokens)",
                  static_cast<long long>(step), e.accuracy, static_cast<long long>(e.problems), e.mean_len);
    progress.message(line);
    if (std::isnan(first_eval)) first_eval = e.accuracy;
    last_eval = e.accuracy;
    last_eval_step = step;
    return e.accuracy;
  };
  auto checkpoint = [&](bool rl_stage) {
    if (!root) return;
    st.stage = rl_stage ? "rl" : "sft";
    if (!rl_stage) st.sft_cursor = sft.cursor();
    if (rl_stage) {
      st.rl_steps = rlt->steps_done();
      st.rl_cursor = rlt->cursor();
      st.methods.clear();
      for (auto& m : methods)
        if (std::string state = m->save_state(); !state.empty()) st.methods[m->name()] = state;
      if (std::string state = rlt->speculative_state(); !state.empty()) st.methods["speculative"] = state;
    }
    Optimizer& opt = rl_stage ? rlt->optimizer() : sft.trainer().optimizer();
    st.opt_steps = opt.steps_done();
    st.opt_skipped = opt.skipped();
    sinks.flush();
    samples->flush();
    std::string dir = (fs::path(run_dir) / "checkpoints" / ("step-" + std::to_string(st.step))).string();
    // Fault injection for the crash test: TEMPER_FAULT_KILL_IN_CHECKPOINT=N kills the process (SIGKILL)
    // halfway through writing checkpoint N.
    const char* kill_at = std::getenv("TEMPER_FAULT_KILL_IN_CHECKPOINT");
    std::function<void()> mid;
    if (kill_at && std::to_string(st.step) == kill_at) mid = [] { std::raise(SIGKILL); };
    save_checkpoint(dir, *policy, ex, &opt, rl_stage ? reference.get() : nullptr, st, config_text, mid);
    prune_checkpoints(run_dir, cfg.keep_last);
    progress.message("checkpoint " + dir);
  };

  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  // Fault injection for the signal test: TEMPER_FAULT_SIGNAL_IN_STEP="N:SIG" raises signal SIG (15 SIGTERM, 2 SIGINT)
  // inside step N, as a spot instance's SIGTERM or a Ctrl-C arriving mid-step would (a signal sent from outside
  // may come after a short run has ended).
  auto fault_signal = [fault = std::getenv("TEMPER_FAULT_SIGNAL_IN_STEP")](int64_t step) {
    if (!fault) return;
    const std::string f = fault;
    const size_t colon = f.find(':');
    if (colon != std::string::npos && f.substr(0, colon) == std::to_string(step))
      std::raise(std::stoi(f.substr(colon + 1)));
  };
  // After each step: evaluation (every N steps, at the end of SFT when RL follows, at the end), then
  // the checkpoint (every N steps, at the end, or when asked to stop): everything a step writes is
  // written before its checkpoint, so a resume from it repeats nothing and misses nothing.
  auto after_step = [&](bool rl_stage) {
    bool last = st.step == total;
    bool sft_end = !rl_stage && st.sft_steps == cfg.sft_steps && cfg.rl_steps > 0;
    if ((cfg.eval_every > 0 && st.step % cfg.eval_every == 0) || sft_end || last) {
      double a = run_eval(st.step);
      if (sft_end) sft_end_eval = a;
    }
    bool stop = g_signal != 0 || (o.stop_after > 0 && st.step >= o.stop_after);
    if (comm.size() > 1) {  // a signal may reach the ranks at different steps: they stop together
      double any = stop ? 1 : 0;
      comm.allreduce_max(&any, 1);
      stop = any > 0;
    }
    if ((cfg.checkpoint_every > 0 && st.step % cfg.checkpoint_every == 0) || last || stop) checkpoint(rl_stage);
    if (stop && !last && root) {
      progress.finish();
      std::fprintf(stderr, "temper train: stopped %s after step %lld; checkpoint written. Continue with: temper train --resume %s\n",
                   g_signal ? ("by signal " + std::to_string(g_signal.load())).c_str() : o.stop_after > 0 && st.step >= o.stop_after ? "(--stop-after)" : "(another rank was signalled)",
                   static_cast<long long>(st.step), run_dir.c_str());
    }
    return stop && !last;
  };

  if (st.step == 0) run_eval(0);
  // SFT.
  while (st.sft_steps < cfg.sft_steps) {
    const int64_t comm_bytes = comm.bytes_sent();
    const double comm_s = comm.seconds();
    rl::Metrics m = sft.step();
    ++st.step;
    fault_signal(st.step);
    ++st.sft_steps;
    m.emplace_back("rss_mb", rss_mb());
    add_comm_metrics(m, comm, comm_bytes, comm_s);
    sinks.write(st.step, "sft", m);
    progress.update(st.step, m);
    if (after_step(false)) return 0;
  }
  // RL.
  if (cfg.rl_steps > 0) {
    if (!rlt) {
      if (reference) {  // the frozen KL reference: the policy as RL starts
        std::copy(policy->params(), policy->params() + policy->flat_size(), reference->params());
        reference->params_updated();
      }
      make_rl();
    }
    while (rlt->steps_done() < cfg.rl_steps) {
      const int64_t comm_bytes = comm.bytes_sent();
      const double comm_s = comm.seconds();
      rl::Metrics m = rlt->step();
      ++st.step;
      fault_signal(st.step);
      m.emplace_back("rss_mb", rss_mb());
      add_comm_metrics(m, comm, comm_bytes, comm_s);
      sinks.write(st.step, "train", m);
      if (samples && cfg.samples_every > 0 && rlt->steps_done() % cfg.samples_every == 0) {
        const rl::Batch& b = rlt->last_batch();
        // The first sample of each of the first groups (one per prompt), then more of each if there are fewer groups.
        const size_t n = b.traj.size(), stride = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(cfg.rl.group_size), n / std::max<size_t>(1, static_cast<size_t>(cfg.samples_per_step))));
        std::set<const rl::Trajectory*> written;
        auto write_sample = [&](const rl::Trajectory& t) {
          if (!written.insert(&t).second) return;
          const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
          report::Sample s;
          s.step = st.step;
          s.prompt = p.shown();
          s.completion = t.text;
          s.reward = t.reward;
          s.answer = p.answer;
          s.correct = t.correct;
          samples->write(s);
        };
        for (size_t i = 0; i < std::min<size_t>(static_cast<size_t>(cfg.samples_per_step), n); ++i)
          write_sample(b.traj[(i * stride) % n]);
        // Prompts a method built (ZPPO's candidate questions, REVES's revisions: ids "<id>#<kind>") come after
        // the task's groups: one sample of each kind too, so the report shows what the policy was asked.
        std::set<std::string> kinds;
        for (const rl::Trajectory& t : b.traj) {
          const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
          const size_t hash = p.id.rfind('#');
          if (p.index >= 0 || t.parent >= 0 || hash == std::string::npos || !kinds.insert(p.id.substr(hash)).second)
            continue;
          write_sample(t);
        }
      }
      progress.update(st.step, m);
      if (after_step(true)) return 0;
    }
  }
  progress.finish();
  if (!root) return 0;
  if (profile_enabled()) {  // TEMPER_PROFILE=1: seconds in each phase over the whole run (scopes nest)
    std::fprintf(stderr, "temper train: profile (seconds over the run; nested phases overlap):");
    for (auto& [k, v] : profile_report()) std::fprintf(stderr, " %s %.3f", k.c_str(), v);
    std::fprintf(stderr, "\n");
  }
  std::string html = report::write_html_report(run_dir);
  std::fprintf(stderr, "temper train: done, %lld steps. Held-out accuracy: %.3f at the start", static_cast<long long>(st.step), first_eval);
  if (!std::isnan(sft_end_eval)) std::fprintf(stderr, ", %.3f after SFT (RL starts)", sft_end_eval);
  std::fprintf(stderr, ", %.3f at the end. Report: %s\n", last_eval, html.c_str());
  return 0;
}

}  // namespace temper::app

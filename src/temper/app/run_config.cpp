#include "temper/app/run_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "temper/core/error.h"
#include "temper/core/thread_count.h"
#include "temper/model/device_model.h"
#include "temper/rl/async_methods.h"

namespace fs = std::filesystem;

namespace temper::app {

void ModelSection::visit(KeyVisitor& v) {
  v("path", path, "a Hugging Face directory or a .gguf file (empty: a preset from scratch)");
  if (path.empty() && preset.empty()) preset = "quickstart";
  v("preset", preset,
    "with no path: quickstart, quickstart-large (from scratch), qwen2.5-0.5b, smollm2-135m (random weights, for "
    "timing)");
  v("context", context, "a preset's context, prompt + completion tokens (0: the preset's)");
  v.choice("precision", precision, "f32, or bf16 (bf16 weights in the forward products, bf16 K/V and KV cache)",
           {"f32", "bf16"});
  v("device", device, "cpu, cuda, cuda:N, or mirror (the device code path on a CPU copy, for tests); --device");
  v.choice("prompt_format", prompt_format, "auto, raw, chat (the model's chat template)", {"auto", "raw", "chat"});
  v("system_prompt", system_prompt, "the chat template's system message");
  v("user_template", user_template, "how a problem is asked: {question} stands for its text");
  v("seed", seed, "the run's seed: initialisation, sampling, problem order");
  v("recompute", recompute,
    "keep only each layer's input and recompute the rest in the backward: activation memory / layers, about +30% "
    "step time (CPU and CUDA; rl.reuse_activations then defaults to false)");
}

void TaskSection::visit(KeyVisitor& v) {
  v("name", name,
    "arithmetic, countdown, string_ops, compose, constraints, dataset, mixture, user_sim, rubric_proxy, code, "
    "episodes (indices for an [env] that draws its own problems: the default with [env]); "
    "[task.params] holds the task's own parameters");
  v("reward_timeout_s", reward_timeout_s,
    "a verification running longer scores 0 and counts in reward_failures (0: no limit)");
  v("reward_isolation", reward_isolation,
    "where the task's verifier scores a step's samples: \"thread\" (a worker thread; a call past reward_timeout_s "
    "costs its sample and is abandoned, and after 4 that never return the verifier moves to a child process) or "
    "\"process\" (a forked child per batch, killed at reward_timeout_s; ~30-60 ms a batch)",
    rl::kVerifierIsolationNames);
  v.choice("long_prompts", long_prompts,
           "training and held-out prompts longer than the model's context leaves for a completion (training: or "
           "rl.max_prompt_tokens), measured before the first step: \"skip\" leaves them out and says how many, "
           "\"refuse\" stops the run naming the longest",
           {"skip", "refuse"});
}

void TeacherSection::visit(KeyVisitor& v) {
  v.choice("source", source,
           "\"\" (none), gold (the task's solutions), dataset (a dataset's teacher_response), model (path)",
           {"", "gold", "dataset", "model"});
  v("path", path, "source = model: a Hugging Face directory or a GGUF file");
  model.visit(v);
}

void EnvSection::visit(KeyVisitor& v) {
  v("kind", options.kind,
    "calculator, guess (built in), or program (a worker in any language speaking JSON lines: recipes/README.md "
    "\"Environment programs\"); [env.params] holds the environment's own parameters");
  v.strings("program", options.program, "kind = program: the worker's command line, e.g. [\"python3\", \"env.py\"]");
  v("workers", options.workers, "kind = program: worker processes (episodes are pinned to one)");
  v("timeout_s", options.timeout_s, "kind = program: seconds for one call; a worker past it is killed and restarted");
  v("start_timeout_s", options.start_timeout_s, "kind = program: seconds from start to its greeting");
  v.strings("env", options.env, "kind = program: \"KEY=value\" added to the workers' environment");
  v("max_turns", rollout.max_turns, "assistant turns per episode");
  v("turn_max_new", rollout.turn_max_new,
    "tokens per assistant turn (0: only rl.max_new, which caps the whole conversation, observations included)");
  v("threads", rollout.threads, "environment calls at once");
  v("failure_reward", rollout.failure_reward, "the return of an episode the environment failed");
  v("deterministic", rollout.deterministic,
    "mode = steps: an environment's answer goes back env.answer_steps decode steps after its turn ended (waited for "
    "if later), so reruns and resumes are bitwise whatever the environment's timing; false: answers join as they "
    "arrive (no waits; the log-probs then depend on the arrival order at rounding level, ~1e-7)");
  v("answer_steps", rollout.answer_steps,
    "deterministic: decode steps an answer has before the engine waits for it (raise it for slow environments: the "
    "engine decodes the other episodes meanwhile; each turn's continuation starts that many steps after it ended)");
  v("tool_format", tool_format,
    "the model's tool-call syntax: auto (from its chat template), hermes, llama3_json, mistral, none");
  v.choice(
      "mode", mode,
      "steps (temper runs the turns: reset, step) or client (kind = program: the worker runs your agent against an "
      "OpenAI endpoint temper serves with the policy on loopback; every token sampled for the episode is trained "
      "on; timeout_s covers a whole episode, threads the episodes at once)",
      {"steps", "client"});
}

void RunSection::visit(KeyVisitor& v) {
  v("out", out, "the run directory (default runs/<model>-<task>; --out)");
  v("checkpoint_every", checkpoint_every, "steps between checkpoints (0: at the end and when stopped)");
  v("keep_last", keep_last, "checkpoints kept");
  v("samples_every", samples_every, "RL steps between writes to samples.jsonl (0: never)");
  v("samples_per_step", samples_per_step, "samples written each time");
  v("threads", threads, "CPU threads (0: every core; --threads)");
  v("shard_gradients", shard_gradients,
    "data-parallel (mpirun): ZeRO-2, the gradients sharded too: each layer's are reduce-scattered as its backward "
    "ends and a rank keeps 1/N of them (implies shard_optimizer; CPU, not with [lora])");
  if (shard_gradients) shard_optimizer = true;  // its default: ZeRO-2 shards the moments too
  v("shard_optimizer", shard_optimizer,
    "data-parallel (mpirun): each rank keeps 1/N of the AdamW moments (ZeRO-1); gradients reduce-scattered, "
    "weights all-gathered (CPU)");
}

std::string RunConfig::hook_order() const {
  std::string s;
  for (const rl::EnabledMethod& m : methods) s += (s.empty() ? "" : ",") + std::string(m.spec->name);
  return s;
}

namespace {

constexpr double kPretrainedSftLr = 2e-5;
constexpr int64_t kPretrainedMaxNew = 256;

constexpr std::string_view kHookOrderDoc =
    "the enabled methods in hook order, as resolved (written by temper train; a recipe that gives it must match)";

void visit_stage(KeyVisitor& v, StageSection& s, bool with_steps) {
  if (with_steps) v("steps", s.steps, "the stage's steps ([curriculum] sets them from its budget)");
  v.choice("schedule", s.schedule, "learning rate after warm-up: cosine (to min_lr_ratio at the last step), constant",
           {"cosine", "constant"});
}

void visit_eval(KeyVisitor& v, RunConfig& c) {
  v("every", c.eval_every, "steps between evaluations (0: at the start, the end of SFT and the end)");
  c.eval.visit(v);
}

// Defaults one section takes from another: the teacher and evaluation decode as RL does.
void derive_defaults(RunConfig& c) {
  c.teacher.model.max_new = c.rl.max_new;
  c.teacher.model.kv_memory_mb = c.rl.kv_memory_mb;
  c.teacher.model.max_seqs = c.rl.max_seqs;
  c.eval.max_new = c.rl.max_new;
  c.eval.kv_memory_mb = c.rl.kv_memory_mb;
  c.eval.seed = c.model.seed;
}

std::string default_out(const RunConfig& c) {
  return "runs/" + (c.model.path.empty() ? c.model.preset : fs::path(c.model.path).stem().string()) + "-" + c.task.name;
}

// A section that switches on (`enabled`, default: any key given) into an optional config.
template <class T, class Visit>
void read_optional(Recipe& r, const std::string& sec, std::optional<T>& out, Visit&& visit) {
  if (!r.get_bool(sec + ".enabled", r.has_prefix(sec + "."))) return;
  T t;
  read_section(r, sec + ".", [&](KeyVisitor& v) { visit(t, v); });
  out = std::move(t);
}

void read_model_and_task(Recipe& r, RunConfig& c) {
  read_section(r, "model.", [&](KeyVisitor& v) { c.model.visit(v); });
  TEMPER_CHECK(c.model.context == 0 || (c.model.context >= 16 && c.model.context <= 65536 && c.model.path.empty()))
      << r.source()
      << ": model.context sets a preset's context: expected 16..65536 with model.preset (not model.path), got "
      << c.model.context;
  TEMPER_CHECK(device_name_valid(c.model.device))
      << r.source() << ": model.device: expected \"cpu\", \"cuda\", \"cuda:N\" or "
      << "\"mirror\", got '" << c.model.device << "'";
  // Recomputing saves the activations that rl.reuse_activations would keep from the rollouts (and cannot train
  // from: Transformer::reusable): off unless the recipe asks for both, which read_stages refuses.
  if (c.model.recompute) r.set_default("rl.reuse_activations", "false", "model");
  // An environment draws its own problems unless the recipe names a task (a dataset whose rows it reads).
  if (r.get_bool("env.enabled", r.has_prefix("env."))) r.set_default("task.name", "\"episodes\"", "env");
  read_section(r, "task.", [&](KeyVisitor& v) { c.task.visit(v); });
  c.task.params = r.get_table("task.params.");
  TEMPER_CHECK(std::isfinite(c.task.reward_timeout_s) && c.task.reward_timeout_s >= 0)
      << r.source() << ": task.reward_timeout_s must be >= 0 seconds (0: no limit), got " << c.task.reward_timeout_s;
}

class SectionDefaults final : public rl::RecipeDefaults {
 public:
  SectionDefaults(Recipe& r, std::string_view section) : r_(r), section_(section) {}
  void set(const std::string& key, const std::string& literal) override { r_.set_default(key, literal, section_); }

 private:
  Recipe& r_;
  std::string section_;
};

// The methods the recipe turns on, in hook order: their sections read and validated, conflicts refused, then the
// defaults they set in other sections (before those are read).
void read_methods(Recipe& r, RunConfig& c, std::span<const rl::MethodSpec* const> table) {
  for (const rl::MethodSpec* spec : table) {
    const std::string sec(spec->section);
    if (!r.get_bool(sec + ".enabled", r.has_prefix(sec + "."))) continue;
    rl::EnabledMethod m{spec, spec->setup()};
    read_section(r, sec + ".", [&](KeyVisitor& v) { m.setup->visit(v); });
    c.methods.push_back(std::move(m));
  }
  std::stable_sort(c.methods.begin(), c.methods.end(), [](const rl::EnabledMethod& a, const rl::EnabledMethod& b) {
    return a.spec->order < b.spec->order;
  });
  rl::RunSettings run{c.rl, c.sft, c.eval, c.task.name, c.model.seed};
  for (const rl::EnabledMethod& m : c.methods) {
    try {
      m.setup->validate(run);
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": [" << m.spec->section << "]: " << e.what();
    }
  }
  try {
    rl::check_method_conflicts(c.methods);
  } catch (const Error& e) {
    TEMPER_FAIL() << r.source() << ": " << e.what();
  }
  for (const rl::EnabledMethod& m : c.methods) {
    SectionDefaults d(r, m.spec->section);
    m.setup->change_defaults(d);
    m.setup->configure(run);
  }
  const std::string order = c.hook_order();
  TEMPER_CHECK(r.get_string("rl.hook_order", order) == order)
      << r.source() << ": rl.hook_order: the recipe's methods run in the order '" << order << "', not '"
      << r.get_string("rl.hook_order", order) << "' (each method's place is fixed; remove the key)";
}

void finish_stage(const Recipe& r, const char* sec, const StageSection& s, LrSchedule& lr) {
  lr.total_steps = s.schedule == "cosine" ? s.steps : 0;
  TEMPER_CHECK(lr.peak > 0 && lr.warmup_steps >= 0) << r.source() << ": " << sec << ".lr must be > 0 and warmup >= 0";
}

// [sft], [rl] and their subsections, then [curriculum], which sets both stages' steps from its budget.
void read_stages(Recipe& r, RunConfig& c) {
  const bool curriculum = r.has_prefix("curriculum.");
  // A pretrained model fine-tunes at a small rate (TRL's SFT default, 2e-5); 1e-3 is for a model from scratch.
  // and writes longer answers than the quickstart's 64 tokens (TRL's max_completion_length default, 256).
  if (!c.model.path.empty()) c.sft.train.lr.peak = kPretrainedSftLr, c.rl.max_new = kPretrainedMaxNew;
  read_section(r, "sft.", [&](KeyVisitor& v) {
    visit_stage(v, c.sft_stage, !curriculum);
    c.sft.visit(v);
  });
  read_optional(r, "sft.distill", c.sft.distill, [](rl::DistillConfig& d, KeyVisitor& v) { d.visit(v); });
  c.sft.seed = c.model.seed;
  read_section(r, "rl.", [&](KeyVisitor& v) {
    visit_stage(v, c.rl_stage, !curriculum);
    c.rl.visit(v);
  });
  read_optional(r, "rl.speculative", c.rl.speculative, [](rl::SpeculativeConfig& s, KeyVisitor& v) {
    s.visit(v);
    s.validate();
  });
  read_optional(r, "rl.async", c.rl.async, [](rl::AsyncConfig& a, KeyVisitor& v) { a.visit(v); });
  c.rl.seed = c.model.seed;
  if (curriculum) {
    TEMPER_CHECK(!r.has("sft.steps") && !r.has("rl.steps"))
        << r.source()
        << ": [curriculum] sets sft.steps and rl.steps from curriculum.total and curriculum.ratio; remove "
        << (r.has("sft.steps") ? "sft.steps" : "rl.steps");
    TEMPER_CHECK(!c.task.params.count("train_set"))
        << r.source()
        << ": [curriculum] chooses the task's train_set per stage (curriculum.sft_set, curriculum.rl_set); remove "
           "task.params.train_set";
    rl::CurriculumConfig cc;
    read_section(r, "curriculum.", [&](KeyVisitor& v) { cc.visit(v); });
    c.plan = rl::plan_curriculum(cc, c.sft.batch, c.rl.prompts_per_step, c.rl.epochs * c.rl.mini_batches);
    c.sft_stage.steps = c.plan.sft_steps;
    c.rl_stage.steps = c.plan.rl_steps;
    c.curriculum = cc;
  }
  finish_stage(r, "sft", c.sft_stage, c.sft.train.lr);
  finish_stage(r, "rl", c.rl_stage, c.rl.optimizer.lr);
  TEMPER_CHECK(!(c.model.recompute && c.rl.reuse_activations))
      << r.source() << ": model.recompute = true with rl.reuse_activations = true: the update recomputes each "
      << "layer's activations, so it cannot take the rollout's (and keeping them costs the memory recompute saves); "
      << "set rl.reuse_activations = false (its default with model.recompute) or model.recompute = false";
}

// A method that sets the advantages itself leaves rl.advantage and rl.scale_rewards unused: a recipe that sets
// them to anything but their defaults is told so.
void check_unused_advantage_keys(const Recipe& r, const RunConfig& c) {
  auto off_default = [&](const std::string& key, const std::string& plain) {
    if (!r.has(key)) return false;
    const std::string set_by_method = r.default_literal(key);
    return r.resolved_literal(key) != (set_by_method.empty() ? plain : set_by_method);
  };
  for (const rl::EnabledMethod& m : c.methods) {
    if (!m.setup->effects().sets_advantages) continue;
    const rl::AdvantageConfig plain;  // the estimator's defaults
    for (auto [key, lit] :
         {std::pair{"rl.advantage", toml_quote(std::string(enum_name(rl::kAdvantageEstimatorNames, plain.estimator)))},
          std::pair{"rl.scale_rewards", toml_quote(std::string(enum_name(rl::kRewardScaleNames, plain.scale)))}})
      TEMPER_CHECK(!off_default(key, lit))
          << r.source() << ": [" << m.spec->section << "] sets the advantages itself, so " << key << " = "
          << r.resolved_literal(key) << " would have no effect; remove " << key;
  }
}

void read_teacher(Recipe& r, RunConfig& c) {
  read_section(r, "teacher.", [&](KeyVisitor& v) { c.teacher.visit(v); });
  TEMPER_CHECK(c.teacher.source != "model" || !c.teacher.path.empty())
      << r.source() << ": teacher.source = \"model\" needs teacher.path (a Hugging Face directory or a GGUF file)";
  TEMPER_CHECK(c.teacher.source == "model" || c.teacher.path.empty())
      << r.source() << ": teacher.path is set but teacher.source is '" << c.teacher.source
      << "' (set source = \"model\")";
  TEMPER_CHECK(!c.sft.distill || c.teacher.source == "model")
      << r.source() << ": [sft.distill] needs a teacher model: [teacher] source = \"model\" with path = ...";
  TEMPER_CHECK(!c.sft.teacher_completions || !c.teacher.source.empty())
      << r.source() << ": sft.completions = \"teacher\" needs a [teacher]";
  for (const rl::EnabledMethod& m : c.methods)
    TEMPER_CHECK(!m.setup->needs().teacher || !c.teacher.source.empty())
        << r.source() << ": [" << m.spec->section
        << "] (as set) needs a teacher: add [teacher] with source = \"gold\" (the "
        << "task's solutions), \"dataset\" (teacher_response) or \"model\" (path = ...)";
}

void read_eval(Recipe& r, RunConfig& c) {
  read_section(r, "eval.", [&](KeyVisitor& v) { visit_eval(v, c); });
  c.eval.pass_k = {1};
  if (c.eval.samples > 1) c.eval.pass_k.push_back(c.eval.samples);
  if (r.has_prefix("eval.heldout.")) {
    HeldoutSection h;
    h.task = r.get_string("eval.heldout.task", c.task.name);
    h.params = h.task == c.task.name ? c.task.params : tasks::TaskParams{};
    for (auto& [k, v] : r.get_table("eval.heldout.params.")) h.params[k] = v;
    c.heldout = h;
  }
}

// [[reward]] tables, in order; each term's judge = { ... } its own sub-table.
void read_rewards(Recipe& r, RunConfig& c) {
  for (int64_t i : r.table_array_indices("reward")) {
    const std::string prefix = "reward." + std::to_string(i) + ".";
    rl::RewardTermConfig t;
    read_section(r, prefix, [&](KeyVisitor& v) { t.visit(v); });
    if (r.has_prefix(prefix + "judge.")) {
      rl::JudgeConfig j;
      read_section(r, prefix + "judge.", [&](KeyVisitor& v) { j.visit(v); });
      t.judge = j;
    }
    try {
      t.validate();
    } catch (const Error& e) {
      TEMPER_FAIL() << r.source() << ": [[reward]] " << i + 1 << ": " << e.what();
    }
    for (const rl::RewardTermConfig& o : c.rewards)
      TEMPER_CHECK(o.name != t.name) << r.source() << ": two [[reward]] terms are named '" << t.name << "'";
    c.rewards.push_back(std::move(t));
  }
}

}  // namespace

void LoraSection::visit(KeyVisitor& v) {
  v("rank", config.rank, "the adapters' rank r");
  v("alpha", config.alpha, "the adapters' scale numerator: scale = alpha / r (rslora: alpha / sqrt(r))");
  v("dropout", config.dropout, "dropout on the adapters' input (only 0 so far)");
  v("targets", targets, "the adapted products: q, k, v, o, gate, up, down (or their HF names, q_proj ...)");
  v("rslora", config.use_rslora, "rank-stabilised scale alpha / sqrt(r)");
  v("init", init, "a PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to start from");
  v("base", config.base,
    "the frozen base's block products: f32 (the model's weights), bf16, int4 or nf4 (QLoRA: 4-bit, dequantised in "
    "the product; int4 an f32 scale and zero per 128 inputs, nf4 QLoRA's NormalFloat levels and an f32 absmax per 64 "
    "inputs); embeddings, LM head and norms stay f32",
    kLoraBaseNames);
}

// [lora]: the targets by name, the config validated; what cannot train adapters refused.
void read_lora(Recipe& r, RunConfig& c) {
  if (!r.get_bool("lora.enabled", r.has_prefix("lora."))) return;
  LoraSection l;
  read_section(r, "lora.", [&](KeyVisitor& v) { l.visit(v); });
  l.config.targets.clear();
  for (const std::string& t : l.targets) {
    LoraTarget x;
    TEMPER_CHECK(lora_target_from_name(t, &x))
        << r.source() << ": lora.targets: '" << t << "' is not one of q, k, v, o, gate, up, down";
    l.config.targets.push_back(x);
  }
  try {
    l.config.validate("[lora]");
  } catch (const Error& e) {
    TEMPER_FAIL() << r.source() << ": " << e.what();
  }
  const std::string base(lora_base_name(l.config.base));
  TEMPER_CHECK(c.model.device == "cpu") << r.source() << ": [lora] trains on the CPU so far (model.device = \""
                                        << c.model.device << "\""
                                        << (l.config.base != LoraBase::f32
                                                ? ", lora.base = \"" + base + "\": a held base too"
                                                : std::string())
                                        << "); set model.device = \"cpu\"";
  TEMPER_CHECK(!c.rl.speculative) << r.source() << ": [rl.speculative] with [lora]: not yet (the drafter is the base"
                                  << (l.config.base != LoraBase::f32
                                          ? "; with lora.base = \"" + base + "\" it has no f32 weights to quantise"
                                          : std::string())
                                  << ")";
  // A base held as bf16 / int4 / nf4 has no f32 weights: what writes them or needs their gradient cannot run on it.
  c.lora = std::move(l);
}

// [env] with its params as JSON (TOML literals parsed where they are JSON: numbers, booleans, strings), then what
// cannot run on conversations refused.
void read_env(Recipe& r, RunConfig& c) {
  if (!r.get_bool("env.enabled", r.has_prefix("env."))) return;
  EnvSection e;
  std::map<std::string, std::string> params = r.get_table("env.params.");
  read_section(r, "env.", [&](KeyVisitor& v) { e.visit(v); });
  for (const auto& [k, text] : params) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
    e.options.params[k] = j.is_discarded() ? nlohmann::ordered_json(text) : j;
  }
  try {
    e.options.validate();
    e.rollout.validate();
  } catch (const Error& ex) {
    TEMPER_FAIL() << r.source() << ": " << ex.what();
  }
  for (const rl::EnabledMethod& m : c.methods) {
    const std::string why = m.setup->conversation_refusal();
    TEMPER_CHECK(why.empty()) << r.source() << ": [" << m.spec->section << "] cannot run with [env]: " << why;
  }
  TEMPER_CHECK(!c.rl.speculative) << r.source()
                                  << ": [rl.speculative] cannot run with [env] (not yet on conversations)";
  TEMPER_CHECK(e.mode != "client" || e.options.kind == "program")
      << r.source() << ": env.mode = \"client\" runs your agent: it needs env.kind = \"program\", got '"
      << e.options.kind << "'";
  TEMPER_CHECK(c.sft_steps() == 0 || c.task.name != "episodes")
      << r.source() << ": sft.steps > 0 with [env] needs a [task] with solutions to imitate (a dataset)";
  TEMPER_CHECK(c.eval_every == 0) << r.source()
                                  << ": eval.every with [env]: evaluating conversations is not yet there; "
                                  << "the env/ metrics (env/solved, env/turns) report each step";
  c.env = std::move(e);
}

// [rl.async] with max_staleness > 0: what it cannot run with yet, named with the recipe (rl_trainer.h).
static void check_async(const Recipe& r, const RunConfig& c) {
  if (!c.rl.async || !c.rl.async->on() || c.rl_steps() == 0) return;
  const std::string off = "; or set rl.async.max_staleness = 0";
  TEMPER_CHECK(!c.rl.speculative) << r.source() << ": [rl.async] with [rl.speculative]: not yet (the drafter would "
                                  << "follow the live weights, not the explorer's snapshot); remove one" << off;
  TEMPER_CHECK(c.model.device == "cpu") << r.source()
                                        << ": [rl.async] runs its explorer on the CPU so far (model.device = \""
                                        << c.model.device << "\")" << off;
  try {
    rl::check_async_methods(c.methods);
  } catch (const Error& e) {
    TEMPER_FAIL() << r.source() << ": " << e.what();
  }
}

namespace {

// run.shard_gradients (ZeRO-2) shards the moments too (shard_optimizer not false), on the CPU, without [lora].
void check_shard_gradients(const Recipe& r, const RunConfig& c) {
  if (!c.run.shard_gradients) return;
  TEMPER_CHECK(c.run.shard_optimizer)
      << r.source() << ": run.shard_gradients = true shards the AdamW moments too (ZeRO-2 includes ZeRO-1): leave "
      << "run.shard_optimizer out or set it true";
  TEMPER_CHECK(!c.lora) << r.source() << ": run.shard_gradients with [lora]: not supported (only the adapters "
                        << "train and their gradients are small); set run.shard_gradients = false (run.shard_optimizer "
                        << "shards their AdamW moments)";
  TEMPER_CHECK(c.model.device == "cpu") << r.source() << ": run.shard_gradients runs on the CPU (model.device = \""
                                        << c.model.device << "\": not yet); set it false";
}

}  // namespace

RunConfig read_run_config(Recipe& r, std::span<const rl::MethodSpec* const> table) {
  RunConfig c;
  read_model_and_task(r, c);
  read_methods(r, c, table);
  read_stages(r, c);
  check_unused_advantage_keys(r, c);
  derive_defaults(c);
  read_teacher(r, c);
  read_eval(r, c);
  read_rewards(r, c);
  read_env(r, c);
  read_lora(r, c);
  check_async(r, c);
  c.run.out = default_out(c);
  read_section(r, "run.", [&](KeyVisitor& v) { c.run.visit(v); });
  check_shard_gradients(r, c);
  TEMPER_CHECK(c.sft_steps() >= 0 && c.rl_steps() >= 0) << r.source() << ": sft.steps and rl.steps must be >= 0";
  TEMPER_CHECK(c.sft_steps() + c.rl_steps() > 0) << r.source() << ": nothing to do: sft.steps and rl.steps are both 0";
  TEMPER_CHECK(c.run.keep_last >= 1) << r.source() << ": run.keep_last must be >= 1, got " << c.run.keep_last;
  TEMPER_CHECK(c.run.threads == 0 || thread_count_valid(c.run.threads))
      << r.source() << ": run.threads = " << c.run.threads << ": expected 0 (every core) or " << thread_count_range();
  try {  // the sections' own checks (counts bounded, ranges), named with the recipe
    if (c.rl_steps() > 0) c.rl.validate();
    c.sft.validate();
    c.eval.validate();
  } catch (const Error& e) {
    TEMPER_FAIL() << r.source() << ": " << e.what();
  }
  return c;
}

// ---- --list-keys ----------------------------------------------------------------------------------------------------

namespace {

// Lists a section's keys as Markdown rows: each key's default is what a reader of an empty recipe resolves it to.
class KeyLister final : public KeyVisitor {
 public:
  KeyLister(Recipe& empty, const std::string& prefix, std::string& out)
      : r_(empty), reader_(empty, prefix), prefix_(prefix), out_(out) {}
  void value(std::string_view k, int64_t& f, std::string_view d) override {
    reader_.value(k, f, d), row(k, "integer", d);
  }
  void value(std::string_view k, double& f, std::string_view d) override {
    reader_.value(k, f, d), row(k, "number", d);
  }
  void value(std::string_view k, float& f, std::string_view d) override { reader_.value(k, f, d), row(k, "number", d); }
  void value(std::string_view k, bool& f, std::string_view d) override { reader_.value(k, f, d), row(k, "boolean", d); }
  void value(std::string_view k, std::string& f, std::string_view d) override {
    reader_.value(k, f, d), row(k, "string", d);
  }
  void value(std::string_view k, std::vector<int64_t>& f, std::string_view d) override {
    reader_.value(k, f, d), row(k, "integers", d);
  }
  void strings(std::string_view k, std::vector<std::string>& f, std::string_view d) override {
    reader_.strings(k, f, d), row(k, "strings", d);
  }
  void choice(std::string_view k, std::string& f, std::string_view d,
              const std::vector<std::string>& choices) override {
    reader_.choice(k, f, d, choices);
    std::string one_of;
    for (const std::string& c : choices) one_of += (one_of.empty() ? "" : ", ") + ("`\"" + c + "\"`");
    row(k, "one of " + one_of, d);
  }

 private:
  void row(std::string_view k, const std::string& type, std::string_view doc) {
    const std::string key = prefix_ + std::string(k);
    out_ +=
        "| `" + std::string(k) + "` | " + type + " | `" + r_.resolved_literal(key) + "` | " + std::string(doc) + " |\n";
  }
  Recipe& r_;
  RecipeReader reader_;
  std::string prefix_;
  std::string& out_;
};

template <class F>
void list_section(std::string& out, const std::string& section, const std::string& intro, F&& visit) {
  Recipe empty = Recipe::parse("", "<defaults>");
  out += "\n### [" + section + "]\n\n" + intro + "\n\n| key | type | default | meaning |\n|---|---|---|---|\n";
  KeyLister lister(empty, section + ".", out);
  visit(static_cast<KeyVisitor&>(lister));
}

}  // namespace

std::string list_keys_markdown(std::span<const rl::MethodSpec* const> table) {
  RunConfig c;
  derive_defaults(c);
  std::string out;
  list_section(out, "model", "The policy: a model file or a preset.", [&](KeyVisitor& v) { c.model.visit(v); });
  list_section(out, "task", "What the policy is trained on; `[task.params]` holds the task's own parameters.",
               [&](KeyVisitor& v) { c.task.visit(v); });
  list_section(
      out, "curriculum",
      "The section turns the SFT -> RL curriculum on: it sets `sft.steps` and `rl.steps`, which must then be left out.",
      [&](KeyVisitor& v) { rl::CurriculumConfig().visit(v); });
  list_section(out, "sft",
               "Supervised fine-tuning on gold (or teacher) completions, before RL. With `model.path` (a pretrained "
               "model) `lr` defaults to " +
                   toml_float(kPretrainedSftLr) + " instead.",
               [&](KeyVisitor& v) {
                 visit_stage(v, c.sft_stage, true);
                 c.sft.visit(v);
               });
  list_section(out, "sft.distill", "Logit distillation from `[teacher]` source = \"model\" (the section turns it on).",
               [&](KeyVisitor& v) { rl::DistillConfig().visit(v); });
  list_section(out, "rl",
               "The RL stage: GRPO and its variants. With `model.path` (a pretrained model) `max_new` defaults to " +
                   std::to_string(kPretrainedMaxNew) + " instead (and `eval.max_new` with it).",
               [&](KeyVisitor& v) {
                 visit_stage(v, c.rl_stage, true);
                 c.rl.visit(v);
                 std::string order;
                 v("hook_order", order, kHookOrderDoc);
               });
  list_section(out, "rl.speculative",
               "EfficientRollout: speculative rollouts with a 4-bit self-drafter (the section turns it on).",
               [&](KeyVisitor& v) { rl::SpeculativeConfig().visit(v); });
  list_section(out, "rl.async",
               "Rollouts on the previous weights: an explorer thread samples the next batch while the trainer "
               "updates; the loss corrects the staleness (the section turns it on).",
               [&](KeyVisitor& v) { rl::AsyncConfig().visit(v); });
  for (const rl::MethodSpec* spec : table) {
    std::unique_ptr<rl::MethodSetup> setup = spec->setup();
    list_section(out, std::string(spec->section),
                 std::string(spec->summary) +
                     " (the section turns it on; `enabled = false` keeps it off). Hook order " +
                     std::to_string(spec->order) + ".",
                 [&](KeyVisitor& v) { setup->visit(v); });
  }
  list_section(out, "[reward]",
               "A reward term (an array of tables: one `[[reward]]` per term; none: the task's verifier alone). "
               "Each has one source: `builtin = true`, `program = [...]` or `judge = { ... }` (below); the total "
               "reward is the weighted sum.",
               [&](KeyVisitor& v) { rl::RewardTermConfig().visit(v); });
  list_section(out, "[reward].judge", "An LLM judge (`judge = { model = ..., template = ... }` in a `[[reward]]`).",
               [&](KeyVisitor& v) { rl::JudgeConfig().visit(v); });
  list_section(out, "teacher", "The teacher the methods and SFT stages that use one ask for.",
               [&](KeyVisitor& v) { c.teacher.visit(v); });
  list_section(out, "eval",
               "Held-out evaluation; `[eval.heldout]` (`task`, `[eval.heldout.params]`) adds a second task.",
               [&](KeyVisitor& v) { visit_eval(v, c); });
  c.run.out = default_out(c);
  list_section(out, "env", "Multi-turn rollouts against an environment; `[env.params]` holds its own parameters.",
               [&](KeyVisitor& v) { EnvSection().visit(v); });
  list_section(out, "lora",
               "LoRA: low-rank adapters trained on the frozen base (the section turns it on); checkpoints hold them "
               "in PEFT's format; the KL reference is the base.",
               [&](KeyVisitor& v) { LoraSection().visit(v); });
  list_section(out, "run", "The run directory and what is written to it.", [&](KeyVisitor& v) { c.run.visit(v); });
  return out;
}

}  // namespace temper::app

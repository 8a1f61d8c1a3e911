#include "temper/app/eval_cmd.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "temper/app/checkpoint.h"
#include "temper/app/codec.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/settings.h"
#include "temper/core/thread_pool.h"
#include "temper/io/atomic_file.h"
#include "temper/rl/evaluate.h"
#include "temper/rl/methods/fair.h"
#include "temper/tasks/dataset.h"

namespace temper::app {

namespace {

// The task from --task and --param; a file-backed task given only its file (--param path=test.jsonl) is evaluated
// on every row of it.
std::shared_ptr<const tasks::Task> eval_task(const EvalOptions& o) {
  tasks::TaskParams params;
  for (const std::string& kv : o.params) {
    size_t eq = kv.find('=');
    TEMPER_CHECK(eq != std::string::npos && eq > 0) << "--param '" << kv << "': expected key=value";
    params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if ((o.task == "dataset" || o.task == "user_sim") && params.count("path") && !params.count("eval_path") &&
      !params.count("eval_fraction")) {
    params["eval_path"] = params["path"];
    std::fprintf(stderr, "temper eval: every row of %s (no eval_path or eval_fraction given)\n",
                 params["path"].c_str());
  }
  std::shared_ptr<const tasks::Task> task = tasks::make_task(o.task, params);
  tasks::require_answers(*task, "temper eval", {tasks::Split::eval});  // the checker scores answerless rows 0
  return task;
}

// The evaluation's settings from the options, checked against the task (objectives, preference).
rl::EvalConfig eval_config(const EvalOptions& o, const tasks::Task& task) {
  rl::EvalConfig c;
  c.problems = o.problems;
  c.samples = o.samples;
  c.greedy = o.samples == 1;
  c.sampler.temperature = static_cast<float>(o.temperature);
  c.sampler.top_p = static_cast<float>(o.top_p);
  c.max_new = o.max_new;
  c.seed = o.seed;
  c.pass_k = {1};
  c.all_examples = !o.samples_out.empty();
  if (o.samples > 1) c.pass_k.push_back(o.samples);
  c.revisions = o.revisions;
  if (!o.revision_template.empty()) c.revision.revision_template = o.revision_template;
  c.preference = split_numbers(o.preference, "--preference");
  c.objectives = split_words(o.objectives);
  c.ggf = split_numbers(o.ggf, "--ggf");
  if (!o.preference_prefix.empty()) c.preference_prefix = unescape_newlines(o.preference_prefix);
  try {
    rl::check_objectives(c.objectives, task);
  } catch (const Error& e) {
    TEMPER_FAIL() << "--objectives: " << e.what();
  }
  // A preference alone measures [rl.fair]'s default objectives (correct, brevity) when it weighs as many.
  const std::vector<std::string> fair_default = rl::FairConfig{}.objectives;
  if (c.objectives.empty() && c.preference.size() == fair_default.size()) c.objectives = fair_default;
  std::string fair_names;
  for (const std::string& name : fair_default) fair_names += (fair_names.empty() ? "" : ",") + name;
  TEMPER_CHECK(c.preference.empty() || c.objectives.size() == c.preference.size())
      << "--preference has " << c.preference.size() << " values and --objectives names " << c.objectives.size()
      << (c.objectives.empty()
              ? " (the default, " + fair_names + ", weighs " + std::to_string(fair_default.size()) + ")"
              : std::string())
      << "; name as many --objectives (e.g. correct,brevity,format)";
  if (o.speculative) {
    c.draft_head = draft_head_named(o.draft_head, "--draft-head");
    c.speculative_gamma = o.gamma;  // its range is checked where the drafter is attached
  }
  return c;
}

// The result as a line per measure on stdout, JSON (stdout or --json), and every sample (--samples-out).
void report_eval(const EvalOptions& o, const rl::EvalConfig& c, const rl::EvalResult& r, int64_t failures) {
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["task"] = o.task;
  j["problems"] = r.problems;
  j["samples_per_problem"] = o.samples;
  j["greedy"] = c.greedy;
  j["accuracy"] = r.accuracy;
  for (auto& [k, p] : r.pass_at_k) j["pass_at_" + std::to_string(k)] = p;
  j["reward_mean"] = r.reward_mean;
  j["mean_len"] = r.mean_len;
  j["truncated_frac"] = r.truncated_frac;
  nlohmann::ordered_json d = nlohmann::ordered_json::object();
  for (auto& [diff, x] : r.by_difficulty) d[std::to_string(diff)] = {{"samples", x.first}, {"accuracy", x.second}};
  j["by_difficulty"] = d;
  if (!r.solved_within.empty()) j["solved_within_revisions"] = r.solved_within;
  if (!c.preference.empty()) j["preference"] = c.preference;
  if (!c.objectives.empty()) {
    nlohmann::ordered_json ob = nlohmann::ordered_json::object();
    for (size_t k = 0; k < c.objectives.size(); ++k) ob[c.objectives[k]] = r.objective_means[k];
    j["objectives"] = ob;
    j["welfare"] = r.welfare;
  }
  j["reward_failures"] = failures;
  if (o.speculative) j["speculative"] = {{"gamma", o.gamma}, {"drafted", r.drafted}, {"accepted", r.accepted}};
  std::printf("task %s, %lld problems x %lld samples (%s): accuracy %.4f", o.task.c_str(), static_cast<long long>(r.problems),
              static_cast<long long>(o.samples), c.greedy ? "greedy" : "sampled", r.accuracy);
  for (auto& [k, p] : r.pass_at_k) std::printf(", pass@%lld %.4f", static_cast<long long>(k), p);
  std::printf(", mean length %.1f tokens, %.1f%% cut at --max-new %lld or the context\n", r.mean_len,
              100 * r.truncated_frac, static_cast<long long>(o.max_new));
  for (auto& [diff, x] : r.by_difficulty)
    std::printf("  difficulty %d: %lld samples, accuracy %.4f\n", diff, static_cast<long long>(x.first), x.second);
  for (size_t k = 0; k < r.solved_within.size(); ++k)
    std::printf("  solved within %zu revision(s): %.4f\n", k, r.solved_within[k]);
  for (size_t i = 0; i < std::min<size_t>(3, r.examples.size()); ++i)
    std::printf("  example %s: %s -> %s [%s]\n", r.examples[i].id.c_str(), r.examples[i].prompt.c_str(),
                r.examples[i].completion.c_str(), r.examples[i].correct ? "correct" : "wrong");
  if (!o.samples_out.empty()) {
    std::string lines;
    for (const rl::EvalExample& e : r.examples) {
      nlohmann::ordered_json x;
      x["id"] = e.id;
      x["sample"] = e.sample;
      x["prompt"] = e.prompt;
      x["completion"] = e.completion;
      x["answer"] = e.answer;
      x["reward"] = e.reward;
      x["correct"] = e.correct;
      lines += x.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    io::write_text_atomic(o.samples_out, lines);
  }
  std::string text = j.dump(2) + "\n";
  if (!o.json_out.empty()) io::write_text_atomic(o.json_out, text);
  else std::printf("%s", text.c_str());
}

}  // namespace

int eval(const EvalOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  std::shared_ptr<const tasks::Task> task = eval_task(o);
  LoadedModel lm = load_model(o.model);
  attach_device(*lm.model, o.device);
  TEMPER_CHECK(lm.tokenizer) << o.model << ": no tokenizer (tokenizer.json or GGUF tokenizer metadata)";
  rl::PromptCodec codec = make_codec(lm.tokenizer, lm.eos_ids, o.prompt_format, unescape_newlines(o.system_prompt),
                                     unescape_newlines(o.user_template));
  rl::EvalConfig c = eval_config(o, *task);
  const auto t0 = std::chrono::steady_clock::now();
  c.progress = [t0](int64_t done, int64_t total, int64_t tokens) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "temper eval: %lld/%lld samples done, %lld tokens generated (%.0f tokens/s)\n",
                 static_cast<long long>(done), static_cast<long long>(total), static_cast<long long>(tokens),
                 s > 0 ? static_cast<double>(tokens) / s : 0.0);
  };
  reward::SafeRewardOptions safe_opt;
  safe_opt.timeout_s = o.reward_timeout_s;
  reward::SafeReward safe(safe_opt);
  rl::EvalResult r = rl::evaluate(*lm.model, task, codec, c, safe);
  if (!r.speculative.empty()) std::fprintf(stderr, "temper eval: %s\n", r.speculative.c_str());

  report_eval(o, c, r, safe.failures());
  return 0;
}

}  // namespace temper::app

// The options of `temper train`, `eval`, `report` and `compare`.
#include "temper/app/cli_run.h"

#include <memory>

namespace temper::app {

CLI::App* add_train_command(CLI::App& app, TrainOptions& o) {
  auto* trn =
      app.add_subcommand("train", "SFT then RL on a task (no recipe: the built-in quickstart); writes a run directory");
  trn->add_option("recipe", o.recipe, "Recipe (TOML); none: the built-in quickstart");
  trn->add_option("--set", o.sets, "Override a recipe key: --set rl.lr=1e-5 (repeatable)");
  trn->add_option("--out", o.out, "Run directory (default: the recipe's run.out)");
  auto* resume = trn->add_option("--resume", o.resume, "Continue the run in this directory from its newest checkpoint");
  trn->add_flag("--allow-changes", o.allow_changes,
                "With --resume: apply --set / a recipe / --device to the resumed run (recorded in "
                "RUN/history.jsonl); without it changes on resume are refused")
      ->needs(resume);
  trn->add_flag("--fallback", o.fallback,
                "With --resume: when the newest checkpoint fails its checksums, continue from the previous good one")
      ->needs(resume);
  add_threads_option(trn, o.threads, "Threads (default: all cores)");
  trn->add_option("--device", o.device, "cpu, cuda or cuda:N: the policy on that GPU (the recipe's model.device)");
  trn->add_option("--stop-after", o.stop_after,
                  "Checkpoint and exit after this step (as on SIGTERM); continue with --resume");
  trn->add_flag("--list-keys", o.list_keys,
                "Print every recipe section and key with its default and meaning (Markdown)");
  trn->add_option("--connect", o.connect,
                  "HOST:PORT: serve as an explorer of the trainer listening there (its rl.async.explorer_listen; "
                  "TEMPER_EXPLORER_TOKEN as the trainer's); this machine needs the run's model.path");
  trn->add_option("--fd", o.explorer_fd, "An [rl.async] explorer process on this socket (started by temper train)")
      ->group("");
  return trn;
}

CLI::App* add_eval_command(CLI::App& app, EvalOptions& o) {
  auto* evc = app.add_subcommand("eval", "Held-out accuracy of a model on a task: pass@k, mean length, per difficulty");
  evc->add_option("--model", o.model, "Model (Hugging Face directory, a run's checkpoint, or .gguf)")->required();
  evc->add_option("--task", o.task,
                  "Task: arithmetic, countdown, string_ops, compose, constraints, dataset, mixture, user_sim, "
                  "rubric_proxy, code")
      ->capture_default_str();
  evc->add_option("--param", o.params, "Task parameter key=value (repeatable), e.g. --param max_ops=3");
  evc->add_option("--problems", o.problems, "Held-out problems")->capture_default_str();
  evc->add_option("--device", o.device, "cpu, cuda or cuda:N (the model's forwards on that GPU)")
      ->capture_default_str();
  evc->add_option("-k,--samples", o.samples, "Samples per problem (1: greedy)")->capture_default_str();
  evc->add_option("--max-new", o.max_new, "Most new tokens per completion")->capture_default_str();
  evc->add_option("--temperature", o.temperature, "Sampling temperature (k > 1)")->capture_default_str();
  evc->add_option("--top-p", o.top_p, "Nucleus mass (k > 1)")->capture_default_str();
  evc->add_option("--prompt-format", o.prompt_format, "auto, raw or chat")->capture_default_str();
  evc->add_option("--system-prompt", o.system_prompt, "Chat system message (a recipe's model.system_prompt)");
  evc->add_option("--user-template", o.user_template,
                  "How a problem is asked: {question} stands for its text (a recipe's model.user_template)");
  evc->add_option("--seed", o.seed, "Sampling seed")->capture_default_str();
  evc->add_option("--reward-timeout", o.reward_timeout_s,
                  "Seconds a verification may take; a later one scores 0 and is counted (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  evc->add_flag("--speculative", o.speculative,
                "Speculative decoding with the model's 4-bit self-drafter where its cost model predicts a speed-up "
                "(same greedy output)");
  evc->add_option("--gamma", o.gamma, "--speculative: draft tokens per cycle")->capture_default_str();
  evc->add_option("--draft-head", o.draft_head, "--speculative: the drafter's LM head: bf16, int4 or f32")
      ->capture_default_str();
  evc->add_option("--revisions", o.revisions,
                  "Sequential revision rounds after a wrong first attempt (feedback: incorrect)")
      ->capture_default_str();
  evc->add_option("--revision-template", o.revision_template,
                  "Revision prompt with {question} and {attempt} (default: the question, the attempt, \"The previous "
                  "answer is incorrect.\")");
  evc->add_option("--json", o.json_out, "Write the JSON result here (default: stdout)");
  evc->add_option("--samples-out", o.samples_out,
                  "Write every sample here (JSONL: id, sample, prompt, completion, answer, reward, correct)");
  add_threads_option(evc, o.threads, "Threads");
  evc->add_option("--preference", o.preference,
                  "Fair RL: the trade-off, per-objective weights summing to 1 (e.g. 0.7,0.3), written before each "
                  "question");
  evc->add_option("--objectives", o.objectives,
                  "Objectives measured per sample: correct, brevity, format, task:K or task:NAME (an entry of the "
                  "task's reward vector; comma list; with a --preference of 2 values, default correct,brevity)");
  evc->add_option("--ggf", o.ggf, "Gini weights, strictly decreasing (default: linear)");
  evc->add_option("--preference-prefix", o.preference_prefix,
                  "The preference's text before the question, with {p} (default: \"<pref {p}>\\n\")");
  return evc;
}

CLI::App* add_report_command(CLI::App& app, ReportOptions& o) {
  auto* rep = app.add_subcommand("report", "Write RUN_DIR/report.html: metric charts, summary, samples, config");
  rep->add_option("run_dir", o.run_dir, "Run directory (holds metrics.jsonl)")->required();
  rep->add_option("--out", o.out, "Write the page here instead of RUN_DIR/report.html");
  return rep;
}

CLI::App* add_compare_command(CLI::App& app, CompareCmdOptions& o) {
  auto* cmpc = app.add_subcommand(
      "compare", "Compare runs side by side: charts per metric (a colour per arm), summary over seeds");
  cmpc->add_option("runs", o.runs, "ARM=RUN_DIR, several per arm for seeds")->required();
  cmpc->add_option("--out", o.out, "Output directory (compare.html, <kind>_<metric>.svg, summary.md/json)")->required();
  cmpc->add_option("--metric", o.metrics, "KIND:NAME (default: eval_accuracy, reward_mean, entropy, response_len_mean)")
      ->allow_extra_args(false);  // one value per --metric: a run list may follow
  cmpc->add_option("--smooth", o.smooth, "Trailing mean over N steps in per-step charts")->capture_default_str();
  cmpc->add_option("--tail", o.tail, "Share of the last steps a per-step final value averages")->capture_default_str();
  cmpc->add_option("--title", o.title, "Page title")->capture_default_str();
  return cmpc;
}

void add_run_commands(CLI::App& app, std::vector<Command>& commands) {
  auto tro = std::make_shared<TrainOptions>();
  commands.push_back({add_train_command(app, *tro), [tro] { return train(*tro); }});
  auto ev = std::make_shared<EvalOptions>();
  commands.push_back({add_eval_command(app, *ev), [ev] { return eval(*ev); }});
  auto ro = std::make_shared<ReportOptions>();
  commands.push_back({add_report_command(app, *ro), [ro] { return report(*ro); }});
  auto cmp = std::make_shared<CompareCmdOptions>();
  commands.push_back({add_compare_command(app, *cmp), [cmp] { return compare(*cmp); }});
}

}  // namespace temper::app

// The run's settings: every section declared once (the reader accepts every key --list-keys prints, at
// its listed default; recipes/README.md holds the same tables), methods from a table (a trivial method added
// the way docs/ARCHITECTURE.md "Adding a method" says, then trained one step), conflicts between methods
// refused with both sides named, and the hook order resolved, saved and checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error_of.h"
#include "rl/letter_task.h"
#include "temper/app/run_config.h"
#include "temper/core/error.h"
#include "temper/rl/methods/registry.h"
#include "temper/rl/methods/stare.h"

using namespace temper;
using namespace temper::app;

namespace {

using test::error_of;

RunConfig read(const std::string& toml, std::span<const rl::MethodSpec* const> table = rl::method_table()) {
  Recipe r = Recipe::parse(toml, "t.toml");
  RunConfig c = read_run_config(r, table);
  r.check_all_read();
  return c;
}

// ---- A trivial method, added as docs/ARCHITECTURE.md "Adding a method" says ----------------------------------------
// 1. Its settings: a config struct that declares its keys once.
struct ScaleConfig {
  double scale = 1.0;
  void visit(KeyVisitor& v) { v("scale", scale, "every token weight is multiplied by this"); }
  void validate() const { TEMPER_CHECK(scale > 0) << "rl.scale.scale must be > 0, got " << scale; }
};
// 2. The method: the hooks it needs.
class Scale final : public rl::Method {
 public:
  explicit Scale(ScaleConfig c) : cfg_(c) {}
  std::string name() const override { return "scale"; }
  void token_weights(rl::Batch& b) override {
    for (rl::Trajectory& t : b.traj)
      for (float& w : t.weight) w *= static_cast<float>(cfg_.scale);
    ++calls_;
  }
  void metrics(rl::Metrics& m) const override { m.emplace_back("scale_calls", static_cast<double>(calls_)); }

 private:
  ScaleConfig cfg_;
  int64_t calls_ = 0;
};
// 3. Its setup and its spec: the section, its place in the hook order.
class ScaleSetup final : public rl::MethodSetupOf<ScaleConfig> {
  std::unique_ptr<rl::Method> make(const rl::MethodDeps&) const override { return std::make_unique<Scale>(cfg); }
};
const rl::MethodSpec kScaleMethod{"scale", "rl.scale", 95, "a test method: token weights scaled",
                                  []() -> std::unique_ptr<rl::MethodSetup> { return std::make_unique<ScaleSetup>(); }};
// 4. One line in the table (here a test's own table beside STARE).
const rl::MethodSpec* const kTable[] = {&kScaleMethod, &rl::kStareMethod};

}  // namespace

TEST(Methods, ATrivialMethodAddedAsTheDocsSayReadsItsKeysAndTrains) {
  RunConfig c = read("[rl]\nsteps = 1\n[rl.scale]\nscale = 2.5\n[rl.stare]\n", kTable);
  ASSERT_EQ(c.methods.size(), 2u);
  EXPECT_EQ(c.hook_order(), "stare,scale");  // by order (90 < 95), not by table position
  EXPECT_NE(
      error_of([] { read("[rl]\nsteps = 1\n[rl.scale]\nscale = -1\n", kTable); }).find("rl.scale.scale must be > 0"),
      std::string::npos);
  EXPECT_NE(
      error_of([] { read("[rl]\nsteps = 1\n[rl.scale]\nscal = 2\n", kTable); }).find("unknown key 'rl.scale.scal'"),
      std::string::npos);

  // Built from the table and trained one step: its hook ran and its metric is reported.
  test::RlSetup s;
  std::vector<std::unique_ptr<rl::Method>> methods;
  std::vector<rl::Method*> raw;
  for (const rl::EnabledMethod& m : c.methods) raw.push_back(methods.emplace_back(m.setup->make({})).get());
  rl::RlTrainer trainer(s.model, s.task, test::codec(), test::config(), s.safe, raw);
  rl::Metrics m = trainer.step();
  EXPECT_EQ(test::value(m, "scale_calls"), 1.0);
  EXPECT_DOUBLE_EQ(static_cast<const ScaleSetup&>(*c.methods[1].setup).cfg.scale, 2.5);  // its key was read
  EXPECT_EQ(methods[1]->name(), "scale");
}

TEST(RunConfig, EveryListedKeyIsReadAtItsListedDefault) {
  const std::string md = list_keys_markdown(rl::method_table());
  // Each section's rows: | `key` | type | `default` | meaning |
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> sections;
  std::istringstream in(md);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.rfind("### [", 0) == 0) section = line.substr(5, line.rfind(']') - 5);  // "[reward]" for [[reward]]
    if (line.rfind("| `", 0) != 0) continue;
    const size_t k1 = 3, k2 = line.find('`', k1);
    const size_t d1 = line.find("| `", k2 + 2) + 3, d2 = line.find("` |", d1);
    sections[section].emplace_back(line.substr(k1, k2 - k1), line.substr(d1, d2 - d1));
  }
  for (const char* s :
       {"model", "task", "sft", "rl", "rl.speculative", "rl.stare", "rl.zppo", "teacher", "eval", "env", "run"})
    EXPECT_TRUE(sections.count(s)) << "no section [" << s << "] in --list-keys";
  EXPECT_NE(md.find("| `advantage_eps` | number | `0.0001` |"), std::string::npos);  // once undocumented
  for (auto& [sec, keys] : sections) {
    if (sec == "curriculum") continue;      // needs a compositional task and no steps keys: tests/e2e/curriculum.sh
    if (sec == "[reward].judge") continue;  // needs a judge model: tests/rl/test_judge_reward.cpp, tests/e2e/judge.sh
    const bool term = sec == "[reward]";    // "### [[reward]]": an array of tables, one source needed
    std::string toml = term ? "[[reward]]\n" : "[" + sec + "]\n";
    for (auto& [k, lit] : keys) {
      if (k == "hook_order") continue;
      std::string v = sec == "rl" && k == "steps" ? "1" : lit;
      if (term && k == "name") v = "\"t\"";
      if (term && k == "builtin") v = "true";
      if (sec == "env" && k == "kind") v = "\"guess\"";  // no environment by default
      toml += k + " = " + v + "\n";
    }
    if (sec != "rl") toml += "[rl]\nsteps = 1\n";
    if (sec == "rl.turing") toml += "[task]\nname = \"user_sim\"\n";
    if (sec == "rl.zppo" || sec == "sft.distill") toml += "[teacher]\nsource = \"model\"\npath = \"m\"\n";
    SCOPED_TRACE(toml);
    Recipe r = Recipe::parse(toml, "t.toml");
    EXPECT_NO_THROW({
      read_run_config(r, rl::method_table());
      r.check_all_read();
    }) << error_of([&] {
      Recipe q = Recipe::parse(toml, "t.toml");
      read_run_config(q, rl::method_table());
      q.check_all_read();
    });
    for (auto& [k, lit] : keys) {  // the default read back is the listed one
      if (term && (k == "name" || k == "builtin")) continue;
      if (sec == "env" && k == "kind") continue;
      if (k != "hook_order" && !(sec == "rl" && k == "steps")) {
        EXPECT_EQ(r.resolved_literal((term ? std::string("reward.0") : sec) + "." + k), lit) << sec << "." << k;
      }
    }
  }
}

// [env]: an environment draws its own problems (task "episodes") unless a task is named; its params reach it
// as JSON; what cannot run on conversations is refused with the reason; STARE runs.
TEST(RunConfig, EnvSectionReadsParamsAndRefusesWhatCannotRunOnConversations) {
  RunConfig c = read(
      "[env]\nkind = \"calculator\"\nmax_turns = 3\n[env.params]\ndigits = 5\nname = \"x\"\n"
      "[rl]\nsteps = 1\n[rl.stare]\n");
  ASSERT_TRUE(c.env);
  EXPECT_EQ(c.task.name, "episodes");
  EXPECT_EQ(c.env->options.kind, "calculator");
  EXPECT_EQ(c.env->rollout.max_turns, 3);
  EXPECT_EQ(c.env->options.params.dump(), R"({"digits":5,"name":"x"})");
  EXPECT_EQ(read("[env]\nkind = \"guess\"\n[task]\nname = \"arithmetic\"\n[rl]\nsteps = 1\n").task.name, "arithmetic");
  EXPECT_FALSE(read("[rl]\nsteps = 1\n").env);
  const std::string dre = error_of([] { read("[env]\nkind = \"guess\"\n[rl]\nsteps = 1\n[rl.dre]\n"); });
  EXPECT_NE(dre.find("t.toml: [rl.dre] cannot run with [env]: it reads or rewrites single completions"),
            std::string::npos)
      << dre;
  EXPECT_NE(error_of([] {
              read("[env]\nkind = \"guess\"\n[rl]\nsteps = 1\n[rl.speculative]\n");
            }).find("[rl.speculative] cannot run with [env]"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              read("[env]\nkind = \"guess\"\n[rl]\nsteps = 1\n[eval]\nevery = 5\n");
            }).find("eval.every with [env]"),
            std::string::npos);
  EXPECT_NE(error_of([] { read("[env]\nkind = \"guess\"\n[sft]\nsteps = 2\n"); }).find("sft.steps > 0 with [env]"),
            std::string::npos);
  EXPECT_NE(error_of([] { read("[env]\nkind = \"program\"\n[rl]\nsteps = 1\n"); }).find("env.program"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              read("[env]\nkind = \"guess\"\nmax_turns = 0\n[rl]\nsteps = 1\n");
            }).find("env.max_turns must be >= 1"),
            std::string::npos);
  // [rl.async]: the explorer thread converses, or explorer ranks (each a block of the round's problems).
  EXPECT_EQ(read("[env]\nkind = \"guess\"\n[rl]\nsteps = 2\n[rl.async]\nmax_staleness = 1\n").rl.async->max_staleness,
            1);
  const RunConfig one =
      read("[env]\nkind = \"guess\"\n[rl]\nsteps = 2\n[rl.async]\nmax_staleness = 1\nexplorer_ranks = 1\n");
  EXPECT_EQ(one.rl.async->explorer_ranks, 1);
  EXPECT_TRUE(one.env.has_value());
  EXPECT_EQ(read("[env]\nkind = \"guess\"\n[rl]\nsteps = 2\n[rl.async]\nmax_staleness = 1\nexplorer_ranks = 2\n")
                .rl.async->explorer_ranks,
            2);
  // Explorer processes converse too (each its own environment); they and explorer ranks are one choice.
  EXPECT_EQ(read("[env]\nkind = \"guess\"\n[rl]\nsteps = 2\n[rl.async]\nmax_staleness = 1\nexplorer_processes = 2\n")
                .rl.async->explorer_processes,
            2);
  EXPECT_NE(error_of([] {
              read("[rl]\nsteps = 2\n[rl.async]\nmax_staleness = 1\nexplorer_processes = 2\nexplorer_ranks = 1\n");
            }).find("explorer_processes = 2 and explorer_ranks = 1: choose one"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              read("[rl]\nsteps = 2\n[rl.async]\nmax_staleness = 1\nexplorer_processes = 1\nkill_steps = [0]\n");
            }).find("kill_steps: steps count from 1"),
            std::string::npos);
  EXPECT_EQ(
      read("[rl]\nsteps = 2\n[rl.async]\nmax_staleness = 1\nexplorer_processes = 3\n").rl.async->explorer_processes, 3);
}

TEST(RunConfig, RecipeReadmeKeyTablesAreCurrent) {
  std::ifstream f(std::string(TEMPER_SOURCE_DIR) + "/recipes/README.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str(), begin = "<!-- keys: begin (scripts/gen-recipe-keys) -->\n",
                    end = "<!-- keys: end -->";
  const size_t b = text.find(begin), e = text.find(end);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos) << "recipes/README.md lacks the generated key tables";
  EXPECT_EQ(text.substr(b + begin.size(), e - b - begin.size()), list_keys_markdown(rl::method_table()))
      << "recipes/README.md's key tables are stale: run scripts/gen-recipe-keys";
}

TEST(RunConfig, AReplacingDiscriminatorDefaultsToTheDistributionMatchingPoint) {
  // Reverse KL at weight coef, RLOO's leave-one-out baseline, no std scaling (docs/METHODS.md derives why).
  RunConfig c = read("[rl]\nsteps = 1\n[rl.discriminator]\ncoef = 0.5\n");
  EXPECT_DOUBLE_EQ(c.rl.loss.kl_coef, 0.5);
  EXPECT_EQ(c.rl.loss.kl_estimator, rl::KlEstimator::k2);
  EXPECT_EQ(c.rl.advantage.estimator, rl::AdvantageEstimator::rloo);
  EXPECT_EQ(c.rl.advantage.scale, rl::RewardScale::none);
  RunConfig r = read("[rl]\nsteps = 1\n[rl.discriminator]\nkl = \"reward\"\n");  // the KL in the reward
  EXPECT_DOUBLE_EQ(r.rl.loss.kl_coef, 0.0);
  EXPECT_EQ(r.rl.advantage.estimator, rl::AdvantageEstimator::rloo);
  RunConfig a = read("[rl]\nsteps = 1\n[rl.discriminator]\ncombine = \"add\"\n");  // no such point: defaults
  EXPECT_EQ(a.rl.loss.kl_estimator, rl::KlEstimator::k3);
  EXPECT_EQ(a.rl.advantage.estimator, rl::AdvantageEstimator::grpo);
}

TEST(RunConfig, ConflictsBetweenMethodsAreRefusedNamingBothSides) {
  // fair's scalarised reward would be overwritten by a replacing discriminator.
  std::string e = error_of([] { read("[rl]\nsteps = 1\n[rl.fair]\n[rl.discriminator]\n"); });
  EXPECT_NE(e.find("[rl.fair]"), std::string::npos) << e;
  EXPECT_NE(e.find("[rl.discriminator] with combine = \"replace\""), std::string::npos) << e;
  EXPECT_NO_THROW(read("[rl]\nsteps = 1\n[rl.fair]\n[rl.discriminator]\ncombine = \"add\"\n"));
  // ZPPO and a replacing discriminator both set rl.scale_rewards' default: the recipe chooses.
  e = error_of([] { read("[rl]\nsteps = 1\n[rl.zppo]\nmode = \"buffer\"\n[rl.discriminator]\n"); });
  EXPECT_NE(
      e.find("[rl.discriminator] sets the default of rl.scale_rewards to \"none\" and [rl.zppo] to \"batch_active\""),
      std::string::npos)
      << e;
  RunConfig z = read("[rl]\nsteps = 1\nscale_rewards = \"group\"\n[rl.zppo]\nmode = \"buffer\"\n[rl.discriminator]\n");
  EXPECT_EQ(z.rl.advantage.scale, rl::RewardScale::group);
  EXPECT_EQ(z.rl.epochs, 4);                 // ZPPO's default
  EXPECT_DOUBLE_EQ(z.rl.loss.kl_coef, 1.0);  // the discriminator's
  // A method that sets the advantages: a non-default estimator or scale would do nothing.
  e = error_of([] { read("[rl]\nsteps = 1\nadvantage = \"rloo\"\n[rl.graphpo]\n"); });
  EXPECT_NE(e.find("[rl.graphpo] sets the advantages itself, so rl.advantage = \"rloo\" would have no effect"),
            std::string::npos)
      << e;
  e = error_of([] { read("[rl]\nsteps = 1\nscale_rewards = \"batch\"\n[rl.rcsd]\n"); });
  EXPECT_NE(e.find("[rl.rcsd] sets the advantages itself, so rl.scale_rewards"), std::string::npos) << e;
  EXPECT_NO_THROW(read(
      "[rl]\nsteps = 1\nadvantage = \"grpo\"\nscale_rewards = \"group\"\n[rl.graphpo]\n"));  // a resolved config.toml
  EXPECT_NO_THROW(read("[rl]\nsteps = 1\nscale_rewards = \"batch\"\n[rl.rcsd]\ncombine = \"add\"\n"));
  // Two that set the advantages, two that fork rollouts.
  e = error_of([] { read("[rl]\nsteps = 1\n[rl.graphpo]\n[rl.rcsd]\n"); });
  EXPECT_NE(e.find("[rl.graphpo] and [rl.rcsd] with combine = \"replace\" both set the advantages"), std::string::npos)
      << e;
  e = error_of([] { read("[rl]\nsteps = 1\n[rl.dre]\n[rl.graphpo]\nexpand_budget = 2\nreallocate = true\n"); });
  EXPECT_NE(e.find("[rl.dre] with mode = \"online\" and [rl.graphpo] with reallocate = true both fork rollouts"),
            std::string::npos)
      << e;
  EXPECT_NO_THROW(
      read("[rl]\nsteps = 1\n[rl.dre]\nmode = \"offline\"\n[rl.graphpo]\nexpand_budget = 2\nreallocate = true\n"));
  // Trajectories appended after a method set the rewards would miss it: ZPPO's BCQ groups, DRE's regenerations.
  e = error_of([] { read("[rl]\nsteps = 1\n[rl.fair]\n[rl.zppo]\n[teacher]\nsource = \"gold\"\n"); });
  EXPECT_NE(e.find("[rl.zppo] with mode = \"zppo\" appends trajectories after [rl.fair] has set the round's rewards"),
            std::string::npos)
      << e;
  e = error_of([] { read("[rl]\nsteps = 1\n[rl.discriminator]\ncombine = \"add\"\n[rl.dre]\nmode = \"offline\"\n"); });
  EXPECT_NE(
      e.find("[rl.dre] with mode = \"offline\" appends trajectories after [rl.discriminator] with combine = \"add\""),
      std::string::npos)
      << e;
  EXPECT_NO_THROW(read("[rl]\nsteps = 1\n[rl.fair]\n[rl.zppo]\nmode = \"buffer\"\n[rl.dre]\n"));
}

TEST(RunConfig, AChoiceOutsideItsNamesIsRefusedNamingTheKeyAndTheNames) {
  // Once checked by each config's validate() on strings; the enums' name tables refuse them as the recipe is read.
  const std::pair<std::string, std::string> cases[] = {
      {"[rl.fair]\nsft_targets = \"often\"\n", "'rl.fair.sft_targets' must be one of same, preference, got 'often'"},
      {"[rl.fair]\nwelfare = \"nash\"\n", "'rl.fair.welfare' must be one of ggf, linear"},
      {"[task]\nname = \"user_sim\"\n[rl.turing]\njudge = \"llm\"\n",
       "'rl.turing.judge' must be one of scripted, discriminator"},
      {"[rl.rcsd]\ncombine = \"mix\"\n", "'rl.rcsd.combine' must be one of replace, add, got 'mix'"},
      {"[rl.rcsd]\nteacher = \"ema\"\n", "'rl.rcsd.teacher' must be one of policy, initial, got 'ema'"},
      {"[rl.rcsd]\nmode = \"forward_kl\"\n", "'rl.rcsd.mode' must be one of sampled, reverse_kl"},
      {"[rl.discriminator]\nfeatures = \"bag\"\n", "'rl.discriminator.features' must be one of embedding, ngrams"},
      {"[rl.discriminator]\nreal = \"human\"\n", "'rl.discriminator.real' must be one of gold, teacher"},
      {"[rl]\nloss_agg = \"sum\"\n",
       "'rl.loss_agg' must be one of token_mean, seq_mean_token_mean, seq_mean_token_sum_norm"},
  };
  for (const auto& [toml, want] : cases) {
    const std::string e = error_of([&] { read("[sft]\nsteps = 1\n" + toml); });
    EXPECT_NE(e.find(want), std::string::npos) << toml << " -> " << e;
  }
  EXPECT_NE(error_of([] {
              read("[task]\nname = \"compose\"\n[curriculum]\ntotal = 10\nbudget = \"weeks\"\n");
            }).find("'curriculum.budget' must be one of prompts, steps"),
            std::string::npos);
}

TEST(RunConfig, SftOnAPretrainedModelDefaultsToASmallLearningRate) {
  EXPECT_DOUBLE_EQ(read("[sft]\nsteps = 1\n").sft.train.lr.peak, 1e-3);  // a preset from scratch
  EXPECT_DOUBLE_EQ(read("[model]\npath = \"m.gguf\"\n[sft]\nsteps = 1\n").sft.train.lr.peak, 2e-5);
  EXPECT_DOUBLE_EQ(read("[model]\npath = \"m.gguf\"\n[sft]\nsteps = 1\nlr = 1e-4\n").sft.train.lr.peak, 1e-4);
  // and completions of 256 tokens, not the quickstart's 64 (evaluation follows); a recipe's own wins
  EXPECT_EQ(read("[model]\npath = \"m.gguf\"\n[rl]\nsteps = 1\n").rl.max_new, 256);
  EXPECT_EQ(read("[model]\npath = \"m.gguf\"\n[rl]\nsteps = 1\n").eval.max_new, 256);
  EXPECT_EQ(read("[model]\npath = \"m.gguf\"\n[rl]\nsteps = 1\nmax_new = 32\n").rl.max_new, 32);
  EXPECT_EQ(read("[rl]\nsteps = 1\n").rl.max_new, 64);
}

TEST(RunConfig, HookOrderIsResolvedSavedAndChecked) {
  Recipe r = Recipe::parse("[rl]\nsteps = 1\n[rl.stare]\n[rl.zppo]\nmode = \"buffer\"\n[rl.fair]\n", "t.toml");
  RunConfig c = read_run_config(r, rl::method_table());
  EXPECT_EQ(c.hook_order(), "fair,zppo,stare");
  EXPECT_EQ(r.resolved_literal("rl.hook_order"), "\"fair,zppo,stare\"");
  // The resolved recipe reads back to the same run; a different order is refused.
  Recipe back = Recipe::parse(r.resolved_toml(), "config.toml");
  EXPECT_EQ(read_run_config(back, rl::method_table()).hook_order(), "fair,zppo,stare");
  EXPECT_NO_THROW(back.check_all_read());
  std::string e = error_of([] { read("[rl]\nsteps = 1\nhook_order = \"stare,fair\"\n[rl.stare]\n[rl.fair]\n"); });
  EXPECT_NE(e.find("run in the order 'fair,stare', not 'stare,fair'"), std::string::npos) << e;
}

// model.recompute: read and resolved; rl.reuse_activations (which a recomputing model cannot train from) defaults
// to false with it, and a recipe that asks for both is refused naming both keys.
TEST(RunConfig, RecomputeTurnsActivationReuseOffAndRefusesBoth) {
  RunConfig plain = read("[rl]\nsteps = 1\n");
  EXPECT_FALSE(plain.model.recompute);
  EXPECT_TRUE(plain.rl.reuse_activations);
  Recipe r = Recipe::parse("[model]\nrecompute = true\n[rl]\nsteps = 1\n", "t.toml");
  RunConfig rc = read_run_config(r, rl::method_table());
  EXPECT_TRUE(rc.model.recompute);
  EXPECT_FALSE(rc.rl.reuse_activations);
  EXPECT_EQ(r.resolved_literal("rl.reuse_activations"), "false");
  Recipe back = Recipe::parse(r.resolved_toml(), "config.toml");  // the saved config reads back to the same run
  RunConfig again = read_run_config(back, rl::method_table());
  EXPECT_TRUE(again.model.recompute && !again.rl.reuse_activations);
  EXPECT_FALSE(read("[model]\nrecompute = true\n[rl]\nsteps = 1\nreuse_activations = false\n").rl.reuse_activations);
  const std::string e =
      error_of([] { read("[model]\nrecompute = true\n[rl]\nsteps = 1\nreuse_activations = true\n"); });
  EXPECT_NE(e.find("t.toml: model.recompute = true with rl.reuse_activations = true"), std::string::npos) << e;
  EXPECT_NE(e.find("set rl.reuse_activations = false"), std::string::npos) << e;
}

// run.shard_gradients (ZeRO-2) implies run.shard_optimizer, also in the saved config (a resume reads it back); an
// explicit shard_optimizer = false, [lora] and a device are refused naming the key.
TEST(RunConfig, ShardGradientsImpliesShardOptimizerAndRefusesWhatItCannotShard) {
  Recipe r = Recipe::parse("[rl]\nsteps = 1\n[run]\nshard_gradients = true\n", "t.toml");
  RunConfig c = read_run_config(r, rl::method_table());
  EXPECT_TRUE(c.run.shard_gradients && c.run.shard_optimizer);
  EXPECT_EQ(r.resolved_literal("run.shard_optimizer"), "true");
  Recipe back = Recipe::parse(r.resolved_toml(), "config.toml");
  RunConfig again = read_run_config(back, rl::method_table());
  EXPECT_TRUE(again.run.shard_gradients && again.run.shard_optimizer);
  EXPECT_FALSE(read("[rl]\nsteps = 1\n").run.shard_optimizer);
  const std::string off =
      error_of([] { read("[rl]\nsteps = 1\n[run]\nshard_gradients = true\nshard_optimizer = false\n"); });
  EXPECT_NE(off.find("t.toml: run.shard_gradients = true shards the AdamW moments too"), std::string::npos) << off;
  const std::string lora = error_of([] { read("[rl]\nsteps = 1\n[lora]\nrank = 4\n[run]\nshard_gradients = true\n"); });
  EXPECT_NE(lora.find("run.shard_gradients with [lora]"), std::string::npos) << lora;
  const std::string dev =
      error_of([] { read("[model]\ndevice = \"cuda\"\n[rl]\nsteps = 1\n[run]\nshard_gradients = true\n"); });
  EXPECT_NE(dev.find("run.shard_gradients runs on the CPU (model.device = \"cuda\""), std::string::npos) << dev;
}

// Counts that size allocations are bounded: an absurd one is refused naming the key and the bound, when the recipe
// is read (before the run directory exists), instead of growing memory until std::bad_alloc.
TEST(RunConfig, AbsurdCountsAreRefusedNamingTheKey) {
  struct Case {
    const char* toml;
    const char* says;
  };
  for (const Case& k : {
           Case{"[rl]\nsteps = 1\n[eval]\nproblems = 1000000000\n",
                "eval.problems = 1000000000: expected 1 to 10000000"},
           Case{"[rl]\nsteps = 1\n[eval]\nsamples = 100000\ngreedy = false\n",
                "eval.samples = 100000: expected 1 to 65536"},
           Case{"[rl]\nsteps = 1\n[eval]\nproblems = 1000000\nsamples = 64\ngreedy = false\n",
                "eval.problems x eval.samples = 1000000 x 64 = 64000000 completions: expected at most 10000000"},
           Case{"[rl]\nsteps = 1\n[eval]\nmax_new = 1000000000\n", "eval.max_new = 1000000000: expected 1 to 4194304"},
           Case{"[rl]\nsteps = 1\nprompts_per_step = 1000000000\n",
                "rl.prompts_per_step = 1000000000: expected 1 to 65536"},
           Case{"[rl]\nsteps = 1\ngroup_size = 100000\nmax_seqs = 100000\n",
                "rl.group_size = 100000: expected 1 to 4096"},
           Case{
               "[rl]\nsteps = 1\nprompts_per_step = 65536\ngroup_size = 64\nmax_seqs = 64\n",
               "rl.prompts_per_step x rl.group_size = 65536 x 64 = 4194304 sequences a step: expected at most 1048576"},
           Case{"[rl]\nsteps = 1\nmax_new = 1000000000\n", "rl.max_new = 1000000000: expected 1 to 4194304"},
           Case{"[rl]\nsteps = 1\nkv_memory_mb = 1000000000\n", "rl.kv_memory_mb = 1000000000: expected 1 to 16777216"},
           Case{"[rl]\nsteps = 1\nmax_seqs = 1000000000\n", "rl.max_seqs = 1000000000: expected 1 to 1048576"},
           Case{"[rl]\nsteps = 1\nreuse_activations_mb = 1000000000\n",
                "rl.reuse_activations_mb = 1000000000: expected 0 to 16777216"},
           Case{"[sft]\nsteps = 1\nbatch = 1000000000\n", "sft.batch = 1000000000: expected 1 to 65536"},
           // eval decodes with rl's KV cache even in a run without RL steps
           Case{"[sft]\nsteps = 1\n[rl]\nkv_memory_mb = 1000000000\n",
                "rl.kv_memory_mb (the evaluation's KV cache) = 1000000000: expected 1 to 16777216"},
       }) {
    const std::string e = error_of([&] { read(k.toml); });
    EXPECT_NE(e.find(k.says), std::string::npos) << k.toml << "\n -> " << e;
  }
  // The bounds themselves are accepted.
  EXPECT_EQ(read("[rl]\nsteps = 1\n[eval]\nproblems = 10000000\n").eval.problems, 10000000);
  EXPECT_EQ(read("[rl]\nsteps = 1\nprompts_per_step = 65536\ngroup_size = 16\nmax_seqs = 16\n").rl.prompts_per_step,
            65536);
}

TEST(RunConfig, EveryShippedTrainRecipeReads) {
  // Every recipe `temper train` takes (recipes/*.toml but the flow, control and tabular apps', every experiment's
  // arms and stages) passes the checks train makes before the first step: a recipe that only fails after the SFT
  // stage of experiments/run.sh wastes its hours.
  namespace fs = std::filesystem;
  const fs::path root(TEMPER_SOURCE_DIR);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(root / "recipes")) {
    const std::string name = e.path().filename().string();
    const bool other_app = name.starts_with("flow_") || name.starts_with("control_") || name.starts_with("tabular_");
    if (e.path().extension() == ".toml" && !other_app) files.push_back(e.path());
  }
  for (const auto& e : fs::recursive_directory_iterator(root / "experiments"))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  ASSERT_GT(files.size(), 100u);
  for (const fs::path& f : files) {
    const std::string error = error_of([&] {
      Recipe r = Recipe::load(f.string());
      read_run_config(r, rl::method_table());
      r.check_all_read();
    });
    EXPECT_EQ(error, "(no error)") << f;
  }
}

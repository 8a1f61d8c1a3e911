// Recipes: TOML flattened to dotted keys, --set overrides typed as TOML, typed getters with defaults,
// errors that name the file, line, key and the expected form; unknown keys refused with the known
// keys of their section; the resolved recipe reads back to the same values; the built-in quickstart
// equals recipes/quickstart.toml.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/error_of.h"
#include "temper/app/quickstart.h"
#include "temper/app/recipe.h"
#include "temper/core/error.h"

using namespace temper;
using namespace temper::app;

using test::error_of;

TEST(Recipe, TheFoldedPrintoutShowsWhatTheRecipeGaveAndCountsTheRest) {
  Recipe r = Recipe::parse("[rl]\nlr = 1e-4\n", "r.toml");
  r.set("rl.steps=20");
  EXPECT_DOUBLE_EQ(r.get_double("rl.lr", 1.0), 1e-4);
  EXPECT_EQ(r.get_int("rl.steps", 1), 20);
  EXPECT_EQ(r.get_int("rl.group_size", 8), 8);  // a default
  r.set_default("rl.epochs", "4", "rl.zppo");   // a method's changed default counts as given
  EXPECT_EQ(r.get_int("rl.epochs", 1), 4);
  const std::string folded = r.resolved_toml(true);
  EXPECT_NE(folded.find("1 more at their defaults"), std::string::npos) << folded;
  EXPECT_NE(folded.find("lr = 0.0001"), std::string::npos) << folded;
  EXPECT_NE(folded.find("steps = 20"), std::string::npos) << folded;
  EXPECT_NE(folded.find("epochs = 4"), std::string::npos) << folded;
  EXPECT_EQ(folded.find("group_size"), std::string::npos) << folded;
  EXPECT_NE(r.resolved_toml().find("group_size = 8"), std::string::npos);  // config.toml: every setting
}

TEST(Recipe, TypedValuesDefaultsAndOverrides) {
  Recipe r = Recipe::parse("[rl]\nlr = 1e-4\nsteps = 10\nname = \"x\"\n[task.params]\nmax_ops = 3\nops = \"+-\"\n", "r.toml");
  r.set("rl.steps=20");
  r.set("rl.flag=true");
  r.set("rl.free=some text");
  EXPECT_EQ(r.get_int("rl.steps", 1), 20);
  EXPECT_DOUBLE_EQ(r.get_double("rl.lr", 1.0), 1e-4);
  EXPECT_DOUBLE_EQ(r.get_double("rl.steps", 0), 20.0);  // an integer is a number
  EXPECT_EQ(r.get_string("rl.name", ""), "x");
  EXPECT_TRUE(r.get_bool("rl.flag", false));
  EXPECT_EQ(r.get_string("rl.free", ""), "some text");
  EXPECT_EQ(r.get_int("rl.absent", 7), 7);
  auto t = r.get_table("task.params.");
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t["max_ops"], "3");
  EXPECT_EQ(t["ops"], "+-");
  EXPECT_NO_THROW(r.check_all_read());
  // The resolved recipe reads back to the same values, defaults included.
  Recipe back = Recipe::parse(r.resolved_toml(), "resolved");
  EXPECT_EQ(back.get_int("rl.steps", 0), 20);
  EXPECT_EQ(back.get_int("rl.absent", 0), 7);
  EXPECT_DOUBLE_EQ(back.get_double("rl.lr", 0), 1e-4);
  EXPECT_EQ(back.get_string("rl.free", ""), "some text");
  EXPECT_EQ(back.get_table("task.params.")["ops"], "+-");
}

TEST(Recipe, ASectionSwitchedOffKeepsItsSettingsUnread) {
  Recipe r = Recipe::parse("[rl.stare]\nenabled = false\nw = 2.0\n[rl.dre]\nenabled = true\ndelta = 0.3\n", "off.toml");
  EXPECT_FALSE(r.get_bool("rl.stare.enabled", true));
  EXPECT_TRUE(r.get_bool("rl.dre.enabled", false));
  EXPECT_DOUBLE_EQ(r.get_double("rl.dre.delta", 0.2), 0.3);
  EXPECT_NO_THROW(r.check_all_read());  // rl.stare.w is off with its section
  r.set("rl.stare.enabled=true");       // on, the same key unread is refused
  const std::string e = error_of([&] { r.check_all_read(); });
  EXPECT_NE(e.find("unknown key 'rl.stare.w'"), std::string::npos) << e;
}

TEST(Recipe, ErrorsNameTheFileKeyAndExpectedForm) {
  Recipe r = Recipe::parse("[rl]\nsteps = \"ten\"\nlr = 0.1\nstpes = 3\n", "my.toml");
  std::string e = error_of([&] { r.get_int("rl.steps", 1); });
  EXPECT_NE(e.find("my.toml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("'rl.steps' must be an integer"), std::string::npos) << e;
  r.get_double("rl.lr", 0);
  e = error_of([&] { r.check_all_read(); });
  EXPECT_NE(e.find("my.toml:4: unknown key 'rl.stpes'"), std::string::npos) << e;
  EXPECT_NE(e.find("rl.lr"), std::string::npos) << e;  // the known keys of the section
  e = error_of([&] { Recipe::parse("[rl\nx=1", "broken.toml"); });
  EXPECT_NE(e.find("broken.toml:1"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid TOML"), std::string::npos) << e;
  Recipe c = Recipe::parse("[rl]\nadvantage = \"ppo\"\n", "c.toml");
  e = error_of([&] { c.get_choice("rl.advantage", "grpo", {"grpo", "rloo"}); });
  EXPECT_NE(e.find("must be one of grpo, rloo, got 'ppo'"), std::string::npos) << e;
  e = error_of([&] { c.set("novalue"); });
  EXPECT_NE(e.find("expected key=value"), std::string::npos) << e;
}

TEST(Recipe, BuiltInQuickstartEqualsTheRecipeFile) {
  std::ifstream in(std::string(TEMPER_SOURCE_DIR) + "/recipes/quickstart.toml");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), quickstart_recipe());
  ModelConfig c = quickstart_model_config();
  EXPECT_NO_THROW(c.validate());
  text::Tokenizer t = byte_tokenizer();
  EXPECT_EQ(t.vocab_size(), c.vocab_size);
  EXPECT_EQ(t.encode("12+7="), (std::vector<int32_t>{'1', '2', '+', '7', '='}));
  EXPECT_EQ(t.eos_id(), 256);
  EXPECT_EQ(t.decode(std::vector<int32_t>{'#', ' ', '9', 256}, true), "# 9");
}

TEST(Recipe, AnEmptySectionTurnsItsMethodOn) {
  Recipe r = Recipe::parse("[rl]\nsteps = 2\n[rl.graphpo]\n[rl.stare]\nw = 2\n", "r.toml");
  EXPECT_TRUE(r.has_prefix("rl.graphpo."));  // no keys, still present
  EXPECT_TRUE(r.has_prefix("rl.stare."));
  EXPECT_FALSE(r.has_prefix("rl.dre."));
  EXPECT_FALSE(r.has_prefix("rl.graph."));
}

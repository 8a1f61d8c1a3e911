// The dataset task's curriculum fields: a row's `modules` (the atomic skills it uses) and `set` (the curriculum set it
// belongs to). train_set keeps a set's rows and those without a set; the inventory is every module the file declares;
// a file whose rows declare none cannot serve [curriculum] and says so naming the file and the field; malformed fields
// name file:line and the field. count_coverage (rl/curriculum.h) over a dataset counts each row's modules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/scratch.h"
#include "temper/rl/curriculum.h"
#include "temper/tasks/dataset.h"

using namespace temper;
using namespace temper::tasks;
using temper::test::error_of;

namespace {

const char* kRows = R"({"prompt": "ab|rev=", "answer": "ba", "modules": ["rev"], "set": "sft"})"
                    "\n"
                    R"({"prompt": "ab|dup=", "answer": "abab", "modules": ["dup"], "set": "sft"})"
                    "\n"
                    R"({"prompt": "ab|rev|dup=", "answer": "baba", "modules": ["rev", "dup", "rev"], "set": "rl"})"
                    "\n"
                    R"({"prompt": "ab|sort=", "answer": "ab", "modules": ["sort"]})"
                    "\n";

DatasetConfig config(const std::string& file, const std::string& text, const std::string& train_set = "all") {
  DatasetConfig c;
  c.path = test::write_scratch("dataset_modules", file, text);
  c.train_set = train_set;
  return c;
}

std::vector<std::string> prompts(const DatasetTask& t) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < t.size(Split::train); ++i)
    out.push_back(t.problem(Split::train, static_cast<uint64_t>(i)).prompt);
  return out;
}

}  // namespace

TEST(DatasetModules, RowsDeclareModulesAndSetsAndTrainSetSelectsThem) {
  DatasetTask all(config("rows.jsonl", kRows));
  EXPECT_EQ(all.size(Split::train), 4);
  EXPECT_EQ(all.problem(Split::train, 2).modules, (std::vector<std::string>{"rev", "dup"}));  // repeats once
  EXPECT_TRUE(all.problem(Split::train, 3).modules == std::vector<std::string>{"sort"});
  EXPECT_EQ(all.module_inventory(), (std::vector<std::string>{"dup", "rev", "sort"}));
  DatasetTask sft(config("rows.jsonl", kRows, "sft"));
  EXPECT_EQ(prompts(sft),
            (std::vector<std::string>{"ab|rev=", "ab|dup=", "ab|sort="}));  // a row without a set: every set
  EXPECT_EQ(sft.module_inventory(), all.module_inventory());                // the file's, whatever the set
  DatasetTask rl(config("rows.jsonl", kRows, "rl"));
  EXPECT_EQ(prompts(rl), (std::vector<std::string>{"ab|rev|dup=", "ab|sort="}));
  // The stage's coverage counts the modules of the rows it draws (cycling through them).
  rl::Coverage c = rl::count_coverage(sft, 6);
  EXPECT_EQ(c.problems, 6);
  EXPECT_EQ(c.count.at("rev"), 2);
  EXPECT_EQ(c.count.at("dup"), 2);
  EXPECT_EQ(c.count.at("sort"), 2);
  EXPECT_TRUE(c.missing.empty());
  rl::Coverage r = rl::count_coverage(rl, 2);
  EXPECT_EQ(r.missing, std::vector<std::string>{});
  EXPECT_EQ(r.count.at("rev"), 1);
  // From recipe parameters: train_set is a dataset parameter (not a user simulator's).
  DatasetConfig p = DatasetConfig::from_params({{"path", config("rows.jsonl", kRows).path}, {"train_set", "rl"}});
  EXPECT_EQ(p.train_set, "rl");
  EXPECT_NE(error_of([&] {
              DatasetConfig::from_params({{"path", "x.jsonl"}, {"train_set", "rl"}}, "user_sim");
            }).find("train_set"),
            std::string::npos);
}

TEST(DatasetModules, RowsWithoutModulesOrAnUnknownSetAreRefusedNamingTheFileAndTheField) {
  const DatasetConfig plain = config("plain.jsonl", R"({"prompt": "1+1=", "answer": "2"})"
                                                    "\n");
  DatasetTask t(plain);
  const std::string msg = error_of([&] { t.module_inventory(); });
  EXPECT_NE(msg.find(plain.path), std::string::npos) << msg;
  EXPECT_NE(msg.find("no row has the field 'modules'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[curriculum]"), std::string::npos) << msg;
  const std::string none = error_of([&] { DatasetTask(config("rows.jsonl", kRows, "test")); });
  EXPECT_NE(none.find("field 'set' = \"test\""), std::string::npos) << none;
  EXPECT_NE(none.find("the file's sets: \"rl\", \"sft\""), std::string::npos) << none;
  const std::string bad = error_of([&] {
    DatasetTask(config("bad.jsonl", R"({"prompt": "x", "answer": "1", "modules": "rev"})"
                                    "\n"));
  });
  EXPECT_NE(bad.find("bad.jsonl:1: field 'modules': expected a list of strings"), std::string::npos) << bad;
  const std::string item = error_of([&] {
    DatasetTask(config("bad2.jsonl",
                       "\n"
                       R"({"prompt": "x", "answer": "1", "modules": ["rev", 3]})"
                       "\n"));
  });
  EXPECT_NE(item.find("bad2.jsonl:2: field 'modules[1]': expected a non-empty string"), std::string::npos) << item;
  const std::string set = error_of([&] {
    DatasetTask(config("bad3.jsonl", R"({"prompt": "x", "answer": "1", "set": 1})"
                                     "\n"));
  });
  EXPECT_NE(set.find("bad3.jsonl:1: field 'set': expected a non-empty string"), std::string::npos) << set;
}

// FilteredTask: problems of a finite split left out and the rest renumbered densely (size and problem agree, ids
// unchanged, in order), verification and the rest forwarded; a stream or an index past the end refused.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "common/scratch.h"
#include "temper/core/rng.h"
#include "temper/tasks/filtered_task.h"

using namespace temper;
using namespace temper::tasks;
using temper::test::expect_error;

namespace {

std::shared_ptr<const Task> dataset(int train_rows, int eval_rows) {
  std::string train, eval;
  for (int i = 0; i < train_rows; ++i)
    train += R"({"id": "t)" + std::to_string(i) + R"(", "prompt": "What is )" + std::to_string(i) +
             R"(+1?", "answer": ")" + std::to_string(i + 1) + "\"}\n";
  for (int i = 0; i < eval_rows; ++i)
    eval += R"({"id": "e)" + std::to_string(i) + R"(", "prompt": "Half of )" + std::to_string(2 * i) +
            R"(?", "answer": ")" + std::to_string(i) + "\"}\n";
  const std::string tp = test::write_scratch("filtered_task", "train" + std::to_string(train_rows) + ".jsonl", train);
  if (eval_rows == 0) return make_task("dataset", {{"path", tp}});
  const std::string ep = test::write_scratch("filtered_task", "eval" + std::to_string(eval_rows) + ".jsonl", eval);
  return make_task("dataset", {{"path", tp}, {"eval_path", ep}});
}

}  // namespace

TEST(FilteredTask, LeavesOutRowsAndRenumbersTheRestInOrder) {
  auto inner = dataset(6, 3);
  FilteredTask f(inner, {{Split::train, {4, 1, 4}}, {Split::eval, {0}}});  // a repeat counts once
  ASSERT_EQ(f.size(Split::train), 4);
  ASSERT_EQ(f.size(Split::eval), 2);
  EXPECT_EQ(f.left_out(Split::train), 2);
  std::vector<std::string> ids;
  for (uint64_t i = 0; i < 4; ++i) ids.push_back(f.problem(Split::train, i).id);
  EXPECT_EQ(ids, (std::vector<std::string>{"t0", "t2", "t3", "t5"}));
  EXPECT_EQ(f.problem(Split::eval, 0).id, "e1");
  EXPECT_EQ(f.problem(Split::eval, 1).id, "e2");
  EXPECT_EQ(f.problem(Split::train, 1).prompt, inner->problem(Split::train, 2).prompt);
  expect_error([&] { f.problem(Split::train, 4); }, {"train problem 4", "4 kept problems"});
  // Everything else goes to the inner task.
  const Problem p = f.problem(Split::train, 3);
  EXPECT_TRUE(f.verify(p, "5+1=6\n#### 6").correct);
  EXPECT_FALSE(f.verify(p, "#### 7").correct);
  EXPECT_EQ(f.name(), "dataset");
  EXPECT_EQ(f.extract_answer("x\n#### 12"), inner->extract_answer("x\n#### 12"));
  EXPECT_EQ(f.answer_close(), inner->answer_close());
}

TEST(FilteredTask, MatchesABruteForceRenumberingForAnySet) {
  auto inner = dataset(40, 0);
  Rng rng(7, 0);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<uint64_t> out;
    std::set<uint64_t> gone;
    for (int k = 0, n = static_cast<int>(rng.next_u32() % 40); k < n; ++k) {
      uint64_t i = rng.next_u32() % 40;
      out.push_back(i);
      gone.insert(i);
    }
    if (gone.size() == 40) continue;
    FilteredTask f(inner, {{Split::train, out}});
    std::vector<uint64_t> kept;
    for (uint64_t i = 0; i < 40; ++i)
      if (!gone.count(i)) kept.push_back(i);
    ASSERT_EQ(f.size(Split::train), static_cast<int64_t>(kept.size()));
    for (size_t i = 0; i < kept.size(); ++i) ASSERT_EQ(f.inner_index(Split::train, i), kept[i]) << "trial " << trial;
  }
}

TEST(FilteredTask, NothingLeftOutForwardsAStreamAndItsModules) {
  auto compose = std::shared_ptr<const Task>(make_task("compose", {}));
  FilteredTask f(compose, {});
  EXPECT_EQ(f.size(Split::train), compose->size(Split::train));
  EXPECT_EQ(f.module_inventory(), compose->module_inventory());
  EXPECT_FALSE(f.module_inventory().empty());
  EXPECT_EQ(f.problem(Split::train, 3).id, compose->problem(Split::train, 3).id);
}

TEST(FilteredTask, RefusesAStreamAndAnIndexPastTheEnd) {
  auto arithmetic = std::shared_ptr<const Task>(make_task("arithmetic", {}));
  ASSERT_LT(arithmetic->size(Split::train), 0);
  expect_error([&] { FilteredTask(arithmetic, {{Split::train, {0}}}); }, {"train split is a procedural stream"});
  expect_error([&] { FilteredTask(dataset(6, 3), {{Split::eval, {3}}}); }, {"eval problem 3", "the split has 3"});
}

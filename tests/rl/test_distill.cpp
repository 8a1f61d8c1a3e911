// Teachers and logit distillation: a model teacher samples n responses per problem reproducibly from
// its seed and drops those cut off at max_new; SFT from a teacher that is the student itself, over the full vocabulary, has forward KL 0
// and a zero gradient; from a different teacher the KL falls step after step; a teacher with another
// vocabulary is refused; the gold and dataset teachers return the problem's fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "rl/letter_task.h"
#include "temper/rl/sft.h"
#include "temper/rl/teacher.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

namespace {

class GoldLetters : public LetterTask {
 public:
  tasks::Problem problem(tasks::Split s, uint64_t i) const override {
    tasks::Problem p = LetterTask::problem(s, i);
    p.gold_solution = std::string(1, letter(int32_t(i % 4))) + "ab" + letter(int32_t(i % 6));
    p.teacher_response = i % 2 ? "aaa" : "";
    return p;
  }
};

PromptCodec letters() {
  PromptCodec c = codec();
  c.encode_completion = [](const std::string& s) {  // letters -> their ids, then 0 ('a') as the end
    std::vector<int32_t> ids;
    for (char ch : s) ids.push_back(ch - 'a');
    return ids;
  };
  c.stop_ids = {};
  return c;
}

SftConfig sft_config(bool distill, int64_t top_k) {
  SftConfig c;
  c.batch = 6;
  c.train.lr.peak = 3e-3;
  c.train.adamw.weight_decay = 0;
  if (distill) c.distill = DistillConfig{top_k, 1.0, 0.0};
  return c;
}

std::unique_ptr<Transformer> model(uint64_t seed) {
  auto m = std::make_unique<Transformer>(small_config(Arch::llama, 64));
  m->init_random(seed, 0.05f);
  return m;
}

}  // namespace

TEST(Teacher, ModelTeacherSamplesReproduciblyAndFieldTeachersReadTheProblem) {
  GoldLetters task;
  std::vector<tasks::Problem> ps = {task.problem(tasks::Split::train, 1), task.problem(tasks::Split::train, 2)};
  ModelTeacherConfig tc;
  tc.max_new = 5;
  tc.kv_memory_mb = 4;
  PromptCodec stops = letters();
  for (int32_t id = 0; id < 40; ++id) stops.stop_ids.insert(id);  // about 1 token in 3 ends a response
  ModelTeacher t(model(9), stops, tc);
  auto a = t.respond(ps, 8, 42), b = t.respond(ps, 8, 42), c = t.respond(ps, 8, 43);
  ASSERT_EQ(a.size(), 2u);
  size_t kept = 0;
  for (auto& r : a) {
    kept += r.size();
    for (auto& x : r) EXPECT_LE(x.size(), 5u);  // finished within max_new (the stop token decodes too)
  }
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, 16u);  // responses cut off at max_new are dropped
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ModelTeacher never(model(9), letters(), tc);  // no stop ids: every response is cut off
  for (auto& r : never.respond(ps, 3, 42)) EXPECT_TRUE(r.empty());
  EXPECT_NE(t.model(), nullptr);

  auto gold = make_gold_teacher()->respond(ps, 4, 0);
  EXPECT_EQ(gold, (std::vector<std::vector<std::string>>{{ps[0].gold_solution}, {ps[1].gold_solution}}));
  auto data = make_dataset_teacher()->respond(ps, 4, 0);
  EXPECT_EQ(data, (std::vector<std::vector<std::string>>{{"aaa"}, {}}));  // problem 2 has none
  tasks::Problem none = ps[0];
  none.gold_solution.clear();
  EXPECT_THROW(make_gold_teacher()->respond({none}, 1, 0), Error);
}

namespace {
double metric(const Metrics& m, const std::string& k) { return value(m, k); }
}  // namespace

TEST(Distill, FromItselfOverTheFullVocabularyKlAndGradientAreZero) {
  auto student = model(5);
  auto copy = model(5);
  ModelTeacherConfig tc;
  tc.kv_memory_mb = 4;
  ModelTeacher t(std::move(copy), letters(), tc);
  auto task = std::make_shared<GoldLetters>();
  SftTrainer sft(*student, task, letters(), sft_config(true, student->config().vocab_size), &t);
  std::vector<float> before(student->params(), student->params() + student->flat_size());
  Metrics m = sft.step();
  EXPECT_NEAR(metric(m, "distill_kl"), 0.0, 1e-5);
  EXPECT_LT(metric(m, "grad_norm"), 1e-5);
  // Cross-entropy against itself is its own entropy: the loss is the teacher's entropy, about log V for
  // a near-uniform random model.
  EXPECT_NEAR(metric(m, "loss"), std::log(static_cast<double>(student->config().vocab_size)), 0.1);
}

TEST(Distill, FromAnotherTeacherTheKlFalls) {
  auto student = model(5);
  ModelTeacherConfig tc;
  tc.kv_memory_mb = 4;
  auto tm = model(5);  // the student sharpened: its final norm scaled, so its logits are 6x larger
  Tensor norm = tm->param("model.norm.weight");
  for (int64_t i = 0; i < norm.numel(); ++i) norm.data<float>()[i] *= 6.f;
  tm->params_updated();
  tc.max_new = 8;
  PromptCodec stops = letters();
  for (int32_t id = 0; id < 40; ++id) stops.stop_ids.insert(id);  // the teacher's samples end
  ModelTeacher t(std::move(tm), stops, tc);
  auto task = std::make_shared<GoldLetters>();
  SftConfig cfg = sft_config(true, 8);
  cfg.teacher_completions = true;
  cfg.train.lr.peak = 1e-2;
  SftTrainer sft(*student, task, letters(), cfg, &t);
  double first = 0, last = 0, missing = 0;  // the first step's KL; the mean of the last 5 of 40
  for (int s = 0; s < 40; ++s) {
    Metrics m = sft.step();
    missing += metric(m, "teacher_missing");
    ASSERT_TRUE(std::isfinite(metric(m, "distill_kl")));
    if (s == 0) first = metric(m, "distill_kl");
    if (s >= 35) last += metric(m, "distill_kl") / 5;
  }
  EXPECT_GT(first, 1.0);
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
  EXPECT_LT(missing, 0.5 * 40 * 6);  // most rows are the teacher's own samples (cut-off ones fall back to gold)

  ModelConfig other = small_config(Arch::llama, 64);
  other.vocab_size = 96;
  auto om = std::make_unique<Transformer>(other);
  om->init_random(1, 0.05f);
  ModelTeacher wrong(std::move(om), letters(), tc);
  EXPECT_THROW(SftTrainer(*student, task, letters(), sft_config(true, 8), &wrong), Error);
  EXPECT_THROW(SftTrainer(*student, task, letters(), sft_config(true, 8), nullptr), Error);
}

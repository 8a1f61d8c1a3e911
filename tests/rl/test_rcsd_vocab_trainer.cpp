// RCSD's reverse-KL mode at SmolLM2's vocabulary (V = 49,152) on a tiny model through the trainer: refused above
// 16,384 entries before; now the trajectories carry the frozen teacher's log-probs over all 49,152 entries (equal to
// its own forward in the rubric context), the update sees a positive KL and a few updates shrink it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "rl/rubric_letters.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

TEST(RcsdLargeVocab, ReverseKlModeRunsAtV49152ThroughTheTrainer) {
  ModelConfig mc = small_config(Arch::llama, 64);
  mc.vocab_size = 49152;
  RlSetup s(mc, 3);
  Transformer start(mc);
  copy_weights(s.model, start);
  auto task = std::make_shared<RubricLetters>();
  RcsdConfig rc;
  rc.teacher = RcsdTeacher::initial;
  rc.mode = RcsdMode::reverse_kl;
  Rcsd r(rc);
  RlConfig cfg = config();
  PromptCodec c = codec();
  RlTrainer t(s.model, task, c, cfg, s.safe, {&r}, &start);
  Metrics m = t.step();
  const Batch& b = t.last_batch();
  const int64_t V = mc.vocab_size;
  int checked = 0;
  for (const Trajectory& x : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(x.problem)];
    if (task->rubric(p).empty() || x.tokens.empty()) continue;
    ASSERT_EQ(x.loss_terms.teacher_logq.size(), x.tokens.size() * static_cast<size_t>(V));
    if (checked++ > 1) continue;
    expect_teacher_logq(start, c, p, "b", rc.tmpl, x, 997);
  }
  EXPECT_GT(checked, 0);
  const double first = value(m, "reverse_kl");
  EXPECT_GT(first, 0);
  double last = first;
  for (int i = 0; i < 5; ++i) last = value(t.step(), "reverse_kl");
  EXPECT_LT(last, first) << "the KL the updates see";
  std::printf("reverse KL at V = 49152: %.4f -> %.4f over 6 steps\n", first, last);
}

// RCSD's reverse-KL mode at SmolLM2's vocabulary (V = 49,152) on a tiny model through the trainer: refused above
// 16,384 entries before; now the trajectories carry the frozen teacher's log-probs over all 49,152 entries (equal to
// its own forward in the rubric context), the update sees a positive KL and a few updates shrink it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "rl/letter_task.h"
#include "temper/rl/methods/rcsd.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

namespace {
class RubricLetters : public LetterTask {
 public:
  std::string rubric(const tasks::Problem& p) const override { return std::stoul(p.id) % 2 ? "" : "b"; }
};
}  // namespace

TEST(RcsdLargeVocab, ReverseKlModeRunsAtV49152ThroughTheTrainer) {
  ModelConfig mc = small_config(Arch::llama, 64);
  mc.vocab_size = 49152;
  RlSetup s(mc, 3);
  Transformer start(mc);
  std::copy(s.model.params(), s.model.params() + s.model.flat_size(), start.params());
  start.params_updated();
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
    std::vector<int32_t> tok = c.encode_prompt(rcsd_teacher_problem(p, c, "b", rc.tmpl));
    const size_t P = tok.size();
    tok.insert(tok.end(), x.tokens.begin(), x.tokens.end());
    std::vector<float> z(tok.size() * static_cast<size_t>(V));
    start.forward_logits(tok.data(), 1, static_cast<int64_t>(tok.size()), z.data());
    for (size_t k = 0; k < x.tokens.size(); ++k) {
      const float* row = z.data() + (P - 1 + k) * static_cast<size_t>(V);
      double mx = *std::max_element(row, row + V), se = 0;
      for (int64_t v = 0; v < V; ++v) se += std::exp(row[v] - mx);
      for (int64_t v = 0; v < V; v += 997)
        EXPECT_NEAR(x.loss_terms.teacher_logq[k * static_cast<size_t>(V) + static_cast<size_t>(v)],
                    row[v] - mx - std::log(se), 1e-4);
    }
  }
  EXPECT_GT(checked, 0);
  const double first = value(m, "reverse_kl");
  EXPECT_GT(first, 0);
  double last = first;
  for (int i = 0; i < 5; ++i) last = value(t.step(), "reverse_kl");
  EXPECT_LT(last, first) << "the KL the updates see";
  std::printf("reverse KL at V = 49152: %.4f -> %.4f over 6 steps\n", first, last);
}

// The RCSD tests' shared pieces: the letters task with a rubric ("b" on even problems, none on odd ones), a frozen
// copy of a model's weights (the "initial" teacher the trainer holds), and the check that a trajectory carries the
// teacher's log-probs over the whole vocabulary in the rubric context (log softmax of its logits, in double).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "rl/letter_task.h"
#include "temper/rl/methods/rcsd.h"

namespace temper::test {

class RubricLetters : public LetterTask {
 public:
  std::string rubric(const tasks::Problem& p) const override { return std::stoul(p.id) % 2 ? "" : "b"; }
};

inline void copy_weights(const Transformer& from, Transformer& to) {
  std::copy(from.params(), from.params() + from.flat_size(), to.params());
  to.params_updated();
}

// x.loss_terms.teacher_logq at every token and every `stride`-th vocabulary entry equals the log softmax of
// `teacher`'s logits for x's tokens after p's teacher prompt with `rubric` (template `tmpl`), to 1e-4.
inline void expect_teacher_logq(Transformer& teacher, const rl::PromptCodec& c, const tasks::Problem& p,
                                const std::string& rubric, const std::string& tmpl, const rl::Trajectory& x,
                                int64_t stride) {
  const int64_t V = teacher.config().vocab_size;
  std::vector<int32_t> tok = c.encode_prompt(rl::rcsd_teacher_problem(p, c, rubric, tmpl));
  const size_t P = tok.size();
  tok.insert(tok.end(), x.tokens.begin(), x.tokens.end());
  std::vector<float> z(tok.size() * static_cast<size_t>(V));
  teacher.forward_logits(tok.data(), 1, static_cast<int64_t>(tok.size()), z.data());
  for (size_t k = 0; k < x.tokens.size(); ++k) {
    const float* row = z.data() + (P - 1 + k) * static_cast<size_t>(V);
    double mx = *std::max_element(row, row + V), se = 0;
    for (int64_t v = 0; v < V; ++v) se += std::exp(row[v] - mx);
    for (int64_t v = 0; v < V; v += stride)
      EXPECT_NEAR(x.loss_terms.teacher_logq[k * static_cast<size_t>(V) + static_cast<size_t>(v)],
                  row[v] - mx - std::log(se), 1e-4);
  }
}

}  // namespace temper::test

// Pairwise judges for user simulators (Turing-RL, spec methods-other section 2): a judge sees a user's
// history, the conversation and two candidate next turns, A and B, one real and one generated, and
// rates how likely B is the real one on the paper's 1..7 scale (7: surely B, 4: cannot tell, 1: surely
// A). Both judges here (ScriptedJudge: the paper's rubric without an LLM; ClassifierJudge: any
// real-vs-generated classifier) map a score gap (B minus A) to the rating with the paper's thresholds;
// ModelJudge asks a frozen LLM (the paper's judge; rl/judge_reward.h) for the rating itself.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "temper/tasks/task.h"

namespace temper::rl {

// A score gap (B minus A) to the rating, with the paper's thresholds:
//   gap <= -2: 1, <= -1: 2, <= -0.25: 3, < 0.25: 4, < 1: 5, < 2: 6, else 7.
int rating_from_gap(double gap);

class PairwiseJudge {
 public:
  virtual ~PairwiseJudge() = default;
  virtual std::string name() const = 0;
  // 1..7: how likely B, not A, is the real user's turn for problem p (history, context).
  virtual int rate(const tasks::Problem& p, const std::string& a, const std::string& b) = 0;
  // Many pairs at once (a model judge asks them in one batch); by default rate() each.
  struct Pair {
    const tasks::Problem* p = nullptr;
    const std::string* a = nullptr;
    const std::string* b = nullptr;
  };
  virtual std::vector<int> rate_all(const std::vector<Pair>& pairs) {
    std::vector<int> out;
    out.reserve(pairs.size());
    for (const Pair& x : pairs) out.push_back(rate(*x.p, *x.a, *x.b));
    return out;
  }
  virtual int64_t failures() const { return 0; }  // judgements it could not read
};

struct TurnScore {
  double target = 0;  // answers the conversation: shares a content word (4+ letters) with the context
  double goal = 0;    // a turn this user would write at this length: exp(-|ln((w + 1) / (mean history w + 1))|)
  double style = 0;   // mean of casing (1 - |upper-case share - the history's|), habitual words (share of the
                      // words in at least half of the history's turns that it uses), ending (its last character
                      // is the history's most common last character)
  double penalty = 0; // 3 x mean of: copy (a 5-word span of the context or history), wrong role (starts with a
                      // role tag), reframe ("as an ai", "i am human", ...), assistant-like ("sure", "how can i help", ...)
  double total() const { return target + goal + style - penalty; }
};

// ScriptedJudge: the paper's rubric without an LLM: each turn scores target + goal + style in [0, 3]
// minus 3 x the mean of four penalties (copying, wrong role, adversarial reframing, assistant-like);
// the criteria are measured against the user's own history (TurnScore above, ScriptedJudge::score).
class ScriptedJudge : public PairwiseJudge {
 public:
  std::string name() const override { return "scripted"; }
  int rate(const tasks::Problem& p, const std::string& a, const std::string& b) override;
  static TurnScore score(const tasks::Problem& p, const std::string& turn);
};

// ClassifierJudge: any real-vs-generated classifier (the trained discriminator of rl/discriminator.h
// on frozen embeddings): gap = logit(B) - logit(A).
class ClassifierJudge : public PairwiseJudge {
 public:
  using Logit = std::function<double(const tasks::Problem&, const std::string& turn)>;
  explicit ClassifierJudge(Logit logit) : logit_(std::move(logit)) {}
  std::string name() const override { return "discriminator"; }
  int rate(const tasks::Problem& p, const std::string& a, const std::string& b) override {
    return rating_from_gap(logit_(p, b) - logit_(p, a));
  }

 private:
  Logit logit_;
};

class JudgeModel;

// The judge's prompt for ModelJudge: {history} (the user's earlier turns, one a line), {context} (the
// conversation), {a} and {b} (the candidates); "{{" and "}}" are literal braces.
extern const char* const kModelJudgeTemplate;

// ModelJudge: the paper's frozen LLM judge. The model reads the template filled with the pair and answers with a
// rating, read as a score (rl/judge_reward.h parse_judge_score: "Score: N" first) and rounded to 1..7; an answer
// without one, or out of range, counts as "cannot tell" (4) and in failures(). Greedy: the same pair, the same
// rating. rate_all asks every pair in one engine run.
class ModelJudge : public PairwiseJudge {
 public:
  // Throws naming `where` when the template has an unknown placeholder or lacks {a} or {b}.
  ModelJudge(std::shared_ptr<JudgeModel> model, const std::string& tmpl, int64_t max_new,
             const std::string& where = "rl.turing.judge_template");
  std::string name() const override { return "model"; }
  int rate(const tasks::Problem& p, const std::string& a, const std::string& b) override {
    return rate_all({{&p, &a, &b}})[0];
  }
  std::vector<int> rate_all(const std::vector<Pair>& pairs) override;
  int64_t failures() const override { return failures_; }
  // A judgement's rating: the score rounded into 1..7; 0 when there is none in range.
  static int rating_of(const std::string& judgement);

 private:
  std::shared_ptr<JudgeModel> model_;
  std::string tmpl_;
  int64_t max_new_;
  int64_t failures_ = 0;
};

}  // namespace temper::rl

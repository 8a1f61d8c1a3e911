// DRE, dynamic rollout editing against overthinking (Wei et al. 2026, arXiv 2606.17890;
// ../shared/specs/methods-llm-rl.md section 2; the algorithm is our reconstruction from the abstract,
// as the spec records). A correct rollout that keeps reasoning after its answer has appeared is edited:
// the verified prefix is kept, the reasoning is closed there and the policy writes the answer; the edit
// joins the rollout's group and is preferred. The edit, the modes and the metrics: above Dre.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "temper/rl/method.h"
#include "temper/rl/methods/dre_detector.h"

namespace temper::rl {

struct MethodSpec;

enum class DreMode { online, offline, measure };  // measure: the metrics only, no edits (baselines)
enum class DreCompose { add_beside, add_and_prefer, replace };
inline constexpr EnumNames<DreMode, 3> kDreModeNames{
    {{DreMode::online, "online"}, {DreMode::offline, "offline"}, {DreMode::measure, "measure"}}};
inline constexpr EnumNames<DreCompose, 3> kDreComposeNames{{{DreCompose::add_beside, "add_beside"},
                                                            {DreCompose::add_and_prefer, "add_and_prefer"},
                                                            {DreCompose::replace, "replace"}}};

struct DreConfig {
  DreMode mode = DreMode::online;
  DreCompose compose = DreCompose::add_and_prefer;
  double delta = 0.2;               // add_and_prefer: the original's reward falls by this
  int64_t min_tail = 8;             // tokens an edit must save (original length - edit length)
  int64_t answer_budget = 16;       // tokens the policy may write after the forced close
  int64_t max_edits_per_group = 0;  // 0: every qualifying rollout
  uint64_t seed = 0;                // offline regeneration's sampling streams
  // The answer detector and the forced close (dre_detector.h): the task's own rule, or a preset.
  DreDetector detector = DreDetector::task;
  std::string regex;  // detector = "regex": a PCRE2 pattern whose (last) match in a line is the answer
  std::string close;  // the text forced to close the reasoning; "": the detector's own
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// Where a completion's answer first appears: tokens [0, at) end at the first step boundary whose
// candidate `accept` takes (-1: none); `close` is the token where the answer section starts (-1: none).
struct Emergence {
  int64_t at = -1, close = -1;
};
Emergence find_emergence(const AnswerDetector& det, const tasks::Problem& p, const PromptCodec& codec,
                         const std::vector<int32_t>& tokens, const std::function<bool(const std::string&)>& accept);
// The same with the task's own detector and close.
Emergence find_emergence(const tasks::Task& task, const tasks::Problem& p, const PromptCodec& codec,
                         const std::vector<int32_t>& tokens, const std::function<bool(const std::string&)>& accept);

// The online hook: forks a sequence once, at the first boundary whose stated answer the task accepts.
class DreHook : public rollout::RolloutHook {
 public:
  void reset(const MethodEnv* env, const AnswerDetector* det, const RolloutRound& round, std::vector<int32_t> close,
             int64_t budget);
  rollout::HookDecision after_token(const rollout::RolloutRequest& q, const rollout::Completion& c) override;
  // (problem index, member) pairs forked this round
  const std::set<std::pair<int64_t, int64_t>>& forked() const { return forked_; }

 private:
  const MethodEnv* env_ = nullptr;
  const AnswerDetector* det_ = nullptr;
  RolloutRound round_;
  std::vector<int32_t> close_;
  int64_t budget_ = 0;
  std::set<std::pair<int64_t, int64_t>> done_, forked_;
};

struct DreStats {
  int64_t candidates = 0;  // forks made (online) or regenerations run (offline)
  int64_t edits = 0;       // kept
  int64_t saved_tokens = 0;
  double len_correct = 0, len_incorrect = 0;  // mean tokens of the originals
  double overthink_correct = 0, overthink_incorrect = 0;
  int64_t n_correct = 0, n_incorrect = 0;
};

// A correct rollout that keeps reasoning after its answer has appeared is edited: the verified prefix (up to
// the first step boundary whose stated answer the task accepts) is kept, the reasoning is closed there (the
// detector's close: the task's answer_close, e.g. "#### ", or a preset's such as "</think>\n\n"; forced and masked
// from the loss) and the policy writes the answer. The
// edit joins the rollout's group and is preferred:
//   add_beside      the edit is added (reward from the verifier, 1), the original keeps its reward;
//   add_and_prefer  as add_beside, and the overthinking original's reward drops by delta (default 0.2);
//   replace         the edit takes the original's place (group size unchanged).
// Modes: online (a rollout hook forks the sequence at the first verified answer during generation;
// the fork is closed while the original goes on) and offline (detect on finished rollouts and
// regenerate the close from the prefix on the current weights). Either way an edit is kept only when
// the original is correct, the edit verifies, and it saves at least min_tail tokens.
// Metrics: edits, tokens saved, and the overthinking ratio (tokens between the first appearance of a
// rollout's own final answer and its answer line, over all its tokens) of correct vs incorrect rollouts.
class Dre : public Method {
 public:
  explicit Dre(const DreConfig& cfg) : cfg_(cfg) { cfg_.validate(); }
  std::string name() const override { return "dre"; }
  void attach(const MethodEnv& env) override;
  rollout::RolloutHook* rollout_hook(const RolloutRound& round) override;
  void after_reward(Batch& b) override;
  void metrics(Metrics& m) const override;
  const DreStats& stats() const { return stats_; }  // of the step so far

 private:
  void measure(const Batch& b, size_t from);
  void regenerate(Batch& b);
  void compose(Batch& b, const std::set<std::pair<int64_t, int64_t>>& edits_of);

  DreConfig cfg_;
  MethodEnv env_;
  std::optional<AnswerDetector> det_;
  std::vector<int32_t> close_;
  DreHook hook_;
  DreStats stats_;
  int64_t stats_step_ = -1;
  std::set<std::pair<int64_t, int64_t>> online_forks_;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kDreMethod;

}  // namespace temper::rl

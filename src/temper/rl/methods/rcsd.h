// Rubric-conditioned self-distillation (Gu et al. 2026, arXiv 2606.19327; ../shared/specs/methods-other.md
// section 1; abstract-level sources, the OPSD-family sampled-token form). The teacher is the policy
// itself with the problem's rubric inserted into the prompt (`template`, {rubric} and {question}); one
// extra forward over each rollout's tokens in that context, no gradient, gives a per-token advantage (or,
// with `mode = "reverse_kl"`, a full-vocabulary KL). Rubrics: Task::rubric (a dataset's `rubric` field by
// default; with `rubric_writer`, a judge model writes one, greedily, once per problem id, for problems that have
// none: rl/judge_reward.h; the written ones are saved in the checkpoint). The advantage, `combine`, `teacher` and
// `mode`: above Rcsd.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/rl/method.h"

namespace temper::rl {

struct MethodSpec;

enum class RcsdCombine { replace, add };
inline constexpr EnumNames<RcsdCombine, 2> kRcsdCombineNames{
    {{RcsdCombine::replace, "replace"}, {RcsdCombine::add, "add"}}};
enum class RcsdTeacher { policy, initial };  // the current weights, or the frozen weights as RL started
inline constexpr EnumNames<RcsdTeacher, 2> kRcsdTeacherNames{
    {{RcsdTeacher::policy, "policy"}, {RcsdTeacher::initial, "initial"}}};
enum class RcsdMode { sampled, reverse_kl };  // the per-token advantage, or full-vocabulary KL(pi || teacher)
inline constexpr EnumNames<RcsdMode, 2> kRcsdModeNames{
    {{RcsdMode::sampled, "sampled"}, {RcsdMode::reverse_kl, "reverse_kl"}}};

struct RcsdConfig {
  RcsdCombine combine = RcsdCombine::replace;
  double coef = 1.0;                // scale of A_t
  double clip = 5.0;                // |A_t| bound
  std::string tmpl = "Rubric:\n{rubric}\n\n{question}";
  RcsdTeacher teacher = RcsdTeacher::policy;
  RcsdMode mode = RcsdMode::sampled;
  // Rubrics for problems without one, written once per problem id by a judge model (greedy) and cached.
  std::string rubric_writer;  // a Hugging Face directory or GGUF file; "" = none (such problems get no rubric)
  std::string rubric_prompt = kRcsdRubricPrompt;  // {question}, {answer}
  int64_t rubric_max_new = 128;
  std::string rubric_device = "cpu";
  static constexpr const char* kRcsdRubricPrompt =
      "Write a short grading rubric (three to five bullet points) for judging answers to the problem below: what a "
      "correct, complete answer must contain and the usual mistakes. Do not solve the problem.\n\nProblem:\n"
      "{question}\n\nReference answer: {answer}";
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// A problem with its rubric before the question as the model is asked it, in `asked` (and the last user
// message of a chat problem); `prompt` stays the question (rl/derived_problem.h).
tasks::Problem rcsd_teacher_problem(const tasks::Problem& p, const PromptCodec& codec, const std::string& rubric,
                                    const std::string& tmpl);

// What writes the rubrics of problems without one: an answer to each prompt (rubric_prompt filled in), greedy,
// `max_new` tokens at most; an empty answer: none. rubric_writer's judge model, or a test's scripted writer.
using RcsdRubricWriter =
    std::function<std::vector<std::string>(const std::vector<std::string>& prompts, int64_t max_new)>;

// The per-token advantage is A_t = coef x clip(log p_teacher(y_t) - log p_student(y_t), -clip, clip), with the
// student's log-probs those the rollout recorded; `combine = "replace"` (default: RCSD alone) uses A_t as the
// advantage, `combine = "add"` adds A_t to the GRPO advantage. A problem without a rubric gets 0 (replace) or
// its GRPO advantage (add).
// `teacher = "initial"` scores the rubric context with the frozen weights as RL started instead (a teacher
// that does not drift with the student; the trainer then holds that frozen copy).
// `mode = "reverse_kl"` distils the teacher's whole next-token distribution instead (any vocabulary: the step's
// completion tokens x V log-probs are held until the update, at most kMaxDistillBytes): every completion token's loss
// gains coef x KL(pi(.|student context) || teacher(.|rubric context)) (Trajectory::loss_terms.teacher_logq,
// Batch::reverse_kl_coef; the fused classifier's reverse-KL target); with replace the advantages are 0 (the KL is the
// whole signal), with add GRPO's stay.
class Rcsd : public Method {
 public:
  // writer: the rubric writer to use instead of loading rubric_writer (a test's scripted one); empty: load it.
  explicit Rcsd(RcsdConfig cfg, RcsdRubricWriter writer = {});
  std::string name() const override { return "rcsd"; }
  void attach(const MethodEnv& env) override;  // rubric_writer: loads it
  bool advantages(Batch& b) override;
  void adjust_advantages(Batch& b) override;  // combine = "add": onto the estimator's advantages
  void metrics(Metrics& m) const override;
  // The written rubrics (problem id -> rubric, empty ones too), so that a resumed run asks the writer for none of
  // them again; "" while there are none.
  std::string save_state() const override;
  void load_state(const std::string& s) override;

 private:
  void compute(Batch& b, bool add);
  void write_rubrics(const Batch& b);  // rubric_writer: for this batch's problems without one, cached
  std::string rubric(const tasks::Problem& p) const;
  RcsdConfig cfg_;
  RcsdRubricWriter writer_;
  std::map<std::string, std::string> written_;  // problem id -> the writer's rubric ("": none, not asked again)
  MethodEnv env_;
  double adv_sum_ = 0, adv_abs_ = 0, clipped_ = 0, teacher_s_ = 0;  // teacher_s_: seconds of the teacher pass
  int64_t tokens_ = 0, with_rubric_ = 0, sequences_ = 0;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kRcsdMethod;

}  // namespace temper::rl

// ZPPO, zone of proximal policy optimization: the teacher goes into the prompt, not the gradient (Lee
// et al. 2026, arXiv 2606.18216; ../shared/specs/methods-llm-rl.md section 3). Questions the student
// fails enter a replay buffer and come back until it passes them; hard ones are reformulated with
// candidates (BCQ: a correct teacher response and a wrong student rollout; NCQ: the student's wrong
// answers) that the student answers in ordinary GRPO groups. Modes `buffer` and `inject` run the
// paper's baselines in the same code path. In detail: above Zppo.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/rng.h"
#include "temper/rl/method.h"
#include "temper/rl/methods/prompt_buffer.h"
#include "temper/rl/teacher.h"

namespace temper::rl {

struct MethodSpec;

enum class ZppoMode { zppo, buffer, inject };
inline constexpr EnumNames<ZppoMode, 3> kZppoModeNames{
    {{ZppoMode::zppo, "zppo"}, {ZppoMode::buffer, "buffer"}, {ZppoMode::inject, "inject"}}};
// Who restates the candidates: auto (the teacher when it is a model, the plain stripping for the gold and dataset
// teachers, which only give their fixed text), teacher (the teacher model; refused for a text teacher), strip.
enum class ZppoRewrite { automatic, teacher, strip };
inline constexpr EnumNames<ZppoRewrite, 3> kZppoRewriteNames{
    {{ZppoRewrite::automatic, "auto"}, {ZppoRewrite::teacher, "teacher"}, {ZppoRewrite::strip, "strip"}}};

struct ZppoConfig {
  ZppoMode mode = ZppoMode::zppo;
  double hard_threshold = 0.5;  // admit below, graduate at or above
  int64_t capacity = 10000;     // buffer size (FIFO eviction)
  double replay_ratio = 0.25;   // replayed questions per new question each step
  double aug_ratio = 0.25;      // BCQ + NCQ prompts per new question each step
  bool bcq = true, ncq = true;
  int64_t teacher_samples = 4;  // G_T: teacher responses asked per hard question
  // The teacher samples at most ceil(teacher_ratio x new questions) hard questions per step (over its rounds), the
  // first ones of the seeded shuffle that also orders the BCQ/NCQ budget: the spec's cap (BCQ + NCQ <= rho_aug = 0.25
  // x new questions; the teacher is sampled for the post-cap hard questions only). Mode zppo; inject samples every
  // hard question (its baseline's definition).
  double teacher_ratio = 0.25;
  int64_t group_size = 0;          // G_S on reformulated prompts (0: rl.group_size)
  int64_t candidate_tokens = 128;  // each candidate is cut to its last N tokens
  // BCQ: both candidates plain and cut to the same length (the shorter one's, at most candidate_tokens), so that
  // neither length nor formatting tells the teacher's from the student's; false: each cut to the budget alone.
  bool match_candidates = true;
  int64_t ncq_traces = 2;  // wrong traces shown in an NCQ
  // The teacher's rewrite of the candidates (spec step 4: the frozen teacher restates both BCQ candidates, and the NCQ
  // traces, with one prompt, so style and length do not tell which is whose). A rewrite that changes a candidate's
  // verdict (the teacher's no longer correct, a wrong one made correct) or that the teacher does not finish is
  // dropped for the original text (a BCQ keeps both rewrites or neither). Rewritten BCQ candidates are stripped of
  // markdown and each cut to candidate_tokens; the originals (text teachers, `strip`, dropped rewrites) go through
  // match_candidates as before.
  ZppoRewrite rewrite = ZppoRewrite::automatic;
  std::string rewrite_template =
      "Restate the solution below as short step-by-step reasoning in plain sentences, then its final answer line "
      "exactly as the solution gives it. Do not correct it, even if it is wrong.\n\nQuestion: {question}\n\n"
      "Solution:\n{response}";
  // Templates: {question}, {candidates} (the <candidate> blocks), {wrong_answers} (NCQ, comma-separated).
  std::string bcq_template =
      "{question}\n\nHere are two candidate responses. One is correct and one is wrong.\n{candidates}Solve the "
      "question.";
  std::string ncq_template =
      "{question}\n\nThe following answers are all WRONG: {wrong_answers}.\n{candidates}Solve the question.";
  uint64_t seed = 0;
  void validate() const;
  void visit(KeyVisitor& v);  // its recipe section's keys
};

// A candidate: the text cut to its last `budget` tokens ("..." marks a cut), in <candidate> tags.
std::string zppo_candidate(const PromptCodec& codec, const std::string& text, int64_t budget);
// A response without formatting that could identify its author: markdown emphasis and code marks ("**", "__" unless
// between letters or digits, "`") and <candidate> tags removed, spaces at line ends and runs of spaces collapsed, blank
// lines dropped.
std::string zppo_plain(const std::string& text);
// A BCQ's two candidates, {teacher's, student's}: both plain (neither may then be empty), cut to their last n tokens
// where n is the shorter one's length, at most `budget` (a cut inside a UTF-8 character drops the partial one); "..."
// opens both when either was cut.
std::pair<std::string, std::string> zppo_bcq_candidates(const PromptCodec& codec, const std::string& teacher,
                                                        const std::string& student, int64_t budget);
// The teacher's rewrite request for one candidate: the template filled with the plain question and the response,
// as a new question (a chat problem's form: one user message).
tasks::Problem zppo_rewrite_request(const tasks::Problem& p, const std::string& tmpl, const std::string& response);

// The reformulated problem: same question, answer and checker; the template's text, {question} as the
// model is asked it, in `asked` (and the last user message of a chat problem) (rl/derived_problem.h).
tasks::Problem zppo_reformulate(const tasks::Problem& p, const PromptCodec& codec, const std::string& tmpl,
                                const std::string& candidates, const std::string& wrong_answers,
                                const std::string& kind);

// Questions the student fails (group accuracy < 0.5) enter a replay buffer of questions and come back each step
// beside the new ones (replay_ratio x new) until the student reaches 0.5 on them. For hard questions (at most
// ceil(aug_ratio x new) prompts per step, over all its rounds) it builds
//   BCQ  one correct teacher response and one wrong student rollout, both restated by a teacher model with one
//        prompt (`rewrite`), else (the gold and dataset teachers cannot write) the spec's fallback: markdown marks
//        and blank lines stripped, both cut to the same number of final tokens, at most the budget; in identical
//        <candidate> tags, in a seeded random order: "one is correct, one is wrong";
//        the teacher samples only the first ceil(teacher_ratio x new) hard questions of the step's seeded order;
//   NCQ  the student's wrong final answers listed as wrong, with some of its wrong traces as candidates;
// and the student answers them with ordinary rollouts scored by the original question's checker: each
// reformulated prompt is its own GRPO group, every token in the loss was sampled by the student, the
// teacher's text is prompt. With [rl.zppo] the recipe's defaults are the paper's: scale_rewards = "batch_active"
// (normalisation over groups whose rewards differ), epochs = 4, eps_high = 0.28 (ZppoSetup in zppo.cpp).
// Modes for the paper's baselines in the same code path: `buffer` (GRPO-dagger: the buffer, no
// reformulation) and `inject` (GRPO with a correct teacher response added to each hard group as an
// off-policy member, old log-probs from the current policy).
class Zppo : public Method {
 public:
  Zppo(const ZppoConfig& cfg, std::shared_ptr<Teacher> teacher);
  std::string name() const override { return "zppo"; }
  void attach(const MethodEnv& env) override { env_ = env; }
  std::vector<tasks::Problem> extra_problems(int64_t step, int64_t new_problems) override;
  void after_reward(Batch& b) override;
  void metrics(Metrics& m) const override;
  std::string save_state() const override { return buffer_.save(); }
  void load_state(const std::string& s) override { buffer_.load(s); }
  const PromptBuffer& buffer() const { return buffer_; }

 private:
  // What one reformulated prompt shows, chosen before any text is rewritten.
  struct PromptPlan {
    size_t k = 0;  // the question's index in the step's chosen order
    bool bcq = false, teacher_first = false, rewritten = false;
    std::vector<std::string> texts;  // bcq: {teacher's, student's}; ncq: the traces
    std::string answers;             // ncq: the wrong answers listed
  };
  void reformulate(Batch& b, const std::vector<int64_t>& hard_groups, int64_t cap);
  std::vector<std::vector<std::string>> teacher_answers(const std::vector<tasks::Problem>& ps, uint64_t seed);
  std::vector<PromptPlan> plan_prompts(const Batch& b, const std::vector<int64_t>& take,
                                       const std::vector<tasks::Problem>& ps,
                                       const std::vector<std::vector<std::string>>& good, int64_t cap, Rng& rng) const;
  void rewrite_candidates(std::vector<PromptPlan>& plans, const std::vector<tasks::Problem>& ps, uint64_t seed);
  std::vector<tasks::Problem> build_prompts(const std::vector<PromptPlan>& plans,
                                            const std::vector<tasks::Problem>& ps);
  void answer_prompts(Batch& b, const std::vector<tasks::Problem>& built, uint64_t seed);
  void inject(Batch& b, const std::vector<int64_t>& hard_groups);
  std::vector<std::vector<std::string>> correct_teacher_responses(const std::vector<tasks::Problem>& ps, uint64_t seed);
  bool rewrites() const;  // the teacher restates candidates (rewrite and the teacher's source)

  ZppoConfig cfg_;
  std::shared_ptr<Teacher> teacher_;
  MethodEnv env_;
  PromptBuffer buffer_;
  int64_t step_ = 0, round_ = 0, new_ = 0;
  struct StepCounts {
    int64_t replayed = 0, task_groups = 0, hard = 0, all_wrong = 0, admitted = 0, graduated = 0;
    int64_t bcq = 0, ncq = 0, bcq_correct = 0, ncq_correct = 0, bcq_samples = 0, ncq_samples = 0;
    int64_t teacher_asked = 0, teacher_correct = 0, teacher_first = 0, injected = 0;
    int64_t teacher_questions = 0, rewritten = 0, rewrite_dropped = 0;
  } n_;
};

// The method's entry in the table of methods (rl/methods/registry.cpp).
extern const MethodSpec kZppoMethod;

}  // namespace temper::rl

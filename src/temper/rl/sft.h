// Supervised fine-tuning on a task's gold solutions (the SFT stage before RL): batches of
// prompt + gold completion (end token included), loss on the completion tokens only, through the
// same Trainer as `temper bench train` (micro-batches, clipping, AdamW, schedule). With a teacher:
// sequence-level or logit distillation (above DistillConfig).
// Leaves out: packing several examples into one row.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "temper/core/rng.h"
#include "temper/core/settings.h"
#include "temper/model/train_step.h"
#include "temper/rl/method.h"
#include "temper/rl/prompt_codec.h"
#include "temper/rl/teacher.h"

namespace temper::rl {

// With a teacher: the completions can be the teacher's samples instead of the gold solutions
// (sequence-level distillation), and with `distill` the loss is forward KL on the teacher model's
// top-K next-token distributions at every completion position (logit distillation; the teacher must
// share the student's vocabulary), mixed with the hard-token cross-entropy by ce_weight.
struct DistillConfig {
  int64_t top_k = 64;  // teacher probabilities kept per position (the rest of its mass is dropped)
  double kl_weight = 1.0, ce_weight = 0.0;
  void visit(KeyVisitor& v);  // [sft.distill]
};

// Candidate reading: a share of the SFT prompts carry two candidate solutions in <candidate> tags,
// the gold one and a corrupted copy (its last result and answer moved by 1-5), in a random order,
// laid out by the same template ZPPO's BCQ prompts use; the target stays the gold solution. A tiny
// student learns to read candidates here, as an instruction-tuned one already can.
struct SftCandidates {
  double rate = 0;  // share of examples with candidates
  std::string tmpl = "{candidates}{question}";
  int64_t tokens = 48;  // each candidate cut to its last N tokens
};

struct SftConfig {
  int64_t batch = 32;  // examples per step
  SftCandidates candidates;
  TrainConfig train{.adamw = {.weight_decay = 0.0f}, .lr = {.peak = 1e-3, .min_ratio = 0.1}};
  bool teacher_completions = false;       // completions from the teacher instead of the gold solutions
  std::optional<DistillConfig> distill;   // logit distillation from the teacher model
  uint64_t seed = 0;                      // the teacher's sampling
  // Rewrites each problem before its prompt is encoded (fair RL writes a sampled preference, so the
  // policy learns to read past it before RL asks it to read it); index = the problem's draw number.
  std::function<tasks::Problem(tasks::Problem, uint64_t index, const PromptCodec& codec)> condition;
  void validate() const;
  void visit(KeyVisitor& v);  // [sft] (steps and schedule are the run's; [sft.distill] its own section)
};

// A wrong copy of a solution: its integer answer moved by 1-5 on the answer line and in the last
// reasoning line's result; empty when the answer is not an integer or there is no answer line.
std::string corrupt_solution(const std::string& text, const std::string& answer, Rng& rng);

class SftTrainer {
 public:
  SftTrainer(Transformer& model, std::shared_ptr<const tasks::Task> task, PromptCodec codec, SftConfig cfg,
             Teacher* teacher = nullptr);
  Metrics step();
  uint64_t cursor() const { return cursor_; }
  Trainer& trainer() { return trainer_; }
  void restore(uint64_t cursor) { cursor_ = cursor; }

 private:
  Transformer& model_;
  std::shared_ptr<const tasks::Task> task_;
  PromptCodec codec_;
  SftConfig cfg_;
  Trainer trainer_;
  Teacher* teacher_;
  uint64_t cursor_ = 0;
  std::vector<float> logits_, probs_;
  std::vector<int32_t> ids_;
};

}  // namespace temper::rl

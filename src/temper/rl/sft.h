// Supervised fine-tuning on a task's gold solutions (the SFT stage before RL): batches of
// prompt + gold completion (end token included), loss on the completion tokens only, through the
// same Trainer as `temper bench train` (micro-batches, clipping, AdamW, schedule).
// Leaves out: packing several examples into one row.
#pragma once

#include <cstdint>
#include <memory>

#include "temper/model/train_step.h"
#include "temper/rl/method.h"
#include "temper/rl/prompt_codec.h"

namespace temper::rl {

struct SftConfig {
  int64_t batch = 32;  // examples per step
  TrainConfig train;
  void validate() const;
};

class SftTrainer {
 public:
  SftTrainer(Transformer& model, std::shared_ptr<const tasks::Task> task, PromptCodec codec, SftConfig cfg);
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
  uint64_t cursor_ = 0;
};

}  // namespace temper::rl

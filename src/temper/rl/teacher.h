// Teachers: where methods get responses from someone other than the student (ZPPO's correct candidate,
// the teacher-injection baseline, logit distillation). Three sources, chosen by the recipe's [teacher]:
// gold (the task's solution), dataset (the problem's `teacher_response` field) and model (a second model
// held in the same process for generation only); each in detail above class Teacher.
// Responses are completion text in the task's format (reasoning lines, then the answer line).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/dist/communicator.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"
#include "temper/rl/prompt_codec.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/pooled_engine.h"
#include "temper/tasks/task.h"

namespace temper::rl {

// The sources, chosen by the recipe's [teacher]:
//   gold     the task's own step-by-step gold solution (procedural tasks: always correct);
//   dataset  the problem's `teacher_response` field (JSONL datasets; problems without one get none);
//   model    a second model held in the same process for generation only (any format temper loads,
//            GGUF quantized included), sampling with its own tokenizer, KV pool and engine.
class Teacher {
 public:
  virtual ~Teacher() = default;
  virtual std::string name() const = 0;
  // Up to n responses to each problem (out[i] answers problems[i]; fewer or none where the source has
  // none). `seed` makes sampling teachers reproducible: the same (problems, n, seed) gives the same text.
  virtual std::vector<std::vector<std::string>> respond(const std::vector<tasks::Problem>& problems, int64_t n,
                                                        uint64_t seed) = 0;
  // The model behind the teacher (logit distillation needs its distributions); null for text sources.
  virtual Transformer* model() { return nullptr; }
};

// The gold solution, once per problem (whatever n: it is deterministic). Throws naming the problem when a
// task gives none.
std::unique_ptr<Teacher> make_gold_teacher();
// The problem's teacher_response, once per problem; none where it is empty.
std::unique_ptr<Teacher> make_dataset_teacher();

struct ModelTeacherConfig {
  rollout::SamplerConfig sampler;  // temperature 1 by default, as the student samples
  int64_t max_new = 256;
  int64_t kv_memory_mb = 256;
  int64_t max_seqs = 64;
  void visit(KeyVisitor& v);  // in [teacher] (defaults: rl's)
};

// A generation-only model: n samples per problem through its own rollout engine; samples cut off at
// max_new are dropped (an unfinished solution is no response).
class ModelTeacher : public Teacher {
 public:
  ModelTeacher(std::unique_ptr<Transformer> model, PromptCodec codec, ModelTeacherConfig cfg);
  std::string name() const override { return "model"; }
  std::vector<std::vector<std::string>> respond(const std::vector<tasks::Problem>& problems, int64_t n,
                                                uint64_t seed) override;
  Transformer* model() override { return model_.get(); }
  const PromptCodec& codec() const { return codec_; }
  // Data-parallel: every rank answers its share of the questions (rollout::run_sharded) and all
  // ranks get every answer. Every rank must call respond() with the same questions.
  void set_communicator(dist::Communicator* comm) { comm_ = comm; }

 private:
  dist::Communicator* comm_ = nullptr;
  std::unique_ptr<Transformer> model_;
  PromptCodec codec_;
  ModelTeacherConfig cfg_;
  std::unique_ptr<rollout::PooledEngine> engine_;
};

}  // namespace temper::rl

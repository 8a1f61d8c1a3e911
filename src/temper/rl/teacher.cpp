#include "temper/rl/teacher.h"

#include <algorithm>

#include "temper/core/error.h"
#include "temper/rollout/sharded.h"

namespace temper::rl {

void ModelTeacherConfig::visit(KeyVisitor& v) {
  sampler.visit(v);
  v("max_new", max_new, "the teacher's completion tokens at most (default rl.max_new)");
  v("kv_memory_mb", kv_memory_mb, "the teacher's KV cache (default rl.kv_memory_mb)");
  v("max_seqs", max_seqs, "sequences the teacher decodes together (default rl.max_seqs)");
}

namespace {

class FieldTeacher : public Teacher {
 public:
  explicit FieldTeacher(bool gold) : gold_(gold) {}
  std::string name() const override { return gold_ ? "gold" : "dataset"; }
  std::vector<std::vector<std::string>> respond(const std::vector<tasks::Problem>& problems, int64_t n,
                                                uint64_t) override {
    std::vector<std::vector<std::string>> out(problems.size());
    if (n <= 0) return out;
    for (size_t i = 0; i < problems.size(); ++i) {
      const std::string& text = gold_ ? problems[i].gold_solution : problems[i].teacher_response;
      TEMPER_CHECK(!gold_ || !text.empty())
          << "teacher \"gold\": problem " << problems[i].id << " has no gold solution (use source = \"dataset\" or \"model\")";
      if (!text.empty()) out[i].push_back(text);
    }
    return out;
  }

 private:
  bool gold_;
};

}  // namespace

std::unique_ptr<Teacher> make_gold_teacher() { return std::make_unique<FieldTeacher>(true); }
std::unique_ptr<Teacher> make_dataset_teacher() { return std::make_unique<FieldTeacher>(false); }

ModelTeacher::ModelTeacher(std::unique_ptr<Transformer> model, PromptCodec codec, ModelTeacherConfig cfg)
    : model_(std::move(model)), codec_(std::move(codec)), cfg_(std::move(cfg)) {
  TEMPER_CHECK(model_) << "teacher: no model";
  TEMPER_CHECK(cfg_.max_new > 0) << "teacher.max_new must be > 0, got " << cfg_.max_new;
  TEMPER_CHECK(cfg_.max_seqs > 0) << "teacher.max_seqs must be > 0, got " << cfg_.max_seqs;
  cfg_.sampler.validate();
  engine_ = std::make_unique<rollout::PooledEngine>(
      *model_, cfg_.kv_memory_mb, rollout::EngineConfig{cfg_.max_seqs, codec_.token_bytes}, "teacher.kv_memory_mb");
}

std::vector<std::vector<std::string>> ModelTeacher::respond(const std::vector<tasks::Problem>& problems, int64_t n,
                                                            uint64_t seed) {
  std::vector<std::vector<std::string>> out(problems.size());
  if (n <= 0 || problems.empty()) return out;
  const int64_t ctx = model_->config().max_position_embeddings;
  std::vector<rollout::RolloutRequest> reqs;
  std::vector<size_t> which;
  for (size_t i = 0; i < problems.size(); ++i) {
    std::vector<int32_t> prompt = codec_.encode_prompt(problems[i]);
    if (static_cast<int64_t>(prompt.size()) >= ctx) continue;  // no room: this problem gets no response
    reqs.push_back(rollout::make_request(std::move(prompt), n, cfg_.max_new, ctx, cfg_.sampler, codec_.stop_ids, seed,
                                         static_cast<uint64_t>(i) * static_cast<uint64_t>(n)));
    which.push_back(i);
  }
  std::vector<rollout::Completion> done = rollout::run_sharded(engine_->engine(), reqs, comm_);
  std::sort(done.begin(), done.end(), [](const rollout::Completion& a, const rollout::Completion& b) {
    return a.request != b.request ? a.request < b.request : a.member < b.member;
  });
  for (const rollout::Completion& c : done)  // a response cut off at max_new is not a solution
    if (c.finish != rollout::FinishReason::length) out[which[static_cast<size_t>(c.request)]].push_back(codec_.decode(c.tokens));
  return out;
}

}  // namespace temper::rl

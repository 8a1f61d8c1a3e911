#include "temper/rl/sft.h"

#include <algorithm>
#include <chrono>

#include "temper/core/error.h"
#include "temper/core/log.h"

namespace temper::rl {

void SftConfig::validate() const { TEMPER_CHECK(batch > 0) << "sft.batch must be > 0, got " << batch; }

SftTrainer::SftTrainer(Transformer& model, std::shared_ptr<const tasks::Task> task, PromptCodec codec, SftConfig cfg)
    : model_(model), task_(std::move(task)), codec_(std::move(codec)), cfg_(std::move(cfg)), trainer_(model, cfg_.train) {
  cfg_.validate();
  TEMPER_CHECK(task_->size(tasks::Split::train) != 0) << "sft: task '" << task_->name() << "' has no training problems";
}

Metrics SftTrainer::step() {
  auto t0 = std::chrono::steady_clock::now();
  const int64_t ctx = model_.config().max_position_embeddings, size = task_->size(tasks::Split::train);
  std::vector<std::vector<int32_t>> rows;
  std::vector<size_t> prompt_len;
  for (int64_t i = 0; i < cfg_.batch; ++i) {
    uint64_t idx = cursor_++;
    if (size > 0) idx %= static_cast<uint64_t>(size);
    tasks::Problem p = task_->problem(tasks::Split::train, idx);
    TEMPER_CHECK(!p.gold_solution.empty()) << "sft: problem " << p.id << " has no gold solution";
    std::vector<int32_t> row = codec_.encode_prompt(p);
    prompt_len.push_back(row.size());
    std::vector<int32_t> gold = codec_.encode_completion(p.gold_solution);
    row.insert(row.end(), gold.begin(), gold.end());
    if (static_cast<int64_t>(row.size()) > ctx) row.resize(static_cast<size_t>(ctx));
    rows.push_back(std::move(row));
  }
  int64_t T = 2;
  for (auto& r : rows) T = std::max<int64_t>(T, static_cast<int64_t>(r.size()));
  const int64_t B = cfg_.batch;
  std::vector<int32_t> tokens(static_cast<size_t>(B * T), 0);
  std::vector<float> mask(static_cast<size_t>(B * (T - 1)), 0.f);
  int64_t n_tokens = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& r = rows[static_cast<size_t>(b)];
    std::copy(r.begin(), r.end(), tokens.begin() + b * T);
    for (size_t t = prompt_len[static_cast<size_t>(b)]; t < r.size(); ++t) {  // predicting completion token t
      mask[static_cast<size_t>(b * (T - 1) + static_cast<int64_t>(t) - 1)] = 1.f;
      ++n_tokens;
    }
  }
  StepStats s = trainer_.step(tokens.data(), mask.data(), B, T);
  if (s.skipped)
    log_write(LogLevel::warn, "sft: non-finite loss or gradients (loss " + std::to_string(s.loss) +
                                  "); the update was skipped, the run goes on");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {{"loss", s.loss},
          {"grad_norm", s.grad_norm},
          {"lr", s.lr},
          {"tokens", static_cast<double>(n_tokens)},
          {"tokens_per_s", secs > 0 ? static_cast<double>(B * T) / secs : 0.0},
          {"updates_skipped", s.skipped ? 1.0 : 0.0},
          {"step_s", secs}};
}

}  // namespace temper::rl

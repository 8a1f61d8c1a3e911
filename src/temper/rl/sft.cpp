#include "temper/rl/sft.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/core/rng.h"
#include "temper/rl/methods/zppo.h"

namespace temper::rl {

std::string corrupt_solution(const std::string& text, const std::string& answer, Rng& rng) {
  std::optional<int64_t> v = tasks::parse_int(answer);
  size_t hash = text.rfind("####");
  if (!v || hash == std::string::npos) return {};
  const int64_t delta = tasks::rand_int(rng, 1, 5) * ((rng.next_u32() & 1u) ? 1 : -1);
  const std::string to = std::to_string(*v + delta);
  // The answer line and the last reasoning line's result (the text after its last '=').
  std::string out = text.substr(0, hash) + "#### " + to;
  size_t end = hash;
  while (end > 0 && (out[end - 1] == '\n' || out[end - 1] == ' ')) --end;
  size_t line = out.rfind('\n', end == 0 ? 0 : end - 1);
  line = line == std::string::npos ? 0 : line + 1;
  size_t eq = out.rfind('=', end == 0 ? 0 : end - 1);
  if (eq != std::string::npos && eq >= line && out.substr(eq + 1, end - eq - 1) == answer) out.replace(eq + 1, end - eq - 1, to);
  return out;
}

void DistillConfig::visit(KeyVisitor& v) {
  v("top_k", top_k, "teacher probabilities kept per position (forward KL on the teacher's top-K)");
  v("kl_weight", kl_weight, "weight of the KL to the teacher");
  v("ce_weight", ce_weight, "weight of the cross-entropy on the completion's tokens");
}

void SftConfig::visit(KeyVisitor& v) {
  v("batch", batch, "examples per step");
  v("micro_batch", train.micro_batch, "rows per forward/backward (0: the whole batch)");
  visit_optimizer(v, train.adamw, train.lr, train.max_grad_norm);
  v("candidate_rate", candidates.rate, "share of prompts with the gold and a corrupted solution as <candidate> blocks");
  v("candidate_template", candidates.tmpl, "how candidates are laid out: {candidates}, {question}");
  v("candidate_tokens", candidates.tokens, "each candidate cut to its last N tokens");
  std::string completions = teacher_completions ? "teacher" : "gold";
  v.choice("completions", completions, "SFT targets: gold (the task's solutions), teacher (the [teacher]'s samples)",
           {"gold", "teacher"});
  teacher_completions = completions == "teacher";
}

void SftConfig::validate() const {
  // The counts that size a step's rows and the distillation's teacher probabilities, bounded generously.
  TEMPER_CHECK(batch >= 1 && batch <= 65536) << "sft.batch = " << batch << ": expected 1 to 65536";
  TEMPER_CHECK(train.micro_batch >= 0 && train.micro_batch <= 65536)
      << "sft.micro_batch = " << train.micro_batch << ": expected 0 (the whole batch) to 65536";
  TEMPER_CHECK(candidates.tokens <= kMaxPositions)
      << "sft.candidate_tokens = " << candidates.tokens << ": expected 1 to " << kMaxPositions;
  TEMPER_CHECK(candidates.rate >= 0 && candidates.rate <= 1) << "sft.candidate_rate must be in [0, 1], got " << candidates.rate;
  TEMPER_CHECK(candidates.tokens >= 1) << "sft.candidate_tokens must be >= 1, got " << candidates.tokens;
  TEMPER_CHECK(candidates.tmpl.find("{question}") != std::string::npos && candidates.tmpl.find("{candidates}") != std::string::npos)
      << "sft.candidate_template must contain {question} and {candidates}";
  if (distill) {
    TEMPER_CHECK(distill->top_k >= 1 && distill->top_k <= kMaxVocab)
        << "sft.distill.top_k = " << distill->top_k << ": expected 1 to " << kMaxVocab;
    TEMPER_CHECK(distill->kl_weight >= 0 && distill->ce_weight >= 0 && distill->kl_weight + distill->ce_weight > 0)
        << "sft.distill.kl_weight and ce_weight must be >= 0 and not both 0";
  }
}

SftTrainer::SftTrainer(Transformer& model, std::shared_ptr<const tasks::Task> task, PromptCodec codec, SftConfig cfg,
                       Teacher* teacher)
    : model_(model), task_(std::move(task)), codec_(std::move(codec)), cfg_(std::move(cfg)), trainer_(model, cfg_.train),
      teacher_(teacher) {
  cfg_.validate();
  TEMPER_CHECK(task_->size(tasks::Split::train) != 0) << "sft: task '" << task_->name() << "' has no training problems";
  TEMPER_CHECK(!cfg_.teacher_completions || teacher_) << "sft: completions = \"teacher\" needs a [teacher]";
  if (cfg_.distill) {
    TEMPER_CHECK(teacher_ && teacher_->model()) << "sft: [sft.distill] needs a teacher model ([teacher] source = \"model\")";
    TEMPER_CHECK(teacher_->model()->config().vocab_size == model_.config().vocab_size)
        << "sft: logit distillation needs the teacher's vocabulary; the teacher has " << teacher_->model()->config().vocab_size
        << " tokens, the student " << model_.config().vocab_size;
  }
}

Metrics SftTrainer::step() {
  auto t0 = std::chrono::steady_clock::now();
  const int64_t ctx = model_.config().max_position_embeddings, size = task_->size(tasks::Split::train);
  std::vector<std::vector<int32_t>> rows;
  std::vector<size_t> prompt_len;
  std::vector<tasks::Problem> problems;
  const uint64_t first = cursor_;
  int64_t with_candidates = 0, teacher_missing = 0;
  for (int64_t i = 0; i < cfg_.batch; ++i) {
    uint64_t idx = cursor_++;
    if (size > 0) idx %= static_cast<uint64_t>(size);
    problems.push_back(task_->problem(tasks::Split::train, idx));
    if (cfg_.condition)
      problems.back() = cfg_.condition(std::move(problems.back()), first + static_cast<uint64_t>(i), codec_);
  }
  std::vector<std::vector<std::string>> taught;
  if (cfg_.teacher_completions) taught = teacher_->respond(problems, 1, mix_seed(cfg_.seed ^ 0x5F7ull, first));
  for (int64_t i = 0; i < cfg_.batch; ++i) {
    const tasks::Problem& p = problems[static_cast<size_t>(i)];
    std::string text = p.gold_solution;
    if (cfg_.teacher_completions) {
      if (!taught[static_cast<size_t>(i)].empty()) text = taught[static_cast<size_t>(i)][0];
      else ++teacher_missing;  // no complete teacher response: the gold solution stands in
    }
    TEMPER_CHECK(!text.empty()) << "sft: problem " << p.id << " has no gold solution"
                                << (cfg_.teacher_completions ? " and the teacher gave no complete response" : "");
    std::vector<int32_t> row;
    std::string wrong;
    Rng pick(mix_seed(cfg_.seed ^ 0xCA9Dull, first + static_cast<uint64_t>(i)), 0);
    if (cfg_.candidates.rate > 0 && pick.uniform_f64() < cfg_.candidates.rate && !(wrong = corrupt_solution(text, p.answer, pick)).empty()) {
      std::string a = zppo_candidate(codec_, text, cfg_.candidates.tokens), b = zppo_candidate(codec_, wrong, cfg_.candidates.tokens);
      const bool gold_first = (pick.next_u32() & 1u) != 0;
      row = codec_.encode_prompt(
          zppo_reformulate(p, codec_, cfg_.candidates.tmpl, gold_first ? a + b : b + a, "", "sft"));
      ++with_candidates;
    } else {
      row = codec_.encode_prompt(p);
    }
    prompt_len.push_back(row.size());
    std::vector<int32_t> gold = codec_.encode_completion(text);
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
  SoftTargets soft;
  double teacher_entropy = 0;  // -sum q log q over the kept top-K, masked mean (KL = soft CE - this)
  if (cfg_.distill) {  // the teacher's top-K at every position, row by row (its logits are [T, V] at a time)
    const int64_t V = model_.config().vocab_size, K = std::min<int64_t>(cfg_.distill->top_k, V);
    ids_.assign(static_cast<size_t>(B * T * K), 0);
    probs_.assign(static_cast<size_t>(B * T * K), 0.f);
    logits_.resize(static_cast<size_t>(T * V));
    std::vector<int32_t> order(static_cast<size_t>(V));
    dist::Communicator* comm = trainer_.optimizer().communicator();  // data-parallel: the rows this rank trains on
    const dist::Range mine = comm ? dist::shard(B, *comm) : dist::Range{0, B};
    for (int64_t b = mine.begin; b < mine.end; ++b) {
      teacher_->model()->forward_logits(tokens.data() + b * T, 1, T, logits_.data());
      for (int64_t t = 0; t + 1 < T; ++t) {
        if (mask[static_cast<size_t>(b * (T - 1) + t)] == 0.f) continue;
        const float* z = logits_.data() + t * V;
        float m = *std::max_element(z, z + V);
        double se = 0;
        for (int64_t v = 0; v < V; ++v) se += std::exp(static_cast<double>(z[v] - m));
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + K, order.end(), [z](int32_t x, int32_t y) { return z[x] > z[y] || (z[x] == z[y] && x < y); });
        const size_t at = static_cast<size_t>((b * T + t) * K);
        for (int64_t k = 0; k < K; ++k) {
          double q = std::exp(static_cast<double>(z[order[static_cast<size_t>(k)]] - m)) / se;
          ids_[at + static_cast<size_t>(k)] = order[static_cast<size_t>(k)];
          probs_[at + static_cast<size_t>(k)] = static_cast<float>(q);
          if (q > 0) teacher_entropy -= q * std::log(q);
        }
      }
    }
    if (comm) comm->allreduce_sum(&teacher_entropy, 1);
    teacher_entropy /= std::max<double>(1.0, static_cast<double>(n_tokens));
    soft.K = K, soft.ids = ids_.data(), soft.probs = probs_.data();
    soft.kl_weight = cfg_.distill->kl_weight, soft.ce_weight = cfg_.distill->ce_weight;
  }
  StepStats s = trainer_.step(tokens.data(), mask.data(), B, T, cfg_.distill ? &soft : nullptr);
  if (s.skipped)
    log_write(LogLevel::warn, "sft: non-finite loss or gradients (loss " + std::to_string(s.loss) +
                                  "); the update was skipped, the run goes on");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Metrics out = {{"loss", s.loss},
          {"grad_norm", s.grad_norm},
          {"lr", s.lr},
          {"tokens", static_cast<double>(n_tokens)},
          {"tokens_per_s", secs > 0 ? static_cast<double>(B * T) / secs : 0.0},
          {"updates_skipped", s.skipped ? 1.0 : 0.0},
          {"step_s", secs}};
  if (cfg_.distill) out.emplace_back("distill_kl", s.soft_ce - teacher_entropy);  // forward KL on the teacher's top-K
  if (cfg_.teacher_completions) out.emplace_back("teacher_missing", static_cast<double>(teacher_missing));
  if (cfg_.candidates.rate > 0) out.emplace_back("candidate_frac", static_cast<double>(with_candidates) / static_cast<double>(B));
  return out;
}

}  // namespace temper::rl

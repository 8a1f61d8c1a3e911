// The scorer's passes (scorer.h): one row, a batch of rows in micro-batches (log-probs, or distributions over
// the whole vocabulary), hidden states, and the update's reference log-probs.
#include "temper/rl/scorer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "temper/core/error.h"
#include "temper/rl/packed_rows.h"

namespace temper::rl {

namespace {

using Rows = std::vector<std::vector<int32_t>>;

// Logits a distributions pass holds at a time (rows of a micro-batch, one row at least).
constexpr int64_t kDistChunkBytes = int64_t{256} << 20;

// Log-probs of padded rows (tokens/targets at the packing's stride) from one packed forward, written back
// to their padded positions; positions without a target (a shared prompt's) are left as they were.
void packed_logprobs(Transformer& model, const PackedRows& packed, const int32_t* tok, const int32_t* tgt, float* lp) {
  std::vector<int32_t> xt, xg;
  packed.gather(tok, &xt);
  packed.gather(tgt, &xg);
  std::vector<float> xl(xt.size()), xe(xt.size());
  model.forward_logprobs_packed(xt.data(), xg.data(), packed.segs, xl.data(), xe.data());
  for (size_t n = 0; n < xg.size(); ++n)
    if (xg[n] >= 0) lp[packed.from[n]] = xl[n];
}

// One score_batch call: the rows in order (equal prompts together when packed, else by length), this rank's
// block of them in micro-batches, each completion token's log-prob (and distribution) in flat arrays.
class BatchPass {
 public:
  BatchPass(Transformer& model, const Rows& prompts, const Rows& tokens, bool dists, bool pack)
      : model_(model),
        prompts_(prompts),
        tokens_(tokens),
        n_(static_cast<int64_t>(prompts.size())),
        dists_(dists),
        pack_(pack),
        V_(model.config().vocab_size) {
    off_.assign(static_cast<size_t>(n_ + 1), 0), order_.resize(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) off_[at(i + 1)] = off_[at(i)] + static_cast<int64_t>(tokens_[at(i)].size());
    std::iota(order_.begin(), order_.end(), 0);
    if (pack_)  // rows with equal prompts side by side: a micro-batch holds each prompt once
      std::stable_sort(order_.begin(), order_.end(),
                       [&](int64_t a, int64_t b) { return prompts_[at(a)] < prompts_[at(b)]; });
    else  // rows of similar length share a batch
      std::stable_sort(order_.begin(), order_.end(), [&](int64_t a, int64_t b) { return len(a) < len(b); });
    flat_.assign(static_cast<size_t>(off_.back()), 0.f);
    if (dists_) {  // any vocabulary, while the step's tokens x V fit the budget
      const double mib = static_cast<double>(off_.back()) * static_cast<double>(V_) * sizeof(float) / (1 << 20);
      TEMPER_CHECK(mib <= static_cast<double>(kMaxDistillBytes >> 20))
          << "rl: the full-vocabulary distributions of " << off_.back() << " completion tokens x " << V_
          << " vocabulary entries need " << static_cast<int64_t>(mib) << " MiB, above the " << (kMaxDistillBytes >> 20)
          << " MiB kept per step; generate fewer tokens per step (rl.prompts_per_step, rl.group_size, rl.max_new) "
             "or use the sampled-token form (rl.rcsd.mode = \"sampled\")";
      flat_dist_.assign(static_cast<size_t>(off_.back() * V_), 0.f);
    }
  }

  void run(const dist::Range& own, int64_t mb) {
    for (int64_t r0 = own.begin; r0 < own.end; r0 += mb) {
      const int64_t rows = std::min(mb, own.end - r0);
      int64_t T = 0;
      for (int64_t r = r0; r < r0 + rows; ++r) T = std::max<int64_t>(T, static_cast<int64_t>(len(order_[at(r)])));
      if (T < 2) continue;
      pad(r0, rows, T);
      if (dists_)
        distributions(r0, rows, T);
      else
        logprobs(r0, rows, T);
    }
  }

  // Summed over ranks (each scored its block), then cut into rows.
  void finish(dist::Communicator* comm, std::vector<std::vector<float>>& logp, std::vector<std::vector<float>>* dists) {
    const bool several = comm && comm->size() > 1;
    if (dists) {
      if (several) comm->allreduce_sum(flat_dist_.data(), static_cast<int64_t>(flat_dist_.size()));
      dists->resize(static_cast<size_t>(n_));
      for (int64_t i = 0; i < n_; ++i)
        (*dists)[at(i)].assign(flat_dist_.begin() + off_[at(i)] * V_, flat_dist_.begin() + off_[at(i + 1)] * V_);
    }
    if (several) comm->allreduce_sum(flat_.data(), static_cast<int64_t>(flat_.size()));
    logp.resize(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) logp[at(i)].assign(flat_.begin() + off_[at(i)], flat_.begin() + off_[at(i + 1)]);
  }

 private:
  static size_t at(int64_t i) { return static_cast<size_t>(i); }
  size_t len(int64_t i) const { return prompts_[at(i)].size() + tokens_[at(i)].size(); }

  // The micro-batch's rows right-padded to T (causal rows are unaffected by padding on the right).
  void pad(int64_t r0, int64_t rows, int64_t T) {
    tok_.assign(static_cast<size_t>(rows * T), 0), tgt_.assign(static_cast<size_t>(rows * T), -1);
    for (int64_t r = 0; r < rows; ++r) {
      const auto& p = prompts_[at(order_[at(r0 + r)])];
      const auto& c = tokens_[at(order_[at(r0 + r)])];
      TEMPER_CHECK(!p.empty()) << "rl: score_batch needs a non-empty prompt";
      std::copy(p.begin(), p.end(), tok_.begin() + r * T);
      std::copy(c.begin(), c.end(), tok_.begin() + r * T + static_cast<int64_t>(p.size()));
      for (size_t i = 0; i < c.size(); ++i) tgt_[at(r * T) + p.size() - 1 + i] = c[i];
    }
  }

  void logprobs(int64_t r0, int64_t rows, int64_t T) {
    std::vector<float> lp(static_cast<size_t>(rows * T)), ent(static_cast<size_t>(rows * T));
    if (pack_) {
      std::vector<const std::vector<int32_t>*> ps;
      std::vector<int64_t> lens;
      for (int64_t r = r0; r < r0 + rows; ++r) {
        ps.push_back(&prompts_[at(order_[at(r)])]);
        lens.push_back(static_cast<int64_t>(len(order_[at(r)])));
      }
      packed_logprobs(model_, pack_rows(ps, lens, T), tok_.data(), tgt_.data(), lp.data());
    } else {
      model_.forward_logprobs(tok_.data(), tgt_.data(), rows, T, lp.data(), ent.data());
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = order_[at(r0 + r)];
      const size_t P = prompts_[at(i)].size();
      for (size_t k = 0; k < tokens_[at(i)].size(); ++k) flat_[at(off_[at(i)]) + k] = lp[at(r * T) + P - 1 + k];
    }
  }

  // Log-softmax over the whole vocabulary at each completion token, the micro-batch's rows a few at a time so
  // that their [rows x T x V] logits stay within kDistChunkBytes (one row at least) whatever the vocabulary.
  void distributions(int64_t r0, int64_t rows, int64_t T) {
    const int64_t row_bytes = T * V_ * static_cast<int64_t>(sizeof(float));
    const int64_t sub = std::max<int64_t>(1, std::min<int64_t>(rows, kDistChunkBytes / row_bytes));
    std::vector<float> logits(static_cast<size_t>(sub * T * V_));
    for (int64_t s0 = 0; s0 < rows; s0 += sub) {
      const int64_t n = std::min(sub, rows - s0);
      model_.forward_logits(tok_.data() + s0 * T, n, T, logits.data());
      distributions_of(r0 + s0, n, T, logits.data());
    }
  }

  void distributions_of(int64_t r0, int64_t rows, int64_t T, const float* logits) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = order_[at(r0 + r)];
      const size_t P = prompts_[at(i)].size();
      for (size_t k = 0; k < tokens_[at(i)].size(); ++k) {
        const float* z = logits + static_cast<size_t>(r * T + static_cast<int64_t>(P - 1 + k)) * at(V_);
        float* d = flat_dist_.data() + static_cast<size_t>(off_[at(i)] + static_cast<int64_t>(k)) * at(V_);
        float m = z[0];
        for (int64_t v = 1; v < V_; ++v) m = std::max(m, z[v]);
        double se = 0;
        for (int64_t v = 0; v < V_; ++v) se += std::exp(static_cast<double>(z[v] - m));
        const float lse = m + static_cast<float>(std::log(se));
        for (int64_t v = 0; v < V_; ++v) d[v] = z[v] - lse;
        flat_[at(off_[at(i)]) + k] = d[tokens_[at(i)][k]];
      }
    }
  }

  Transformer& model_;
  const Rows& prompts_;
  const Rows& tokens_;
  const int64_t n_;
  const bool dists_, pack_;
  const int64_t V_;
  std::vector<int64_t> off_, order_;  // off_[i]: row i's first token in flat_; order_: rows in scoring order
  std::vector<float> flat_, flat_dist_;
  std::vector<int32_t> tok_, tgt_;  // the micro-batch's padded rows
};

}  // namespace

Scorer::Scorer(Transformer& policy, Transformer* reference, int64_t micro_batch, bool share_prompts)
    : policy_(policy), reference_(reference), micro_batch_(micro_batch), share_prompts_(share_prompts) {}

void Scorer::lend(MethodEnv& env) {
  env.score_tokens = [this](const std::vector<int32_t>& prompt, const std::vector<int32_t>& toks,
                            std::vector<float>& logp,
                            std::vector<float>& entropy) { score_tokens(prompt, toks, logp, entropy); };
  env.score_batch = [this](const Rows& prompts, const Rows& toks, bool initial, std::vector<std::vector<float>>& logp,
                           std::vector<std::vector<float>>* dists) {
    score_batch(prompts, toks, initial, logp, dists);
  };
  env.embed = [this](const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply) {
    return embed(prompt, reply);
  };
  env.hidden = [this](const std::vector<int32_t>& prompt, const std::vector<int32_t>& toks) {
    return hidden(prompt, toks);
  };
}

void Scorer::score_tokens(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                          std::vector<float>& logp, std::vector<float>& entropy) {
  const int64_t T = static_cast<int64_t>(prompt.size() + tokens.size());
  std::vector<int32_t> tok(prompt), tgt(static_cast<size_t>(T), -1);
  tok.insert(tok.end(), tokens.begin(), tokens.end());
  for (size_t i = 0; i < tokens.size(); ++i) tgt[prompt.size() - 1 + i] = tokens[i];
  std::vector<float> lp(static_cast<size_t>(T)), ent(static_cast<size_t>(T));
  policy_.forward_logprobs(tok.data(), tgt.data(), 1, T, lp.data(), ent.data());
  const long first = static_cast<long>(prompt.size() - 1), last = first + static_cast<long>(tokens.size());
  logp.assign(lp.begin() + first, lp.begin() + last);
  entropy.assign(ent.begin() + first, ent.begin() + last);
}

void Scorer::score_batch(const Rows& prompts, const Rows& tokens, bool initial, std::vector<std::vector<float>>& logp,
                         std::vector<std::vector<float>>* dists) {
  TEMPER_CHECK(!initial || reference_)
      << "rl: a method scores tokens under the starting policy, but the trainer holds no frozen copy of it";
  TEMPER_CHECK(prompts.size() == tokens.size())
      << "rl: score_batch got " << prompts.size() << " prompts for " << tokens.size() << " completions";
  Transformer& model = initial ? *reference_ : policy_;
  std::optional<BaseOnly> base;  // LoRA: the reference is the policy's base, its adapters off
  if (initial) base.emplace(model);
  const bool pack = !dists && share_prompts_ && model.packed_supported();
  BatchPass pass(model, prompts, tokens, dists != nullptr, pack);
  const dist::Range own = dist::shard(static_cast<int64_t>(prompts.size()), rank(), ranks());  // then summed
  pass.run(own, micro_batch_ > 0 ? micro_batch_ : 16);
  pass.finish(comm_, logp, dists);
}

std::vector<float> Scorer::embed(const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply) {
  TEMPER_CHECK(reference_)
      << "rl: a method embeds replies with the starting policy, but the trainer holds no frozen copy of it";
  TEMPER_CHECK(!reply.empty()) << "rl: an empty reply has no embedding";
  std::vector<int32_t> tok(prompt);
  tok.insert(tok.end(), reply.begin(), reply.end());
  const int64_t T = static_cast<int64_t>(tok.size()), H = reference_->config().hidden_size;
  std::vector<float> h(static_cast<size_t>(T * H)), mean(static_cast<size_t>(H), 0.f);
  {
    BaseOnly base(*reference_);
    reference_->forward_hidden(tok.data(), 1, T, h.data());
  }
  for (int64_t t = static_cast<int64_t>(prompt.size()); t < T; ++t)
    for (int64_t j = 0; j < H; ++j)
      mean[static_cast<size_t>(j)] += h[static_cast<size_t>(t * H + j)] / static_cast<float>(reply.size());
  return mean;
}

std::vector<float> Scorer::hidden(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) {
  TEMPER_CHECK(!tokens.empty()) << "rl: hidden states of an empty completion";
  std::vector<int32_t> tok(prompt);
  tok.insert(tok.end(), tokens.begin(), tokens.end());
  const int64_t T = static_cast<int64_t>(tok.size()), H = policy_.config().hidden_size;
  std::vector<float> h(static_cast<size_t>(T * H));
  policy_.forward_hidden(tok.data(), 1, T, h.data());
  return std::vector<float>(h.begin() + static_cast<long>(prompt.size()) * H, h.end());
}

// In micro-batches of the batch's order (data-parallel: this rank's block of rows, then summed); rows of a
// group are adjacent there, so a packed micro-batch holds its prompt once.
void Scorer::reference_logprobs(const Batch& b, TokenRows& rows) {
  const int64_t B = rows.rows, T = rows.T;
  const size_t N = static_cast<size_t>(B * T);
  rows.ref.assign(N, 0.f);
  std::vector<float> ent(N);
  const dist::Range own = dist::shard(B, rank(), ranks());
  const int64_t mb = micro_batch_ > 0 ? micro_batch_ : B;
  const bool pack = share_prompts_ && reference_->packed_supported();
  BaseOnly base(*reference_);  // LoRA: the reference is the policy's base, its adapters off
  for (int64_t r0 = own.begin; r0 < own.end; r0 += mb) {
    const int64_t n = std::min(mb, own.end - r0);
    const size_t off = static_cast<size_t>(r0 * T);
    const int32_t *tok = rows.tok.data() + off, *tgt = rows.tgt.data() + off;
    if (!pack) {
      reference_->forward_logprobs(tok, tgt, n, T, rows.ref.data() + off, ent.data() + off);
      continue;
    }
    std::vector<const std::vector<int32_t>*> prompts;
    std::vector<int64_t> lens;
    for (int64_t r = r0; r < r0 + n; ++r) {
      const Trajectory& t = b.traj[static_cast<size_t>(r)];
      prompts.push_back(&t.prompt);
      lens.push_back(static_cast<int64_t>(t.prompt.size() + t.tokens.size()));
    }
    packed_logprobs(*reference_, pack_rows(prompts, lens, T), tok, tgt, rows.ref.data() + off);
  }
  if (ranks() > 1) comm_->allreduce_sum(rows.ref.data(), static_cast<int64_t>(N));
}

}  // namespace temper::rl

// The fused classifier: logits = h W^T -> log-softmax -> log-prob of the given token, full-vocabulary
// entropy, and (optionally) the gradient of a per-token loss L = sum_n f_n(logprob_n, entropy_n)
// back to h and W, in one pass. Rows are processed in chunks: only [chunk_rows x V] logits exist at a
// time, never [N x V] (the design of Liger-Kernel's fused linear cross-entropy, applied to the
// policy-gradient and entropy terms too). The loss supplies dL/dlogprob and dL/dentropy per row from
// that row's values, so a clipped PPO surrogate fuses as well as cross-entropy.
#pragma once

#include <cstdint>

#include "temper/kernels/matmul.h"

namespace temper::kernels {

// A row's soft target (logit distillation): probabilities q over K vocabulary ids (their sum s may be
// below 1 when only a teacher's top-K is kept), weighted by coef. The row's loss gains
// coef * (-sum_k q_k log p(k)), the cross-entropy part of forward KL(q || p); its gradient on the
// logits is coef * (s p - q).
struct SoftTarget {
  int64_t K = 0;
  const int32_t* ids = nullptr;
  const float* probs = nullptr;
  float coef = 0.f;
};

// A row's reverse-KL target (on-policy distillation over the whole vocabulary, for small vocabularies):
// the teacher's log-probabilities log q over all V ids, weighted by coef. The row's loss gains
// coef * KL(p || q) = coef * sum_v p_v (log p_v - log q_v); its gradient on the logits is
// coef * p_v (log p_v - log q_v - KL(p || q)).
struct ReverseKlTarget {
  const float* logq = nullptr;  // [V]
  float coef = 0.f;
};

class ClassifierLoss {
 public:
  virtual ~ClassifierLoss() = default;
  // Row n has log-prob lp of its target and entropy H: return dL/dlp and dL/dH.
  virtual void coefs(int64_t n, float lp, float H, float* g_lp, float* g_ent) const = 0;
  // Row n's soft target, if any (default: none).
  virtual bool soft_target(int64_t /*n*/, SoftTarget* /*out*/) const { return false; }
  // For rows with a soft target: -sum_k q_k log p(k) before the gradient (rows run in parallel, one call per row).
  virtual void soft_observed(int64_t /*n*/, float /*cross_entropy*/) const {}
  // Row n's reverse-KL target, if any (default: none), and KL(p || q) before the gradient.
  virtual bool reverse_kl_target(int64_t /*n*/, ReverseKlTarget* /*out*/) const { return false; }
  virtual void reverse_kl_observed(int64_t /*n*/, float /*kl*/) const {}
  // True when the loss has no gradient at all: every row's coefficients are zero whatever its log-prob and
  // entropy, and no row has a soft or reverse-KL target. The model then computes the rows' log-probs and
  // entropies only and skips the backward, whose result would be zero (default: false).
  virtual bool no_gradient() const { return false; }
};

struct ClassifierArgs {
  const float* h = nullptr;          // [N, C]
  const float* w = nullptr;          // [V, C]
  const uint16_t* w_bf16 = nullptr;         // optional: w rounded to bf16 (bf16 precision)
  const uint16_t* w_bf16_packed = nullptr;  // optional: w packed (bf16_pack_weight): the forward's logits
  const int32_t* targets = nullptr;  // [N]; -1 = no target (log-prob 0, entropy only)
  int64_t N = 0, C = 0, V = 0;
  float* logprob = nullptr;  // [N] out
  float* entropy = nullptr;  // [N] out
  const ClassifierLoss* loss = nullptr;  // null: forward only
  float* dh = nullptr;                   // [N, C] overwritten (when loss)
  float* dw = nullptr;                   // [V, C] accumulated (when loss); null: not formed (a frozen LM head)
  Precision precision = Precision::f32;
  int64_t chunk_rows = 0;  // 0: as many rows as fit in kClassifierChunkBytes of logits
  float* workspace = nullptr;    // classifier_workspace_floats(N, V, chunk_rows) floats; null: a
  int64_t workspace_floats = 0;  // per-thread buffer grown on demand (tests, one-off calls)
  float softcap = 0.f;           // > 0: final-logit soft-capping z = tanh(z / softcap) * softcap first (Gemma-2)
};

inline constexpr int64_t kClassifierChunkBytes = int64_t{64} << 20;
// Rows a chunk holds at least, whatever the vocabulary: each chunk's weight gradient dW += dZ^T H reads and writes
// all of dW (V x C) for `rows` of work, so with 64-row chunks at V = 256k (Gemma) the update was memory-bound and
// the classifier took ~62% of a 0.5B training step (docs/PERFORMANCE.md). 256 rows cost 256 MB of logits there.
inline constexpr int64_t kClassifierMinChunkRows = 256;

// One logits row: log-prob of `target` (0 if target < 0) and the full-vocabulary entropy, with the
// same arithmetic the fused classifier uses (so rollout statistics equal training's). Returns lse.
float logit_row_stats(const float* z, int64_t V, int32_t target, float* logprob, float* entropy);

// Final-logit soft-capping of n logits in place, z = tanh(z / softcap) * softcap (HF Gemma2ForCausalLM's
// divide, tanh, multiply), with the classifier's own float ops: capped rollout logits equal training's bit
// for bit whatever the rows' layout. softcap <= 0: nothing.
void softcap_rows(float* z, int64_t n, float softcap);

int64_t classifier_chunk(int64_t N, int64_t V, int64_t chunk_rows = 0);  // rows per chunk
inline int64_t classifier_workspace_floats(int64_t N, int64_t V, int64_t chunk_rows = 0) {
  return classifier_chunk(N, V, chunk_rows) * V;
}

void classifier_fused(const ClassifierArgs& a);

}  // namespace temper::kernels

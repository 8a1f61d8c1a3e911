#include "temper/kernels/classifier.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

float logit_row_stats(const float* z, int64_t V, int32_t target, float* logprob, float* entropy) {
  float se, sexm;
  float m = isa_table().row_softmax_stats(z, V, &se, &sexm);
  float lse = m + std::log(se);
  *entropy = std::log(se) - sexm / se;
  *logprob = target >= 0 ? z[target] - lse : 0.f;
  return lse;
}

int64_t classifier_chunk(int64_t N, int64_t V, int64_t chunk_rows) {
  int64_t chunk = chunk_rows > 0 ? chunk_rows : std::max(kClassifierChunkBytes / (4 * V), kClassifierMinChunkRows);
  if (chunk < 1) chunk = 1;
  return chunk < N ? chunk : (N > 0 ? N : 1);
}

void softcap_rows(float* z, int64_t n, float softcap) {
  if (softcap <= 0.f || n <= 0) return;
  const IsaTable& t = isa_table();
  constexpr int64_t kBlock = 4096;  // a multiple of 16: the kernel's blocks never straddle two calls
  parallel_for((n + kBlock - 1) / kBlock, 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
      t.logit_softcap(z + k * kBlock, k * kBlock + kBlock < n ? kBlock : n - k * kBlock, softcap);
  });
}

namespace {

// Row n's logits zr (capped if a.softcap > 0) become dL/dz of the raw logits, in place: the loss's
// log-prob and entropy terms, a soft target's cross-entropy, a reverse-KL target, then the chain through
// the soft-capping.
void row_gradient(const ClassifierArgs& a, const IsaTable& t, float* zr, int64_t n, int32_t tgt, float lse, float lp,
                  float H) {
  float g_lp = 0.f, g_ent = 0.f;
  a.loss->coefs(n, lp, H, &g_lp, &g_ent);
  if (tgt < 0) g_lp = 0.f;
  SoftTarget st;
  const bool soft = a.loss->soft_target(n, &st) && st.K > 0;
  float mass = 0.f;
  if (soft) {  // fold coef * s * p into the target term; the one-hot and q parts are added after
    float ce = 0.f;
    for (int64_t k = 0; k < st.K; ++k) {
      mass += st.probs[k];
      ce -= st.probs[k] * (zr[st.ids[k]] - lse);
    }
    a.loss->soft_observed(n, ce);
    g_lp -= st.coef * mass;
  }
  ReverseKlTarget rk;
  const bool reverse = a.loss->reverse_kl_target(n, &rk) && rk.logq;
  static thread_local std::vector<float> g_rk, capped;
  if (reverse) {  // coef * p (log p - log q - KL), from the logits before they become the gradient
    if (static_cast<int64_t>(g_rk.size()) < a.V) g_rk.resize(static_cast<size_t>(a.V));
    double kl = 0;
    for (int64_t v = 0; v < a.V; ++v) {
      const float lpv = zr[v] - lse;
      g_rk[static_cast<size_t>(v)] = lpv - rk.logq[v];
      kl += std::exp(static_cast<double>(lpv)) * static_cast<double>(g_rk[static_cast<size_t>(v)]);
    }
    a.loss->reverse_kl_observed(n, static_cast<float>(kl));
    for (int64_t v = 0; v < a.V; ++v)
      g_rk[static_cast<size_t>(v)] =
          rk.coef * std::exp(zr[v] - lse) * (g_rk[static_cast<size_t>(v)] - static_cast<float>(kl));
  }
  if (a.softcap > 0.f) {  // the capped logits, for the chain dz_raw = dz (1 - tanh^2)
    if (static_cast<int64_t>(capped.size()) < a.V) capped.resize(static_cast<size_t>(a.V));
    std::copy(zr, zr + a.V, capped.begin());
  }
  t.classifier_row_grad(zr, a.V, tgt, lse, H, g_lp, g_ent);
  if (reverse)
    for (int64_t v = 0; v < a.V; ++v) zr[v] += g_rk[static_cast<size_t>(v)];
  if (soft) {
    if (tgt >= 0) zr[tgt] += st.coef * mass;
    for (int64_t k = 0; k < st.K; ++k) zr[st.ids[k]] -= st.coef * st.probs[k];
  }
  if (a.softcap > 0.f) t.logit_softcap_bwd(zr, capped.data(), a.V, a.softcap);
}

}  // namespace

void classifier_fused(const ClassifierArgs& a) {
  TEMPER_CHECK(a.h && a.w && a.logprob && a.entropy) << "classifier: missing input or output";
  TEMPER_CHECK(!a.loss || a.dh) << "classifier: a loss needs dh";
  TEMPER_CHECK(a.softcap >= 0.f && std::isfinite(a.softcap))
      << "classifier: softcap must be finite and >= 0 (0 = off), got " << a.softcap;
  for (int64_t n = 0; n < a.N; ++n)
    TEMPER_CHECK(!a.targets || (a.targets[n] >= -1 && a.targets[n] < a.V))
        << "target id " << a.targets[n] << " at row " << n << " outside vocab [0, " << a.V << ")";
  const IsaTable& t = isa_table();
  const int64_t chunk = classifier_chunk(a.N, a.V, a.chunk_rows);
  float* zbuf = a.workspace;  // captured by pointer: workers must not touch their own thread_local
  if (!zbuf || a.workspace_floats < chunk * a.V) {
    static thread_local std::vector<float> z;
    if (static_cast<int64_t>(z.size()) < chunk * a.V) z.resize(static_cast<size_t>(chunk * a.V));
    zbuf = z.data();
  }
  for (int64_t r0 = 0; r0 < a.N; r0 += chunk) {
    int64_t rows = r0 + chunk < a.N ? chunk : a.N - r0;
    const float* hc = a.h + r0 * a.C;
    if (a.w_bf16_packed) gemm_bf16_packed(rows, a.V, a.C, hc, a.C, a.w_bf16_packed, 0.f, zbuf, a.V);
    else gemm(false, true, rows, a.V, a.C, hc, a.C, a.w, a.C, 0.f, zbuf, a.V, a.precision, a.w_bf16);
    parallel_for(rows, 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t n = r0 + i;
        float* zr = zbuf + i * a.V;
        if (a.softcap > 0.f) t.logit_softcap(zr, a.V, a.softcap);
        int32_t tgt = a.targets ? a.targets[n] : -1;
        float lp, H;
        float lse = logit_row_stats(zr, a.V, tgt, &lp, &H);
        a.logprob[n] = lp;
        a.entropy[n] = H;
        if (a.loss) row_gradient(a, t, zr, n, tgt, lse, lp, H);
      }
    });
    if (a.loss) {
      gemm(false, false, rows, a.C, a.V, zbuf, a.V, a.w, a.C, 0.f, a.dh + r0 * a.C, a.C, a.precision, a.w_bf16);
      if (a.dw) gemm(true, false, a.V, a.C, rows, zbuf, a.V, hc, a.C, 1.f, a.dw, a.C, a.precision);
    }
  }
}

}  // namespace temper::kernels

// Reference classifier: full logits, log-softmax, log-prob, entropy, and the gradient of
// L = sum_n g_lp[n] * lp_n + g_ent[n] * H_n with fixed coefficients, in T. softcap > 0: the logits are
// soft-capped first, z = tanh(z / softcap) * softcap (HF Gemma2), and the gradient chained through it.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace temper::kernels::ref {

template <class T>
void classifier(const T* h, const T* w, const int32_t* tgt, int64_t N, int64_t C, int64_t V, T* lp, T* H, const T* g_lp,
                const T* g_ent, T* dh, T* dw, T softcap = T(0)) {
  std::vector<T> z(static_cast<size_t>(V)), logp(static_cast<size_t>(V)), dcap(static_cast<size_t>(V), T(1));
  for (int64_t n = 0; n < N; ++n) {
    T m = -INFINITY;
    for (int64_t v = 0; v < V; ++v) {
      T s = 0;
      for (int64_t c = 0; c < C; ++c) s += h[n * C + c] * w[v * C + c];
      if (softcap > T(0)) {
        const T th = std::tanh(s / softcap);
        s = th * softcap;
        dcap[v] = T(1) - th * th;
      }
      z[v] = s;
      if (s > m) m = s;
    }
    T se = 0;
    for (int64_t v = 0; v < V; ++v) se += std::exp(z[v] - m);
    T lse = m + std::log(se), ent = 0;
    for (int64_t v = 0; v < V; ++v) {
      logp[v] = z[v] - lse;
      ent -= std::exp(logp[v]) * logp[v];
    }
    lp[n] = tgt[n] >= 0 ? logp[tgt[n]] : T(0);
    H[n] = ent;
    if (!g_lp) continue;
    for (int64_t v = 0; v < V; ++v) {
      T p = std::exp(logp[v]);
      T dz = (tgt[n] >= 0 ? g_lp[n] * ((v == tgt[n] ? T(1) : T(0)) - p) : T(0)) - g_ent[n] * p * (logp[v] + ent);
      dz *= dcap[v];
      for (int64_t c = 0; c < C; ++c) {
        dh[n * C + c] += dz * w[v * C + c];
        dw[v * C + c] += dz * h[n * C + c];
      }
    }
  }
}

}  // namespace temper::kernels::ref

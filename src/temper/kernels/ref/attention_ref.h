// Reference causal GQA attention: the full [T, T] score matrix per head, softmax, and the textbook
// backward through the softmax Jacobian. Dense layouts: q/o [B, T, H, D], k/v [B, T, Hkv, D].
// AttnOpts as HF's eager Gemma-2 / Mistral attention: s = q.k * scale, s = cap * tanh(s / cap), then
// the causal (and sliding-window: key j hidden from query i when j <= i - window) mask, softmax.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "temper/kernels/attention.h"

namespace temper::kernels::ref {

template <class T>
T attention_scale(const AttnOpts& opt, int64_t D) {
  return opt.scale > 0.f ? T(opt.scale) : T(1) / std::sqrt(T(D));
}

// Whether query position i sees key position j.
inline bool attention_sees(int64_t i, int64_t j, const AttnOpts& opt) {
  return j <= i && (opt.window <= 0 || j > i - opt.window);
}

// P [T, T] of batch b, head h (0 where masked); G (optional) gets d(capped score)/d(scaled score).
template <class T>
void attention_probs(const T* q, const T* k, int64_t B, int64_t Tn, int64_t H, int64_t Hkv, int64_t D, int64_t b,
                     int64_t h, std::vector<T>& P, const AttnOpts& opt = {}, std::vector<T>* G = nullptr) {
  int64_t kvh = h / (H / Hkv);
  const T scale = attention_scale<T>(opt, D), cap = T(opt.softcap);
  P.assign(static_cast<size_t>(Tn * Tn), T(0));
  if (G) G->assign(static_cast<size_t>(Tn * Tn), T(1));
  for (int64_t i = 0; i < Tn; ++i) {
    T m = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      if (!attention_sees(i, j, opt)) continue;
      T sdot = 0;
      for (int64_t d = 0; d < D; ++d) sdot += q[((b * Tn + i) * H + h) * D + d] * k[((b * Tn + j) * Hkv + kvh) * D + d];
      T s = sdot * scale;
      if (cap > 0) {
        const T th = std::tanh(s / cap);
        s = cap * th;
        if (G) (*G)[i * Tn + j] = 1 - th * th;
      }
      P[i * Tn + j] = s;
      if (s > m) m = s;
    }
    T sum = 0;
    for (int64_t j = 0; j <= i; ++j)
      if (attention_sees(i, j, opt)) sum += (P[i * Tn + j] = std::exp(P[i * Tn + j] - m));
    for (int64_t j = 0; j <= i; ++j) P[i * Tn + j] /= sum;
  }
  (void)B;
}

template <class T>
void attention_fwd(const T* q, const T* k, const T* v, T* o, int64_t B, int64_t Tn, int64_t H, int64_t Hkv, int64_t D,
                   const AttnOpts& opt = {}) {
  std::vector<T> P;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      attention_probs(q, k, B, Tn, H, Hkv, D, b, h, P, opt);
      int64_t kvh = h / (H / Hkv);
      for (int64_t i = 0; i < Tn; ++i)
        for (int64_t d = 0; d < D; ++d) {
          T acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += P[i * Tn + j] * v[((b * Tn + j) * Hkv + kvh) * D + d];
          o[((b * Tn + i) * H + h) * D + d] = acc;
        }
    }
}

// dq, dk, dv are accumulated (+=): zero them first.
template <class T>
void attention_bwd(const T* q, const T* k, const T* v, const T* dout, T* dq, T* dk, T* dv, int64_t B, int64_t Tn,
                   int64_t H, int64_t Hkv, int64_t D, const AttnOpts& opt = {}) {
  std::vector<T> P, dP, G;
  const T scale = attention_scale<T>(opt, D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      attention_probs(q, k, B, Tn, H, Hkv, D, b, h, P, opt, &G);
      int64_t kvh = h / (H / Hkv);
      dP.assign(static_cast<size_t>(Tn * Tn), T(0));
      for (int64_t i = 0; i < Tn; ++i)
        for (int64_t j = 0; j <= i; ++j) {
          T s = 0;
          for (int64_t d = 0; d < D; ++d) {
            s += dout[((b * Tn + i) * H + h) * D + d] * v[((b * Tn + j) * Hkv + kvh) * D + d];
            dv[((b * Tn + j) * Hkv + kvh) * D + d] += P[i * Tn + j] * dout[((b * Tn + i) * H + h) * D + d];
          }
          dP[i * Tn + j] = s;
        }
      for (int64_t i = 0; i < Tn; ++i) {
        T dot = 0;
        for (int64_t j = 0; j <= i; ++j) dot += P[i * Tn + j] * dP[i * Tn + j];
        for (int64_t j = 0; j <= i; ++j) {
          T ds = P[i * Tn + j] * (dP[i * Tn + j] - dot) * G[i * Tn + j] * scale;
          for (int64_t d = 0; d < D; ++d) {
            dq[((b * Tn + i) * H + h) * D + d] += ds * k[((b * Tn + j) * Hkv + kvh) * D + d];
            dk[((b * Tn + j) * Hkv + kvh) * D + d] += ds * q[((b * Tn + i) * H + h) * D + d];
          }
        }
      }
    }
}

}  // namespace temper::kernels::ref

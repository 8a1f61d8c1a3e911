#include "temper/kernels/attention.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"
#include "temper/kernels/matmul.h"

namespace temper::kernels {
namespace {

constexpr int64_t kBlockQ = 64;

// P[rows, kend] <- softmax rows of S (scaled, causal: query q0+i sees keys [0, q0+i]), lse out.
void softmax_rows_fwd(const IsaTable& t, float* S, int64_t rows, int64_t kend, int64_t q0, float scale, float* lse) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = S + i * kend;
    int64_t n = q0 + i + 1;
    float m = row[0];
    for (int64_t j = 1; j < n; ++j) m = row[j] > m ? row[j] : m;
    float shift = m * scale;
    float sum = t.exp_shift_inplace(row, n, scale, shift);
    float inv = 1.0f / sum;
    t.scale(row, n, inv);
    std::memset(row + n, 0, static_cast<size_t>(kend - n) * sizeof(float));
    lse[i] = shift + std::log(sum);
  }
}

}  // namespace

void attention_fwd(const AttnShape& s, const float* q, const float* k, const float* v, float* o, float* lse) {
  TEMPER_CHECK(s.H % s.Hkv == 0) << "heads " << s.H << " not a multiple of KV heads " << s.Hkv;
  const IsaTable& t = isa_table();
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  const int64_t nqb = (s.T + kBlockQ - 1) / kBlockQ, group = s.H / s.Hkv;
  parallel_tasks(s.B * s.H * nqb, [&](int64_t task) {
    int64_t qb = task % nqb, h = (task / nqb) % s.H, b = task / (nqb * s.H);
    int64_t q0 = qb * kBlockQ, rows = q0 + kBlockQ < s.T ? kBlockQ : s.T - q0, kend = q0 + rows;
    int64_t kvh = h / group;
    static thread_local std::vector<float> S;
    if (static_cast<int64_t>(S.size()) < rows * kend) S.resize(static_cast<size_t>(rows * kend));
    const float* Q = q + (b * s.T + q0) * s.q_stride + h * s.D;
    const float* K = k + b * s.T * s.kv_stride + kvh * s.D;
    const float* V = v + b * s.T * s.kv_stride + kvh * s.D;
    gemm(false, true, rows, kend, s.D, Q, s.q_stride, K, s.kv_stride, 0.f, S.data(), kend);
    softmax_rows_fwd(t, S.data(), rows, kend, q0, scale, lse + (b * s.H + h) * s.T + q0);
    gemm(false, false, rows, s.D, kend, S.data(), kend, V, s.kv_stride, 0.f, o + (b * s.T + q0) * s.o_stride + h * s.D,
         s.o_stride);
  });
}

void attention_bwd(const AttnShape& s, const float* q, const float* k, const float* v, const float* o, const float* lse,
                   const float* dout, float* dq, float* dk, float* dv) {
  const IsaTable& t = isa_table();
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  const int64_t nqb = (s.T + kBlockQ - 1) / kBlockQ, group = s.H / s.Hkv;
  // One task per (batch, KV head): it owns dk/dv of that head and dq of its query heads.
  parallel_tasks(s.B * s.Hkv, [&](int64_t task) {
    int64_t kvh = task % s.Hkv, b = task / s.Hkv;
    static thread_local std::vector<float> P, dP;
    if (static_cast<int64_t>(P.size()) < kBlockQ * s.T) {
      P.resize(static_cast<size_t>(kBlockQ * s.T));
      dP.resize(static_cast<size_t>(kBlockQ * s.T));
    }
    const float* K = k + b * s.T * s.kv_stride + kvh * s.D;
    const float* V = v + b * s.T * s.kv_stride + kvh * s.D;
    float* dK = dk + b * s.T * s.kv_stride + kvh * s.D;
    float* dV = dv + b * s.T * s.kv_stride + kvh * s.D;
    for (int64_t r = 0; r < s.T; ++r) {
      std::memset(dK + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
      std::memset(dV + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
    }
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      for (int64_t qb = 0; qb < nqb; ++qb) {
        int64_t q0 = qb * kBlockQ, rows = q0 + kBlockQ < s.T ? kBlockQ : s.T - q0, kend = q0 + rows;
        const float* Q = q + (b * s.T + q0) * s.q_stride + h * s.D;
        const float* O = o + (b * s.T + q0) * s.o_stride + h * s.D;
        const float* dO = dout + (b * s.T + q0) * s.o_stride + h * s.D;
        float* dQ = dq + (b * s.T + q0) * s.q_stride + h * s.D;
        const float* L = lse + (b * s.H + h) * s.T + q0;
        gemm(false, true, rows, kend, s.D, Q, s.q_stride, K, s.kv_stride, 0.f, P.data(), kend);
        for (int64_t i = 0; i < rows; ++i) {
          float* row = P.data() + i * kend;
          int64_t n = q0 + i + 1;
          t.exp_shift_inplace(row, n, scale, L[i]);
          std::memset(row + n, 0, static_cast<size_t>(kend - n) * sizeof(float));
        }
        gemm(false, true, rows, kend, s.D, dO, s.o_stride, V, s.kv_stride, 0.f, dP.data(), kend);
        for (int64_t i = 0; i < rows; ++i) {
          float di = t.dot(dO + i * s.o_stride, O + i * s.o_stride, s.D);
          t.softmax_bwd_row(P.data() + i * kend, dP.data() + i * kend, kend, di, scale);
        }
        gemm(false, false, rows, s.D, kend, dP.data(), kend, K, s.kv_stride, 0.f, dQ, s.q_stride);
        gemm(true, false, kend, s.D, rows, dP.data(), kend, Q, s.q_stride, 1.f, dK, s.kv_stride);
        gemm(true, false, kend, s.D, rows, P.data(), kend, dO, s.o_stride, 1.f, dV, s.kv_stride);
      }
    }
  });
}

}  // namespace temper::kernels

#include "temper/kernels/attention.h"

#include <algorithm>
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

namespace {

// Checks the segments; returns, for each, the first row of its prefix scratch (prefix rows summed
// per reading segment before they join the prefix's own dk/dv), and the scratch rows in total.
int64_t check_segments(const PackedAttnShape& s, std::vector<int64_t>* scratch_at) {
  TEMPER_CHECK(s.H % s.Hkv == 0) << "heads " << s.H << " not a multiple of KV heads " << s.Hkv;
  int64_t rows = 0;
  if (scratch_at) scratch_at->assign(static_cast<size_t>(s.nsegs), 0);
  for (int64_t i = 0; i < s.nsegs; ++i) {
    const AttnSegment& g = s.segs[i];
    TEMPER_CHECK(g.start >= 0 && g.len >= 0 && g.start + g.len <= s.N)
        << "attention segment " << i << " (rows " << g.start << "+" << g.len << ") outside the " << s.N << " rows";
    if (g.prefix_len == 0) continue;
    bool found = false;  // a prefix is a segment of its own without a prefix (its rows are written once)
    for (int64_t j = 0; j < s.nsegs && !found; ++j)
      found = s.segs[j].start == g.prefix_start && s.segs[j].len == g.prefix_len && s.segs[j].prefix_len == 0;
    TEMPER_CHECK(found) << "attention segment " << i << ": its prefix (rows " << g.prefix_start << "+" << g.prefix_len
                        << ") is not a segment without a prefix";
    if (scratch_at) (*scratch_at)[static_cast<size_t>(i)] = rows;
    rows += g.prefix_len;
  }
  return rows;
}

}  // namespace

void attention_fwd_packed(const PackedAttnShape& s, const float* q, const float* k, const float* v, float* o,
                          float* lse) {
  check_segments(s, nullptr);
  const IsaTable& t = isa_table();
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  const int64_t group = s.H / s.Hkv;
  std::vector<int64_t> first(static_cast<size_t>(s.nsegs + 1), 0);  // tasks: (segment, head, block of queries)
  for (int64_t i = 0; i < s.nsegs; ++i)
    first[static_cast<size_t>(i + 1)] = first[static_cast<size_t>(i)] + s.H * ((s.segs[i].len + kBlockQ - 1) / kBlockQ);
  parallel_tasks(first.back(), [&](int64_t task) {
    const int64_t si = std::upper_bound(first.begin(), first.end(), task) - first.begin() - 1;
    const AttnSegment& g = s.segs[si];
    const int64_t nqb = (g.len + kBlockQ - 1) / kBlockQ, r = task - first[static_cast<size_t>(si)];
    const int64_t qb = r % nqb, h = r / nqb, kvh = h / group, P = g.prefix_len;
    const int64_t q0 = qb * kBlockQ, rows = std::min(kBlockQ, g.len - q0), kend = q0 + rows, W = P + kend;
    static thread_local std::vector<float> S;
    if (static_cast<int64_t>(S.size()) < rows * W) S.resize(static_cast<size_t>(rows * W));
    const float* Q = q + (g.start + q0) * s.q_stride + h * s.D;
    const float* Kp = k + g.prefix_start * s.kv_stride + kvh * s.D;
    const float* Vp = v + g.prefix_start * s.kv_stride + kvh * s.D;
    const float* Ks = k + g.start * s.kv_stride + kvh * s.D;
    const float* Vs = v + g.start * s.kv_stride + kvh * s.D;
    float* O = o + (g.start + q0) * s.o_stride + h * s.D;
    if (P > 0) gemm(false, true, rows, P, s.D, Q, s.q_stride, Kp, s.kv_stride, 0.f, S.data(), W);
    gemm(false, true, rows, kend, s.D, Q, s.q_stride, Ks, s.kv_stride, 0.f, S.data() + P, W);
    softmax_rows_fwd(t, S.data(), rows, W, P + q0, scale, lse + h * s.N + g.start + q0);
    if (P > 0) gemm(false, false, rows, s.D, P, S.data(), W, Vp, s.kv_stride, 0.f, O, s.o_stride);
    gemm(false, false, rows, s.D, kend, S.data() + P, W, Vs, s.kv_stride, P > 0 ? 1.f : 0.f, O, s.o_stride);
  });
}

void attention_bwd_packed(const PackedAttnShape& s, const float* q, const float* k, const float* v, const float* o,
                          const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  std::vector<int64_t> scratch_at;
  const int64_t scratch_rows = check_segments(s, &scratch_at);
  const IsaTable& t = isa_table();
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  const int64_t group = s.H / s.Hkv, Hk = s.Hkv * s.D;
  std::vector<float> dkp(static_cast<size_t>(scratch_rows * Hk)), dvp(dkp.size());
  // One task per (segment, KV head): it owns dk/dv of the segment's rows at that head, dq of its query
  // heads, and its own scratch copy of the prefix's dk/dv.
  parallel_tasks(s.nsegs * s.Hkv, [&](int64_t task) {
    const int64_t kvh = task % s.Hkv, si = task / s.Hkv;
    const AttnSegment& g = s.segs[si];
    const int64_t P = g.prefix_len;
    static thread_local std::vector<float> Pm, dP;
    const float* Kp = k + g.prefix_start * s.kv_stride + kvh * s.D;
    const float* Vp = v + g.prefix_start * s.kv_stride + kvh * s.D;
    const float* Ks = k + g.start * s.kv_stride + kvh * s.D;
    const float* Vs = v + g.start * s.kv_stride + kvh * s.D;
    float* dK = dk + g.start * s.kv_stride + kvh * s.D;
    float* dV = dv + g.start * s.kv_stride + kvh * s.D;
    float* dKp = dkp.data() + scratch_at[static_cast<size_t>(si)] * Hk + kvh * s.D;
    float* dVp = dvp.data() + scratch_at[static_cast<size_t>(si)] * Hk + kvh * s.D;
    for (int64_t r = 0; r < g.len; ++r) {
      std::memset(dK + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
      std::memset(dV + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
    }
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      for (int64_t q0 = 0; q0 < g.len; q0 += kBlockQ) {
        const int64_t rows = std::min(kBlockQ, g.len - q0), kend = q0 + rows, W = P + kend;
        if (static_cast<int64_t>(Pm.size()) < rows * W) {
          Pm.resize(static_cast<size_t>(rows * W));
          dP.resize(static_cast<size_t>(rows * W));
        }
        const float* Q = q + (g.start + q0) * s.q_stride + h * s.D;
        const float* O = o + (g.start + q0) * s.o_stride + h * s.D;
        const float* dO = dout + (g.start + q0) * s.o_stride + h * s.D;
        float* dQ = dq + (g.start + q0) * s.q_stride + h * s.D;
        const float* L = lse + h * s.N + g.start + q0;
        if (P > 0) gemm(false, true, rows, P, s.D, Q, s.q_stride, Kp, s.kv_stride, 0.f, Pm.data(), W);
        gemm(false, true, rows, kend, s.D, Q, s.q_stride, Ks, s.kv_stride, 0.f, Pm.data() + P, W);
        for (int64_t i = 0; i < rows; ++i) {
          float* row = Pm.data() + i * W;
          const int64_t n = P + q0 + i + 1;
          t.exp_shift_inplace(row, n, scale, L[i]);
          std::memset(row + n, 0, static_cast<size_t>(W - n) * sizeof(float));
        }
        if (P > 0) gemm(false, true, rows, P, s.D, dO, s.o_stride, Vp, s.kv_stride, 0.f, dP.data(), W);
        gemm(false, true, rows, kend, s.D, dO, s.o_stride, Vs, s.kv_stride, 0.f, dP.data() + P, W);
        for (int64_t i = 0; i < rows; ++i) {
          float di = t.dot(dO + i * s.o_stride, O + i * s.o_stride, s.D);
          t.softmax_bwd_row(Pm.data() + i * W, dP.data() + i * W, W, di, scale);
        }
        if (P > 0) gemm(false, false, rows, s.D, P, dP.data(), W, Kp, s.kv_stride, 0.f, dQ, s.q_stride);
        gemm(false, false, rows, s.D, kend, dP.data() + P, W, Ks, s.kv_stride, P > 0 ? 1.f : 0.f, dQ, s.q_stride);
        gemm(true, false, kend, s.D, rows, dP.data() + P, W, Q, s.q_stride, 1.f, dK, s.kv_stride);
        gemm(true, false, kend, s.D, rows, Pm.data() + P, W, dO, s.o_stride, 1.f, dV, s.kv_stride);
        if (P > 0) {
          gemm(true, false, P, s.D, rows, dP.data(), W, Q, s.q_stride, 1.f, dKp, Hk);
          gemm(true, false, P, s.D, rows, Pm.data(), W, dO, s.o_stride, 1.f, dVp, Hk);
        }
      }
    }
  });
  // Each prefix collects what its readers sent it, in segment order (deterministic).
  for (int64_t si = 0; si < s.nsegs; ++si) {
    const AttnSegment& g = s.segs[si];
    for (int64_t r = 0; r < g.prefix_len; ++r) {
      const float* a = dkp.data() + (scratch_at[static_cast<size_t>(si)] + r) * Hk;
      const float* b = dvp.data() + (scratch_at[static_cast<size_t>(si)] + r) * Hk;
      float* x = dk + (g.prefix_start + r) * s.kv_stride;
      float* y = dv + (g.prefix_start + r) * s.kv_stride;
      for (int64_t c = 0; c < Hk; ++c) x[c] += a[c], y[c] += b[c];
    }
  }
}

}  // namespace temper::kernels

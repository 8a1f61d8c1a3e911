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

// The keys a block of queries sees, as columns of its score block: key positions k0, k0 + 1, ..., the
// first np of them rows k0.. of a prefix (positions 0..P-1), the other ns rows s0.. of the queries' own
// sequence (positions P..). The query block is rows q0..q0+rows-1 of that sequence. Without a window
// k0 = 0; with one, keys before the first row's window are left out (never multiplied).
struct KeySpan {
  int64_t k0, np, s0, ns;
  int64_t width() const { return np + ns; }
};

KeySpan key_span(int64_t P, int64_t q0, int64_t rows, int64_t window) {
  const int64_t k0 = window > 0 ? std::max<int64_t>(0, P + q0 - window + 1) : 0;
  const int64_t np = std::max<int64_t>(0, P - k0), s0 = std::max<int64_t>(0, k0 - P);
  return {k0, np, s0, q0 + rows - s0};
}

// Columns [lo, n) of a score row are the keys the query at position pos sees (k0: column 0's position).
struct Visible {
  int64_t lo, n;
};
Visible visible(int64_t pos, int64_t k0, int64_t window) {
  const int64_t first = window > 0 ? std::max<int64_t>(k0, pos - window + 1) : k0;
  return {first - k0, pos + 1 - k0};
}

// Zeroes a score row outside its visible columns.
void clear_outside(float* row, Visible v, int64_t width) {
  std::memset(row, 0, static_cast<size_t>(v.lo) * sizeof(float));
  std::memset(row + v.n, 0, static_cast<size_t>(width - v.n) * sizeof(float));
}

// P[rows, width] <- softmax rows of S (raw q.k; row i's query at position pos0 + i), lse out.
// Without the causal mask (causal false) a row sees all its columns.
void softmax_rows_fwd(const IsaTable& t, float* S, int64_t rows, int64_t width, int64_t pos0, int64_t k0, float scale,
                      const AttnOpts& opt, float* lse, bool causal = true) {
  for (int64_t i = 0; i < rows; ++i) {
    const Visible vis = causal ? visible(pos0 + i, k0, opt.window) : Visible{0, width};
    float* x = S + i * width + vis.lo;
    const int64_t n = vis.n - vis.lo;
    float sc = scale;
    if (opt.softcap > 0.f) {
      t.softcap(x, n, scale, opt.softcap, nullptr);
      sc = 1.0f;
    }
    float m = x[0];
    for (int64_t j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
    const float shift = m * sc;
    const float sum = t.exp_shift_inplace(x, n, sc, shift);
    t.scale(x, n, 1.0f / sum);
    clear_outside(S + i * width, vis, width);
    lse[i] = shift + std::log(sum);
  }
}

// The backward's P rows from the forward's lse; with a cap, G gets each score's 1 - tanh^2.
void probs_rows_bwd(const IsaTable& t, float* P, float* G, int64_t rows, int64_t width, int64_t pos0, int64_t k0,
                    float scale, const AttnOpts& opt, const float* L, bool causal = true) {
  for (int64_t i = 0; i < rows; ++i) {
    const Visible vis = causal ? visible(pos0 + i, k0, opt.window) : Visible{0, width};
    float* x = P + i * width + vis.lo;
    const int64_t n = vis.n - vis.lo;
    if (opt.softcap > 0.f) {
      t.softcap(x, n, scale, opt.softcap, G + i * width + vis.lo);
      t.exp_shift_inplace(x, n, 1.0f, L[i]);
    } else {
      t.exp_shift_inplace(x, n, scale, L[i]);
    }
    clear_outside(P + i * width, vis, width);
  }
}

// dP (dO V^T) -> dS = P (dP - rowsum(dO * O)) * scale, through the cap's tanh where there is one.
void dscores_rows(const IsaTable& t, const float* P, float* dP, const float* G, int64_t rows, int64_t width,
                  int64_t pos0, int64_t k0, float scale, const AttnOpts& opt, const float* dO, const float* O,
                  int64_t o_stride, int64_t D, bool causal = true) {
  for (int64_t i = 0; i < rows; ++i) {
    const float di = t.dot(dO + i * o_stride, O + i * o_stride, D);
    t.softmax_bwd_row(P + i * width, dP + i * width, width, di, scale);
    if (opt.softcap > 0.f) {
      const Visible vis = causal ? visible(pos0 + i, k0, opt.window) : Visible{0, width};
      float* d = dP + i * width;
      const float* g = G + i * width;
      for (int64_t j = vis.lo; j < vis.n; ++j) d[j] *= g[j];
    }
  }
}

template <class T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// The keys of a block of queries: key_span, or all T of them without the causal mask.
KeySpan shape_key_span(const AttnShape& s, int64_t q0, int64_t rows) {
  return s.causal ? key_span(0, q0, rows, s.opt.window) : KeySpan{0, 0, 0, s.T};
}

void attn_shape_check(const AttnShape& s, const char* kernel) {
  TEMPER_CHECK(s.H % s.Hkv == 0) << kernel << ": heads " << s.H << " not a multiple of KV heads " << s.Hkv;
  attn_opts_check(s.opt, kernel);
  TEMPER_CHECK(s.causal || s.opt.window == 0)
      << kernel << ": AttnOpts.window " << s.opt.window << " without the causal mask (expected 0)";
}

}  // namespace

void attn_opts_check(const AttnOpts& opt, const char* kernel) {
  TEMPER_CHECK(std::isfinite(opt.scale) && opt.scale >= 0.f)
      << kernel << ": AttnOpts.scale " << opt.scale << " (expected >= 0; 0 means 1/sqrt(head_dim))";
  TEMPER_CHECK(std::isfinite(opt.softcap) && opt.softcap >= 0.f)
      << kernel << ": AttnOpts.softcap " << opt.softcap << " (expected >= 0; 0 means no soft-capping)";
  TEMPER_CHECK(opt.window >= 0) << kernel << ": AttnOpts.window " << opt.window
                                << " (expected >= 0; 0 means no sliding window)";
}

void attention_fwd(const AttnShape& s, const float* q, const float* k, const float* v, float* o, float* lse) {
  attn_shape_check(s, "attention_fwd");
  const IsaTable& t = isa_table();
  const float scale = attn_scale(s.opt, s.D);
  const int64_t nqb = (s.T + kBlockQ - 1) / kBlockQ, group = s.H / s.Hkv;
  parallel_tasks(s.B * s.H * nqb, [&](int64_t task) {
    int64_t qb = task % nqb, h = (task / nqb) % s.H, b = task / (nqb * s.H);
    int64_t q0 = qb * kBlockQ, rows = q0 + kBlockQ < s.T ? kBlockQ : s.T - q0;
    int64_t kvh = h / group;
    const KeySpan ks = shape_key_span(s, q0, rows);
    const int64_t w = ks.width();
    static thread_local std::vector<float> S;
    grow(S, rows * w);
    const float* Q = q + (b * s.T + q0) * s.q_stride + h * s.D;
    const float* K = k + (b * s.T + ks.s0) * s.kv_stride + kvh * s.D;
    const float* V = v + (b * s.T + ks.s0) * s.kv_stride + kvh * s.D;
    gemm(false, true, rows, w, s.D, Q, s.q_stride, K, s.kv_stride, 0.f, S.data(), w);
    softmax_rows_fwd(t, S.data(), rows, w, q0, ks.k0, scale, s.opt, lse + (b * s.H + h) * s.T + q0, s.causal);
    gemm(false, false, rows, s.D, w, S.data(), w, V, s.kv_stride, 0.f, o + (b * s.T + q0) * s.o_stride + h * s.D,
         s.o_stride);
  });
}

void attention_bwd(const AttnShape& s, const float* q, const float* k, const float* v, const float* o, const float* lse,
                   const float* dout, float* dq, float* dk, float* dv) {
  attn_shape_check(s, "attention_bwd");
  const IsaTable& t = isa_table();
  const float scale = attn_scale(s.opt, s.D);
  const int64_t nqb = (s.T + kBlockQ - 1) / kBlockQ, group = s.H / s.Hkv;
  // One task per (batch, KV head): it owns dk/dv of that head and dq of its query heads.
  parallel_tasks(s.B * s.Hkv, [&](int64_t task) {
    int64_t kvh = task % s.Hkv, b = task / s.Hkv;
    static thread_local std::vector<float> P, dP, G;
    grow(P, kBlockQ * s.T);
    grow(dP, kBlockQ * s.T);
    if (s.opt.softcap > 0.f) grow(G, kBlockQ * s.T);
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
        int64_t q0 = qb * kBlockQ, rows = q0 + kBlockQ < s.T ? kBlockQ : s.T - q0;
        const KeySpan ks = shape_key_span(s, q0, rows);
        const int64_t w = ks.width(), kr = ks.s0 * s.kv_stride;
        const float* Q = q + (b * s.T + q0) * s.q_stride + h * s.D;
        const float* O = o + (b * s.T + q0) * s.o_stride + h * s.D;
        const float* dO = dout + (b * s.T + q0) * s.o_stride + h * s.D;
        float* dQ = dq + (b * s.T + q0) * s.q_stride + h * s.D;
        const float* L = lse + (b * s.H + h) * s.T + q0;
        gemm(false, true, rows, w, s.D, Q, s.q_stride, K + kr, s.kv_stride, 0.f, P.data(), w);
        probs_rows_bwd(t, P.data(), G.data(), rows, w, q0, ks.k0, scale, s.opt, L, s.causal);
        gemm(false, true, rows, w, s.D, dO, s.o_stride, V + kr, s.kv_stride, 0.f, dP.data(), w);
        dscores_rows(t, P.data(), dP.data(), G.data(), rows, w, q0, ks.k0, scale, s.opt, dO, O, s.o_stride, s.D,
                     s.causal);
        gemm(false, false, rows, s.D, w, dP.data(), w, K + kr, s.kv_stride, 0.f, dQ, s.q_stride);
        gemm(true, false, w, s.D, rows, dP.data(), w, Q, s.q_stride, 1.f, dK + kr, s.kv_stride);
        gemm(true, false, w, s.D, rows, P.data(), w, dO, s.o_stride, 1.f, dV + kr, s.kv_stride);
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
  attn_opts_check(s.opt, "attention_fwd_packed");
  const IsaTable& t = isa_table();
  const float scale = attn_scale(s.opt, s.D);
  const int64_t group = s.H / s.Hkv;
  std::vector<int64_t> first(static_cast<size_t>(s.nsegs + 1), 0);  // tasks: (segment, head, block of queries)
  for (int64_t i = 0; i < s.nsegs; ++i)
    first[static_cast<size_t>(i + 1)] = first[static_cast<size_t>(i)] + s.H * ((s.segs[i].len + kBlockQ - 1) / kBlockQ);
  parallel_tasks(first.back(), [&](int64_t task) {
    const int64_t si = std::upper_bound(first.begin(), first.end(), task) - first.begin() - 1;
    const AttnSegment& g = s.segs[si];
    const int64_t nqb = (g.len + kBlockQ - 1) / kBlockQ, r = task - first[static_cast<size_t>(si)];
    const int64_t qb = r % nqb, h = r / nqb, kvh = h / group, P = g.prefix_len;
    const int64_t q0 = qb * kBlockQ, rows = std::min(kBlockQ, g.len - q0);
    const KeySpan ks = key_span(P, q0, rows, s.opt.window);
    const int64_t W = ks.width(), np = ks.np;
    static thread_local std::vector<float> S;
    grow(S, rows * W);
    const float* Q = q + (g.start + q0) * s.q_stride + h * s.D;
    const int64_t kp = np > 0 ? (g.prefix_start + ks.k0) * s.kv_stride + kvh * s.D : 0;  // read only when np > 0
    const float* Kp = k + kp;
    const float* Vp = v + kp;
    const float* Ks = k + (g.start + ks.s0) * s.kv_stride + kvh * s.D;
    const float* Vs = v + (g.start + ks.s0) * s.kv_stride + kvh * s.D;
    float* O = o + (g.start + q0) * s.o_stride + h * s.D;
    if (np > 0) gemm(false, true, rows, np, s.D, Q, s.q_stride, Kp, s.kv_stride, 0.f, S.data(), W);
    gemm(false, true, rows, ks.ns, s.D, Q, s.q_stride, Ks, s.kv_stride, 0.f, S.data() + np, W);
    softmax_rows_fwd(t, S.data(), rows, W, P + q0, ks.k0, scale, s.opt, lse + h * s.N + g.start + q0);
    if (np > 0) gemm(false, false, rows, s.D, np, S.data(), W, Vp, s.kv_stride, 0.f, O, s.o_stride);
    gemm(false, false, rows, s.D, ks.ns, S.data() + np, W, Vs, s.kv_stride, np > 0 ? 1.f : 0.f, O, s.o_stride);
  });
}

namespace {

// One block of a segment's queries at one head in the packed backward: what it reads and writes.
struct PackedBlock {
  const float *Q, *O, *dO, *L, *Kp, *Vp, *Ks, *Vs;
  float *dQ, *dK, *dV, *dKp, *dVp;  // dK/dV at the segment's key row s0, dKp/dVp at the prefix's k0
  int64_t rows, pos0;
  KeySpan ks;
};

void packed_block_bwd(const PackedAttnShape& s, const IsaTable& t, float scale, const PackedBlock& x, float* Pm,
                      float* dP, float* G) {
  const int64_t W = x.ks.width(), np = x.ks.np, ns = x.ks.ns, rows = x.rows, D = s.D, Hk = s.Hkv * s.D;
  if (np > 0) gemm(false, true, rows, np, D, x.Q, s.q_stride, x.Kp, s.kv_stride, 0.f, Pm, W);
  gemm(false, true, rows, ns, D, x.Q, s.q_stride, x.Ks, s.kv_stride, 0.f, Pm + np, W);
  probs_rows_bwd(t, Pm, G, rows, W, x.pos0, x.ks.k0, scale, s.opt, x.L);
  if (np > 0) gemm(false, true, rows, np, D, x.dO, s.o_stride, x.Vp, s.kv_stride, 0.f, dP, W);
  gemm(false, true, rows, ns, D, x.dO, s.o_stride, x.Vs, s.kv_stride, 0.f, dP + np, W);
  dscores_rows(t, Pm, dP, G, rows, W, x.pos0, x.ks.k0, scale, s.opt, x.dO, x.O, s.o_stride, D);
  if (np > 0) gemm(false, false, rows, D, np, dP, W, x.Kp, s.kv_stride, 0.f, x.dQ, s.q_stride);
  gemm(false, false, rows, D, ns, dP + np, W, x.Ks, s.kv_stride, np > 0 ? 1.f : 0.f, x.dQ, s.q_stride);
  gemm(true, false, ns, D, rows, dP + np, W, x.Q, s.q_stride, 1.f, x.dK, s.kv_stride);
  gemm(true, false, ns, D, rows, Pm + np, W, x.dO, s.o_stride, 1.f, x.dV, s.kv_stride);
  if (np > 0) {
    gemm(true, false, np, D, rows, dP, W, x.Q, s.q_stride, 1.f, x.dKp, Hk);
    gemm(true, false, np, D, rows, Pm, W, x.dO, s.o_stride, 1.f, x.dVp, Hk);
  }
}

}  // namespace

void attention_bwd_packed(const PackedAttnShape& s, const float* q, const float* k, const float* v, const float* o,
                          const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  std::vector<int64_t> scratch_at;
  const int64_t scratch_rows = check_segments(s, &scratch_at);
  attn_opts_check(s.opt, "attention_bwd_packed");
  const IsaTable& t = isa_table();
  const float scale = attn_scale(s.opt, s.D);
  const int64_t group = s.H / s.Hkv, Hk = s.Hkv * s.D;
  std::vector<float> dkp(static_cast<size_t>(scratch_rows * Hk)), dvp(dkp.size());
  // One task per (segment, KV head): it owns dk/dv of the segment's rows at that head, dq of its query
  // heads, and its own scratch copy of the prefix's dk/dv.
  parallel_tasks(s.nsegs * s.Hkv, [&](int64_t task) {
    const int64_t kvh = task % s.Hkv, si = task / s.Hkv;
    const AttnSegment& g = s.segs[si];
    const int64_t P = g.prefix_len;
    static thread_local std::vector<float> Pm, dP, G;
    float* dK = dk + g.start * s.kv_stride + kvh * s.D;
    float* dV = dv + g.start * s.kv_stride + kvh * s.D;
    for (int64_t r = 0; r < g.len; ++r) {
      std::memset(dK + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
      std::memset(dV + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
    }
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      for (int64_t q0 = 0; q0 < g.len; q0 += kBlockQ) {
        PackedBlock x;
        x.rows = std::min(kBlockQ, g.len - q0);
        x.pos0 = P + q0;
        x.ks = key_span(P, q0, x.rows, s.opt.window);
        const int64_t W = x.ks.width(), ksr = (g.start + x.ks.s0) * s.kv_stride + kvh * s.D;
        grow(Pm, x.rows * W);
        grow(dP, x.rows * W);
        if (s.opt.softcap > 0.f) grow(G, x.rows * W);
        x.Q = q + (g.start + q0) * s.q_stride + h * s.D;
        x.O = o + (g.start + q0) * s.o_stride + h * s.D;
        x.dO = dout + (g.start + q0) * s.o_stride + h * s.D;
        x.dQ = dq + (g.start + q0) * s.q_stride + h * s.D;
        x.L = lse + h * s.N + g.start + q0;
        x.Ks = k + ksr, x.Vs = v + ksr;
        x.dK = dK + x.ks.s0 * s.kv_stride, x.dV = dV + x.ks.s0 * s.kv_stride;
        x.Kp = x.Vp = nullptr, x.dKp = x.dVp = nullptr;
        if (x.ks.np > 0) {  // the prefix's rows from k0 on
          const int64_t kp = (g.prefix_start + x.ks.k0) * s.kv_stride + kvh * s.D,
                        sp = (scratch_at[static_cast<size_t>(si)] + x.ks.k0) * Hk + kvh * s.D;
          x.Kp = k + kp, x.Vp = v + kp, x.dKp = dkp.data() + sp, x.dVp = dvp.data() + sp;
        }
        packed_block_bwd(s, t, scale, x, Pm.data(), dP.data(), G.data());
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

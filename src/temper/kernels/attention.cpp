#include "temper/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "temper/core/dtype.h"
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
    float shift = 0.f;
    const float sum = t.attn_exp_row(x, n, sc, &shift);
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
    // exp on whole vectors where the row has room (the columns past n are cleared after): no scalar tail.
    const int64_t nv = std::min((n + 15) / 16 * 16, width - vis.lo);
    if (opt.softcap > 0.f) {
      t.softcap(x, n, scale, opt.softcap, G + i * width + vis.lo);
      t.exp_shift_inplace(x, nv, 1.0f, L[i]);
    } else {
      t.exp_shift_inplace(x, nv, scale, L[i]);
    }
    clear_outside(P + i * width, vis, width);
  }
}

// dP (dO V^T) -> dS = P (dP - rowsum(dO * O)) * scale, through the cap's tanh where there is one; zero outside
// the visible columns (the products leave columns past a causal block's triangle unwritten). f32; the bf16
// backward's is IsaTable::attn_dscores_bf16 (block_bwd_bf16).
void dscores_rows(const IsaTable& t, const float* P, float* dP, const float* G, int64_t rows, int64_t width,
                  int64_t pos0, int64_t k0, float scale, const AttnOpts& opt, const float* dO, const float* O,
                  int64_t o_stride, int64_t D, bool causal) {
  for (int64_t i = 0; i < rows; ++i) {
    const Visible vis = causal ? visible(pos0 + i, k0, opt.window) : Visible{0, width};
    const float di = t.dot(dO + i * o_stride, O + i * o_stride, D);
    float* d = dP + i * width;
    t.softmax_bwd_row(P + i * width + vis.lo, d + vis.lo, vis.n - vis.lo, di, scale);
    if (opt.softcap > 0.f) {
      const float* g = G + i * width;
      for (int64_t j = vis.lo; j < vis.n; ++j) d[j] *= g[j];
    }
    clear_outside(d, vis, width);
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

// ---- Blocks of queries against the keys they see, on the ISA's tile products (cpu/attention_tiles.inc).

// Keys (or values) by position: np rows from p, then the rest from s, stride apart (a packed segment's prefix, then
// its own rows; np = 0 for a plain sequence's).
struct KeyRows {
  const float* p;
  const float* s;
  int64_t np, n, stride;
  const float* row(int64_t j) const { return j < np ? p + j * stride : s + (j - np) * stride; }
};
KeyRows rows_at(const float* x, int64_t n, int64_t stride) {
  return {nullptr, x, 0, n, stride};
}

// What a block's products read of its KV head, packed once for every key position 0..n-1 (a forward task's keys, a
// backward task's): Kt [D, n] (K^T, for Q K^T), and by precision Vt [D, n] and K's rows (f32) or Vt16 [D/2, n]
// and K16 [n/2, D] (bf16 pairs: dO V^T, dS K).
struct KeyPack {
  const float *Kt, *Vt, *K, *V;
  int64_t n, ldk, ldv;
  const uint32_t *Vt16, *K16;
};

struct Scratch {
  std::vector<float> S, dP, G;                // P (scores), dP, the cap's factor; [rows, width]
  std::vector<float> Kt, Vt, K, V;            // KeyPack's f32 operands
  std::vector<uint32_t> Vt16, K16, a16, b16;  // KeyPack's bf16 operands, a block's bf16 operands
  std::vector<uint32_t> ds16, dsp16, p16;     // the bf16 backward's dS (pairs along rows, of rows), P's
};
Scratch& scratch() {
  static thread_local Scratch x;
  return x;
}

// out[d * n + j] = row j's element d.
void pack_transposed(const IsaTable& t, const KeyRows& r, int64_t D, std::vector<float>& buf) {
  grow(buf, D * r.n);
  if (r.np > 0) t.attn_transpose(r.p, r.stride, r.np, D, buf.data(), r.n);
  t.attn_transpose(r.s, r.stride, r.n - r.np, D, buf.data() + r.np, r.n);
}
// The rows as one strided array: themselves without a prefix, else copied into buf [n, D].
const float* gathered(const KeyRows& r, int64_t D, std::vector<float>& buf, int64_t* ld) {
  if (r.np == 0) {
    *ld = r.stride;
    return r.s;
  }
  grow(buf, r.n * D);
  for (int64_t j = 0; j < r.n; ++j) std::memcpy(buf.data() + j * D, r.row(j), static_cast<size_t>(D) * sizeof(float));
  *ld = D;
  return buf.data();
}

// Starts loading rows of D floats that are read soon: the backward's come from the batch's whole arrays (a task's
// keys and values, a block's Q and dO rows), mostly past the caches, and one at a time their misses add up.
void prefetch_rows(const float* x, int64_t rows, int64_t stride, int64_t D) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < D; j += 16) __builtin_prefetch(x + r * stride + j);
}

KeyPack pack_keys(const IsaTable& t, const KeyRows& K, const KeyRows& V, int64_t D, Precision prec, bool backward,
                  Scratch& x) {
  KeyPack kp{};
  kp.n = K.n;
  for (int64_t j = 0; backward && j < K.n; ++j) {  // every line of the task's keys and values at once
    prefetch_rows(K.row(j), 1, 0, D);
    prefetch_rows(V.row(j), 1, 0, D);
  }
  pack_transposed(t, K, D, x.Kt);
  kp.Kt = x.Kt.data();
  if (!backward) {
    kp.V = gathered(V, D, x.V, &kp.ldv);
    return kp;
  }
  if (prec == Precision::f32) {
    pack_transposed(t, V, D, x.Vt);
    kp.Vt = x.Vt.data();
    kp.K = gathered(K, D, x.K, &kp.ldk);
    return kp;
  }
  const int64_t n = K.n, Dp = (D + 1) / 2, np = (n + 1) / 2;
  grow(x.Vt16, Dp * n);
  grow(x.K16, np * D);
  pack_transposed(t, V, D, x.Vt);  // V^T [D, n], then its rows in pairs: column j holds V's row j in pairs along it
  for (int64_t p = 0; p < Dp; ++p)
    t.attn_bf16_pairs(x.Vt.data() + 2 * p * n, 2 * p + 1 < D ? x.Vt.data() + (2 * p + 1) * n : nullptr,
                      x.Vt16.data() + p * n, n);
  for (int64_t p = 0; p < np; ++p)
    t.attn_bf16_pairs(K.row(2 * p), 2 * p + 1 < n ? K.row(2 * p + 1) : nullptr, x.K16.data() + p * D, D);
  kp.Vt16 = x.Vt16.data();
  kp.K16 = x.K16.data();
  return kp;
}

// One block: `rows` queries at positions pos0.. (q, o, do rows q_stride / o_stride apart) against the keys at
// positions k0..k0 + width - 1, columns at.. of the pack (causal: row i sees columns <= i + pos0 - k0, and its
// window's).
struct Block {
  const float *Q = nullptr, *O = nullptr, *dO = nullptr, *L = nullptr;
  int64_t rows = 0, pos0 = 0, k0 = 0, width = 0, at = 0;
  bool causal = true;
};
struct Dims {
  int64_t D, q_stride, o_stride;
  float scale;
  const AttnOpts* opt;
};

// The block's P (or the forward's scores, softmaxed, with lse out) in x.S: Q K^T on the f32 tiles, then the rows.
void block_probs(const IsaTable& t, const Dims& d, const KeyPack& kp, const Block& b, Scratch& x, float* lse_out) {
  const int64_t W = b.width;
  grow(x.S, b.rows * W);
  t.attn_mm_f32(b.Q, d.q_stride, 1, kp.Kt + b.at, kp.n, x.S.data(), W, b.rows, W, d.D, false,
                b.causal ? kAttnTriCols : kAttnTriNone, b.pos0 - b.k0);
  if (lse_out) {
    softmax_rows_fwd(t, x.S.data(), b.rows, W, b.pos0, b.k0, d.scale, *d.opt, lse_out, b.causal);
  } else {
    if (d.opt->softcap > 0.f) grow(x.G, b.rows * W);
    probs_rows_bwd(t, x.S.data(), x.G.data(), b.rows, W, b.pos0, b.k0, d.scale, *d.opt, b.L, b.causal);
  }
}

void block_fwd(const IsaTable& t, const Dims& d, const KeyPack& kp, const Block& b, float* O, float* lse) {
  Scratch& x = scratch();
  block_probs(t, d, kp, b, x, lse);
  t.attn_mm_f32(x.S.data(), b.width, 1, kp.V + b.at * kp.ldv, kp.ldv, O, d.o_stride, b.rows, d.D, b.width, false,
                b.causal ? kAttnTriKEnd : kAttnTriNone, b.pos0 - b.k0);
}

// Where a block's dK (or dV) rows go: those of positions below np to p (a packed prefix's scratch, position 0 at
// p), the others to s (position np at s).
struct GradRows {
  float* p;
  int64_t ldp;
  float* s;
  int64_t lds;
  int64_t np;
};

// dK (or dV) += A^T B over the block's query rows, split at the prefix's end. f32: A = dS (or P) [rows, width], B =
// Q (or dO) rows ldb apart. bf16 (A16 set): A16 = A's rows in pairs [rows/2, width], B16 the query rows in pairs.
void grad_keys(const IsaTable& t, const Dims& d, const Block& b, const GradRows& g, const float* A, const float* B,
               int64_t ldb, const uint32_t* A16, const uint32_t* B16) {
  const int64_t W = b.width, c = b.pos0 - b.k0, Rp = (b.rows + 1) / 2;
  const int64_t split = std::clamp<int64_t>(g.np - b.k0, 0, W);  // columns in the prefix
  const int tri = b.causal ? kAttnTriKStart : kAttnTriNone;
  for (int part = 0; part < 2; ++part) {
    const int64_t j0 = part == 0 ? 0 : split, m = part == 0 ? split : W - split;
    if (m == 0) continue;
    const int64_t pos = b.k0 + j0;  // the first row's key position
    float* C = pos < g.np ? g.p + pos * g.ldp : g.s + (pos - g.np) * g.lds;
    const int64_t ldc = pos < g.np ? g.ldp : g.lds;
    if (A16)
      t.attn_mm_bf16(A16 + j0, 1, W, B16, d.D, C, ldc, m, d.D, Rp, true, tri, c - j0);
    else
      t.attn_mm_f32(A + j0, 1, W, B, ldb, C, ldc, m, d.D, b.rows, true, tri, c - j0);
  }
}

// Rows of f32 as bf16 pairs along each row (IsaTable::attn_bf16_row), (n + off + 1) / 2 words a row.
uint32_t* row_pairs(const IsaTable& t, const float* X, int64_t ldx, int64_t rows, int64_t n, int64_t off,
                    std::vector<uint32_t>& buf) {
  const int64_t np = (n + off + 1) / 2;
  grow(buf, rows * np);
  for (int64_t r = 0; r < rows; ++r) t.attn_bf16_row(X + r * ldx, n, off, buf.data() + r * np);
  return buf.data();
}

// The bf16 backward: the scores, dP = dO V^T, then P and dS straight into their bf16 operands (attn_dscores_bf16; its
// row sum is rowsum(P * dP), dO . O's equal, over the same rounded dP: a row's dS then sums to zero as it should,
// where with dO . O a lone key's dS would be dP's rounding error), dQ = dS K, dK += dS^T Q and dV += P^T dO.
void block_bwd_bf16(const IsaTable& t, const Dims& d, const KeyPack& kp, const Block& b, Scratch& x, float* dQ,
                    const GradRows& dK, const GradRows& dV) {
  const int64_t W = b.width, c = b.pos0 - b.k0, D = d.D, Dp = (D + 1) / 2, Rp = (b.rows + 1) / 2;
  // The scores on the f32 tiles (capped where there is a cap, G its factor); attn_dscores_bf16 takes their exp.
  grow(x.S, b.rows * W);
  t.attn_mm_f32(b.Q, d.q_stride, 1, kp.Kt + b.at, kp.n, x.S.data(), W, b.rows, W, D, false,
                b.causal ? kAttnTriCols : kAttnTriNone, c);
  const bool capped = d.opt->softcap > 0.f;
  if (capped) grow(x.G, b.rows * W);
  for (int64_t i = 0; capped && i < b.rows; ++i) {
    const Visible v = b.causal ? visible(b.pos0 + i, b.k0, d.opt->window) : Visible{0, W};
    t.softcap(x.S.data() + i * W + v.lo, v.n - v.lo, d.scale, d.opt->softcap, x.G.data() + i * W + v.lo);
  }
  const uint32_t* dO16 = row_pairs(t, b.dO, d.o_stride, b.rows, D, 0, x.a16);
  float* dP = x.dP.data();
  t.attn_mm_bf16(dO16, Dp, 1, kp.Vt16 + b.at, kp.n, dP, W, b.rows, W, Dp, false, b.causal ? kAttnTriCols : kAttnTriNone,
                 c);
  const int64_t off = b.at & 1, Wp = (W + off + 1) / 2;  // dS's pairs line up with K16's (pairs from position 0)
  grow(x.ds16, b.rows * Wp);
  grow(x.dsp16, Rp * W);
  grow(x.p16, Rp * W);
  float* P = x.S.data();
  const float* G = capped ? x.G.data() : nullptr;
  for (int64_t p = 0; p < Rp; ++p) {
    const int64_t i = 2 * p, n = std::min<int64_t>(2, b.rows - i);
    int64_t lo[2] = {0, 0}, hi[2] = {0, 0};
    for (int64_t r = 0; r < n; ++r) {
      const Visible v = b.causal ? visible(b.pos0 + i + r, b.k0, d.opt->window) : Visible{0, W};
      lo[r] = v.lo, hi[r] = v.n;
    }
    t.attn_dscores_bf16(P + i * W, b.L + i, capped ? 1.0f : d.scale, dP + i * W, G ? G + i * W : nullptr, W, n, lo, hi,
                        d.scale, W, off, x.ds16.data() + i * Wp, Wp, x.dsp16.data() + p * W, x.p16.data() + p * W);
  }
  t.attn_mm_bf16(x.ds16.data(), Wp, 1, kp.K16 + (b.at / 2) * D, D, dQ, d.q_stride, b.rows, D, Wp, false,
                 b.causal ? kAttnTriKEnd : kAttnTriNone, c + off);
  grow(x.b16, Rp * D);
  auto pairs_of_rows = [&](const float* X, int64_t ldx) {  // the block's rows of D in pairs
    for (int64_t p = 0; p < Rp; ++p)
      t.attn_bf16_pairs(X + 2 * p * ldx, 2 * p + 1 < b.rows ? X + (2 * p + 1) * ldx : nullptr, x.b16.data() + p * D, D);
    return x.b16.data();
  };
  grad_keys(t, d, b, dK, nullptr, nullptr, 0, x.dsp16.data(), pairs_of_rows(b.Q, d.q_stride));
  grad_keys(t, d, b, dV, nullptr, nullptr, 0, x.p16.data(), pairs_of_rows(b.dO, d.o_stride));
}

// The block's share of dQ (written), dK and dV (added). bf16: dP = dO V^T, dQ = dS K, dK += dS^T Q and dV += P^T dO
// with bf16 operands (block_bwd_bf16); P itself is recomputed in f32 (the forward's lse).
void block_bwd(const IsaTable& t, const Dims& d, const KeyPack& kp, const Block& b, Precision prec, float* dQ,
               const GradRows& dK, const GradRows& dV) {
  Scratch& x = scratch();
  const int64_t W = b.width, c = b.pos0 - b.k0, D = d.D;
  grow(x.dP, b.rows * W);
  if (prec == Precision::bf16) {
    block_bwd_bf16(t, d, kp, b, x, dQ, dK, dV);
    return;
  }
  block_probs(t, d, kp, b, x, nullptr);
  float *P = x.S.data(), *dP = x.dP.data();
  t.attn_mm_f32(b.dO, d.o_stride, 1, kp.Vt + b.at, kp.n, dP, W, b.rows, W, D, false,
                b.causal ? kAttnTriCols : kAttnTriNone, c);
  dscores_rows(t, P, dP, x.G.data(), b.rows, W, b.pos0, b.k0, d.scale, *d.opt, b.dO, b.O, d.o_stride, D, b.causal);
  t.attn_mm_f32(dP, W, 1, kp.K + b.at * kp.ldk, kp.ldk, dQ, d.q_stride, b.rows, D, W, false,
                b.causal ? kAttnTriKEnd : kAttnTriNone, c);
  grad_keys(t, d, b, dK, dP, b.Q, d.q_stride, nullptr, nullptr);
  grad_keys(t, d, b, dV, P, b.dO, d.o_stride, nullptr, nullptr);
}

// At the start of block b: its own dO (and O) rows, read after its P, its dQ rows, written (without, the products'
// stores wait on their lines), and the next block's Q rows (next: may be b).
void prefetch_block(const Block& b, const Block& next, const float* dQ, const Dims& d, Precision prec) {
  prefetch_rows(b.dO, b.rows, d.o_stride, d.D);
  for (int64_t r = 0; r < b.rows; ++r)
    for (int64_t j = 0; j < d.D; j += 16) __builtin_prefetch(dQ + r * d.q_stride + j, 1);
  if (prec == Precision::f32) prefetch_rows(b.O, b.rows, d.o_stride, d.D);
  if (next.Q != b.Q) prefetch_rows(next.Q, next.rows, d.q_stride, d.D);
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
  const Dims d{s.D, s.q_stride, s.o_stride, attn_scale(s.opt, s.D), &s.opt};
  const int64_t nqb = (s.T + kBlockQ - 1) / kBlockQ, group = s.H / s.Hkv;
  // One task per (batch, KV head, block of queries): the block's keys packed once for the group's heads.
  parallel_tasks(s.B * s.Hkv * nqb, [&](int64_t task) {
    const int64_t qb = task % nqb, kvh = (task / nqb) % s.Hkv, b = task / (nqb * s.Hkv);
    const int64_t q0 = qb * kBlockQ, rows = q0 + kBlockQ < s.T ? kBlockQ : s.T - q0;
    const KeySpan ks = shape_key_span(s, q0, rows);
    const int64_t kr = (b * s.T + ks.s0) * s.kv_stride + kvh * s.D;
    const KeyPack kp = pack_keys(t, rows_at(k + kr, ks.width(), s.kv_stride), rows_at(v + kr, ks.width(), s.kv_stride),
                                 s.D, s.precision, false, scratch());
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      const Block x{.Q = q + (b * s.T + q0) * s.q_stride + h * s.D,
                    .rows = rows,
                    .pos0 = q0,
                    .k0 = ks.k0,
                    .width = ks.width(),
                    .causal = s.causal};
      block_fwd(t, d, kp, x, o + (b * s.T + q0) * s.o_stride + h * s.D, lse + (b * s.H + h) * s.T + q0);
    }
  });
}

void attention_bwd(const AttnShape& s, const float* q, const float* k, const float* v, const float* o, const float* lse,
                   const float* dout, float* dq, float* dk, float* dv) {
  attn_shape_check(s, "attention_bwd");
  const IsaTable& t = isa_table();
  const Dims d{s.D, s.q_stride, s.o_stride, attn_scale(s.opt, s.D), &s.opt};
  const int64_t nqb = (s.T + kBlockQ - 1) / kBlockQ, group = s.H / s.Hkv;
  // One task per (batch, KV head): it owns dk/dv of that head and dq of its query heads; its keys packed once.
  parallel_tasks(s.B * s.Hkv, [&](int64_t task) {
    const int64_t kvh = task % s.Hkv, b = task / s.Hkv, kr = b * s.T * s.kv_stride + kvh * s.D;
    float* dK = dk + kr;
    float* dV = dv + kr;
    for (int64_t r = 0; r < s.T; ++r) {
      std::memset(dK + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
      std::memset(dV + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
    }
    const KeyPack kp = pack_keys(t, rows_at(k + kr, s.T, s.kv_stride), rows_at(v + kr, s.T, s.kv_stride), s.D,
                                 s.precision, true, scratch());
    auto block = [&](int64_t i) {  // the task's i-th block: head kvh * group + i / nqb, queries from (i % nqb) * 64
      const int64_t h = kvh * group + i / nqb, q0 = (i % nqb) * kBlockQ, rows = std::min(kBlockQ, s.T - q0);
      const KeySpan ks = shape_key_span(s, q0, rows);
      const int64_t qr = (b * s.T + q0) * s.q_stride + h * s.D, orow = (b * s.T + q0) * s.o_stride + h * s.D;
      return Block{.Q = q + qr,
                   .O = o + orow,
                   .dO = dout + orow,
                   .L = lse + (b * s.H + h) * s.T + q0,
                   .rows = rows,
                   .pos0 = q0,
                   .k0 = ks.k0,
                   .width = ks.width(),
                   .at = ks.k0,
                   .causal = s.causal};
    };
    for (int64_t i = 0; i < group * nqb; ++i) {
      const Block x = block(i);
      prefetch_block(x, i + 1 < group * nqb ? block(i + 1) : x, dq + (x.Q - q), d, s.precision);
      block_bwd(t, d, kp, x, s.precision, dq + (x.Q - q), {nullptr, 0, dK, s.kv_stride, 0},
                {nullptr, 0, dV, s.kv_stride, 0});
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
  const Dims d{s.D, s.q_stride, s.o_stride, attn_scale(s.opt, s.D), &s.opt};
  const int64_t group = s.H / s.Hkv;
  // Tasks: (segment, KV head, block of queries), the block's keys packed once for the group's heads.
  std::vector<int64_t> first(static_cast<size_t>(s.nsegs + 1), 0);
  for (int64_t i = 0; i < s.nsegs; ++i)
    first[static_cast<size_t>(i + 1)] =
        first[static_cast<size_t>(i)] + s.Hkv * ((s.segs[i].len + kBlockQ - 1) / kBlockQ);
  parallel_tasks(first.back(), [&](int64_t task) {
    const int64_t si = std::upper_bound(first.begin(), first.end(), task) - first.begin() - 1;
    const AttnSegment& g = s.segs[si];
    const int64_t nqb = (g.len + kBlockQ - 1) / kBlockQ, r = task - first[static_cast<size_t>(si)];
    const int64_t qb = r % nqb, kvh = r / nqb, P = g.prefix_len;
    const int64_t q0 = qb * kBlockQ, rows = std::min(kBlockQ, g.len - q0);
    const KeySpan ks = key_span(P, q0, rows, s.opt.window);
    const int64_t kp0 = ks.np > 0 ? (g.prefix_start + ks.k0) * s.kv_stride + kvh * s.D : 0;  // read only when np > 0
    const int64_t kr = (g.start + ks.s0) * s.kv_stride + kvh * s.D;
    const KeyPack kp = pack_keys(t, {k + kp0, k + kr, ks.np, ks.width(), s.kv_stride},
                                 {v + kp0, v + kr, ks.np, ks.width(), s.kv_stride}, s.D, s.precision, false, scratch());
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      const Block x{.Q = q + (g.start + q0) * s.q_stride + h * s.D,
                    .rows = rows,
                    .pos0 = P + q0,
                    .k0 = ks.k0,
                    .width = ks.width()};
      block_fwd(t, d, kp, x, o + (g.start + q0) * s.o_stride + h * s.D, lse + h * s.N + g.start + q0);
    }
  });
}

void attention_bwd_packed(const PackedAttnShape& s, const float* q, const float* k, const float* v, const float* o,
                          const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  std::vector<int64_t> scratch_at;
  const int64_t scratch_rows = check_segments(s, &scratch_at);
  attn_opts_check(s.opt, "attention_bwd_packed");
  const IsaTable& t = isa_table();
  const Dims d{s.D, s.q_stride, s.o_stride, attn_scale(s.opt, s.D), &s.opt};
  const int64_t group = s.H / s.Hkv, Hk = s.Hkv * s.D;
  std::vector<float> dkp(static_cast<size_t>(scratch_rows * Hk)), dvp(dkp.size());
  // One task per (segment, KV head): it owns dk/dv of the segment's rows at that head, dq of its query
  // heads, and its own scratch copy of the prefix's dk/dv; its keys (prefix, then its own) packed once.
  parallel_tasks(s.nsegs * s.Hkv, [&](int64_t task) {
    const int64_t kvh = task % s.Hkv, si = task / s.Hkv;
    const AttnSegment& g = s.segs[si];
    const int64_t P = g.prefix_len;
    float* dK = dk + g.start * s.kv_stride + kvh * s.D;
    float* dV = dv + g.start * s.kv_stride + kvh * s.D;
    for (int64_t r = 0; r < g.len; ++r) {
      std::memset(dK + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
      std::memset(dV + r * s.kv_stride, 0, static_cast<size_t>(s.D) * sizeof(float));
    }
    const int64_t kp0 = P > 0 ? g.prefix_start * s.kv_stride + kvh * s.D : 0, kr = g.start * s.kv_stride + kvh * s.D;
    const KeyPack kp = pack_keys(t, {k + kp0, k + kr, P, P + g.len, s.kv_stride},
                                 {v + kp0, v + kr, P, P + g.len, s.kv_stride}, s.D, s.precision, true, scratch());
    const int64_t sp = P > 0 ? scratch_at[static_cast<size_t>(si)] * Hk + kvh * s.D : 0;
    const GradRows gk{dkp.data() + sp, Hk, dK, s.kv_stride, P}, gv{dvp.data() + sp, Hk, dV, s.kv_stride, P};
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      for (int64_t q0 = 0; q0 < g.len; q0 += kBlockQ) {
        const int64_t rows = std::min(kBlockQ, g.len - q0);
        const KeySpan ks = key_span(P, q0, rows, s.opt.window);
        const int64_t qr = (g.start + q0) * s.q_stride + h * s.D, orow = (g.start + q0) * s.o_stride + h * s.D;
        const Block x{.Q = q + qr,
                      .O = o + orow,
                      .dO = dout + orow,
                      .L = lse + h * s.N + g.start + q0,
                      .rows = rows,
                      .pos0 = P + q0,
                      .k0 = ks.k0,
                      .width = ks.width(),
                      .at = ks.k0};
        block_bwd(t, d, kp, x, s.precision, dq + qr, gk, gv);
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

std::string attention_kernel_name(Isa isa) {
  const IsaTable& t = isa_table(isa);
  return std::string(t.attn_kernel) + ", backward bf16 products: " + t.attn_bf16_kernel;
}

std::string attention_kernel_name() {
  return attention_kernel_name(cpu_isa());
}

}  // namespace temper::kernels

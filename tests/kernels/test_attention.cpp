// Harness entry for causal GQA attention: fast (tiled, every ISA) vs the full-matrix fp64 reference,
// finite differences on the reference, fast backward vs reference backward.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/cpu/attention_dpbf16.h"
#include "temper/kernels/cpu/isa_table.h"
#include "temper/kernels/paged_attention.h"
#include "temper/kernels/ref/attention_ref.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

namespace {
struct Case { int64_t B, T, H, Hkv, D; };
}

TEST(OpAttention, ForwardBackwardEveryIsa) {
  // T <= 128 takes the one-sequence kernels (every ISA), longer sequences the tiled GEMM path.
  for (Case c : {Case{1, 1, 1, 1, 4}, Case{2, 13, 4, 2, 16}, Case{1, 150, 3, 1, 24}, Case{2, 70, 4, 4, 8},
                 Case{1, 128, 4, 2, 32}, Case{3, 40, 6, 2, 80}, Case{1, 129, 2, 1, 16}, Case{2, 17, 2, 1, 128}}) {
    SCOPED_TRACE("B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
                 " Hkv=" + std::to_string(c.Hkv) + " D=" + std::to_string(c.D));
    int64_t nq = c.B * c.T * c.H * c.D, nkv = c.B * c.T * c.Hkv * c.D;
    auto q = random_vec(nq, 51), k = random_vec(nkv, 52), v = random_vec(nkv, 53), dout = random_vec(nq, 54);
    auto qd = to_f64(q), kd = to_f64(k), vd = to_f64(v), dod = to_f64(dout);
    std::vector<double> o_ref(nq), dq_ref(nq, 0.0), dk_ref(nkv, 0.0), dv_ref(nkv, 0.0);
    ref::attention_fwd(qd.data(), kd.data(), vd.data(), o_ref.data(), c.B, c.T, c.H, c.Hkv, c.D);
    ref::attention_bwd(qd.data(), kd.data(), vd.data(), dod.data(), dq_ref.data(), dk_ref.data(), dv_ref.data(), c.B,
                       c.T, c.H, c.Hkv, c.D);
    if (c.T <= 20) {
      auto loss = [&] {
        std::vector<double> o(nq);
        ref::attention_fwd(qd.data(), kd.data(), vd.data(), o.data(), c.B, c.T, c.H, c.Hkv, c.D);
        double s = 0;
        for (int64_t i = 0; i < nq; ++i) s += o[i] * dod[i];
        return s;
      };
      EXPECT_TRUE(fd_check(qd, dq_ref, loss));
      EXPECT_TRUE(fd_check(kd, dk_ref, loss));
      EXPECT_TRUE(fd_check(vd, dv_ref, loss));
    }
    AttnShape s{c.B, c.T, c.H, c.Hkv, c.D, c.H * c.D, c.Hkv * c.D, c.H * c.D};
    for_each_isa([&](Isa) {
      std::vector<float> o(nq, 5.f), lse(c.B * c.H * c.T), dq(nq, 7.f), dk(nkv, 9.f), dv(nkv, 9.f);  // all overwritten
      attention_fwd(s, q.data(), k.data(), v.data(), o.data(), lse.data());
      EXPECT_TRUE(all_close(o, o_ref, tolerance(Kind::reduction, c.T)));
      attention_bwd(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(), dv.data());
      EXPECT_TRUE(all_close(dq, dq_ref, tolerance(Kind::reduction, c.T * c.D), 1e-6));
      EXPECT_TRUE(all_close(dk, dk_ref, tolerance(Kind::reduction, c.T * c.D), 1e-6));
      EXPECT_TRUE(all_close(dv, dv_ref, tolerance(Kind::reduction, c.T * c.D), 1e-6));
    });
  }
}

TEST(OpAttention, PagedBlockUpdateEveryIsaMatchesSoftmaxReference) {
  // attn_block_update over blocks of a strided KV layout equals softmax(q K^T * scale) V in fp64.
  for_each_isa([](Isa isa) {
    SCOPED_TRACE(std::string(isa_name(isa)));
    const IsaTable& t = isa_table(isa);
    for (int64_t D : {8, 32, 64, 80})
      for (int64_t len : {1, 5, 16, 37}) {
        const int64_t stride = 2 * D + 3, bs = 16;
        auto q = random_vec(D, 11), K = random_vec(len * stride, 12), V = random_vec(len * stride, 13);
        const float scale = 1.0f / std::sqrt(float(D));
        float m = -INFINITY, l = 0.f;
        std::vector<float> acc(D, 0.f), scores(bs);
        for (int64_t b0 = 0; b0 < len; b0 += bs)
          t.attn_block_update(q.data(), K.data() + b0 * stride, V.data() + b0 * stride, stride, std::min(bs, len - b0),
                              D, scale, 0.f, scores.data(), &m, &l, acc.data());
        std::vector<double> s(len), ref(D, 0.0);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          double d = 0;
          for (int64_t k = 0; k < D; ++k) d += double(q[k]) * K[j * stride + k];
          s[j] = d * scale;
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j < len; ++j) sum += std::exp(s[j] - mx);
        for (int64_t j = 0; j < len; ++j)
          for (int64_t k = 0; k < D; ++k) ref[k] += std::exp(s[j] - mx) / sum * V[j * stride + k];
        std::vector<float> out(D);
        for (int64_t k = 0; k < D; ++k) out[k] = acc[k] / l;
        EXPECT_TRUE(all_close(out, ref, tolerance(Kind::reduction, len * D))) << "D " << D << " len " << len;
      }
  });
}

namespace {
// With a window of 1 every P is 1 and dq, dk are exactly 0 in fp64: in fp32 they cancel to ~1e-6
// from O(1) terms (P (dP - rowsum(dO * O))), so they get an absolute floor above that.
double atol_dqk(const AttnOpts& opt) {
  return opt.window == 1 ? 1e-5 : 1e-6;
}

// Packed rows: two prompts (5 and 66 tokens), their completions placed anywhere, and a row with no
// shared prompt. Each completion with its prompt is one causal sequence of the fp64 reference (with
// the same options); a prompt's outputs are the same in every such sequence, and its gradients are
// the sum over its readers (the prompt's own output gradient counted once).
void check_packed(const AttnOpts& opt, Precision prec = Precision::f32) {
  const int64_t H = 4, Hkv = 2, D = 16, Hq = H * D, Hk = Hkv * D;
  std::vector<AttnSegment> segs;
  int64_t N = 0;
  auto add = [&](int64_t len, int64_t prefix) {
    AttnSegment g;
    g.start = N, g.len = len;
    if (prefix >= 0)
      g.prefix_start = segs[static_cast<size_t>(prefix)].start, g.prefix_len = segs[static_cast<size_t>(prefix)].len;
    segs.push_back(g);
    N += len;
  };
  add(5, -1);   // 0: prompt A
  add(7, 0);    // 1: A's completions
  add(9, -1);   // 2: a row alone
  add(1, 0);    // 3
  add(66, -1);  // 4: prompt B (two query blocks)
  add(3, 4);    // 5
  add(70, 0);   // 6: two query blocks after a prompt
  add(4, 4);    // 7
  auto q = random_vec(N * Hq, 61), k = random_vec(N * Hk, 62), v = random_vec(N * Hk, 63),
       dout = random_vec(N * Hq, 64);
  std::vector<double> o_ref(N * Hq, 0.0), dq_ref(N * Hq, 0.0), dk_ref(N * Hk, 0.0), dv_ref(N * Hk, 0.0);
  std::vector<bool> prefix_out_done(segs.size(), false);
  for (size_t si = 0; si < segs.size(); ++si) {
    const AttnSegment& g = segs[si];
    const bool is_prefix = std::any_of(
        segs.begin(), segs.end(), [&](const AttnSegment& x) { return x.prefix_len > 0 && x.prefix_start == g.start; });
    if (is_prefix) continue;  // covered by its readers
    // The sequence's rows in the packed array: the prefix's, then the segment's.
    std::vector<int64_t> at;
    for (int64_t r = 0; r < g.prefix_len; ++r) at.push_back(g.prefix_start + r);
    for (int64_t r = 0; r < g.len; ++r) at.push_back(g.start + r);
    const int64_t T = static_cast<int64_t>(at.size());
    size_t pi = 0;
    while (g.prefix_len > 0 && segs[pi].start != g.prefix_start) ++pi;
    const bool first_reader = g.prefix_len > 0 && !prefix_out_done[pi];
    std::vector<double> sq(T * Hq), sk(T * Hk), sv(T * Hk), sdo(T * Hq, 0.0), so(T * Hq), sdq(T * Hq, 0.0),
        sdk(T * Hk, 0.0), sdv(T * Hk, 0.0);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < Hq; ++c) {
        sq[t * Hq + c] = q[at[t] * Hq + c];
        // a prompt's output gradient enters once: in its first reader's sequence
        if (t >= g.prefix_len || first_reader) sdo[t * Hq + c] = dout[at[t] * Hq + c];
      }
      for (int64_t c = 0; c < Hk; ++c) sk[t * Hk + c] = k[at[t] * Hk + c], sv[t * Hk + c] = v[at[t] * Hk + c];
    }
    if (first_reader) prefix_out_done[pi] = true;
    ref::attention_fwd(sq.data(), sk.data(), sv.data(), so.data(), 1, T, H, Hkv, D, opt);
    ref::attention_bwd(sq.data(), sk.data(), sv.data(), sdo.data(), sdq.data(), sdk.data(), sdv.data(), 1, T, H, Hkv, D,
                       opt);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < Hq; ++c)
        o_ref[at[t] * Hq + c] = so[t * Hq + c], dq_ref[at[t] * Hq + c] += sdq[t * Hq + c];
      for (int64_t c = 0; c < Hk; ++c)
        dk_ref[at[t] * Hk + c] += sdk[t * Hk + c], dv_ref[at[t] * Hk + c] += sdv[t * Hk + c];
    }
  }
  // the one segment alone is its own sequence (done above); every prompt has readers
  PackedAttnShape s{N, H, Hkv, D, Hq, Hk, Hq, segs.data(), static_cast<int64_t>(segs.size()), opt};
  s.precision = prec;
  // bf16: the gradient products on bf16 operands (the forward stays f32).
  const double gtol =
      prec == Precision::bf16 ? tolerance(Kind::bf16, 136 * D, 2.0) : tolerance(Kind::reduction, 136 * D);
  for_each_isa([&](Isa) {
    std::vector<float> o(N * Hq, 5.f), lse(N * H), dq(N * Hq, 7.f), dk(N * Hk, 9.f),
        dv(N * Hk, 9.f);  // all overwritten
    attention_fwd_packed(s, q.data(), k.data(), v.data(), o.data(), lse.data());
    EXPECT_TRUE(all_close(o, o_ref, tolerance(Kind::reduction, 136)));
    attention_bwd_packed(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                         dv.data());
    EXPECT_TRUE(all_close(dq, dq_ref, gtol, atol_dqk(opt)));
    EXPECT_TRUE(all_close(dk, dk_ref, gtol, atol_dqk(opt)));
    EXPECT_TRUE(all_close(dv, dv_ref, gtol, 1e-6));
  });
  // A prefix must be a segment of its own.
  segs[1].prefix_len = 4;
  std::vector<float> o(N * Hq), lse(N * H);
  EXPECT_THROW(attention_fwd_packed(s, q.data(), k.data(), v.data(), o.data(), lse.data()), Error);
}

}  // namespace

TEST(OpAttention, SharedPrefixSegmentsEqualTheirUnpackedSequencesEveryIsa) {
  check_packed({});
}

// ---- Score options (AttnOpts: Gemma-2/3, Mistral, Phi-3) ----------------------------------------------

namespace {

std::string opts_name(const AttnOpts& o) {
  return "scale=" + std::to_string(o.scale) + " softcap=" + std::to_string(o.softcap) +
         " window=" + std::to_string(o.window);
}

// lse [B, H, T] of the final (scaled, capped, masked) scores in fp64.
std::vector<double> lse_ref(const std::vector<double>& q, const std::vector<double>& k, const Case& c,
                            const AttnOpts& opt) {
  std::vector<double> out(static_cast<size_t>(c.B * c.H * c.T));
  const double scale = ref::attention_scale<double>(opt, c.D);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.T; ++i) {
        std::vector<double> s;
        for (int64_t j = 0; j <= i; ++j) {
          if (!ref::attention_sees(i, j, opt)) continue;
          double d = 0;
          for (int64_t x = 0; x < c.D; ++x)
            d += q[((b * c.T + i) * c.H + h) * c.D + x] * k[((b * c.T + j) * c.Hkv + h / (c.H / c.Hkv)) * c.D + x];
          d *= scale;
          s.push_back(opt.softcap > 0 ? opt.softcap * std::tanh(d / opt.softcap) : d);
        }
        const double m = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double x : s) sum += std::exp(x - m);
        out[static_cast<size_t>((b * c.H + h) * c.T + i)] = m + std::log(sum);
      }
  return out;
}

// Forward (o, lse) and backward of every ISA against the fp64 reference with the options; for short
// sequences the reference's own gradients against central differences (the chain through tanh).
// bf16: the forward as in f32 (bit for bit), the gradients within bf16's tolerance and not f32's bits.
void check_training(const Case& c, const AttnOpts& opt, float qscale, Precision prec = Precision::f32) {
  SCOPED_TRACE("B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
               " Hkv=" + std::to_string(c.Hkv) + " D=" + std::to_string(c.D) + " " + opts_name(opt) + " " +
               std::string(precision_name(prec)));
  const int64_t nq = c.B * c.T * c.H * c.D, nkv = c.B * c.T * c.Hkv * c.D;
  auto q = random_vec(nq, 71, qscale), k = random_vec(nkv, 72), v = random_vec(nkv, 73), dout = random_vec(nq, 74);
  auto qd = to_f64(q), kd = to_f64(k), vd = to_f64(v), dod = to_f64(dout);
  std::vector<double> o_ref(nq), dq_ref(nq, 0.0), dk_ref(nkv, 0.0), dv_ref(nkv, 0.0);
  ref::attention_fwd(qd.data(), kd.data(), vd.data(), o_ref.data(), c.B, c.T, c.H, c.Hkv, c.D, opt);
  ref::attention_bwd(qd.data(), kd.data(), vd.data(), dod.data(), dq_ref.data(), dk_ref.data(), dv_ref.data(), c.B, c.T,
                     c.H, c.Hkv, c.D, opt);
  const auto l_ref = lse_ref(qd, kd, c, opt);
  if (c.T <= 20) {
    auto loss = [&] {
      std::vector<double> o(nq);
      ref::attention_fwd(qd.data(), kd.data(), vd.data(), o.data(), c.B, c.T, c.H, c.Hkv, c.D, opt);
      double s = 0;
      for (int64_t i = 0; i < nq; ++i) s += o[i] * dod[i];
      return s;
    };
    EXPECT_TRUE(fd_check(qd, dq_ref, loss, 40));
    EXPECT_TRUE(fd_check(kd, dk_ref, loss, 40));
    EXPECT_TRUE(fd_check(vd, dv_ref, loss, 40));
  }
  AttnShape s{c.B, c.T, c.H, c.Hkv, c.D, c.H * c.D, c.Hkv * c.D, c.H * c.D, opt};
  s.precision = prec;
  const bool bf16 = prec == Precision::bf16;
  // bf16: two rounded products in a chain (dP from bf16 dO and V, then dS rounded again into dK and dQ): slack 2.
  const double gtol = bf16 ? tolerance(Kind::bf16, c.T * c.D, 2.0) : tolerance(Kind::reduction, c.T * c.D);
  for_each_isa([&](Isa) {
    std::vector<float> o(nq, 5.f), lse(c.B * c.H * c.T), dq(nq, 7.f), dk(nkv, 9.f), dv(nkv, 9.f);  // all overwritten
    attention_fwd(s, q.data(), k.data(), v.data(), o.data(), lse.data());
    EXPECT_TRUE(all_close(o, o_ref, tolerance(Kind::reduction, c.T)));
    EXPECT_TRUE(all_close(lse, l_ref, tolerance(Kind::reduction, c.D)));
    attention_bwd(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(), dv.data());
    EXPECT_TRUE(all_close(dq, dq_ref, gtol, atol_dqk(opt)));
    EXPECT_TRUE(all_close(dk, dk_ref, gtol, atol_dqk(opt)));
    EXPECT_TRUE(all_close(dv, dv_ref, gtol, 1e-6));
    if (bf16) {
      AttnShape s32 = s;
      s32.precision = Precision::f32;
      std::vector<float> o32(nq), lse32(lse.size()), dv32(nkv, 9.f), dq32(nq), dk32(nkv);
      attention_fwd(s32, q.data(), k.data(), v.data(), o32.data(), lse32.data());
      EXPECT_EQ(o32, o);  // the forward is f32 in both
      EXPECT_EQ(lse32, lse);
      attention_bwd(s32, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq32.data(), dk32.data(),
                    dv32.data());
      double diff = 0;
      for (int64_t i = 0; i < nkv; ++i) diff = std::max(diff, double(std::fabs(dv32[i] - dv[i])));
      EXPECT_GT(diff, 1e-5) << "the bf16 backward gave f32's dv";
    }
  });
}

AttnOpts opts(float scale, float softcap, int64_t window) {
  AttnOpts o;
  o.scale = scale, o.softcap = softcap, o.window = window;
  return o;
}

}  // namespace

TEST(OpAttention, OptionsAloneAndCombinedMatchTheReferenceEveryIsa) {
  // q scaled by 3: scaled scores of a few units, where a cap of 2.5 bends them (tanh far from linear).
  // Windows: 1 (a row sees itself), smaller than T, crossing the 64-row query blocks, larger than T.
  for (Case c : {Case{2, 13, 4, 2, 16}, Case{1, 17, 3, 1, 8}}) {
    for (AttnOpts o : {opts(0.11f, 0, 0), opts(0, 2.5f, 0), opts(0, 0, 5), opts(0, 0, 1), opts(0, 0, 100),
                       opts(0.2f, 2.5f, 4), opts(0, 1.0f, 1)})
      check_training(c, o, 3.0f);
  }
  for (Case c : {Case{1, 150, 3, 1, 24}, Case{2, 70, 4, 2, 16}}) {
    for (AttnOpts o : {opts(0, 0, 70), opts(0, 0, 64), opts(0, 0, 65), opts(0.15f, 3.0f, 0), opts(0.15f, 3.0f, 33),
                       opts(0, 0, 1), opts(0, 0, 1000)})
      check_training(c, o, 3.0f);
  }
}

TEST(OpAttention, OptionsChangeTheOutputs) {
  // Each option alone moves o away from plain attention (the options reach the kernel).
  const Case c{1, 40, 2, 1, 16};
  const int64_t nq = c.T * c.H * c.D, nkv = c.T * c.Hkv * c.D;
  auto q = random_vec(nq, 81, 3.f), k = random_vec(nkv, 82), v = random_vec(nkv, 83);
  auto run = [&](AttnOpts o) {
    std::vector<float> out(nq), lse(c.H * c.T);
    attention_fwd(AttnShape{c.B, c.T, c.H, c.Hkv, c.D, c.H * c.D, c.Hkv * c.D, c.H * c.D, o}, q.data(), k.data(),
                  v.data(), out.data(), lse.data());
    return out;
  };
  const auto plain = run({});
  for (AttnOpts o : {opts(0.1f, 0, 0), opts(0, 2.f, 0), opts(0, 0, 8)}) {
    const auto got = run(o);
    double diff = 0;
    for (int64_t i = 0; i < nq; ++i) diff = std::max(diff, double(std::fabs(got[i] - plain[i])));
    EXPECT_GT(diff, 1e-2) << opts_name(o);
  }
  EXPECT_EQ(run(opts(0, 0, 40)), plain);           // a window of T is no window, bit for bit
  EXPECT_EQ(run(opts(1.0f / 4.0f, 0, 0)), plain);  // 1/sqrt(16) given explicitly
}

TEST(OpAttention, SharedPrefixSegmentsWithWindowAndSoftcapEqualTheirUnpackedSequencesEveryIsa) {
  // Window 4: a completion's first rows see the prompt's last rows, later ones none of it. Window 40:
  // the 70-row completion of the 5-token prompt leaves it after 36 rows, the 66-token prompt is seen
  // from row 27 on by its completions; both cross the 64-row query blocks.
  for (AttnOpts o : {opts(0, 0, 4), opts(0, 0, 40), opts(0, 0, 1), opts(0.2f, 2.0f, 0), opts(0.2f, 2.0f, 6)}) {
    SCOPED_TRACE(opts_name(o));
    check_packed(o);
  }
}

TEST(OpAttention, OptionsRefuseNegativeValues) {
  std::vector<float> x(64), lse(8);
  for (AttnOpts o : {opts(-1.f, 0, 0), opts(0, -2.f, 0), opts(0, 0, -1), opts(NAN, 0, 0)}) {
    AttnShape s{1, 2, 1, 1, 4, 4, 4, 4, o};
    EXPECT_THROW(attention_fwd(s, x.data(), x.data(), x.data(), x.data() + 8, lse.data()), Error) << opts_name(o);
  }
}

TEST(OpAttention, SoftcapKernelMatchesTanhEveryIsa) {
  // x = cap * tanh(x * scale / cap) and 1 - tanh^2 over both sides of the kernel's |x| = 0.625 split.
  std::vector<float> x0;
  for (int i = -4000; i <= 4000; ++i) x0.push_back(static_cast<float>(i) * 0.0037f);
  for_each_isa([&](Isa isa) {
    const IsaTable& t = isa_table(isa);
    std::vector<float> x = x0, g(x0.size());
    t.softcap(x.data(), static_cast<int64_t>(x.size()), 0.5f, 3.0f, g.data());
    double worst = 0, worst_g = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double th = std::tanh(double(x0[i]) * 0.5f / 3.0f);
      worst = std::max(worst, std::fabs(x[i] - 3.0 * th) / (3.0 * std::fabs(th) + 1e-30));
      worst_g = std::max(worst_g, std::fabs(g[i] - (1 - th * th)));
    }
    EXPECT_LT(worst, 4e-7);
    EXPECT_LT(worst_g, 4e-7);
  });
}

namespace {

struct PagedShape {
  int64_t H = 6, Hkv = 2, D = 32, bs = 8;
  std::vector<int64_t> seq_len = {61, 9, 130};
  // rows: (sequence, position)
  std::vector<std::pair<int64_t, int64_t>> rows = {{0, 60}, {0, 0}, {0, 33}, {1, 8},  {2, 129}, {2, 100},
                                                   {2, 17}, {2, 7}, {2, 64}, {0, 15}, {1, 2}};
};

// One query row at position T - 1 over keys [0, T) of a dense [T, Hkv, D] sequence in fp64 (the scaled, capped,
// windowed scores of attention.h): its output [H, D] into o, its lse [H] into lse.
void paged_row_ref(const float* q, const float* k, const float* v, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                   const AttnOpts& opt, double* o, double* lse) {
  const double scale = attn_scale(opt, D);
  const int64_t first = opt.window > 0 ? std::max<int64_t>(0, T - opt.window) : 0;
  for (int64_t h = 0; h < H; ++h) {
    const int64_t kv = h / (H / Hkv);
    std::vector<double> s(T);
    double mx = -1e300;
    for (int64_t j = first; j < T; ++j) {
      double d = 0;
      for (int64_t c = 0; c < D; ++c) d += double(q[h * D + c]) * k[(j * Hkv + kv) * D + c];
      s[j] = d * scale;
      if (opt.softcap > 0.f) s[j] = opt.softcap * std::tanh(s[j] / opt.softcap);
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (int64_t j = first; j < T; ++j) sum += std::exp(s[j] - mx);
    for (int64_t c = 0; c < D; ++c) {
      double acc = 0;
      for (int64_t j = first; j < T; ++j) acc += std::exp(s[j] - mx) / sum * v[(j * Hkv + kv) * D + c];
      o[h * D + c] = acc;
    }
    lse[h] = mx + std::log(sum);
  }
}

// Paged attention over a scattered pool against the fp64 reference on each row's dense sequence: rows of
// several sequences (prefill rows and decode rows), GQA. Blocks wholly before a row's window are -1 in its
// table; the pool sits between NaN guards, so reading one (or a block outside the window) poisons the output.
// Each row alone gives the bits it gets in the batch (a row's result depends on the row only).
void check_paged(const AttnOpts& opt, bool bf16, const PagedShape& shape = {}) {
  SCOPED_TRACE(opts_name(opt) + (bf16 ? " bf16 cache" : " f32 cache") + " H " + std::to_string(shape.H) + " Hkv " +
               std::to_string(shape.Hkv) + " D " + std::to_string(shape.D) + " block " + std::to_string(shape.bs));
  const int64_t H = shape.H, Hkv = shape.Hkv, D = shape.D, bs = shape.bs, row = Hkv * D;
  const std::vector<int64_t>& seq_len = shape.seq_len;
  const int64_t nseq = static_cast<int64_t>(seq_len.size());
  const int64_t max_blocks = *std::max_element(seq_len.begin(), seq_len.end()) / bs + 1, nblocks = nseq * max_blocks,
                guard = bs * row;
  std::vector<int32_t> scattered(static_cast<size_t>(nblocks));  // the pool's blocks in a fixed random order
  std::iota(scattered.begin(), scattered.end(), 0);
  std::shuffle(scattered.begin(), scattered.end(), std::mt19937(7));
  std::vector<float> dense_k, dense_v;  // per sequence [len, Hkv, D], bf16-rounded for a bf16 cache
  std::vector<float> kpool(nblocks * bs * row + 2 * guard, NAN), vpool(kpool.size(), NAN);
  std::vector<std::vector<int32_t>> tables(nseq);
  std::vector<int64_t> seq_at(nseq);
  for (int64_t sq = 0, at = 0; sq < nseq; ++sq) {
    auto k = random_vec(seq_len[sq] * row, 90 + sq), v = random_vec(seq_len[sq] * row, 95 + sq);
    if (bf16)
      for (auto* x : {&k, &v})
        for (float& f : *x) f = bf16_to_f32(f32_to_bf16(f));
    seq_at[sq] = at;
    at += seq_len[sq] * row;
    dense_k.insert(dense_k.end(), k.begin(), k.end());
    dense_v.insert(dense_v.end(), v.begin(), v.end());
    for (int64_t b = 0; b < max_blocks; ++b) tables[sq].push_back(scattered[static_cast<size_t>(sq * max_blocks + b)]);
    for (int64_t p = 0; p < seq_len[sq]; ++p)
      for (int64_t c = 0; c < row; ++c) {
        const int64_t dst = guard + (tables[sq][p / bs] * bs + p % bs) * row + c;
        kpool[dst] = k[p * row + c], vpool[dst] = v[p * row + c];
      }
  }
  // each row gets its own table copy with -1 before its window
  const auto& rows = shape.rows;
  const int64_t n = static_cast<int64_t>(rows.size());
  auto q = random_vec(n * H * D, 99, 3.f);
  std::vector<std::vector<int32_t>> row_tables(n);
  std::vector<const int32_t*> table_ptrs(n);
  std::vector<int64_t> kv_len(n);
  std::vector<double> o_ref(n * H * D), lse_want(n * H);
  for (int64_t i = 0; i < n; ++i) {
    const auto [sq, pos] = rows[i];
    kv_len[i] = pos + 1;
    row_tables[i] = tables[sq];
    const int64_t first = opt.window > 0 ? std::max<int64_t>(0, pos + 1 - opt.window) : 0;
    for (int64_t b = 0; b < first / bs; ++b) row_tables[i][b] = -1;
    table_ptrs[i] = row_tables[i].data();
    paged_row_ref(q.data() + i * H * D, dense_k.data() + seq_at[sq], dense_v.data() + seq_at[sq], pos + 1, H, Hkv, D,
                  opt, o_ref.data() + i * H * D, lse_want.data() + i * H);
  }
  std::vector<uint16_t> kp16(kpool.size()), vp16(vpool.size());
  for (size_t i = 0; i < kpool.size(); ++i) kp16[i] = f32_to_bf16(kpool[i]), vp16[i] = f32_to_bf16(vpool[i]);
  auto attend = [&](int64_t i0, int64_t rows_n, float* o, float* lse) {
    PagedAttnArgs a;
    a.n = rows_n, a.H = H, a.Hkv = Hkv, a.D = D;
    a.q = q.data() + i0 * H * D, a.q_stride = H * D, a.o = o, a.o_stride = H * D;
    a.block_tables = table_ptrs.data() + i0, a.kv_len = kv_len.data() + i0, a.block_size = bs, a.lse = lse;
    if (bf16)
      a.k_pool16 = kp16.data() + guard, a.v_pool16 = vp16.data() + guard;
    else
      a.k_pool = kpool.data() + guard, a.v_pool = vpool.data() + guard;
    a.opt = opt;
    paged_attention_fwd(a);
  };
  const int64_t longest = *std::max_element(kv_len.begin(), kv_len.end());
  for_each_isa([&](Isa) {
    std::vector<float> o(n * H * D, 5.f), lse(n * H, 5.f);
    attend(0, n, o.data(), lse.data());
    EXPECT_TRUE(all_close(o, o_ref, tolerance(Kind::reduction, longest)));
    EXPECT_TRUE(all_close(lse, lse_want, tolerance(Kind::reduction, D)));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> o1(H * D, 6.f), lse1(H, 6.f);
      attend(i, 1, o1.data(), lse1.data());
      EXPECT_TRUE(std::equal(o1.begin(), o1.end(), o.begin() + i * H * D)) << "row " << i << " alone";
      EXPECT_TRUE(std::equal(lse1.begin(), lse1.end(), lse.begin() + i * H)) << "row " << i << " alone";
    }
  });
}

}  // namespace

TEST(OpAttention, PagedWithOptionsMatchesTheReferenceEveryIsa) {
  for (bool bf16 : {false, true})
    for (AttnOpts o : {opts(0, 0, 0), opts(0, 0, 20), opts(0, 0, 8), opts(0, 0, 1), opts(0, 0, 9), opts(0, 0, 500),
                       opts(0.1f, 0, 0), opts(0, 2.5f, 0), opts(0.12f, 2.0f, 13)})
      check_paged(o, bf16);
}

// The AVX-512 kernel's head dims (16 to 128 in registers, 256 in a loop; 40: the one-head code) and query heads per
// KV head (whole tiles of 4 or 2 and their remainders), on blocks of 16 (a full zmm of keys), 8 and 24; 128 query
// heads on blocks of 256 take one head per kernel call (their scores outgrow the scratch).
TEST(OpAttention, PagedHeadDimsAndGroupsMatchTheReferenceEveryIsa) {
  for (PagedShape s :
       {PagedShape{4, 4, 16, 16}, PagedShape{8, 2, 64, 16}, PagedShape{12, 2, 128, 16}, PagedShape{5, 1, 80, 8},
        PagedShape{14, 2, 48, 16}, PagedShape{4, 2, 256, 8}, PagedShape{4, 2, 40, 24}, PagedShape{128, 1, 16, 256}})
    for (bool bf16 : {false, true})
      for (AttnOpts o : {opts(0, 0, 0), opts(0, 2.5f, 21)}) check_paged(o, bf16, s);
}

// Rows past 512 positions are cut at multiples of 512 into tasks and merged (kernels/paged_attention.cpp): rows
// just below, at and past the cuts, windows starting inside a later piece or covering one cut, beside short rows
// (which a batch without a long row runs uncut: each row alone gives the batch's bits).
TEST(OpAttention, LongRowsCutIntoPiecesMatchTheReferenceEveryIsa) {
  PagedShape s;
  s.H = 4, s.Hkv = 2, s.D = 32, s.bs = 16;
  s.seq_len = {1300, 40};
  s.rows = {{0, 1299}, {1, 39}, {0, 511}, {0, 512}, {0, 1023}, {0, 1024}, {0, 700}, {1, 0}};
  for (bool bf16 : {false, true})
    for (AttnOpts o : {opts(0, 0, 0), opts(0, 0, 600), opts(0, 0, 100), opts(0.1f, 2.0f, 0)}) check_paged(o, bf16, s);
  for (int64_t bs : {8, 48}) {  // 48: the cuts at multiples of 528
    s.bs = bs;
    check_paged(opts(0, 0, 0), false, s);
    check_paged(opts(0, 0, 100), true, s);
  }
}

// bf16 training (the model's Precision::bf16): the backward's gradient products on bf16 operands with f32 sums.
// Shapes: query blocks cut by T, odd head dims (pairs padded), GQA; windows whose first key sits at an odd
// position (dS's pairs shifted against K's) and soft-capping.
TEST(OpAttention, Bf16BackwardMatchesTheReferenceEveryIsa) {
  for (Case c : {Case{2, 13, 4, 2, 16}, Case{1, 150, 3, 1, 24}, Case{2, 70, 4, 4, 8}, Case{1, 129, 2, 1, 16},
                 Case{1, 37, 2, 1, 7}, Case{2, 17, 2, 1, 128}})
    check_training(c, {}, 1.0f, Precision::bf16);
  for (AttnOpts o : {opts(0, 0, 5), opts(0, 0, 65), opts(0.15f, 3.0f, 33)})
    check_training(Case{1, 150, 3, 1, 24}, o, 3.0f, Precision::bf16);
}

TEST(OpAttention, Bf16SharedPrefixSegmentsEqualTheirUnpackedSequencesEveryIsa) {
  for (AttnOpts o : {AttnOpts{}, opts(0, 0, 5), opts(0.2f, 2.0f, 6)}) {
    SCOPED_TRACE(opts_name(o));
    check_packed(o, Precision::bf16);
  }
}

// The tile products themselves (cpu/attention_tiles.inc, attention_dpbf16.cpp) on shapes that cut the 6 x 64
// register tiles, every triangle mode: f32 against fp64; bf16 (pairs) against fp64 on the rounded values and, bit
// for bit, the same on every ISA (the portable loops sum as VDPBF16PS does).
TEST(OpAttention, TileProductsMatchTheReferenceEveryIsa) {
  struct Mm {
    int64_t M, N, K;
    int tri;
    int64_t c;
  };
  std::vector<float> first_bf16;
  for (Mm m : {Mm{13, 70, 9, kAttnTriNone, 0}, Mm{64, 131, 64, kAttnTriCols, 5}, Mm{7, 16, 33, kAttnTriKEnd, 3},
               Mm{20, 64, 20, kAttnTriKStart, -2}, Mm{1, 1, 1, kAttnTriNone, 0}, Mm{66, 80, 65, kAttnTriKEnd, 0}}) {
    SCOPED_TRACE("M=" + std::to_string(m.M) + " N=" + std::to_string(m.N) + " K=" + std::to_string(m.K) +
                 " tri=" + std::to_string(m.tri));
    const int64_t Kp = (m.K + 1) / 2;
    auto A = random_vec(m.M * 2 * Kp, 81), B = random_vec(2 * Kp * m.N, 82);
    for (int64_t i = 0; i < m.M; ++i)  // zero what the triangle skips (attention's P and dS are zero there)
      for (int64_t k = 0; k < 2 * Kp; ++k)
        if (k >= m.K || (m.tri == kAttnTriKEnd && k > i + m.c) || (m.tri == kAttnTriKStart && k < i - m.c))
          A[i * 2 * Kp + k] = 0.f;
    std::vector<uint32_t> A16(m.M * Kp), B16(Kp * m.N);
    for (int64_t i = 0; i < m.M; ++i)
      for (int64_t p = 0; p < Kp; ++p)
        A16[i * Kp + p] = f32_to_bf16(A[i * 2 * Kp + 2 * p]) | uint32_t(f32_to_bf16(A[i * 2 * Kp + 2 * p + 1])) << 16;
    for (int64_t p = 0; p < Kp; ++p)
      for (int64_t n = 0; n < m.N; ++n)
        B16[p * m.N + n] = f32_to_bf16(B[2 * p * m.N + n]) | uint32_t(f32_to_bf16(B[(2 * p + 1) * m.N + n])) << 16;
    std::vector<double> ref32(m.M * m.N, 0.0), ref16(m.M * m.N, 0.0);
    for (int64_t i = 0; i < m.M; ++i)
      for (int64_t n = 0; n < m.N; ++n)
        for (int64_t k = 0; k < m.K; ++k) {
          ref32[i * m.N + n] += double(A[i * 2 * Kp + k]) * B[k * m.N + n];
          ref16[i * m.N + n] +=
              double(bf16_to_f32(f32_to_bf16(A[i * 2 * Kp + k]))) * bf16_to_f32(f32_to_bf16(B[k * m.N + n]));
        }
    // Cols: columns n <= i + c are the row's; the others may be written (by the row's tile) or not.
    auto kept = [&](int64_t i, int64_t n) { return m.tri == kAttnTriCols && n > i + m.c; };
    first_bf16.clear();
    for_each_isa([&](Isa isa) {
      const IsaTable& t = isa_table(isa);
      for (bool acc : {false, true}) {
        std::vector<float> C(m.M * m.N, 0.5f), C16(m.M * m.N, 0.5f);
        t.attn_mm_f32(A.data(), 2 * Kp, 1, B.data(), m.N, C.data(), m.N, m.M, m.N, m.K, acc, m.tri, m.c);
        t.attn_mm_bf16(A16.data(), Kp, 1, B16.data(), m.N, C16.data(), m.N, m.M, m.N, Kp, acc, m.tri, m.c);
        std::vector<double> w32, w16;
        std::vector<float> g32, g16;
        for (int64_t i = 0; i < m.M; ++i)
          for (int64_t n = 0; n < m.N; ++n) {
            if (kept(i, n)) continue;
            w32.push_back(ref32[i * m.N + n] + (acc ? 0.5 : 0.0)), g32.push_back(C[i * m.N + n]);
            w16.push_back(ref16[i * m.N + n] + (acc ? 0.5 : 0.0)), g16.push_back(C16[i * m.N + n]);
          }
        EXPECT_TRUE(all_close(g32, w32, tolerance(Kind::reduction, m.K))) << "f32 accumulate " << acc;
        EXPECT_TRUE(all_close(g16, w16, tolerance(Kind::reduction, m.K))) << "bf16 accumulate " << acc;
        if (acc && first_bf16.empty()) {
          first_bf16 = g16;
        } else if (acc) {
          EXPECT_EQ(g16, first_bf16) << "bf16 pairs give other bits on " << isa_name(isa);
        }
      }
    });
  }
}

// The bf16 operands' rounding (IsaTable::attn_bf16_pairs, attn_bf16_row): core/dtype.h's f32_to_bf16 bit for bit on
// every ISA (VCVTNE2PS2BF16 where the CPU has AVX512-BF16): ties, NaN, infinities, lengths that cut the vectors, both
// offsets. (Denormal inputs are left out: VCVTNE2PS2BF16 flushes them, as VDPBF16PS reads them.)
TEST(OpAttention, Bf16OperandRoundingIsF32ToBf16EveryIsa) {
  auto x = random_vec(77, 83), y = random_vec(77, 84);
  x[3] = __builtin_bit_cast(float, 0x3f808000u);  // a tie, rounds to even (down)
  x[4] = __builtin_bit_cast(float, 0x3f818000u);  // a tie, rounds to even (up)
  x[5] = std::nanf(""), x[6] = INFINITY, x[7] = -INFINITY, x[8] = -0.0f, y[9] = std::nanf(""), y[10] = 3.4e38f;
  auto bits = [](float f) { return uint32_t(f32_to_bf16(f)); };
  for_each_isa([&](Isa isa) {
    const IsaTable& t = isa_table(isa);
    for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{33}, int64_t{77}}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      std::vector<uint32_t> got(n + 1, 0xdeadbeefu), want(n + 1, 0xdeadbeefu);
      for (int64_t i = 0; i < n; ++i) want[i] = bits(x[i]) | bits(y[i]) << 16;
      t.attn_bf16_pairs(x.data(), y.data(), got.data(), n);
      EXPECT_EQ(got, want) << "pairs of two rows";
      for (int64_t i = 0; i < n; ++i) want[i] = bits(x[i]);
      t.attn_bf16_pairs(x.data(), nullptr, got.data(), n);
      EXPECT_EQ(got, want) << "pairs with a zero second row";
      for (int64_t off : {0, 1}) {
        const int64_t np = (n + off + 1) / 2;
        std::vector<uint32_t> row(np + 1, 0xdeadbeefu), row_want(np + 1, 0xdeadbeefu);
        for (int64_t p = 0; p < np; ++p) {
          const int64_t i = 2 * p - off;
          row_want[p] = (i >= 0 ? bits(x[i]) : 0u) | (i + 1 < n ? bits(x[i + 1]) : 0u) << 16;
        }
        t.attn_bf16_row(x.data(), n, off, row.data());
        EXPECT_EQ(row, row_want) << "a row's pairs, off " << off;
      }
    }
  });
}

// The bf16 backward's dS step (IsaTable::attn_dscores_bf16) on every ISA against fp64: P given, or from scores and
// the row's lse (P = exp(s * es - L)); d = sum of P dP over the visible columns, dS = P (dP - d) scale (* G) there
// and +0 elsewhere, in its three layouts (rows with off 0 and 1, pairs of the two rows; one row alone), and P's pairs
// (exactly f32_to_bf16's where P is given).
TEST(OpAttention, Bf16DscoresMatchTheReferenceEveryIsa) {
  const int64_t W = 45, ld = 48;
  auto P = random_vec(2 * ld, 85), dP = random_vec(2 * ld, 86), G = random_vec(2 * ld, 87), S = random_vec(2 * ld, 88);
  for (float& x : P) x = std::fabs(x) / 8.f;
  for (float& x : S) x *= 8.f;  // scores; es = 1/8 below
  const float L[2] = {1.5f, -0.25f}, es = 0.125f;
  const int64_t lo[2] = {3, 0}, hi[2] = {29, 45};
  for (int64_t i = 0; i < 2; ++i)  // P is zero outside a row's visible columns (scores and dP anything)
    for (int64_t j = 0; j < ld; ++j)
      if (j < lo[i] || j >= hi[i]) P[i * ld + j] = 0.f, dP[i * ld + j] = 1e30f, S[i * ld + j] = 1e30f;
  const float scale = 0.125f;
  auto bits = [](float f) { return uint32_t(f32_to_bf16(f)); };
  for (bool from_scores : {false, true})
    for (bool capped : {false, true})
      for (int64_t rows : {int64_t{2}, int64_t{1}})
        for (int64_t off : {int64_t{0}, int64_t{1}}) {
          SCOPED_TRACE("from scores " + std::to_string(from_scores) + " capped " + std::to_string(capped) + " rows " +
                       std::to_string(rows) + " off " + std::to_string(off));
          std::vector<double> want(2 * W, 0.0), pw(2 * W, 0.0);  // fp64 dS and P [2, W]
          for (int64_t i = 0; i < rows; ++i) {
            double d = 0;
            for (int64_t j = lo[i]; j < hi[i]; ++j) {
              pw[i * W + j] = from_scores ? std::exp(double(S[i * ld + j]) * es - L[i]) : P[i * ld + j];
              d += pw[i * W + j] * dP[i * ld + j];
            }
            for (int64_t j = lo[i]; j < hi[i]; ++j)
              want[i * W + j] = pw[i * W + j] * (dP[i * ld + j] - d) * scale * (capped ? G[i * ld + j] : 1.0);
          }
          const int64_t Wp = (W + off + 1) / 2;
          for_each_isa([&](Isa isa) {
            const IsaTable& t = isa_table(isa);
            std::vector<uint32_t> rows16(2 * Wp, 0xdeadbeefu), dsp(W + 1, 0xdeadbeefu), pp(W + 1, 0xdeadbeefu);
            std::vector<float> in = from_scores ? S : P;
            t.attn_dscores_bf16(in.data(), from_scores ? L : nullptr, es, dP.data(), capped ? G.data() : nullptr, ld,
                                rows, lo, hi, scale, W, off, rows16.data(), Wp, dsp.data(), pp.data());
            std::vector<float> got, got_p;
            std::vector<double> ref, ref_p;
            for (int64_t i = 0; i < 2; ++i)
              for (int64_t j = 0; j < W; ++j) {
                const uint32_t w = dsp[j], p16 = pp[j] >> (16 * i) & 0xffffu;
                got.push_back(bf16_to_f32(static_cast<uint16_t>(i == 0 ? w : w >> 16)));
                ref.push_back(want[i * W + j]);
                got_p.push_back(bf16_to_f32(static_cast<uint16_t>(p16)));
                ref_p.push_back(pw[i * W + j]);
                if (want[i * W + j] == 0.0) {
                  EXPECT_EQ(i == 0 ? w & 0xffffu : w >> 16, 0u) << "+0 at " << i << "," << j;
                }
                if (!from_scores) {
                  EXPECT_EQ(p16, i < rows ? bits(P[i * ld + j]) : 0u) << "P at " << i << "," << j;
                }
              }
            EXPECT_EQ(dsp[W], 0xdeadbeefu);
            EXPECT_EQ(pp[W], 0xdeadbeefu);
            EXPECT_TRUE(all_close(got, ref, tolerance(Kind::bf16, 4), 1e-6));
            EXPECT_TRUE(all_close(got_p, ref_p, tolerance(Kind::bf16, 4), 1e-30));
            for (int64_t i = 0; i < rows; ++i) {  // the rows' stream: off zeros, then the row's dS, then a zero
              const uint16_t* h = reinterpret_cast<const uint16_t*>(rows16.data() + i * Wp);
              for (int64_t k = 0; k < 2 * Wp; ++k) {
                const int64_t j = k - off;
                const uint32_t pair = dsp[j < 0 || j >= W ? 0 : j];
                EXPECT_EQ(h[k], j < 0 || j >= W ? 0u : (i == 0 ? pair & 0xffffu : pair >> 16)) << i << "," << k;
              }
            }
            if (rows == 1) {
              EXPECT_EQ(rows16[Wp], 0xdeadbeefu) << "a lone row writes one row";
            }
          });
        }
}

// The forward's softmax numerators (IsaTable::attn_exp_row) on every ISA against fp64: exp(x * scale - max * scale)
// over the row's n scores (whole vectors, a masked tail, a lone score), their sum and the shift; the columns past n
// untouched.
TEST(OpAttention, ExpRowMatchesTheReferenceEveryIsa) {
  const int64_t ld = 80;
  auto S = random_vec(ld, 89);
  for (float& x : S) x *= 8.f;
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{45}, int64_t{64}, int64_t{79}})
    for (float sc : {0.125f, 1.0f}) {
      SCOPED_TRACE("n " + std::to_string(n) + " scale " + std::to_string(sc));
      double m = S[0];
      for (int64_t j = 1; j < n; ++j) m = std::max(m, double(S[j]));
      std::vector<double> want(static_cast<size_t>(n));
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += want[j] = std::exp((double(S[j]) - m) * sc);
      for_each_isa([&](Isa isa) {
        std::vector<float> x = S;
        float shift = -1.f;
        const float got_sum = isa_table(isa).attn_exp_row(x.data(), n, sc, &shift);
        EXPECT_TRUE(all_close(x.data(), want.data(), n, tolerance(Kind::elementwise, 1, 4.0)));
        EXPECT_NEAR(got_sum, sum, 4e-6 * sum);
        EXPECT_FLOAT_EQ(shift, static_cast<float>(m * sc));
        for (int64_t j = n; j < ld; ++j) EXPECT_EQ(x[j], S[j]) << "column " << j << " past n";
      });
    }
}

// `temper info` and every bench JSON name the attention's kernels (kernels::attention_kernel_name): the names are
// those of the table's entries (register tiles on AVX-512, VDPBF16PS where the CPU has AVX512-BF16).
TEST(OpAttention, KernelNameIsTheIsaTablesChoice) {
  for_each_isa([&](Isa isa) {
    const IsaTable& t = isa_table(isa);
    const bool dpbf16 = t.attn_mm_bf16 == attn_mm_dpbf16;
    EXPECT_EQ(dpbf16, isa == Isa::avx512 && cpu_features().avx512_bf16);
    const std::string tiles = (isa == Isa::avx512 ? "tiles " : "loops ") + std::string(isa_name(isa));
    const std::string want = tiles + ", backward bf16 products: " + (dpbf16 ? "vdpbf16ps" : tiles);
    EXPECT_EQ(attention_kernel_name(isa), want);
    EXPECT_EQ(attention_kernel_name(), want);  // the active ISA's (for_each_isa sets it)
  });
}

// The tasks own disjoint outputs and sum in a fixed order: 1 and 2 threads give the same bits, f32 and bf16.
TEST(OpAttention, SameBitsForOneAndTwoThreads) {
  const Case c{2, 150, 4, 2, 24};
  const int64_t nq = c.B * c.T * c.H * c.D, nkv = c.B * c.T * c.Hkv * c.D;
  auto q = random_vec(nq, 91), k = random_vec(nkv, 92), v = random_vec(nkv, 93), dout = random_vec(nq, 94);
  const int threads = num_threads();
  for (Precision p : {Precision::f32, Precision::bf16}) {
    AttnShape s{c.B, c.T, c.H, c.Hkv, c.D, c.H * c.D, c.Hkv * c.D, c.H * c.D};
    s.precision = p;
    std::vector<std::vector<float>> runs;
    for (int n : {1, 2}) {
      set_num_threads(n);
      std::vector<float> o(nq), lse(c.B * c.H * c.T), dq(nq), dk(nkv), dv(nkv);
      attention_fwd(s, q.data(), k.data(), v.data(), o.data(), lse.data());
      attention_bwd(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                    dv.data());
      std::vector<float> all = o;
      for (const auto* x : {&lse, &dq, &dk, &dv}) all.insert(all.end(), x->begin(), x->end());
      runs.push_back(all);
    }
    EXPECT_EQ(runs[0], runs[1]) << precision_name(p);
  }
  set_num_threads(threads);
}

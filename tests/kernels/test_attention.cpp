// Harness entry for causal GQA attention: fast (tiled, every ISA) vs the full-matrix fp64 reference,
// finite differences on the reference, fast backward vs reference backward.
#include <algorithm>

#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/cpu/isa_table.h"
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
          t.attn_block_update(q.data(), K.data() + b0 * stride, V.data() + b0 * stride, stride, std::min(bs, len - b0), D,
                              scale, scores.data(), &m, &l, acc.data());
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

TEST(OpAttention, SharedPrefixSegmentsEqualTheirUnpackedSequencesEveryIsa) {
  // Packed rows: two prompts (5 and 66 tokens), their completions placed anywhere, and a row with no
  // shared prompt. Each completion with its prompt is one causal sequence of the fp64 reference; a
  // prompt's outputs are the same in every such sequence, and its gradients are the sum over its
  // readers (the prompt's own output gradient counted once).
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
    ref::attention_fwd(sq.data(), sk.data(), sv.data(), so.data(), 1, T, H, Hkv, D);
    ref::attention_bwd(sq.data(), sk.data(), sv.data(), sdo.data(), sdq.data(), sdk.data(), sdv.data(), 1, T, H, Hkv,
                       D);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < Hq; ++c)
        o_ref[at[t] * Hq + c] = so[t * Hq + c], dq_ref[at[t] * Hq + c] += sdq[t * Hq + c];
      for (int64_t c = 0; c < Hk; ++c)
        dk_ref[at[t] * Hk + c] += sdk[t * Hk + c], dv_ref[at[t] * Hk + c] += sdv[t * Hk + c];
    }
  }
  // the one segment alone is its own sequence (done above); every prompt has readers
  PackedAttnShape s{N, H, Hkv, D, Hq, Hk, Hq, segs.data(), static_cast<int64_t>(segs.size())};
  for_each_isa([&](Isa) {
    std::vector<float> o(N * Hq, 5.f), lse(N * H), dq(N * Hq, 7.f), dk(N * Hk, 9.f),
        dv(N * Hk, 9.f);  // all overwritten
    attention_fwd_packed(s, q.data(), k.data(), v.data(), o.data(), lse.data());
    EXPECT_TRUE(all_close(o, o_ref, tolerance(Kind::reduction, 136)));
    attention_bwd_packed(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                         dv.data());
    EXPECT_TRUE(all_close(dq, dq_ref, tolerance(Kind::reduction, 136 * D), 1e-6));
    EXPECT_TRUE(all_close(dk, dk_ref, tolerance(Kind::reduction, 136 * D), 1e-6));
    EXPECT_TRUE(all_close(dv, dv_ref, tolerance(Kind::reduction, 136 * D), 1e-6));
  });
  // A prefix must be a segment of its own.
  segs[1].prefix_len = 4;
  std::vector<float> o(N * Hq), lse(N * H);
  EXPECT_THROW(attention_fwd_packed(s, q.data(), k.data(), v.data(), o.data(), lse.data()), Error);
}

// Harness entry for causal GQA attention: fast (tiled, every ISA) vs the full-matrix fp64 reference,
// finite differences on the reference, fast backward vs reference backward.
#include "common/op_harness.h"
#include "common/tolerance.h"
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

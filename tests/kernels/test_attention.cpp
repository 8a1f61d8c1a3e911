// Harness entry for causal GQA attention: fast (tiled, every ISA) vs the full-matrix fp64 reference,
// finite differences on the reference, fast backward vs reference backward.
#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/ref/attention_ref.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

namespace {
struct Case { int64_t B, T, H, Hkv, D; };
}

TEST(OpAttention, ForwardBackwardEveryIsa) {
  for (Case c : {Case{1, 1, 1, 1, 4}, Case{2, 13, 4, 2, 16}, Case{1, 150, 3, 1, 24}, Case{2, 70, 4, 4, 8}}) {
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

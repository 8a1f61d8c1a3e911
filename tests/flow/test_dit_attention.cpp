// Bidirectional attention (kernels::attention_fwd/bwd with AttnShape::causal false, what the DiT's blocks
// use) against a double reference: the full softmax over all T keys and the textbook backward. Token
// counts that are not multiples of the 64-query block, and grouped KV heads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/kernels/attention.h"

using namespace temper;

namespace {

struct Ref {
  std::vector<double> o, lse, dq, dk, dv;
};

// Dense rows: q/o [B*T, H*D], k/v [B*T, Hkv*D].
Ref reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
              const std::vector<float>& dout, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  Ref r;
  const int64_t Q = H * D, K = Hkv * D;
  r.o.assign(B * T * Q, 0), r.dq.assign(B * T * Q, 0), r.dk.assign(B * T * K, 0), r.dv.assign(B * T * K, 0);
  r.lse.assign(B * H * T, 0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / Hkv);
      auto qi = [&](int64_t i, int64_t d) { return static_cast<double>(q[(b * T + i) * Q + h * D + d]); };
      auto kj = [&](int64_t j, int64_t d) { return static_cast<double>(k[(b * T + j) * K + kh * D + d]); };
      auto vj = [&](int64_t j, int64_t d) { return static_cast<double>(v[(b * T + j) * K + kh * D + d]); };
      auto gi = [&](int64_t i, int64_t d) { return static_cast<double>(dout[(b * T + i) * Q + h * D + d]); };
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(T), p(T), dp(T);
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          double x = 0;
          for (int64_t d = 0; d < D; ++d) x += qi(i, d) * kj(j, d);
          s[j] = x * scale;
          m = std::max(m, s[j]);
        }
        for (int64_t j = 0; j < T; ++j) sum += (p[j] = std::exp(s[j] - m));
        for (int64_t j = 0; j < T; ++j) p[j] /= sum;
        r.lse[(b * H + h) * T + i] = m + std::log(sum);
        double dot = 0;
        for (int64_t j = 0; j < T; ++j) {
          double x = 0;
          for (int64_t d = 0; d < D; ++d) {
            r.o[(b * T + i) * Q + h * D + d] += p[j] * vj(j, d);
            x += gi(i, d) * vj(j, d);
          }
          dp[j] = x;
          dot += p[j] * x;
        }
        for (int64_t j = 0; j < T; ++j) {
          const double ds = p[j] * (dp[j] - dot) * scale;
          for (int64_t d = 0; d < D; ++d) {
            r.dq[(b * T + i) * Q + h * D + d] += ds * kj(j, d);
            r.dk[(b * T + j) * K + kh * D + d] += ds * qi(i, d);
            r.dv[(b * T + j) * K + kh * D + d] += p[j] * gi(i, d);
          }
        }
      }
    }
  return r;
}

std::vector<float> randn(int64_t n, uint64_t stream) {
  std::vector<float> v(static_cast<size_t>(n));
  rng_fill_normal(7, stream, v);
  return v;
}

void check(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  SCOPED_TRACE(::testing::Message() << "B " << B << " T " << T << " H " << H << " Hkv " << Hkv << " D " << D);
  const int64_t Q = H * D, K = Hkv * D;
  auto q = randn(B * T * Q, 1), k = randn(B * T * K, 2), v = randn(B * T * K, 3), dout = randn(B * T * Q, 4);
  kernels::AttnShape s{B, T, H, Hkv, D, Q, K, Q, {}};
  s.causal = false;
  std::vector<float> o(B * T * Q), lse(B * H * T), dq(B * T * Q), dk(B * T * K), dv(B * T * K);
  kernels::attention_fwd(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  kernels::attention_bwd(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                         dv.data());
  const Ref r = reference(q, k, v, dout, B, T, H, Hkv, D);
  const double tol = test::tolerance(test::Kind::reduction, std::max(T, D));
  EXPECT_TRUE(test::all_close(o, r.o, tol)) << "o";
  EXPECT_TRUE(test::all_close(lse, r.lse, tol)) << "lse";
  EXPECT_TRUE(test::all_close(dq, r.dq, tol)) << "dq";
  EXPECT_TRUE(test::all_close(dk, r.dk, tol)) << "dk";
  EXPECT_TRUE(test::all_close(dv, r.dv, tol)) << "dv";
  // The last query sees the first key (no causal mask): its output differs from the causal kernel's at row 0.
  kernels::AttnShape c = s;
  c.causal = true;
  std::vector<float> oc(o.size()), lc(lse.size());
  kernels::attention_fwd(c, q.data(), k.data(), v.data(), oc.data(), lc.data());
  EXPECT_NE(oc[0], o[0]);
}

}  // namespace

TEST(DitAttention, BidirectionalMatchesReference) {
  check(2, 16, 4, 4, 16);
  check(1, 37, 2, 1, 8);    // not a multiple of anything; grouped KV heads
  check(2, 100, 2, 2, 12);  // more than one 64-query block
}

TEST(DitAttention, WindowWithoutMaskRefused) {
  kernels::AttnShape s{1, 4, 1, 1, 4, 4, 4, 4, {}};
  s.causal = false;
  s.opt.window = 2;
  std::vector<float> x(16), lse(4);
  EXPECT_THROW(kernels::attention_fwd(s, x.data(), x.data(), x.data(), x.data(), lse.data()), Error);
}

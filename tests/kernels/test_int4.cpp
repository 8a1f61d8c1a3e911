// The drafter's 4-bit weights: the group each row shape takes, round-to-nearest error within half a
// step (one step where the zero point's rounding shifts the grid), grid values exactly, and the
// int4 x int8 product within the bound its activation rounding allows, on every ISA.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_harness.h"
#include "temper/core/error.h"
#include "temper/kernels/int4_matmul.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

TEST(Int4, GroupSizeFitsThePaddedRow) {
  EXPECT_EQ(int4_group_for(1536, 128), 128);  // SmolLM2's intermediate size
  EXPECT_EQ(int4_group_for(576, 128), 64);    // SmolLM2's hidden size: 4.5 groups of 128
  EXPECT_EQ(int4_group_for(88, 128), 32);     // the tiny test model's intermediate size, padded to 96
  EXPECT_EQ(int4_group_for(256, 64), 64);
  EXPECT_THROW(int4_group_for(256, 48), Error);
}

TEST(Int4, RoundToNearestErrorAndExactGridValues) {
  const int64_t N = 7, K = 200;  // padded to 224, group 32
  auto w = random_vec(N * K, 5, 0.5f);
  w[3] = 0.f;
  Int4Weights q;
  quantize_int4(w.data(), N, K, K, 128, &q);
  ASSERT_EQ(q.Kp, 224);
  ASSERT_EQ(q.group, 32);
  std::vector<float> d(static_cast<size_t>(N * K));
  dequantize_int4(q, d.data());
  const int64_t G = q.Kp / q.group;
  double worst = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const float s = q.scale[static_cast<size_t>(n * G + k / q.group)];
      const double e = std::fabs(w[n * K + k] - d[n * K + k]);
      ASSERT_LE(e, s * 1.0001) << "n=" << n << " k=" << k;  // half a step, plus half from the zero point's rounding
      worst = std::max(worst, e / s);
    }
  EXPECT_GT(worst, 0.3);            // the bound is not vacuous
  EXPECT_EQ(d[3], 0.f);             // zero stays exact
  // Values on the grid come back exactly: quantizing the dequantized matrix is a fixed point.
  Int4Weights q2;
  quantize_int4(d.data(), N, K, K, 128, &q2);
  std::vector<float> d2(d.size());
  dequantize_int4(q2, d2.data());
  for (size_t i = 0; i < d.size(); ++i) ASSERT_NEAR(d2[i], d[i], 1e-6f * (1 + std::fabs(d[i]))) << i;
  // Half a byte per (padded) weight, 5 bytes (scale, zero) per group.
  EXPECT_EQ(q.bytes(), static_cast<size_t>(N * (q.Kp / 2 + 5 * G)));
}

TEST(Int4, ProductWithinTheActivationRoundingBoundOnEveryIsa) {
  const int64_t M = 5, N = 37, K = 576;  // group 64
  auto w = random_vec(N * K, 11, 0.1f), x = random_vec(M * K, 12, 2.0f);
  x[7] = 0.f;
  Int4Weights q;
  quantize_int4(w.data(), N, K, K, 128, &q);
  EXPECT_GT(N * K * 4.0 / static_cast<double>(q.bytes()), 6.9);  // 4.6 bits per weight at group 64
  std::vector<float> wd(static_cast<size_t>(N * K));
  dequantize_int4(q, wd.data());
  // Exact product with the dequantized weights, and the bound from rounding x per weight group
  // (64 inputs here): |a - sa qa| <= max|a| / 254 over the group.
  std::vector<double> exact(static_cast<size_t>(M * N)), bound(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0, b = 0;
      for (int64_t c = 0; c < K / q.group; ++c) {
        double amax = 0;
        for (int64_t j = 0; j < q.group; ++j) amax = std::max(amax, std::fabs(double(x[m * K + c * q.group + j])));
        for (int64_t j = 0; j < q.group; ++j) {
          const int64_t k = c * q.group + j;
          s += double(x[m * K + k]) * wd[n * K + k];
          b += std::fabs(wd[n * K + k]) * amax / 254.0;
        }
      }
      exact[m * N + n] = s;
      bound[m * N + n] = b;
    }
  for_each_isa([&](Isa) {
    std::vector<float> y(static_cast<size_t>(M * N), 3.f);
    int4_gemm(M, x.data(), K, q, false, y.data(), N);
    double used = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_LE(std::fabs(y[i] - exact[i]), bound[i] * 1.001 + 1e-4) << i;
      used = std::max(used, std::fabs(y[i] - exact[i]) / bound[i]);
    }
    EXPECT_GT(used, 0.01);  // activations really are rounded
    // accumulate adds to what is there
    std::vector<float> y2(y.size(), 1.f);
    int4_gemm(M, x.data(), K, q, true, y2.data(), N);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y2[i], y[i] + 1.f, 1e-4f * (1 + std::fabs(y[i])));
  });
  // The cols16 layout (AVX-512 VNNI): the same dequantized weights bit for bit, and products from the same
  // integers: equal to the rows layout's up to float summation order, within the same bound.
  if (!int4_cols16_supported()) GTEST_SKIP() << "no AVX-512 VNNI: the cols16 layout is not built here";
  for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{5}}) {
    Int4Weights c;
    quantize_int4(w.data(), N, K, K, 128, &c, Int4Layout::cols16);
    EXPECT_EQ(c.layout, Int4Layout::cols16);
    EXPECT_EQ(c.q.size(), static_cast<size_t>((N + 15) / 16 * 16 * K / 2));  // 4 bits per weight (+ padded rows)
    std::vector<float> wc(static_cast<size_t>(N * K));
    dequantize_int4(c, wc.data());
    ASSERT_EQ(wc, wd);
    std::vector<float> yr(static_cast<size_t>(rows * N)), yc(static_cast<size_t>(rows * N), 3.f);
    int4_gemm(rows, x.data(), K, q, false, yr.data(), N);
    int4_gemm(rows, x.data(), K, c, false, yc.data(), N);
    for (size_t i = 0; i < yc.size(); ++i) {
      ASSERT_LE(std::fabs(yc[i] - exact[i]), bound[i] * 1.001 + 1e-4) << i;
      ASSERT_NEAR(yc[i], yr[i], 1e-5f * (1 + std::fabs(yr[i]))) << i;
    }
    std::vector<float> y2(yc.size(), 1.f);
    int4_gemm(rows, x.data(), K, c, true, y2.data(), N);
    for (size_t i = 0; i < yc.size(); ++i) ASSERT_NEAR(y2[i], yc[i] + 1.f, 1e-4f * (1 + std::fabs(yc[i])));
  }
}

// The training attention (kernels::attention_fwd + attention_bwd) at one layer of a batch, f32 and bf16 (the
// backward's gradient products in bf16), against the same blocks' products on kernels::gemm() (what attention.cpp
// called before its own tiles: oneDNN sgemm on 64-query blocks) and the gemm() rate of one large product.
// GFLOP/s count the causal products' useful multiply-adds: 2 D (t + 1) per query row t and product, two products
// in the forward, five in the backward (P recomputed, dP, dQ, dK, dV).
// Run: build/bench/attention_train [--threads N] [--reps R] [--B 8 --T 256 --H 9 --Hkv 3 --D 64] [--only PART]
// (the default shape is SmolLM2-135M's layer at batch 8 x 256). --only fwd | f32_bwd | bf16_bwd: that call alone,
// best of R (to time or `perf record` one kernel). Results go to docs/PERFORMANCE.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "best_of.h"
#include "temper/core/cpu_features.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/matmul.h"

using namespace temper;
using temper::bench::best_of;
using namespace temper::kernels;

namespace {

// The products of the forward and backward on gemm() per block of 64 queries, as attention.cpp made them before
// its tiles (the softmax rows left out: this is the products' time alone).
void products_on_gemm(const AttnShape& s, const float* q, const float* k, const float* v, const float* dout, float* o,
                      float* dq, float* dk, float* dv, bool backward) {
  const int64_t nqb = (s.T + 63) / 64, group = s.H / s.Hkv, D = s.D;
  if (!backward) {
    parallel_tasks(s.B * s.H * nqb, [&](int64_t task) {
      const int64_t qb = task % nqb, h = (task / nqb) % s.H, b = task / (nqb * s.H), q0 = 64 * qb;
      const int64_t rows = std::min<int64_t>(64, s.T - q0), w = q0 + rows, kvh = h / group;
      static thread_local std::vector<float> S;
      S.resize(static_cast<size_t>(rows * w));
      const float* Q = q + (b * s.T + q0) * s.q_stride + h * D;
      const float* K = k + b * s.T * s.kv_stride + kvh * D;
      const float* V = v + b * s.T * s.kv_stride + kvh * D;
      gemm(false, true, rows, w, D, Q, s.q_stride, K, s.kv_stride, 0.f, S.data(), w);
      for (float& x : S) x *= 1e-3f;
      gemm(false, false, rows, D, w, S.data(), w, V, s.kv_stride, 0.f, o + (b * s.T + q0) * s.o_stride + h * D,
           s.o_stride);
    });
    return;
  }
  parallel_tasks(s.B * s.Hkv, [&](int64_t task) {
    const int64_t kvh = task % s.Hkv, b = task / s.Hkv;
    static thread_local std::vector<float> P, dP;
    P.resize(static_cast<size_t>(64 * s.T));
    dP.resize(static_cast<size_t>(64 * s.T));
    const float* K = k + b * s.T * s.kv_stride + kvh * D;
    const float* V = v + b * s.T * s.kv_stride + kvh * D;
    float* dK = dk + b * s.T * s.kv_stride + kvh * D;
    float* dV = dv + b * s.T * s.kv_stride + kvh * D;
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
      for (int64_t q0 = 0; q0 < s.T; q0 += 64) {
        const int64_t rows = std::min<int64_t>(64, s.T - q0), w = q0 + rows;
        const float* Q = q + (b * s.T + q0) * s.q_stride + h * D;
        const float* dO = dout + (b * s.T + q0) * s.o_stride + h * D;
        float* dQ = dq + (b * s.T + q0) * s.q_stride + h * D;
        gemm(false, true, rows, w, D, Q, s.q_stride, K, s.kv_stride, 0.f, P.data(), w);
        gemm(false, true, rows, w, D, dO, s.o_stride, V, s.kv_stride, 0.f, dP.data(), w);
        for (int64_t i = 0; i < rows * w; ++i) P[i] *= 1e-3f, dP[i] *= 1e-3f;
        gemm(false, false, rows, D, w, dP.data(), w, K, s.kv_stride, 0.f, dQ, s.q_stride);
        gemm(true, false, w, D, rows, dP.data(), w, Q, s.q_stride, 1.f, dK, s.kv_stride);
        gemm(true, false, w, D, rows, P.data(), w, dO, s.o_stride, 1.f, dV, s.kv_stride);
      }
  });
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  int64_t B = 8, T = 256, H = 9, Hkv = 3, D = 64;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--only") {
      only = argv[i + 1];
      continue;
    }
    const int64_t x = std::stoll(argv[i + 1]);
    if (a == "--threads")
      threads = static_cast<int>(x);
    else if (a == "--reps")
      reps = static_cast<int>(x);
    else if (a == "--B")
      B = x;
    else if (a == "--T")
      T = x;
    else if (a == "--H")
      H = x;
    else if (a == "--Hkv")
      Hkv = x;
    else if (a == "--D")
      D = x;
  }
  set_num_threads(threads);
  const int64_t nq = B * T * H * D, nkv = B * T * Hkv * D;
  std::vector<float> q(nq), k(nkv), v(nkv), dout(nq), o(nq), lse(B * H * T), dq(nq), dk(nkv), dv(nkv);
  rng_fill_normal(1, 0, std::span<float>(q), 0.f, 1.f);
  rng_fill_normal(2, 0, std::span<float>(k), 0.f, 1.f);
  rng_fill_normal(3, 0, std::span<float>(v), 0.f, 1.f);
  rng_fill_normal(4, 0, std::span<float>(dout), 0.f, 1.f);
  AttnShape s{B, T, H, Hkv, D, H * D, Hkv * D, H * D};
  const double per_product = 2.0 * D * B * H * (T * (T + 1) / 2.0);  // causal multiply-adds x 2
  const double fwd_flops = 2 * per_product, bwd_flops = 5 * per_product;
  std::printf(
      "{\"isa\": \"%s\", \"attention\": \"%s\", \"threads\": %d, \"shape\": {\"B\": %ld, \"T\": %ld, \"H\": %ld, "
      "\"Hkv\": %ld, \"D\": %ld},\n",
      std::string(isa_name(cpu_isa())).c_str(), attention_kernel_name().c_str(), threads, static_cast<long>(B),
      static_cast<long>(T), static_cast<long>(H), static_cast<long>(Hkv), static_cast<long>(D));
  if (!only.empty()) {  // one call alone: the forward, or a backward over the forward's lse
    const bool fwd = only == "fwd";
    if (!fwd && only != "f32_bwd" && only != "bf16_bwd") {
      std::fprintf(stderr, "attention_train: --only '%s' (expected fwd, f32_bwd or bf16_bwd)\n", only.c_str());
      return 2;
    }
    s.precision = only == "bf16_bwd" ? Precision::bf16 : Precision::f32;
    attention_fwd(s, q.data(), k.data(), v.data(), o.data(), lse.data());
    const double t = best_of(reps, [&] {
      if (fwd)
        attention_fwd(s, q.data(), k.data(), v.data(), o.data(), lse.data());
      else
        attention_bwd(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                      dv.data());
    });
    std::printf(" \"%s\": {\"s\": %.6f, \"gflops\": %.1f}}\n", only.c_str(), t,
                (fwd ? fwd_flops : bwd_flops) / t * 1e-9);
    return 0;
  }
  for (Precision p : {Precision::f32, Precision::bf16}) {
    s.precision = p;
    const double tf = best_of(reps, [&] { attention_fwd(s, q.data(), k.data(), v.data(), o.data(), lse.data()); });
    const double tb = best_of(reps, [&] {
      attention_bwd(s, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                    dv.data());
    });
    std::printf(" \"%s\": {\"fwd_s\": %.5f, \"bwd_s\": %.5f, \"fwd_gflops\": %.1f, \"bwd_gflops\": %.1f},\n",
                std::string(precision_name(p)).c_str(), tf, tb, fwd_flops / tf * 1e-9, bwd_flops / tb * 1e-9);
  }
  const double gf = best_of(reps, [&] {
    products_on_gemm(s, q.data(), k.data(), v.data(), dout.data(), o.data(), dq.data(), dk.data(), dv.data(), false);
  });
  const double gb = best_of(reps, [&] {
    products_on_gemm(s, q.data(), k.data(), v.data(), dout.data(), o.data(), dq.data(), dk.data(), dv.data(), true);
  });
  std::printf(" \"gemm_blocks_f32\": {\"fwd_s\": %.5f, \"bwd_s\": %.5f, \"fwd_gflops\": %.1f, \"bwd_gflops\": %.1f},\n",
              gf, gb, fwd_flops / gf * 1e-9, bwd_flops / gb * 1e-9);
  // One large product of the same inner dimension (D): the machine's gemm() rate per precision.
  const int64_t M = 2048, N = 2048;
  std::vector<float> a(M * D), bm(N * D), c(M * N);
  rng_fill_normal(5, 0, std::span<float>(a), 0.f, 1.f);
  rng_fill_normal(6, 0, std::span<float>(bm), 0.f, 1.f);
  std::printf(" \"gemm_large\": {\"M\": %ld, \"N\": %ld, \"K\": %ld", static_cast<long>(M), static_cast<long>(N),
              static_cast<long>(D));
  for (Precision p : {Precision::f32, Precision::bf16}) {
    const double t = best_of(reps, [&] { gemm(false, true, M, N, D, a.data(), D, bm.data(), D, 0.f, c.data(), N, p); });
    std::printf(", \"%s_gflops\": %.1f", std::string(precision_name(p)).c_str(), 2.0 * M * N * D / t * 1e-9);
  }
  std::printf("}}\n");
  return 0;
}

// LoRA on a base held as bf16, int4 or nf4 (QLoRA; model/frozen_base.h): the held base computes what an f32 model
// holding its dequantised values computes (int4, nf4: within 1e-4; bf16: the f32 model with bf16-rounded weights), the
// paged rollout's log-probs equal the training forward's (f32: 1e-5), the adapters' gradients equal the dequantised
// model's and finite differences, recomputation changes no bit, the f32 values and gradients of the held products are
// given back (their memory too), and quantising is deterministic. Every family of the golden shape.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "common/models.h"
#include "common/tolerance.h"
#include "model/lora_fixture.h"
#include "temper/app/memory_plan.h"
#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/io/peft_adapter.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/cpu/isa_table.h"
#include "temper/kernels/held_gemv.h"
#include "temper/kernels/int4_matmul.h"
#include "temper/kernels/nf4.h"
#include "temper/kernels/weight_panel.h"
#include "temper/model/frozen_base.h"
#include "temper/model/kv_pool.h"
#include "temper/model/lora.h"
#include "temper/model/optimizer.h"
#include "temper/model/transformer.h"

using namespace temper;
using namespace temper::test;

namespace {

const std::vector<LoraTarget>& kAll = kAllLoraTargets;
const auto& kArchs = kLoraArchs;

LoraConfig lora_config(LoraBase base, int64_t rank = 4, double alpha = 8) {
  LoraConfig c;
  c.rank = rank;
  c.alpha = alpha;
  c.targets = kAll;
  c.base = base;
  return c;
}

// An f32 model holding exactly the values a base held as `format` multiplies by.
std::unique_ptr<Transformer> dequantised_copy(const Transformer& m, LoraBase format) {
  auto c = copy_of(m);
  FrozenBase fb(c->config(), c->layout(), c->params(), format);
  fb.dequantize_into(c->params());
  c->params_updated();
  return c;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// Resident memory of this process (bytes), from /proc/self/statm.
double rss_bytes() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

}  // namespace

// The panels: int4 rows widened as dequantize_int4 (the reference) does, bit for bit, for row ranges and rows whose
// length is not a multiple of 32; bf16 exactly.
TEST(QLora, WeightPanelsEqualTheReferenceDequantisation) {
  for (int64_t K : {64, 88, 200}) {
    const int64_t N = 37;
    std::vector<float> W(static_cast<size_t>(N * K));
    rng_fill_normal(5, static_cast<uint64_t>(K), std::span<float>(W), 0.f, 0.3f);
    kernels::Int4Weights q;
    kernels::quantize_int4(W.data(), N, K, K, 128, &q, kernels::Int4Layout::rows);
    std::vector<float> want(W.size()), got(W.size(), -1.f);
    kernels::dequantize_int4(q, want.data());
    kernels::int4_rows_to_f32(q, 0, 11, got.data());
    kernels::int4_rows_to_f32(q, 11, N, got.data() + 11 * K);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * got.size()), 0) << "K " << K;
    EXPECT_GT(max_diff(want, W), 1e-3) << "K " << K;  // 4 bits: not the f32 values
    std::vector<uint16_t> h(W.size());
    for (size_t i = 0; i < W.size(); ++i) h[i] = f32_to_bf16(W[i]);
    kernels::bf16_rows_to_f32(h.data(), K, 3, N, got.data());
    for (int64_t i = 0; i < (N - 3) * K; ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)], bf16_to_f32(h[static_cast<size_t>(3 * K + i)]));
  }
  kernels::Int4Weights c16;
  std::vector<float> W(64 * 64, 0.5f);
  if (kernels::int4_cols16_supported()) {
    kernels::quantize_int4(W.data(), 64, 64, 64, 128, &c16, kernels::Int4Layout::cols16);
    EXPECT_THROW(kernels::int4_rows_to_f32(c16, 0, 1, W.data()), Error);
  }
}

// The held bytes are what the memory plan counts; quantising the same weights twice gives the same bytes (a resumed
// run re-quantises the model file's weights to the base it trained on).
TEST(QLora, HeldBytesArePlannedAndQuantisingIsDeterministic) {
  ModelConfig cfg = family_config(Arch::qwen2);
  Transformer m(cfg);
  m.init_random(42, 0.1f);
  for (LoraBase f : {LoraBase::bf16, LoraBase::int4, LoraBase::nf4}) {
    FrozenBase a(cfg, m.layout(), m.params(), f), b(cfg, m.layout(), m.params(), f);
    EXPECT_EQ(static_cast<double>(a.bytes()), FrozenBase::bytes_for(cfg, f)) << lora_base_name(f);
    EXPECT_EQ(a.weights().size(), static_cast<size_t>(4 * cfg.num_layers));
    for (size_t i = 0; i < a.weights().size(); ++i) {
      const FrozenBase::Weight& w = a.weights()[i];
      std::vector<float> x(static_cast<size_t>(w.N * w.K)), y(x.size());
      a.dequantize(w.offset, x.data());
      b.dequantize(w.offset, y.data());
      EXPECT_EQ(std::memcmp(x.data(), y.data(), sizeof(float) * x.size()), 0);
      if (f == LoraBase::int4) {
        EXPECT_EQ(w.q4.q, b.weights()[i].q4.q);
      }
      if (f == LoraBase::nf4) {
        EXPECT_EQ(w.nf4.q, b.weights()[i].nf4.q);
        EXPECT_EQ(w.nf4.absmax, b.weights()[i].nf4.absmax);
      }
    }
  }
  // The digest ranks compare (TrainRun::sync_weights): the same for the same held bytes, another for one weight's
  // value moved by an int4 step (bf16: one ulp), for the other format, and for the same bytes taken in reverse.
  for (LoraBase f : {LoraBase::bf16, LoraBase::int4, LoraBase::nf4}) {
    const FrozenBase a(cfg, m.layout(), m.params(), f);
    FrozenBase reversed(cfg, m.layout(), f);
    for (auto w = a.weights().rbegin(); w != a.weights().rend(); ++w) reversed.take(w->offset, m.params() + w->offset);
    EXPECT_EQ(a.digest(), reversed.digest()) << lora_base_name(f);
    auto moved = copy_of(m);
    const FrozenBase::Weight& last = a.weights().back();
    float& x = moved->params()[last.offset + last.N * last.K - 1];
    x = f == LoraBase::bf16 ? x * (1 + 1.0f / 64) : x + 0.5f;
    const FrozenBase b(cfg, m.layout(), moved->params(), f);
    EXPECT_NE(a.digest(), b.digest()) << lora_base_name(f);
  }
  EXPECT_NE(FrozenBase(cfg, m.layout(), m.params(), LoraBase::bf16).digest(),
            FrozenBase(cfg, m.layout(), m.params(), LoraBase::int4).digest());
  EXPECT_NE(FrozenBase(cfg, m.layout(), m.params(), LoraBase::nf4).digest(),
            FrozenBase(cfg, m.layout(), m.params(), LoraBase::int4).digest());
  int64_t linear = 0;
  const FrozenBase all(cfg, m.layout(), m.params(), LoraBase::bf16);
  for (const FrozenBase::Weight& w : all.weights()) linear += w.N * w.K;
  EXPECT_EQ(linear, FrozenBase::params_for(cfg));
  // int4 at group 64 or 32 on this shape: 4 bits plus 5 bytes a group, far under bf16's 16.
  EXPECT_LT(FrozenBase::bytes_for(cfg, LoraBase::int4), 0.4 * FrozenBase::bytes_for(cfg, LoraBase::bf16));
  EXPECT_LT(FrozenBase::bytes_for(cfg, LoraBase::nf4), 0.4 * FrozenBase::bytes_for(cfg, LoraBase::bf16));
}

// The products over panels (small ones here: every weight cut into several, the last one ragged) equal one GEMM on
// the dequantised weight: y = x W^T and dx = dy W, overwriting and accumulating, f32 and bf16.
TEST(QLora, PanelProductsEqualOneGemmOnTheDequantisedWeight) {
  ModelConfig cfg = family_config(Arch::qwen2);
  Transformer m(cfg);
  m.init_random(42, 0.1f);
  for (LoraBase f : {LoraBase::int4, LoraBase::nf4, LoraBase::bf16})
    for (kernels::Precision p : {kernels::Precision::f32, kernels::Precision::bf16}) {
      FrozenBase fb(cfg, m.layout(), m.params(), f, 16 * 88 + 5);  // 16 rows of the widest input (F = 88)
      for (const FrozenBase::Weight& w : fb.weights()) {
        const int64_t M = 9;
        std::vector<float> W(static_cast<size_t>(w.N * w.K)), x(static_cast<size_t>(M * w.K)),
            dy(static_cast<size_t>(M * w.N));
        fb.dequantize(w.offset, W.data());
        rng_fill_normal(3, 1, std::span<float>(x), 0.f, 1.f);
        rng_fill_normal(3, 2, std::span<float>(dy), 0.f, 1.f);
        for (float beta : {0.f, 1.f}) {
          std::vector<float> y(static_cast<size_t>(M * w.N), 0.5f), want = y, dx(x.size(), 0.25f), dwant = dx;
          fb.forward(w.offset, M, x.data(), w.K, beta, y.data(), w.N, p);
          kernels::gemm(false, true, M, w.N, w.K, x.data(), w.K, W.data(), w.K, beta, want.data(), w.N, p);
          fb.backward_input(w.offset, M, dy.data(), w.N, beta, dx.data(), w.K, p);
          kernels::gemm(false, false, M, w.K, w.N, dy.data(), w.N, W.data(), w.K, beta, dwant.data(), w.K, p);
          // The same products summed in other orders (the panels split dx's reduction over the outputs).
          EXPECT_TRUE(all_close(y, want, tolerance(Kind::reduction, w.K))) << w.N << "x" << w.K << " beta " << beta;
          EXPECT_TRUE(all_close(dx, dwant, tolerance(Kind::reduction, w.N))) << w.N << "x" << w.K << " beta " << beta;
          EXPECT_GT(max_diff(y, std::vector<float>(y.size(), 0.5f)), 0.1);
        }
      }
    }
}

// Decode-shaped products without a panel (kernels/held_gemv.h). f32: every output has the bits of the small-M GEMM's
// row kernel over the whole dequantised weight (what kernels::gemm gives up to 16 rows and gemm_decode up to its
// limit), so up to 16 rows the panel path's bits; bf16: bf16 x and weights with f32 sums, within f32 summation
// order of the panel path's bf16 GEMM and of an fp64 sum of the same bf16 operands. Odd K (a pair cut in two), K past
// one 32-element step, ragged blocks of outputs, overwriting and accumulating.
TEST(QLora, DecodeProductsNeedNoPanel) {
  const kernels::IsaTable& t = kernels::isa_table();
  for (int64_t K : {64, 88, 200, 577}) {
    const int64_t N = 37;
    std::vector<float> W0(static_cast<size_t>(N * K));
    rng_fill_normal(5, static_cast<uint64_t>(K), std::span<float>(W0), 0.f, 0.3f);
    kernels::Int4Weights q;
    kernels::quantize_int4(W0.data(), N, K, K, 128, &q, kernels::Int4Layout::rows);
    kernels::Nf4Weights q_nf4;
    kernels::quantize_nf4(W0.data(), N, K, K, &q_nf4);
    std::vector<uint16_t> h(W0.size());
    for (size_t i = 0; i < W0.size(); ++i) h[i] = f32_to_bf16(W0[i]);
    for (LoraBase f : {LoraBase::int4, LoraBase::nf4, LoraBase::bf16}) {
      const kernels::HeldWeight hw{N, K, f == LoraBase::bf16 ? h.data() : nullptr, f == LoraBase::int4 ? &q : nullptr,
                                   f == LoraBase::nf4 ? &q_nf4 : nullptr};
      std::vector<float> W(W0.size());  // the values the products use
      if (f == LoraBase::int4)
        kernels::dequantize_int4(q, W.data());
      else if (f == LoraBase::nf4)
        kernels::dequantize_nf4(q_nf4, W.data());
      else
        for (size_t i = 0; i < W.size(); ++i) W[i] = bf16_to_f32(h[i]);
      for (int64_t M : {1, 3, 4, 9, 16, 17, 64}) {
        const int64_t ldx = K + 3, ldy = N + 2;
        std::vector<float> x(static_cast<size_t>(M * ldx));
        rng_fill_normal(7, static_cast<uint64_t>(M), std::span<float>(x), 0.f, 1.f);
        for (bool acc : {false, true}) {
          const std::string what = std::string(lora_base_name(f)) + " K " + std::to_string(K) + " M " +
                                   std::to_string(M) + (acc ? " accumulating" : "");
          std::vector<float> y0(static_cast<size_t>(M * ldy));
          rng_fill_normal(9, 1, std::span<float>(y0), 0.f, 1.f);
          // f32: bitwise the row kernel on the dequantised weight; up to 16 rows kernels::gemm's bits too.
          std::vector<float> got = y0, want = y0, gemm = y0;
          kernels::held_gemv(hw, M, x.data(), ldx, acc, got.data(), ldy, kernels::Precision::f32);
          t.gemm_nt_f32(x.data(), ldx, W.data(), K, want.data(), ldy, M, 0, N, K, acc);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * got.size()), 0) << what;
          kernels::gemm(false, true, M, N, K, x.data(), ldx, W.data(), K, acc ? 1.f : 0.f, gemm.data(), ldy,
                        kernels::Precision::f32);
          if (M <= 16)
            ASSERT_EQ(std::memcmp(got.data(), gemm.data(), sizeof(float) * got.size()), 0) << what;
          else
            EXPECT_TRUE(all_close(got, gemm, tolerance(Kind::reduction, K))) << what;
          EXPECT_GT(max_diff(got, y0), 0.1) << what;
          // bf16: against an fp64 sum of the bf16 operands and against kernels::gemm's bf16 path.
          std::vector<float> g16 = y0, p16 = y0;
          std::vector<double> ref(y0.begin(), y0.end());
          kernels::held_gemv(hw, M, x.data(), ldx, acc, g16.data(), ldy, kernels::Precision::bf16);
          kernels::gemm(false, true, M, N, K, x.data(), ldx, W.data(), K, acc ? 1.f : 0.f, p16.data(), ldy,
                        kernels::Precision::bf16);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double s = 0;
              for (int64_t k = 0; k < K; ++k)
                s += static_cast<double>(bf16_to_f32(f32_to_bf16(x[static_cast<size_t>(m * ldx + k)]))) *
                     bf16_to_f32(f32_to_bf16(W[static_cast<size_t>(n * K + k)]));
              double& r = ref[static_cast<size_t>(m * ldy + n)];
              r = acc ? r + s : s;
            }
          for (int64_t m = 0; m < M; ++m)  // the columns past N are left as they were
            for (int64_t n = N; n < ldy; ++n) {
              const size_t i = static_cast<size_t>(m * ldy + n);
              ASSERT_EQ(g16[i], y0[i]);
              ASSERT_EQ(got[i], y0[i]);
            }
          EXPECT_TRUE(all_close(g16, ref, tolerance(Kind::reduction, K))) << what;
          EXPECT_TRUE(all_close(g16, p16, tolerance(Kind::reduction, K))) << what;
          EXPECT_GT(max_diff(g16, got), 0) << what;  // rounded to bf16: not the f32 product
        }
      }
    }
  }
}

// The held kernels of every ISA this CPU runs give the same bits: the int4 and nf4 rows as the reference
// dequantisation gives them (dequantize_int4 / dequantize_nf4: value by value, the group or block k / G) and as the
// panels widen them (int4_rows_to_f32 / nf4_rows_to_f32, in row ranges), and rounded to bf16 as f32_to_bf16 rounds;
// bf16 rows widened exactly, the bf16 product (VDPBF16PS on AVX512-BF16, FMAs on widened pairs on AVX-512, plain loops
// elsewhere) to the last bit. Rows not a multiple of 32 or of 64, groups / blocks of 32, 64 (one partial: K 40) and
// 128, several a row (SmolLM2's C = 576 and F = 1536 in blocks of 64).
TEST(QLora, HeldKernelsGiveTheSameBitsOnEveryIsa) {
  struct Case {
    int64_t K, int4_group, nf4_block;  // int4 asked for groups of 128, as the frozen base is
  };
  for (const Case& cs : {Case{32, 32, 32}, Case{40, 64, 64}, Case{88, 32, 32}, Case{96, 32, 32}, Case{200, 32, 32},
                         Case{256, 128, 64}, Case{576, 64, 64}, Case{577, 32, 32}, Case{1536, 128, 64}}) {
    const int64_t K = cs.K, N = 13, M = 7;
    std::vector<float> W(static_cast<size_t>(N * K)), x(static_cast<size_t>(M * K));
    rng_fill_normal(5, static_cast<uint64_t>(K), std::span<float>(W), 0.f, 0.3f);
    rng_fill_normal(6, static_cast<uint64_t>(K), std::span<float>(x), 0.f, 1.f);
    kernels::Int4Weights q;
    kernels::quantize_int4(W.data(), N, K, K, 128, &q, kernels::Int4Layout::rows);
    kernels::Nf4Weights q4;
    kernels::quantize_nf4(W.data(), N, K, K, &q4);
    ASSERT_EQ(q.group, cs.int4_group) << "K " << K;
    ASSERT_EQ(q4.block, cs.nf4_block) << "K " << K;
    std::vector<float> want(W.size()), want4(W.size()), y0(static_cast<size_t>(M * N), 0.5f), want_y;
    kernels::dequantize_int4(q, want.data());
    kernels::dequantize_nf4(q4, want4.data());
    EXPECT_GT(max_diff(want, W), 1e-3) << "K " << K;  // 4 bits: not the f32 values
    EXPECT_GT(max_diff(want4, W), 1e-3) << "K " << K;
    std::vector<float> panel(W.size(), -1.f);
    kernels::int4_rows_to_f32(q, 0, 5, panel.data());
    kernels::int4_rows_to_f32(q, 5, N, panel.data() + 5 * K);
    EXPECT_EQ(std::memcmp(panel.data(), want.data(), sizeof(float) * W.size()), 0) << "int4 panels K " << K;
    std::fill(panel.begin(), panel.end(), -1.f);
    kernels::nf4_rows_to_f32(q4, 0, 5, panel.data());
    kernels::nf4_rows_to_f32(q4, 5, N, panel.data() + 5 * K);
    EXPECT_EQ(std::memcmp(panel.data(), want4.data(), sizeof(float) * W.size()), 0) << "nf4 panels K " << K;
    std::vector<uint16_t> w16(W.size()), x16(x.size());
    for (size_t i = 0; i < W.size(); ++i) w16[i] = f32_to_bf16(W[i]);
    for (size_t i = 0; i < x.size(); ++i) x16[i] = f32_to_bf16(x[i]);
    int isas = 0;
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (!cpu_isa_supported(isa)) continue;
      ++isas;
      const kernels::IsaTable& t = kernels::isa_table(isa);
      // Each format's f32 rows [r0, r1) and bf16 rows into row r0 of out (ldo K).
      const auto int4_f32 = [&](int64_t r0, int64_t r1, float* out) {
        t.held_int4_f32(q.q.data(), q.scale.data(), q.zero.data(), K, q.Kp, q.group, r0, r1, out + r0 * K, K);
      };
      const auto int4_bf16 = [&](int64_t r0, int64_t r1, uint16_t* out) {
        t.held_int4_bf16(q.q.data(), q.scale.data(), q.zero.data(), K, q.Kp, q.group, r0, r1, out + r0 * K, K);
      };
      const auto nf4_f32 = [&](int64_t r0, int64_t r1, float* out) {
        t.held_nf4_f32(q4.q.data(), q4.absmax.data(), K, q4.Kp, q4.block, r0, r1, out + r0 * K, K);
      };
      const auto nf4_bf16 = [&](int64_t r0, int64_t r1, uint16_t* out) {
        t.held_nf4_bf16(q4.q.data(), q4.absmax.data(), K, q4.Kp, q4.block, r0, r1, out + r0 * K, K);
      };
      const auto check = [&](const char* format, const std::vector<float>& ref, const auto& f32, const auto& bf16) {
        std::vector<float> got(W.size(), -1.f);
        f32(2, N, got.data());
        f32(0, 2, got.data());
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), sizeof(float) * got.size()), 0)
            << format << " " << isa_name(isa) << " K " << K;
        std::vector<uint16_t> r16(W.size(), 1);
        bf16(1, N, r16.data());
        bf16(0, 1, r16.data());
        for (size_t i = 0; i < W.size(); ++i)
          ASSERT_EQ(r16[i], f32_to_bf16(ref[i])) << format << " " << isa_name(isa) << " K " << K << " value " << i;
      };
      check("int4", want, int4_f32, int4_bf16);
      check("nf4", want4, nf4_f32, nf4_bf16);
      std::vector<float> got(W.size(), -1.f);
      t.held_bf16_f32(w16.data(), N * K - 1, got.data());
      for (int64_t i = 0; i < N * K - 1; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], bf16_to_f32(w16[static_cast<size_t>(i)])) << isa_name(isa);
      std::vector<float> y = y0;
      t.held_gemm_nt_bf16(x16.data(), K, w16.data(), K, y.data(), N, M, 0, 5, K, false);
      t.held_gemm_nt_bf16(x16.data(), K, w16.data(), K, y.data(), N, M, 5, N, K, true);
      if (want_y.empty()) {
        want_y = y;
        EXPECT_GT(max_diff(y, y0), 0.1);
      }
      EXPECT_EQ(std::memcmp(y.data(), want_y.data(), sizeof(float) * y.size()), 0) << isa_name(isa) << " K " << K;
    }
    EXPECT_GE(isas, 1);
  }
}

// The int4 and nf4 bases (with and without adapters) compute the logits of an f32 model holding their dequantised
// values (within 1e-4); the bf16 base those of an f32 model with bf16-rounded block weights (f32 precision: 1e-5); the
// quantisation itself moves the logits far more than that.
TEST(QLora, HeldBaseEqualsTheF32ModelOfItsValues) {
  for (Arch arch : kArchs)
    for (LoraBase f : {LoraBase::int4, LoraBase::nf4, LoraBase::bf16}) {
      ModelConfig cfg = family_config(arch);
      Transformer m(cfg);
      m.init_random(42, 0.1f);
      Batch b(cfg, 2);
      const std::vector<float> original = logits(m, b);
      auto ref = dequantised_copy(m, f);
      m.hold_base(f);
      const std::vector<float> got = logits(m, b), want = logits(*ref, b);
      const int64_t n = static_cast<int64_t>(got.size());
      const double tol = f == LoraBase::bf16 ? 1e-5 : 1e-4;
      EXPECT_TRUE(all_close(got.data(), want.data(), n, tol)) << arch_name(arch) << " " << lora_base_name(f);
      EXPECT_GT(max_diff(got, original), 100 * tol * max_abs(want.data(), n)) << arch_name(arch);
      // With adapters (the held base's adapters on one, f32 ones with the same values on the other).
      LoraAdapters ad(cfg, lora_config(f)), adr(cfg, lora_config(LoraBase::f32));
      randomize(ad, 11);
      randomize(adr, 11);
      m.attach_lora(&ad);
      ref->attach_lora(&adr);
      const std::vector<float> got2 = logits(m, b), want2 = logits(*ref, b);
      EXPECT_TRUE(all_close(got2.data(), want2.data(), n, tol)) << arch_name(arch) << " adapters";
      EXPECT_GT(max_diff(got2, got), 1e-2) << arch_name(arch);
    }
}

// bf16 precision: the bf16 base gives the f32 master model's bf16 logits within the bf16 tolerance (the held values
// are the master's bf16 copy).
TEST(QLora, Bf16BaseInBf16PrecisionEqualsTheMasterModel) {
  for (Arch arch : {Arch::llama, Arch::gemma2}) {
    ModelConfig cfg = family_config(arch);
    Transformer m(cfg);
    m.init_random(42, 0.1f);
    m.set_precision(kernels::Precision::bf16);
    Batch b(cfg, 2);
    const std::vector<float> want = logits(m, b);
    m.hold_base(LoraBase::bf16);
    const std::vector<float> got = logits(m, b);
    EXPECT_TRUE(
        all_close(got.data(), want.data(), static_cast<int64_t>(got.size()), tolerance(Kind::bf16, cfg.hidden_size)))
        << arch_name(arch);
  }
}

// The rollout invariant on a held base with adapters: the paged forward's log-probs are the training forward's; f32
// within 1e-5, bf16 within the bf16 tolerance.
TEST(QLora, PagedForwardLogprobsEqualTheTrainingForward) {
  for (Arch arch : {Arch::llama, Arch::qwen3, Arch::gemma2, Arch::phi3})
    for (LoraBase f : {LoraBase::int4, LoraBase::nf4, LoraBase::bf16})
      for (kernels::Precision prec : {kernels::Precision::f32, kernels::Precision::bf16}) {
        ModelConfig cfg = family_config(arch);
        Transformer m(cfg);
        m.init_random(42, 0.1f);
        m.set_precision(prec);
        LoraAdapters ad(cfg, lora_config(f));
        randomize(ad, 17);
        m.attach_lora(&ad);
        ASSERT_NE(m.held_base(), nullptr);
        Batch b(cfg, 4, 2, 19);
        std::vector<float> want(static_cast<size_t>(b.N())), ent(static_cast<size_t>(b.N()));
        m.forward_logprobs(b.tokens.data(), b.targets.data(), b.B, b.T, want.data(), ent.data());
        for (int64_t i = 0; i < b.N(); ++i)
          if (b.targets[static_cast<size_t>(i)] < 0) want[static_cast<size_t>(i)] = 0;
        const std::vector<float> got = paged_logprobs(m, b, prec);
        const double tol = prec == kernels::Precision::f32 ? 1e-5 : tolerance(Kind::bf16, cfg.hidden_size);
        EXPECT_TRUE(all_close(got.data(), want.data(), b.N(), tol))
            << arch_name(arch) << " " << lora_base_name(f) << " " << kernels::precision_name(prec);
      }
}

// Gradients: the adapters' equal those of the f32 model holding the dequantised values (base frozen there), finite
// differences agree on A and B, and the base gets no gradient at all (held products, embedding, LM head, norms).
TEST(QLora, AdapterGradientsMatchTheDequantisedModelAndFiniteDifferences) {
  for (Arch arch : kArchs)
    for (LoraBase format : {LoraBase::int4, LoraBase::nf4}) {
      SCOPED_TRACE(lora_base_name(format));
      ModelConfig cfg = family_config(arch);
      Transformer m(cfg);
      m.init_random(42, 0.1f);
      auto ref = dequantised_copy(m, format);
      ref->set_base_frozen(true);
      LoraAdapters ad(cfg, lora_config(format)), adr(cfg, lora_config(LoraBase::f32));
      randomize(ad, 13);
      randomize(adr, 13);
      m.attach_lora(&ad);
      ref->attach_lora(&adr);
      Batch b(cfg, 3);
      WeightedLoss loss(b.N());
      Grads g = train_pass(m, &ad, b, loss), gr = train_pass(*ref, &adr, b, loss);
      const double tol = tolerance(Kind::reduction, b.N(), 3);
      EXPECT_TRUE(all_close(g.lp.data(), gr.lp.data(), b.N(), 1e-5)) << arch_name(arch);
      EXPECT_TRUE(all_close(g.lora.data(), gr.lora.data(), ad.size(), tol)) << arch_name(arch);
      EXPECT_GT(max_abs(g.lora.data(), ad.size()), 1e-3) << arch_name(arch);
      const FrozenBase& fb = *m.held_base();
      int64_t held = 0;
      for (const ParamEntry& e : m.layout().entries()) {
        if (fb.covers(e.offset, e.numel())) {  // no gradient, no value
          EXPECT_EQ(max_abs(g.model.data() + e.offset, e.numel()), 0.0) << arch_name(arch) << " " << e.name;
          EXPECT_EQ(max_abs(m.params() + e.offset, e.numel()), 0.0) << arch_name(arch) << " " << e.name;
          EXPECT_THROW(m.param(e.name), Error) << e.name;
          ++held;
        } else {
          EXPECT_TRUE(all_close(g.model.data() + e.offset, gr.model.data() + e.offset, e.numel(), tol, 1e-7))
              << arch_name(arch) << " " << e.name;
        }
      }
      EXPECT_GE(held, 4 * cfg.num_layers) << arch_name(arch);
      // No base gradient is formed under the adapters (the LM head's and embedding's dW, the norms', the biases'):
      // the model's whole gradient buffer stays zero.
      EXPECT_EQ(max_abs(g.model.data(), m.flat_size()), 0.0) << arch_name(arch);
      // Finite differences on the loss, at the largest analytic entries of A and B of two adapters.
      auto objective = [&]() {
        std::vector<float> lp(static_cast<size_t>(b.N())), ent(static_cast<size_t>(b.N()));
        m.forward_logprobs(b.tokens.data(), b.targets.data(), b.B, b.T, lp.data(), ent.data());
        return loss.value(lp, ent);
      };
      expect_adapter_gradients_match_differences(ad, g.lora, objective, arch);
    }
}

// Recomputation on and off over a held base: the same gradients, bit for bit; a bf16 base too.
TEST(QLora, RecomputeGivesTheStoredPathsGradients) {
  for (Arch arch : {Arch::llama, Arch::gemma2})
    for (LoraBase f : {LoraBase::int4, LoraBase::nf4, LoraBase::bf16}) {
      ModelConfig cfg = family_config(arch);
      Transformer m(cfg);
      m.init_random(42, 0.1f);
      LoraAdapters ad(cfg, lora_config(f));
      randomize(ad, 19);
      m.attach_lora(&ad);
      Batch b(cfg, 5);
      WeightedLoss loss(b.N());
      Grads stored = train_pass(m, &ad, b, loss);
      m.set_recompute(true);
      Grads re = train_pass(m, &ad, b, loss);
      EXPECT_EQ(re.lora, stored.lora) << arch_name(arch) << " " << lora_base_name(f);
      EXPECT_EQ(re.model, stored.model) << arch_name(arch);
      EXPECT_GT(max_abs(re.lora.data(), ad.size()), 1e-3);
    }
}

// The held products' f32 values and gradients cost no memory: holding gives their pages back, and training passes
// (zero_grad, forward_backward) never write them again. A model of a few hundred MB of block products.
TEST(QLora, HoldingTheBaseGivesItsF32MemoryBack) {
  ModelConfig cfg = model_config_preset("tiny");
  cfg.hidden_size = 512, cfg.num_heads = 8, cfg.num_kv_heads = 8, cfg.head_dim = 64, cfg.intermediate_size = 1536;
  cfg.num_layers = 6;
  Transformer m(cfg);
  m.init_random(1, 0.02f);
  const double linear = 4.0 * static_cast<double>(FrozenBase::params_for(cfg));  // ~57 MB of f32 values
  LoraAdapters ad(cfg, lora_config(LoraBase::int4, 8));
  ad.init(3);
  const double before = rss_bytes();
  m.attach_lora(&ad);
  const double after = rss_bytes();
  const double held = static_cast<double>(m.held_base()->bytes());
  // The f32 values went, the int4 bytes came (the quantiser's own scratch is small).
  EXPECT_NEAR(before - after, linear - held, 0.1 * linear) << "before " << before << " after " << after;
  std::printf("f32 block products %.1f MB, held %.1f MB, RSS %.1f -> %.1f MB\n", linear / 1e6, held / 1e6, before / 1e6,
              after / 1e6);
  Batch b(cfg, 7, 2, 16);
  WeightedLoss loss(b.N());
  train_pass(m, &ad, b, loss);  // the arena and the classifier's buffers grow here (not the gradients)
  const double trained = rss_bytes();
  train_pass(m, &ad, b, loss);
  EXPECT_LT(rss_bytes() - trained, 0.05 * linear);
  // The grads of the held products were never written: a full gradient buffer would have added `linear`.
  EXPECT_LT(trained - after, 0.5 * linear) << "trained " << trained << " after " << after;
  std::printf("after two training passes: RSS %.1f MB\n", rss_bytes() / 1e6);
}

// The memory plan of a held base (app/memory_plan.h, lora_held) against what training on it holds: the resident
// memory a model, its int4 base, adapters, optimiser and two training steps add to this process, within 10%. The
// plan's "runtime" (binary, libraries, threads) is the process's own: a small model's training step first brings it
// in (the thread pool and its allocator arenas, the kernels' code pages: ~11 MB a fresh process, as ctest runs this
// test alone, would otherwise count against the held terms).
TEST(QLora, MemoryPlanOfAHeldBaseMatchesTheResidentMemory) {
  ModelConfig cfg = model_config_preset("tiny");
  cfg.hidden_size = 512, cfg.num_heads = 8, cfg.num_kv_heads = 8, cfg.head_dim = 64, cfg.intermediate_size = 1536;
  cfg.num_layers = 6, cfg.vocab_size = 8192;
  const int64_t B = 2, T = 64;
  const double fresh = rss_bytes();
  {
    const ModelConfig small = family_config(Arch::llama);
    Transformer warm(small);
    warm.init_random(2, 0.02f);
    LoraAdapters wad(small, lora_config(LoraBase::int4, 16));
    wad.init(5);
    warm.attach_lora(&wad);
    Optimizer wopt(warm, OptimizerConfig{});
    wopt.train_adapters(&wad);
    Batch wb(small, 4, B, T);
    WeightedLoss wloss(wb.N());
    train_pass(warm, &wad, wb, wloss);
    wopt.step();
  }
  const double start = rss_bytes();
  Transformer m(cfg);
  m.init_random(1, 0.02f);
  LoraAdapters ad(cfg, lora_config(LoraBase::int4, 16));
  ad.init(3);
  m.attach_lora(&ad);
  Optimizer opt(m, OptimizerConfig{});
  opt.train_adapters(&ad);
  m.plan(B * T, T);
  Batch b(cfg, 9, B, T);
  WeightedLoss loss(b.N());
  for (int step = 0; step < 2; ++step) {
    train_pass(m, &ad, b, loss);
    opt.step();
  }
  const double measured = rss_bytes() - start;
  app::MemorySettings s;
  s.micro_batch = B, s.seq = T, s.lora_rank = 16, s.lora_trainable = ad.size(), s.qlora = true, s.lora_held = true;
  const app::MemoryPlan plan = app::plan_memory(cfg, s);
  double planned = 0, loading = 0;
  for (const app::MemoryItem& i : plan.items)
    if (i.name == "loading (transient)")
      loading = i.bytes;
    else if (i.name != "runtime")  // the process's own: here before the test
      planned += i.bytes;
  std::printf(
      "plan %.1f MB (and %.1f MB more while loading), resident %.1f MB (%+.1f%%; the runtime's %.1f MB before)\n",
      planned / 1e6, loading / 1e6, measured / 1e6, 100.0 * (measured - planned) / planned, (start - fresh) / 1e6);
  EXPECT_NEAR(measured, planned, 0.1 * planned);
  // Held as it loads, the load's peak (the int4 base, the f32 rest, one product's values: test_qlora_load.cpp measures
  // it) stays under what training holds; loaded whole, this model's f32 weights (57 MB of products) would not.
  EXPECT_EQ(loading, 0);
  EXPECT_GT(plan.load_bytes, 0);
  EXPECT_LT(plan.load_bytes, plan.host_bytes());  // both with the runtime
}

// What cannot run on a held base is refused: a device, a base held again in another format, merging into it, a
// drafter, an optimiser stepping the model's own weights.
TEST(QLora, WhatNeedsF32WeightsIsRefused) {
  ModelConfig cfg = family_config(Arch::llama);
  Transformer m(cfg);
  m.init_random(42, 0.1f);
  LoraAdapters ad(cfg, lora_config(LoraBase::int4));
  ad.init(3);
  m.attach_lora(&ad);
  EXPECT_TRUE(m.base_frozen());
  m.set_base_frozen(false);
  EXPECT_TRUE(m.base_frozen());  // held: frozen for good
  EXPECT_THROW(m.hold_base(LoraBase::bf16), Error);
  EXPECT_NO_THROW(m.hold_base(LoraBase::int4));
  EXPECT_THROW(ad.merge_into(m), Error);
  OptimizerConfig oc;
  Optimizer full(m, oc);
  EXPECT_THROW(full.step(), Error);
  Optimizer lora(m, oc);
  lora.train_adapters(&ad);
  Batch b(cfg, 8);
  WeightedLoss loss(b.N());
  train_pass(m, &ad, b, loss);
  const std::vector<float> a0(ad.params(), ad.params() + ad.size());
  EXPECT_FALSE(lora.step().skipped);
  EXPECT_GT(max_diff(a0, std::vector<float>(ad.params(), ad.params() + ad.size())), 0.0);
  // Detached, the model still runs on its held base (the KL reference of LoRA is this model without adapters).
  m.attach_lora(nullptr);
  EXPECT_NE(m.held_base(), nullptr);
}

// PEFT out and in: a run on an int4 or nf4 base records it (temper_lora_base); merging that adapter into the f32 base
// it started from merges into the dequantised weights, so the merged model's logits are the held base's with adapters
// (within 1e-4), not those of a merge into the f32 weights; resuming into adapters of another held base is refused.
TEST(QLora, PeftAdaptersRecordTheBaseAndMergeIntoTheDequantisedWeights) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("temper_qlora_peft_" + std::to_string(getpid()))).string();
  for (Arch arch : {Arch::llama, Arch::qwen2})
    for (LoraBase format : {LoraBase::int4, LoraBase::nf4}) {
      SCOPED_TRACE(lora_base_name(format));
      ModelConfig cfg = family_config(arch);
      Transformer m(cfg);
      m.init_random(42, 0.1f);
      auto f32_base = copy_of(m);
      LoraAdapters ad(cfg, lora_config(format));
      randomize(ad, 29);
      m.attach_lora(&ad);
      Batch b(cfg, 3);
      const std::vector<float> want = logits(m, b);
      io::write_peft_adapter(ad, dir);
      EXPECT_EQ(io::read_peft_adapter_config(dir).base, format);
      EXPECT_EQ(io::read_peft_adapter(dir, cfg)->config().base, LoraBase::f32);  // the caller's choice
      auto merged = copy_of(*f32_base);
      io::merge_peft_adapter(*merged, dir);
      const std::vector<float> got = logits(*merged, b);
      EXPECT_TRUE(all_close(got.data(), want.data(), static_cast<int64_t>(got.size()), 1e-4)) << arch_name(arch);
      auto plain = copy_of(*f32_base);  // merged into the f32 weights instead: the quantisation's difference
      LoraAdapters adf(cfg, lora_config(LoraBase::f32));
      io::load_peft_adapter_weights(adf, dir);
      adf.merge_into(*plain);
      EXPECT_GT(max_diff(logits(*plain, b), want), 1e-3) << arch_name(arch);
      LoraAdapters other(cfg, lora_config(LoraBase::bf16)), same(cfg, lora_config(format));
      EXPECT_THROW(io::load_peft_adapter_weights(other, dir), Error);
      LoraAdapters other4(cfg, lora_config(format == LoraBase::int4 ? LoraBase::nf4 : LoraBase::int4));
      EXPECT_THROW(io::load_peft_adapter_weights(other4, dir), Error);
      io::load_peft_adapter_weights(same, dir);
      EXPECT_EQ(std::memcmp(same.params(), ad.params(), sizeof(float) * static_cast<size_t>(ad.size())), 0);
    }
  std::filesystem::remove_all(dir);
}

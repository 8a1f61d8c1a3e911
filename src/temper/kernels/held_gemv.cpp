#include "temper/kernels/held_gemv.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {
namespace {

// Output rows per block: a multiple of 4 (the row kernels' tiles) whose f32 rows fill about 32 KiB.
int64_t block_rows(int64_t K) {
  return std::max<int64_t>(4, 8192 / std::max<int64_t>(1, K) / 4 * 4);
}

// Rows [r0, r1) of the weight as f32 rows of K (the thread's buffer).
void widen(const IsaTable& t, const HeldWeight& w, int64_t r0, int64_t r1, float* out) {
  if (w.nf4) {
    const Nf4Weights& q = *w.nf4;
    t.held_nf4_f32(q.q.data(), q.absmax.data(), w.K, q.Kp, q.block, r0, r1, out, w.K);
    return;
  }
  if (w.int4) {
    const Int4Weights& q = *w.int4;
    t.held_int4_f32(q.q.data(), q.scale.data(), q.zero.data(), w.K, q.Kp, q.group, r0, r1, out, w.K);
    return;
  }
  t.held_bf16_f32(w.bf16 + r0 * w.K, (r1 - r0) * w.K, out);
}

// The same rounded to bf16 (int4, nf4).
void widen16(const IsaTable& t, const HeldWeight& w, int64_t r0, int64_t r1, uint16_t* out) {
  if (w.nf4) {
    const Nf4Weights& q = *w.nf4;
    t.held_nf4_bf16(q.q.data(), q.absmax.data(), w.K, q.Kp, q.block, r0, r1, out, w.K);
    return;
  }
  const Int4Weights& q = *w.int4;
  t.held_int4_bf16(q.q.data(), q.scale.data(), q.zero.data(), w.K, q.Kp, q.group, r0, r1, out, w.K);
}

template <class T>
T* grown(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace

// 64 (docs/PERFORMANCE.md, "Decode on a held base"); TEMPER_HELD_GEMV_M=n sets it (0: every product on panels).
int64_t held_gemv_max_rows() {
  static const int64_t m = [] {
    const char* e = std::getenv("TEMPER_HELD_GEMV_M");
    if (!e) return int64_t{64};
    char* end = nullptr;
    const long x = std::strtol(e, &end, 10);
    TEMPER_CHECK(end != e && *end == 0 && x >= 0) << "TEMPER_HELD_GEMV_M='" << e << "' is not a row count >= 0";
    return static_cast<int64_t>(x);
  }();
  return m;
}

void held_gemv(const HeldWeight& w, int64_t M, const float* x, int64_t ldx, bool accumulate, float* y, int64_t ldy,
               Precision p) {
  TEMPER_CHECK((w.bf16 != nullptr) + (w.int4 != nullptr) + (w.nf4 != nullptr) == 1)
      << "held_gemv: the weight is held as one of bf16, int4 and nf4";
  TEMPER_CHECK(!w.int4 || (w.int4->layout == Int4Layout::rows && w.int4->N == w.N && w.int4->K == w.K))
      << "held_gemv: int4 weights in the rows layout of the weight's shape expected";
  TEMPER_CHECK(!w.nf4 || (w.nf4->N == w.N && w.nf4->K == w.K))
      << "held_gemv: nf4 weights of the weight's shape expected";
  TEMPER_CHECK(M <= held_gemv_max_rows()) << "held_gemv: " << M << " rows, at most " << held_gemv_max_rows();
  if (M <= 0 || w.N == 0) return;
  const IsaTable& t = isa_table();
  const int64_t N = w.N, K = w.K, R = block_rows(K), blocks = (N + R - 1) / R;
  if (p == Precision::f32) {
    parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
      thread_local std::vector<float> rows;
      float* f = grown(rows, R * K);
      for (int64_t i = b; i < e; ++i) {
        const int64_t r0 = i * R, r1 = std::min(N, r0 + R);
        widen(t, w, r0, r1, f);
        t.gemm_nt_f32(x, ldx, f, K, y + r0, ldy, M, 0, r1 - r0, K, accumulate);
      }
    });
    return;
  }
  thread_local std::vector<uint16_t> x16;  // x rounded to bf16 once (the calling thread's; workers read it)
  uint16_t* a = grown(x16, M * K);
  for (int64_t m = 0; m < M; ++m) t.f32_to_bf16(x + m * ldx, a + m * K, K);
  if (w.bf16) {  // the held values are the product's operand as they are
    parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
      const int64_t r0 = b * R, r1 = std::min(N, e * R);
      t.held_gemm_nt_bf16(a, K, w.bf16, K, y, ldy, M, r0, r1, K, accumulate);
    });
    return;
  }
  parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
    thread_local std::vector<uint16_t> rows16;
    uint16_t* h = grown(rows16, R * K);
    for (int64_t i = b; i < e; ++i) {
      const int64_t r0 = i * R, r1 = std::min(N, r0 + R);
      widen16(t, w, r0, r1, h);
      t.held_gemm_nt_bf16(a, K, h, K, y + r0, ldy, M, 0, r1 - r0, K, accumulate);
    }
  });
}

}  // namespace temper::kernels

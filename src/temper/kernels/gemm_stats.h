// Per-shape accounting of the CPU products, for benches: when on, every kernels::gemm() call and every
// packed forward product records its shape and seconds (the caller's thread; the products' own workers are
// inside the timed call). `temper bench train --profile` reports each shape's rate inside the step beside
// the same shape timed alone in the same run (the issue-41 yardstick: >= 70% of the same-shape rate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/kernels/matmul.h"

namespace temper::kernels {

enum class GemmKind { gemm, packed_f32, packed_bf16 };

struct GemmShape {
  GemmKind kind = GemmKind::gemm;
  bool ta = false, tb = false;  // gemm() only
  int64_t M = 0, N = 0, K = 0;
  Precision precision = Precision::f32;
  bool operator<(const GemmShape& o) const;
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K); }
  std::string name() const;  // e.g. "gemm nt bf16 2048x576x576", "packed bf16 2048x1536x576"
};

struct GemmShapeTime {
  GemmShape shape;
  int64_t calls = 0;
  double seconds = 0;
};

void gemm_stats_enable(bool on);
bool gemm_stats_enabled();
void gemm_stats_reset();
void gemm_stats_add(const GemmShape& s, double seconds);
std::vector<GemmShapeTime> gemm_stats_report();  // largest total seconds first

// Times the shape alone through the same entry point (random operands, packed weights for the packed kinds), in
// GFLOP/s: the better of one call on the whole pool and one call per thread at once (how the step runs its
// small products, inside pool tasks), each the best of `reps` after one warm-up.
double gemm_shape_rate(const GemmShape& s, int reps);

}  // namespace temper::kernels

// `temper bench roofline`: this machine's measured rates, the denominators of docs/PERFORMANCE.md's figures:
// GEMM GFLOP/s per precision through the engine's own entry points (kernels::gemm f32 and bf16,
// gemm_bf16_packed on packed weights) and oneDNN's bf16 matmul on pre-converted operands (the library peer),
// on a large square product and SmolLM2-135M's training products; memory bandwidth (read-only sum, copy,
// triad) over >= 1 GiB, best of a few repetitions. A table, or one JSON line with --json.
// Leaves out: attention, the elementwise kernels, devices (temper bench cuda --what gemm).
#pragma once

#include <cstdint>

namespace temper::app {

struct BenchRooflineOptions {
  int threads = 0;          // 0: all cores (or TEMPER_THREADS)
  bool json = false;        // only the JSON line
  bool small = false;       // a test's sizes: square 256, 64 tokens, 64 MiB of memory, 2 repetitions
  int64_t square = 2048;    // the square product's M = N = K
  int64_t tokens = 2048;    // rows (B*T) of the SmolLM2-135M training products
  double memory_gib = 1.0;  // the read-only sum's buffer; copy and triad use arrays of half of it each
  int reps = 5;             // timed repetitions at least (the best is kept)
};

int bench_roofline(BenchRooflineOptions o);

// The read-only sum's bandwidth in GB/s (1e9 bytes) over a `gib` GiB buffer on every thread, best of `reps`: the
// roofline's read figure, and `temper bench rollout`'s batch-1 bound (with BenchRooflineOptions' defaults).
// bytes (optional): the bytes one pass reads.
double read_bandwidth_gbs(double gib, int reps, int64_t* bytes = nullptr);

}  // namespace temper::app

// `temper bench dit`: the DiT's flow-matching training step (issue 38's performance bar: against PyTorch on
// the same shape and machine, bench/peers/dit_step.py). One step: x_t = (1 - t) x0 + t x1 (noise x0, a fixed
// batch x1, t ~ U(0, 1), labels over the classes and the null label, drawn per step), v = DiT(x_t, t, y),
// loss = mean((v - (x1 - x0))^2), backward, AdamW (lr 1e-4, torch's defaults). One JSON line with the
// fields the peer prints (images_per_s, step_s, cpu_step_s: process CPU seconds per step), the CPU's fields,
// and with --profile seconds per phase.
#pragma once

#include <cstdint>
#include <string>

namespace temper::app {

struct BenchDitOptions {
  int64_t image = 16, channels = 3, patch = 2, hidden = 128, depth = 4, heads = 4, classes = 10;
  double mlp_ratio = 4.0, t_scale = 1000.0;
  int64_t batch = 64;
  int threads = 0;  // 0: all cores (or TEMPER_THREADS)
  std::string dtype = "f32";
  int steps = 10, warmup = 2;
  bool json = false, profile = false;
};

int bench_dit(BenchDitOptions o);

}  // namespace temper::app

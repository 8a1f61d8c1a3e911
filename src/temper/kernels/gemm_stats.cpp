#include "temper/kernels/gemm_stats.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"

namespace temper::kernels {
namespace {

struct Stats {
  std::mutex mu;
  std::map<GemmShape, GemmShapeTime> by_shape;
};

Stats& stats() {
  static Stats s;
  return s;
}

std::atomic<bool>& enabled() {
  static std::atomic<bool> on{false};
  return on;
}

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  Rng rng(seed, 0);
  for (auto& x : v) x = static_cast<float>(rng.next_u32() % 2001) * 1e-3f - 1.f;
  return v;
}

}  // namespace

bool GemmShape::operator<(const GemmShape& o) const {
  return std::tie(kind, ta, tb, M, N, K, precision) < std::tie(o.kind, o.ta, o.tb, o.M, o.N, o.K, o.precision);
}

std::string GemmShape::name() const {
  const std::string dims = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  const std::string prec(precision_name(precision));
  if (kind != GemmKind::gemm) return "packed " + prec + " " + dims;
  return std::string("gemm ") + (ta ? "t" : "n") + (tb ? "t" : "n") + " " + prec + " " + dims;
}

void gemm_stats_enable(bool on) {
  enabled().store(on);
}
bool gemm_stats_enabled() {
  return enabled().load(std::memory_order_relaxed);
}

void gemm_stats_reset() {
  std::lock_guard<std::mutex> g(stats().mu);
  stats().by_shape.clear();
}

void gemm_stats_add(const GemmShape& s, double seconds) {
  std::lock_guard<std::mutex> g(stats().mu);
  GemmShapeTime& t = stats().by_shape[s];
  t.shape = s;
  ++t.calls;
  t.seconds += seconds;
}

std::vector<GemmShapeTime> gemm_stats_report() {
  std::vector<GemmShapeTime> out;
  {
    std::lock_guard<std::mutex> g(stats().mu);
    for (const auto& [k, v] : stats().by_shape) out.push_back(v);
  }
  std::sort(out.begin(), out.end(),
            [](const GemmShapeTime& a, const GemmShapeTime& b) { return a.seconds > b.seconds; });
  return out;
}

double gemm_shape_rate(const GemmShape& s, int reps) {
  const bool was = gemm_stats_enabled();
  gemm_stats_enable(false);
  const int64_t ar = s.ta ? s.K : s.M, ac = s.ta ? s.M : s.K, br = s.tb ? s.N : s.K, bc = s.tb ? s.K : s.N;
  const auto A = random_floats(ar * ac, 1), B = random_floats(br * bc, 2);
  std::vector<float> C(static_cast<size_t>(s.M * s.N));
  std::vector<uint16_t> w16;
  std::vector<float> w32;
  if (s.kind == GemmKind::packed_bf16) {
    w16.resize(static_cast<size_t>(packed_size(s.N, s.K)));
    bf16_pack_weight(B.data(), s.N, s.K, w16.data());
  } else if (s.kind == GemmKind::packed_f32) {
    w32.resize(static_cast<size_t>(packed_size(s.N, s.K)));
    f32_pack_weight(B.data(), s.N, s.K, w32.data());
  }
  // C: one per thread for the parallel copies below.
  const int threads = num_threads();
  std::vector<float> Cs(static_cast<size_t>(s.M * s.N) * static_cast<size_t>(threads));
  auto once = [&](float* c) {
    if (s.kind == GemmKind::packed_bf16)
      gemm_bf16_packed(s.M, s.N, s.K, A.data(), s.K, w16.data(), 0.f, c, s.N);
    else if (s.kind == GemmKind::packed_f32)
      gemm_f32_packed(s.M, s.N, s.K, A.data(), s.K, w32.data(), 0.f, c, s.N);
    else
      gemm(s.ta, s.tb, s.M, s.N, s.K, A.data(), ac, B.data(), bc, 0.f, c, s.N, s.precision);
  };
  auto best_of = [&](auto&& run) {
    run();
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  // The product alone on the whole pool, and as the step runs a small one: one copy per thread at once (a call
  // inside a pool task runs on its thread alone); the better aggregate rate is the shape's rate.
  const double whole = s.flops() / best_of([&] { once(C.data()); });
  const double copies = s.flops() * threads / best_of([&] {
                          parallel_tasks(threads, [&](int64_t t) {
                            once(Cs.data() + static_cast<size_t>(t) * static_cast<size_t>(s.M * s.N));
                          });
                        });
  gemm_stats_enable(was);
  return std::max(whole, copies) * 1e-9;
}

}  // namespace temper::kernels

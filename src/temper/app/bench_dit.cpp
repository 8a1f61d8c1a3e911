#include "temper/app/bench_dit.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "temper/app/cpu_report.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/core/profile.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/flow/dit.h"
#include "temper/nn/mlp.h"

namespace temper::app {
namespace {

double cpu_seconds() {  // the process's CPU time (all threads)
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One flow-matching step's inputs (drawn per step, as a trainer does) and the loss's gradient.
struct FmBatch {
  std::vector<float> x1, x0, xt, t, v, dv;
  std::vector<int32_t> y;
  void draw(uint64_t step, int64_t B, int64_t dim, int64_t classes) {
    x0.resize(x1.size()), xt.resize(x1.size()), v.resize(x1.size()), dv.resize(x1.size());
    t.resize(static_cast<size_t>(B)), y.resize(static_cast<size_t>(B));
    rng_fill_normal(2, step, x0);
    Rng r(3, step);
    for (int64_t b = 0; b < B; ++b) {
      t[b] = r.uniform();
      y[b] = static_cast<int32_t>(r.next_u32() % static_cast<uint32_t>(classes + 1));
      for (int64_t i = b * dim; i < (b + 1) * dim; ++i) xt[i] = (1.f - t[b]) * x0[i] + t[b] * x1[i];
    }
  }
  double loss_grad() {  // mean((v - (x1 - x0))^2)
    double loss = 0;
    const float k = 2.0f / static_cast<float>(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const float d = v[i] - (x1[i] - x0[i]);
      loss += static_cast<double>(d) * d;
      dv[i] = k * d;
    }
    return loss / static_cast<double>(v.size());
  }
};

}  // namespace

int bench_dit(BenchDitOptions o) {
  if (o.threads > 0) set_num_threads(o.threads);
  flow::DitConfig c;
  c.image = o.image, c.channels = o.channels, c.patch = o.patch, c.hidden = o.hidden, c.depth = o.depth;
  c.heads = o.heads, c.classes = o.classes, c.mlp_ratio = o.mlp_ratio, c.t_scale = o.t_scale;
  TEMPER_CHECK(kernels::precision_from_name(o.dtype, &c.precision))
      << "temper bench dit: --dtype " << o.dtype << " (expected f32 or bf16)";
  TEMPER_CHECK(o.batch >= 1 && o.steps >= 1 && o.warmup >= 0)
      << "temper bench dit: --batch " << o.batch << ", --steps " << o.steps << ", --warmup " << o.warmup
      << " (expected batch >= 1, steps >= 1, warmup >= 0)";
  flow::Dit model(c);
  model.init_params(0);
  kernels::AdamWConfig ac;
  ac.weight_decay = 0.01f;
  nn::AdamW opt(model.param_count(), ac);
  std::vector<float> grad(static_cast<size_t>(model.param_count()));
  FmBatch fb;
  fb.x1.resize(static_cast<size_t>(o.batch * model.dim()));
  rng_fill_normal(1, 0, fb.x1);
  if (!o.json)
    std::printf(
        "temper bench dit: %.2fM params, %lldx%lldx%lld patch %lld (%lld tokens), hidden %lld, depth %lld, "
        "heads %lld, batch %lld, %d threads, %s\n",
        model.param_count() / 1e6, (long long)o.image, (long long)o.image, (long long)o.channels, (long long)o.patch,
        (long long)c.tokens(), (long long)o.hidden, (long long)o.depth, (long long)o.heads, (long long)o.batch,
        num_threads(), o.dtype.c_str());
  double loss = 0;
  auto step = [&](int64_t i) {
    {
      TEMPER_PROFILE("data");
      fb.draw(static_cast<uint64_t>(i), o.batch, model.dim(), c.classes);
    }
    model.forward(fb.xt.data(), fb.t.data(), fb.y.data(), o.batch, fb.v.data(), true);
    loss = fb.loss_grad();
    std::fill(grad.begin(), grad.end(), 0.f);
    model.backward(fb.dv.data(), grad.data());
    TEMPER_PROFILE("adamw");
    opt.update(model.params().data(), grad.data(), 1e-4f);
  };
  for (int i = 0; i < o.warmup; ++i) step(i);
  profile_reset();
  profile_enable(o.profile);
  std::vector<double> step_s, cpu_s;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) {
    const auto ts = std::chrono::steady_clock::now();
    const double cs = cpu_seconds();
    step(o.warmup + i);
    step_s.push_back(std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count() * 1e4) /
                     1e4);
    cpu_s.push_back(std::round((cpu_seconds() - cs) * 1e4) / 1e4);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profile_enable(false);
  std::vector<double> sorted = step_s;
  std::sort(sorted.begin(), sorted.end());
  nlohmann::json j = {{"engine", "temper"},
                      {"image", o.image},
                      {"channels", o.channels},
                      {"patch", o.patch},
                      {"hidden", o.hidden},
                      {"depth", o.depth},
                      {"heads", o.heads},
                      {"batch", o.batch},
                      {"threads", num_threads()},
                      {"dtype", o.dtype},
                      {"params", model.param_count()},
                      {"images_per_s", std::round(o.batch * o.steps / secs * 100) / 100},
                      {"step_s", step_s},
                      {"cpu_step_s", cpu_s},
                      {"median_step_s", sorted[sorted.size() / 2]},
                      {"final_loss", loss},
                      {"peak_rss_mb", std::round(peak_resident_mib() * 10) / 10}};
  add_cpu_fields(j);
  if (o.profile) {
    nlohmann::json pj = nlohmann::json::object();
    for (auto& [k, v] : profile_report()) pj[k] = std::round(v / o.steps * 1e4) / 1e4;
    j["profile_s_per_step"] = pj;
  }
  std::printf("%s\n", j.dump().c_str());
  TEMPER_CHECK(std::isfinite(loss)) << "temper bench dit: non-finite loss " << loss;
  return 0;
}

}  // namespace temper::app

// `temper bench cuda`; see bench_cuda.h. FLOPs per trained token: 6 x (matrix parameters incl. the LM
// head) + 6 x L x H x D x T (causal attention, forward and backward), PaLM's MFU accounting.
#include "temper/app/bench_cuda.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "temper/app/cpu_report.h"
#include "temper/app/id_list.h"
#include "temper/core/clock.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/model/config.h"
#include "temper/model/param_layout.h"

#ifdef TEMPER_WITH_CUDA
#include "temper/kernels/cuda/gemm.h"
#include "temper/kernels/cuda/runtime.h"
#include "temper/model/cuda_transformer.h"
#include "temper/model/transformer.h"
#endif

namespace temper::app {

#ifndef TEMPER_WITH_CUDA
int bench_cuda(const BenchCudaOptions&) {
  TEMPER_FAIL() << "this temper was built without the CUDA backend (TEMPER_CUDA=OFF or nvcc not found at configure "
                   "time): rebuild on a machine with the CUDA toolkit";
}
#else

namespace {

double peak_bf16_tflops(const std::string& name, double override_tflops) {
  if (override_tflops > 0) return override_tflops;
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos ||
      name.find("H800") != std::string::npos || name.find("GH200") != std::string::npos)
    return 989.4;  // SXM dense bf16
  if (name.find("A100") != std::string::npos || name.find("A800") != std::string::npos) return 312.0;
  if (name.find("L40S") != std::string::npos) return 362.0;
  return 0;
}

// Parameters that take part in matrix products (every linear layer and the LM head).
int64_t matrix_params(const ModelConfig& c) {
  const int64_t C = c.hidden_size,
                per_layer = c.qkv_dim() * C + c.num_heads * c.head_dim * C + 3 * c.intermediate_size * C;
  return c.num_layers * per_layer + c.vocab_size * C;
}

class MeanLoss : public kernels::ClassifierLoss {  // cross-entropy, mean over rows
 public:
  explicit MeanLoss(int64_t n) : scale_(-1.f / static_cast<float>(n)) {}
  void coefs(int64_t, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = scale_;
    *g_ent = 0.f;
  }

 private:
  float scale_;
};

std::vector<float> random_params(const ModelConfig& cfg) {
  Transformer host(cfg);  // HF's init (normal 0.02, norms 1, biases 0), then only the flat buffer is kept
  host.init_random(0);
  return std::vector<float>(host.params(), host.params() + host.flat_size());
}

nlohmann::json device_json(const cuda::DeviceInfo& d) {
  return {{"name", d.name},
          {"sm", std::to_string(d.sm_major) + std::to_string(d.sm_minor)},
          {"sms", d.sms},
          {"memory_gib", static_cast<double>(d.total_bytes) / (1 << 30)},
          {"peak_bandwidth_gbs", d.peak_bandwidth_gbs}};
}

void bench_train_cuda(const BenchCudaOptions& o, const ModelConfig& cfg, const std::vector<float>& params,
                      const cuda::DeviceInfo& dev) {
  CudaTransformer m(cfg, o.device);
  m.set_params(params.data());
  const int64_t N = o.batch * o.seq;
  m.plan(N, o.seq);
  std::vector<int32_t> tokens(static_cast<size_t>(N)), targets(static_cast<size_t>(N));
  Rng r(1, 0);
  for (auto& t : tokens) t = static_cast<int32_t>(r.next_u32() % static_cast<uint32_t>(cfg.vocab_size));
  for (int64_t n = 0; n < N; ++n) targets[n] = (n % o.seq == o.seq - 1) ? -1 : tokens[n + 1];
  MeanLoss loss(N);
  std::vector<float> lp(static_cast<size_t>(N));
  kernels::AdamWConfig ac;
  std::vector<double> step_s;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    auto t0 = Clock::now();
    m.zero_grad();
    m.forward_backward(tokens.data(), targets.data(), o.batch, o.seq, loss, lp.data(), nullptr);
    m.adamw_step(ac, 1e-5f, s + 1, 1.0);
    m.synchronize();
    if (s >= o.warmup) step_s.push_back(seconds_since(t0));
  }
  double total = 0;
  for (double x : step_s) total += x;
  const double sec = total / static_cast<double>(step_s.size());
  const double flops_per_token = 6.0 * static_cast<double>(matrix_params(cfg)) +
                                 6.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * static_cast<double>(o.seq);
  const double achieved = flops_per_token * static_cast<double>(N) / sec / 1e12;
  const double peak = peak_bf16_tflops(dev.name, o.peak_tflops);
  double mean_lp = 0;
  for (float x : lp) mean_lp += x;
  nlohmann::json j = {{"bench", "train"},
                      {"engine", "temper"},
                      {"shape", o.shape},
                      {"batch", o.batch},
                      {"seq", o.seq},
                      {"dtype", "bf16"},
                      {"seconds_per_step", sec},
                      {"tokens_per_s", static_cast<double>(N) / sec},
                      {"model_tflops", achieved},
                      {"mfu", peak > 0 ? achieved / peak : 0.0},
                      {"peak_tflops", peak},
                      {"loss_first_step", -mean_lp / static_cast<double>(N)},
                      {"activation_gib", static_cast<double>(m.activation_bytes()) / (1 << 30)},
                      {"state_gib", static_cast<double>(m.state_bytes()) / (1 << 30)},
                      {"device", device_json(dev)}};
  add_cpu_fields(j);
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

void bench_decode_cuda(const BenchCudaOptions& o, const ModelConfig& cfg, const std::vector<float>& params,
                       const cuda::DeviceInfo& dev) {
  const int64_t bs = 16, per_row = (o.gen_len + 2 + bs - 1) / bs + 1;
  for (int64_t b : parse_id_list(o.batches, "--batches")) {
    CudaTransformer m(cfg, o.device);
    m.set_params(params.data());
    m.plan_decode(b, b * per_row, bs, per_row);
    auto& d = m.decode_buffers();
    std::vector<int32_t> tok(static_cast<size_t>(b)), zero(static_cast<size_t>(b), 0), one(static_cast<size_t>(b), 1),
        tables(static_cast<size_t>(b * per_row));
    for (int64_t i = 0; i < b; ++i) tok[i] = static_cast<int32_t>((i * 7919 + 13) % cfg.vocab_size);
    for (int64_t i = 0; i < b * per_row; ++i) tables[i] = static_cast<int32_t>(i);
    std::vector<float> temps(static_cast<size_t>(b), 1.0f);
    cuda::copy_to_device(d.tokens.data(), tok.data(), sizeof(int32_t) * b);
    cuda::copy_to_device(d.pos.data(), zero.data(), sizeof(int32_t) * b);
    cuda::copy_to_device(d.kv_len.data(), one.data(), sizeof(int32_t) * b);
    cuda::copy_to_device(d.tables.data(), tables.data(), sizeof(int32_t) * tables.size());
    cuda::copy_to_device(d.temperature.data(), temps.data(), sizeof(float) * b);
    cuda::DeviceBuffer<double> u_all(static_cast<size_t>(b * o.gen_len));
    std::vector<double> u(static_cast<size_t>(b * o.gen_len));
    for (int64_t i = 0; i < b; ++i) {
      Rng r(7, static_cast<uint64_t>(i));
      for (int64_t s = 0; s < o.gen_len; ++s) u[s * b + i] = r.uniform_f64();
    }
    cuda::copy_to_device(u_all.data(), u.data(), u.size() * sizeof(double));
    m.synchronize();
    const int untimed = 2;  // eager + capture
    Clock::time_point t0;
    for (int64_t s = 0; s < o.gen_len; ++s) {
      if (s == untimed) {
        m.synchronize();
        t0 = Clock::now();
      }
      TEMPER_CUDA_CHECK(
          cudaMemcpyAsync(d.u.data(), u_all.data() + s * b, sizeof(double) * b, cudaMemcpyDeviceToDevice, m.stream()));
      m.decode_step(b, o.graph);
    }
    m.synchronize();
    const double sec = seconds_since(t0);
    const int64_t timed = o.gen_len - untimed;
    const double tps = static_cast<double>(b * timed) / sec;
    // Bytes one step must read: bf16 matrices + the KV cache at the mean context (f32).
    const double weight_bytes = 2.0 * static_cast<double>(matrix_params(cfg));
    const double kv_bytes = 2.0 * 4.0 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim *
                            (static_cast<double>(untimed + o.gen_len) / 2.0) * static_cast<double>(b);
    const double roofline = dev.peak_bandwidth_gbs > 0
                                ? static_cast<double>(b) / ((weight_bytes + kv_bytes) / (dev.peak_bandwidth_gbs * 1e9))
                                : 0.0;
    std::vector<int32_t> drawn(static_cast<size_t>(b));
    cuda::copy_to_host(drawn.data(), d.drawn.data(), sizeof(int32_t) * b, m.stream());
    nlohmann::json j = {{"bench", "decode"},
                        {"engine", "temper"},
                        {"shape", o.shape},
                        {"batch", b},
                        {"steps", timed},
                        {"cuda_graph", o.graph},
                        {"tokens_per_s", tps},
                        {"ms_per_step", 1e3 * sec / static_cast<double>(timed)},
                        {"roofline_tokens_per_s", roofline},
                        {"fraction_of_roofline", roofline > 0 ? tps / roofline : 0.0},
                        {"kv_gib", static_cast<double>(m.kv_bytes()) / (1 << 30)},
                        {"last_token_row0", drawn[0]},
                        {"device", device_json(dev)}};
    add_cpu_fields(j);
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
}

void bench_gemm_cuda(const BenchCudaOptions& o, const ModelConfig& cfg, const cuda::DeviceInfo& dev) {
  const int64_t M = o.batch * o.seq, C = cfg.hidden_size, F = cfg.intermediate_size;
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const Shape shapes[] = {{"qkv", cfg.qkv_dim(), C},
                          {"o", C, cfg.num_heads * cfg.head_dim},
                          {"gate_up", 2 * F, C},
                          {"down", C, F},
                          {"lm_head", cfg.vocab_size, C}};
  cuda::Blas blas;
  for (const Shape& s : shapes) {
    cuda::DeviceBuffer<uint16_t> A(static_cast<size_t>(M * s.k)), B(static_cast<size_t>(s.n * s.k));
    cuda::DeviceBuffer<float> Cm(static_cast<size_t>(M * s.n));
    TEMPER_CUDA_CHECK(cudaMemset(A.data(), 0x3c, A.bytes()));  // ~1.0 in bf16
    TEMPER_CUDA_CHECK(cudaMemset(B.data(), 0x3c, B.bytes()));
    cuda::GemmArgs g;
    g.M = M;
    g.N = s.n;
    g.K = s.k;
    g.A = A.data();
    g.lda = s.k;
    g.B = B.data();
    g.ldb = s.k;
    g.C = Cm.data();
    g.ldc = s.n;
    for (int i = 0; i < 3; ++i) blas.gemm(g);
    cuda::synchronize(blas.stream());
    const int reps = 20;
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) blas.gemm(g);
    cuda::synchronize(blas.stream());
    const double sec = seconds_since(t0) / reps;
    const double tflops =
        2.0 * static_cast<double>(M) * static_cast<double>(s.n) * static_cast<double>(s.k) / sec / 1e12;
    nlohmann::json j = {{"bench", "gemm"}, {"engine", "temper"}, {"name", s.name},   {"M", M},
                        {"N", s.n},        {"K", s.k},           {"tflops", tflops}, {"device", dev.name}};
    add_cpu_fields(j);
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
}

}  // namespace

int bench_cuda(const BenchCudaOptions& o) {
  TEMPER_CHECK(o.what == "all" || o.what == "train" || o.what == "decode" || o.what == "gemm")
      << "--what must be train, decode, gemm or all, got '" << o.what << "'";
  TEMPER_CHECK(o.batch > 0 && o.seq >= 2 && o.steps > 0 && o.warmup >= 0 && o.gen_len > 2)
      << "need --batch > 0, --seq >= 2, --steps > 0, --warmup >= 0, --gen-len > 2";
  TEMPER_CHECK(cuda::available()) << "temper bench cuda: no CUDA device is visible";
  ModelConfig cfg = model_config_preset(o.shape);
  if (cfg.max_position_embeddings < o.seq) cfg.max_position_embeddings = o.seq;
  if (cfg.max_position_embeddings < o.gen_len + 4) cfg.max_position_embeddings = o.gen_len + 4;
  const cuda::DeviceInfo dev = cuda::device_info(o.device);
  TEMPER_CUDA_CHECK(cudaSetDevice(o.device));
  if (o.what == "gemm" || o.what == "all") bench_gemm_cuda(o, cfg, dev);
  if (o.what == "gemm") return 0;
  const std::vector<float> params = random_params(cfg);
  if (o.what == "train" || o.what == "all") bench_train_cuda(o, cfg, params, dev);
  if (o.what == "decode" || o.what == "all") bench_decode_cuda(o, cfg, params, dev);
  return 0;
}

#endif

}  // namespace temper::app

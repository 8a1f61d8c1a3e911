#include "temper/app/bench_train.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "temper/app/cpu_report.h"
#include "temper/app/model_source.h"
#include "temper/core/cpu_features.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/core/profile.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/dist/communicator.h"
#include "temper/io/hf_config.h"
#include "temper/io/hf_weights.h"
#include "temper/kernels/gemm_stats.h"
#include "temper/model/lora.h"
#include "temper/model/train_step.h"

namespace temper::app {

namespace {
// The products of the timed steps by shape (those with >= 1% of the products' time): calls and GFLOP/s inside
// the step beside the same shape timed alone now, through the same entry point, and their ratio.
nlohmann::json gemm_shape_rates(int steps, bool print) {
  const auto shapes = kernels::gemm_stats_report();
  double total = 0;
  for (const auto& s : shapes) total += s.seconds;
  nlohmann::json out = nlohmann::json::array();
  if (print) std::printf("  %-34s %9s %10s %10s %7s\n", "product", "calls", "in step", "alone", "ratio");
  for (const auto& s : shapes) {
    if (s.seconds < 0.01 * total) continue;
    const double in_step = s.shape.flops() * static_cast<double>(s.calls) / s.seconds * 1e-9;
    const double alone = kernels::gemm_shape_rate(s.shape, 3);
    const double r2 = std::round(in_step / alone * 100) / 100;
    if (print)
      std::printf("  %-34s %9.1f %10.1f %10.1f %7.2f\n", s.shape.name().c_str(), static_cast<double>(s.calls) / steps,
                  in_step, alone, r2);
    out.push_back({{"product", s.shape.name()},
                   {"calls_per_step", static_cast<double>(s.calls) / steps},
                   {"s_per_step", std::round(s.seconds / steps * 1e4) / 1e4},
                   {"in_step_gflops", std::round(in_step)},
                   {"alone_gflops", std::round(alone)},
                   {"ratio", r2}});
  }
  return out;
}

// --lora R: adapters of rank R (alpha 2R) on all seven products over a frozen `base`, attached to `model`.
std::unique_ptr<LoraAdapters> attach_bench_lora(Transformer& model, int64_t rank, LoraBase base) {
  LoraConfig lc;
  lc.rank = rank;
  lc.alpha = 2.0 * static_cast<double>(rank);
  lc.targets = {LoraTarget::q,    LoraTarget::k,  LoraTarget::v,   LoraTarget::o,
                LoraTarget::gate, LoraTarget::up, LoraTarget::down};
  lc.base = base;
  lc.validate("--lora");
  auto lora = std::make_unique<LoraAdapters>(model.config(), lc);
  lora->init(0);
  model.attach_lora(lora.get());  // holds the base (done already when it was planned)
  model.set_base_frozen(true);
  return lora;
}

}  // namespace

int bench_train(BenchTrainOptions o) {
  if (o.quick) {
    o.shape = "tiny";
    o.model_dir.clear();
    o.batch = 4;
    o.seq = 64;
    o.steps = 3;
    o.warmup = 1;
  }
  if (o.threads > 0) set_num_threads(o.threads);
  kernels::Precision prec;
  TEMPER_CHECK(kernels::precision_from_name(o.dtype, &prec)) << "--dtype must be f32 or bf16, got '" << o.dtype << "'";
  TEMPER_CHECK(o.batch > 0 && o.seq >= 2 && o.steps > 0 && o.warmup >= 0)
      << "need --batch > 0, --seq >= 2, --steps > 0, --warmup >= 0";
  LoraBase base = LoraBase::f32;
  TEMPER_CHECK(lora_base_from_name(o.lora_base, &base))
      << "--lora-base must be f32, bf16, int4 or nf4, got '" << o.lora_base << "'";
  TEMPER_CHECK(o.lora >= 0 && (o.lora > 0 || base == LoraBase::f32))
      << "--lora must be a rank >= 0 (got " << o.lora << "), and --lora-base " << o.lora_base << " needs one";
  TEMPER_CHECK(o.lora == 0 || o.device == "cpu") << "--lora trains on the CPU so far (--device " << o.device << ")";
  ModelConfig cfg;
  std::string shape_name = o.shape;
  if (!o.model_dir.empty()) {
    cfg = io::read_hf_config(o.model_dir + "/config.json");
    shape_name = std::filesystem::path(o.model_dir).filename().string();
  } else {
    cfg = model_config_preset(o.shape);
  }
  if (o.print_config) {
    std::printf("%s\n", io::hf_config_json(cfg).dump(2).c_str());
    return 0;
  }
  if (cfg.max_position_embeddings < o.seq) cfg.max_position_embeddings = o.seq;
  Transformer model(cfg);
  model.plan_held_base(base);  // a bf16 / int4 / nf4 base is held as it loads (or is drawn): never the f32 model whole
  std::string weights = o.model_dir.empty() ? "" : o.model_dir + "/model.safetensors";
  if (!weights.empty() && std::filesystem::exists(weights)) {
    io::load_hf_weights(model, io::SafetensorsFile::open(weights));
  } else {
    model.init_random(0);
  }
  const double load_peak_mib = peak_resident_mib();
  std::unique_ptr<LoraAdapters> lora = o.lora > 0 ? attach_bench_lora(model, o.lora, base) : nullptr;
  model.set_precision(prec);
  model.set_recompute(o.recompute);
  attach_device(model, o.device);
  model.plan(o.micro_batch > 0 && o.micro_batch < o.batch ? o.micro_batch * o.seq : o.batch * o.seq, o.seq);
  TrainConfig tc;
  tc.adamw.weight_decay = 0.01f;
  tc.lr.peak = 1e-4;
  tc.micro_batch = o.micro_batch;
  Trainer trainer(model, tc);
  if (lora) trainer.optimizer().train_adapters(lora.get());
  dist::Communicator& comm = dist::world();
  TEMPER_CHECK(o.zero == 0 || comm.size() > 1)
      << "--zero " << o.zero << " shards over data-parallel ranks: run under mpirun -np N (this is one process)";
  if (comm.size() > 1) {  // each rank its block of the batch
    trainer.optimizer().set_communicator(&comm);
    if (o.zero > 0) trainer.optimizer().set_sharded(true, o.zero == 2);
  }
  std::vector<int32_t> tokens(static_cast<size_t>(o.batch * o.seq));
  Rng rng(1234, 0);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.next_u32() % static_cast<uint32_t>(cfg.vocab_size));
  if (!o.json)
    std::printf("temper bench train: %s (%.1fM params), batch %lld x seq %lld, %d threads, %s, isa %s, gemm %s%s%s\n",
                cfg.summary().c_str(), model.num_params() / 1e6, static_cast<long long>(o.batch),
                static_cast<long long>(o.seq), num_threads(), o.dtype.c_str(), std::string(isa_name(cpu_isa())).c_str(),
                std::string(kernels::gemm_backend_name(kernels::gemm_backend())).c_str(),
                o.recompute ? ", recompute" : "",
                lora ? (", LoRA r=" + std::to_string(o.lora) + " on a " + o.lora_base + " base").c_str() : "");
  StepStats st;
  for (int i = 0; i < o.warmup; ++i) st = trainer.step(tokens.data(), nullptr, o.batch, o.seq);
  profile_reset();
  profile_enable(o.profile);
  kernels::gemm_stats_reset();
  kernels::gemm_stats_enable(o.profile);
  std::vector<double> step_s;  // each timed step's seconds (a median is robust to a noisy neighbour)
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) {
    auto ts = std::chrono::steady_clock::now();
    st = trainer.step(tokens.data(), nullptr, o.batch, o.seq);
    step_s.push_back(std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count() * 1e4) /
                     1e4);
    if (!o.json) std::printf("  step %d: loss %.4f grad_norm %.3f\n", i, st.loss, st.grad_norm);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profile_enable(false);
  kernels::gemm_stats_enable(false);
  double tps = static_cast<double>(o.batch * o.seq * o.steps) / secs;
  nlohmann::json j = {{"engine", "temper"},
                      {"shape", shape_name},
                      {"batch", o.batch},
                      {"seq", o.seq},
                      {"threads", num_threads()},
                      {"dtype", o.dtype},
                      {"device", o.device},
                      {"tokens_per_s", std::round(tps * 100) / 100},
                      {"step_s", step_s},
                      {"peak_rss_mb", std::round(peak_resident_mib() * 10) / 10},
                      {"activation_mb", std::round(model.activation_bytes() / 1048576.0 * 10) / 10},
                      {"recompute", o.recompute},
                      {"lora", o.lora},
                      {"lora_base", o.lora_base},
                      {"load_peak_rss_mb", std::round(load_peak_mib * 10) / 10},
                      {"ranks", comm.size()},
                      {"rank", comm.rank()},
                      {"zero", o.zero},
                      {"final_loss", st.loss}};
  add_cpu_fields(j);  // cpu, isa, amx, bf16_gemm, gemm
  if (o.profile) {
    nlohmann::json pj = nlohmann::json::object();
    for (auto& [k, v] : profile_report()) pj[k] = std::round(v / o.steps * 1e4) / 1e4;
    j["profile_s_per_step"] = pj;
    j["gemm_shapes"] = gemm_shape_rates(o.steps, !o.json);
  }
  std::printf("%s\n", j.dump().c_str());
  TEMPER_CHECK(std::isfinite(st.loss)) << "training produced a non-finite loss";
  return 0;
}

}  // namespace temper::app

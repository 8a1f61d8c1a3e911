#include "temper/app/bench_rollout.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "temper/app/bench_roofline.h"
#include "temper/app/cpu_report.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/core/profile.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/model/frozen_base.h"
#include "temper/rollout/engine.h"

namespace temper::app {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One timed engine run: its seconds and the engine's counters.
struct Run {
  double seconds;
  rollout::EngineStats stats;
};

// Runs the requests for n new tokens each, timed.
Run timed_run(rollout::RolloutEngine& eng, std::vector<rollout::RolloutRequest>& rs, int64_t n) {
  for (auto& r : rs) r.max_new = n;
  double t0 = now();
  auto out = eng.run(rs);
  return Run{now() - t0, eng.stats()};
}

// B prompts of --prompt-len random tokens, G samples each: the engine prefills each prompt once and forks its
// blocks to the G members.
std::vector<rollout::RolloutRequest> group_requests(const BenchRolloutOptions& o, const ModelConfig& c) {
  std::vector<rollout::RolloutRequest> reqs(static_cast<size_t>(o.batch));
  Rng rng(3, 0);
  for (auto& r : reqs) {
    for (int64_t i = 0; i < o.prompt_len; ++i) r.prompt.push_back(static_cast<int32_t>(rng.next_u32() % c.vocab_size));
    r.group_size = o.group;
    r.sampler.temperature = 1.0f;
    r.seed = rng.next_u32();
  }
  return reqs;
}

// The 1-token and N-token runs: the first of each (the profile, under --profile, holds the N-token run's decode-only
// steps) and the fastest times over `pairs` of them.
struct DecodeTiming {
  Run r1, rn;
  double t1, tn;
  int64_t pairs;
  double decode_only_tps;  // the fastest N-token run's decode-only steps: tokens over their seconds
};

// Decode tokens per second of a run's decode-only steps (0 without any).
double decode_only_rate(const rollout::EngineStats& s) {
  return s.decode_only_s > 0 ? static_cast<double>(s.decode_only_tokens) / s.decode_only_s : 0.0;
}

// Times the 1-token and N-token runs after a warm-up. --profile: the phases of the N-token run's steps that only
// decode (the engine mutes the profiler in steps with prompt rows: EngineConfig::profile_decode_only). Subtracting
// the 1-token run's phases instead counted prefill's differences between the runs as decode (its KV writes: 11 ms
// a step at batch 64, prompt 256, against 0.6 ms timed per call).
DecodeTiming time_decode(const BenchRolloutOptions& o, rollout::RolloutEngine& eng,
                         std::vector<rollout::RolloutRequest>& reqs) {
  timed_run(eng, reqs, 2);  // warm-up: oneDNN kernels, pages of the pool
  Run r1 = timed_run(eng, reqs, 1);
  profile_reset();
  profile_enable(o.profile);
  Run rn = timed_run(eng, reqs, o.gen_len);
  profile_enable(false);
  // Decode time is the difference of two runs, so noise in either can swamp it on a small shape (a
  // shared 2-core machine once gave tn < t1): alternate more pairs for up to a second, at least two
  // pairs and at most twenty, and keep the fastest of each.
  double t1 = r1.seconds, tn = rn.seconds, spent = t1 + tn, steady = decode_only_rate(rn.stats);
  int64_t pairs = 1;
  while (pairs < 2 || (spent < 1.0 && pairs < 20)) {
    Run a = timed_run(eng, reqs, 1), b = timed_run(eng, reqs, o.gen_len);
    t1 = std::min(t1, a.seconds);
    tn = std::min(tn, b.seconds);
    steady = std::max(steady, decode_only_rate(b.stats));
    spent += a.seconds + b.seconds;
    ++pairs;
  }
  TEMPER_CHECK(tn > t1) << "bench rollout: the " << o.gen_len << "-token run (" << tn
                        << " s) was not slower than the 1-token run (" << t1 << " s) over " << pairs
                        << " pairs; the machine is too noisy for this shape, raise --gen-len";
  return DecodeTiming{r1, rn, t1, tn, pairs, steady};
}

// The same B x G sequences as B x G independent requests (each its own copy of the prompt): the prefill work
// that sharing saves, in tokens computed and seconds of a 1-token run (the shared one: r1 in t1 seconds).
nlohmann::json prefix_sharing(const BenchRolloutOptions& o, Transformer& m, KvPool& pool,
                              const std::vector<rollout::RolloutRequest>& reqs, const Run& r1, double t1) {
  const int64_t G = o.group, seqs = o.batch * G;
  std::vector<rollout::RolloutRequest> indep;
  for (const auto& r : reqs)
    for (int64_t g = 0; g < G; ++g) {
      indep.push_back(r);
      indep.back().group_size = 1;
      indep.back().stream = static_cast<uint64_t>(g);
    }
  // One engine step holds at most the model's context in tokens (the step's activation arena), so
  // the independent prompts are admitted in waves of max_position_embeddings / P.
  rollout::EngineConfig ic;
  ic.max_seqs = std::max<int64_t>(1, std::min(seqs, m.config().max_position_embeddings / o.prompt_len));
  rollout::RolloutEngine ieng(m, pool, ic);
  timed_run(ieng, indep, 1);  // warm-up: pages of the pool
  Run i1 = timed_run(ieng, indep, 1);
  return {{"prefill_tokens_requested", seqs * o.prompt_len},
          {"shared_prefill_tokens_computed", r1.stats.prefill_tokens},
          {"shared_prefill_s", std::round(t1 * 1000) / 1000},
          {"independent_prefill_tokens_computed", i1.stats.prefill_tokens},
          {"independent_prefill_s", std::round(i1.seconds * 1000) / 1000},
          {"independent_prefill_steps", i1.stats.steps},
          {"prefill_tokens_ratio", std::round(static_cast<double>(i1.stats.prefill_tokens) /
                                              static_cast<double>(r1.stats.prefill_tokens) * 100) /
                                       100},
          {"prefill_time_ratio", std::round(i1.seconds / t1 * 100) / 100}};
}

// Milliseconds per decode step of each profiled phase: the profile (the decode-only steps of the N-token run) over
// their count.
nlohmann::json decode_step_profile(int64_t decode_steps) {
  nlohmann::json pj;
  for (auto& [k, v] : profile_report())
    pj[k] = std::round(v / static_cast<double>(std::max<int64_t>(1, decode_steps)) * 1e6) / 1e3;
  return pj;
}

}  // namespace

Transformer& open_bench_model(const BenchRolloutOptions& o, std::unique_ptr<Transformer>& owned, LoadedModel& lm,
                              std::unique_ptr<LoraAdapters>* lora) {
  kernels::Precision prec;
  TEMPER_CHECK(kernels::precision_from_name(o.dtype, &prec)) << "--dtype must be f32 or bf16, got '" << o.dtype << "'";
  LoraBase base = LoraBase::f32;
  TEMPER_CHECK(lora_base_from_name(o.lora_base, &base))
      << "--lora-base must be f32, bf16, int4 or nf4, got '" << o.lora_base << "'";
  TEMPER_CHECK(o.lora >= 0 && (o.lora > 0 || base == LoraBase::f32))
      << "--lora must be a rank >= 0 (got " << o.lora << "), and --lora-base " << o.lora_base << " needs one";
  TEMPER_CHECK(o.lora == 0 || lora) << "--lora is not taken with --speculative";
  TEMPER_CHECK(o.lora == 0 || o.device == "cpu") << "--lora runs on the CPU so far (--device " << o.device << ")";
  Transformer* m;
  if (!o.model.empty()) {
    lm = load_model(o.model, base);  // a bf16 / int4 / nf4 base is held as it loads
    m = lm.model.get();
  } else {
    owned = std::make_unique<Transformer>(model_config_preset(o.shape));
    owned->plan_held_base(base);
    owned->init_random(0);
    m = owned.get();
  }
  if (o.lora > 0) {
    LoraConfig lc;
    lc.rank = o.lora;
    lc.alpha = 2.0 * static_cast<double>(o.lora);
    lc.targets = {LoraTarget::q,    LoraTarget::k,  LoraTarget::v,   LoraTarget::o,
                  LoraTarget::gate, LoraTarget::up, LoraTarget::down};
    lc.base = base;
    lc.validate("--lora");
    *lora = std::make_unique<LoraAdapters>(m->config(), lc);
    (*lora)->init(0);
    m->attach_lora(lora->get());
    m->set_base_frozen(true);
  }
  m->set_precision(prec);
  attach_device(*m, o.device);
  return *m;
}

int bench_rollout(const BenchRolloutOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  TEMPER_CHECK(o.batch > 0 && o.group > 0 && o.prompt_len > 0 && o.gen_len > 1)
      << "need --batch > 0, --group > 0, --prompt-len > 0, --gen-len > 1";
  std::unique_ptr<Transformer> owned;
  LoadedModel lm;
  std::unique_ptr<LoraAdapters> lora;
  Transformer* m = &open_bench_model(o, owned, lm, &lora);
  const kernels::Precision prec = m->precision();
  const ModelConfig& c = m->config();
  const int64_t G = o.group, seqs = o.batch * G;
  const int64_t block = kKvBlockSize, per_seq = (o.prompt_len + o.gen_len + block - 1) / block + 1;
  KvPool pool(c, block, seqs * per_seq + 4, kv_dtype(prec));
  rollout::EngineConfig ec;
  ec.max_seqs = seqs;
  ec.profile_decode_only = o.profile;
  rollout::RolloutEngine eng(*m, pool, ec);
  std::vector<rollout::RolloutRequest> reqs = group_requests(o, c);
  const DecodeTiming d = time_decode(o, eng, reqs);
  double prefill_tps = static_cast<double>(o.batch * o.prompt_len) / d.t1;
  double decode_tps = static_cast<double>(seqs * (o.gen_len - 1)) / (d.tn - d.t1);
  nlohmann::json group;
  if (G > 1) group = prefix_sharing(o, *m, pool, reqs, d.r1, d.t1);
  const BenchRooflineOptions roofline;  // the bound's bandwidth: bench roofline's read figure
  const double bw = read_bandwidth_gbs(roofline.memory_gib, roofline.reps);
  double weight_bytes = static_cast<double>(m->num_params()) * (prec == kernels::Precision::bf16 ? 2.0 : 4.0);
  if (const FrozenBase* held = m->held_base())  // the held products' bytes in place of theirs at the precision
    weight_bytes += static_cast<double>(held->bytes()) -
                    static_cast<double>(FrozenBase::params_for(c)) * (prec == kernels::Precision::bf16 ? 2.0 : 4.0);
  nlohmann::json j = {{"engine", "temper"},
                      {"shape", o.model.empty() ? o.shape : o.model},
                      {"batch", seqs},
                      {"prompt_len", o.prompt_len},
                      {"gen_len", o.gen_len},
                      {"threads", num_threads()},
                      {"dtype", o.dtype},
                      {"device", o.device},
                      {"prefill_tokens_per_s", std::round(prefill_tps * 10) / 10},
                      {"decode_tokens_per_s", std::round(decode_tps * 10) / 10},
                      // The steps that only decode, timed in the engine (decode_tokens_per_s: the difference of a
                      // 1-token and an N-token run, which also carries their prefills' difference).
                      {"decode_only_tokens_per_s", std::round(d.decode_only_tps * 10) / 10},
                      {"peak_rss_mb", std::round(peak_resident_mib() * 10) / 10},
                      {"read_bandwidth_gb_s", std::round(bw * 10) / 10},
                      {"batch1_bandwidth_bound_tokens_per_s", std::round(bw * 1e9 / weight_bytes * 10) / 10}};
  if (o.lora > 0) {
    j["lora"] = o.lora;
    j["lora_base"] = o.lora_base;
  }
  add_cpu_fields(j);  // cpu, isa, amx, bf16_gemm, gemm
  // Of the timed N-token run: 1 prefill step + N - 1 decode steps when nothing is preempted.
  j["engine_steps"] = d.rn.stats.steps;
  j["preemptions"] = d.rn.stats.preemptions;
  j["timing_pairs"] = d.pairs;  // 1-token and N-token runs timed; the fastest of each is used
  if (o.profile) {
    j["profile_ms_per_decode_step"] = decode_step_profile(d.rn.stats.decode_only_steps);
    j["profiled_decode_steps"] = d.rn.stats.decode_only_steps;
  }
  if (G > 1) {
    j["prompts"] = o.batch;
    j["group"] = G;
    j["prefix_sharing"] = group;
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace temper::app

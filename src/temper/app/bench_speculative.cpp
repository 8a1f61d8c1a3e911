#include "temper/app/bench_speculative.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/app/cpu_report.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/model/int4_drafter.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/spec_control.h"

namespace temper::app {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double r3(double x) {
  return std::round(x * 1000) / 1000;
}

const char* kTexts[] = {
    "Question: A train travels 60 kilometres in 45 minutes. What is its average speed in kilometres per hour? "
    "Answer: Let's think step by step.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "def merge_sort(values):\n    \"\"\"Sort a list of numbers with merge sort.\"\"\"\n",
    "The French Revolution began in 1789 and changed European politics because",
    "Explain to a ten-year-old why the sky is blue.",
    "Question: Solve for x: 3x + 7 = 22. Answer: First, subtract 7 from both sides.",
    "List five tips for writing clean and readable code:\n1.",
    "Photosynthesis is the process by which plants",
};

// --batches: the comma-separated batch sizes, each > 0.
std::vector<int64_t> parse_batches(const std::string& list) {
  std::vector<int64_t> batches;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      batches.push_back(std::stoll(item));
    } catch (...) {
      TEMPER_FAIL() << "--batches: '" << item << "' is not an integer (expected e.g. 1,2,4,8)";
    }
    TEMPER_CHECK(batches.back() > 0) << "--batches: sizes must be > 0";
  }
  return batches;
}

// Prompts: the texts through the tokenizer, or 8 of --prompt-len random tokens.
std::vector<std::vector<int32_t>> bench_prompts(const BenchRolloutOptions& o, const LoadedModel& lm,
                                                const ModelConfig& c) {
  std::vector<std::vector<int32_t>> prompts;
  if (lm.tokenizer) {
    for (const char* t : kTexts) prompts.push_back(lm.tokenizer->encode(t, true));
  } else {
    Rng rng(3, 0);
    for (int i = 0; i < 8; ++i) {
      prompts.emplace_back();
      for (int64_t k = 0; k < o.prompt_len; ++k)
        prompts.back().push_back(static_cast<int32_t>(rng.next_u32() % c.vocab_size));
    }
  }
  return prompts;
}

// A KV pool for the largest batch (or the vocabulary ranking's 4 samples per prompt) of the longest prompt plus
// --gen-len tokens and a draft.
KvPool bench_pool(const BenchRolloutOptions& o, const Transformer& m, const std::vector<std::vector<int32_t>>& prompts,
                  int64_t bmax) {
  int64_t max_prompt = 0;
  for (const auto& p : prompts) max_prompt = std::max<int64_t>(max_prompt, static_cast<int64_t>(p.size()));
  const int64_t block = kKvBlockSize, per_seq = (max_prompt + o.gen_len + o.gamma + 2 + block - 1) / block + 1;
  const int64_t seqs = std::max<int64_t>(bmax, o.drafter_vocab > 0 ? 4 * static_cast<int64_t>(prompts.size()) : 0);
  return KvPool(m.config(), block, seqs * per_seq + 64, kv_dtype(m.precision()));
}

// The drafter's vocabulary subset ranked by the tokens of earlier samples of these prompts (4 each, other seeds,
// --gen-len tokens), as a training run ranks it by its earlier steps' rollouts.
void rank_drafter_vocab(const BenchRolloutOptions& o, Transformer& m, KvPool& pool,
                        const std::vector<std::vector<int32_t>>& prompts, Int4Drafter& drafter) {
  std::vector<rollout::RolloutRequest> seen(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    seen[i].prompt = prompts[i];
    seen[i].group_size = 4;
    seen[i].max_new = o.gen_len;
    seen[i].sampler.temperature = o.temperature;
    seen[i].seed = 100000 + i;
  }
  rollout::RolloutEngine eng(m, pool, rollout::EngineConfig(static_cast<int64_t>(4 * prompts.size())));
  for (const rollout::Completion& c : eng.run(seen)) drafter.observe(c.tokens);
  drafter.refresh(m);
}

// What the rows of every batch size share: the model and its pool, the prompts, the drafter, the speculation
// settings with the controller of every speculative run (always on, at --gamma) and the calibrated cost model.
struct SpecBench {
  const BenchRolloutOptions& o;
  Transformer& m;
  KvPool& pool;
  const std::vector<std::vector<int32_t>>& prompts;
  Int4Drafter& drafter;
  const rollout::SpecConfig& sc;
  rollout::SpecController& always;
  const rollout::SpecCostModel& cost;
};

// One timed engine run: its seconds, the engine's counters and the completions.
struct Timed {
  double s;
  rollout::EngineStats st;
  std::vector<rollout::Completion> out;
};

// The timed runs of one batch size: plain decoding of 1 and of --gen-len tokens, speculative of --gen-len.
struct BatchRuns {
  Timed p1, pn, sn;
};

// Times B requests (the prompts in turn): the plain runs after a warm-up, then the speculative run after one.
BatchRuns time_batch(const SpecBench& b, int64_t B) {
  std::vector<rollout::RolloutRequest> reqs(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) {
    rollout::RolloutRequest& r = reqs[static_cast<size_t>(i)];
    r.prompt = b.prompts[static_cast<size_t>(i) % b.prompts.size()];
    r.sampler.temperature = b.o.temperature;
    r.seed = 1000 + static_cast<uint64_t>(i);
  }
  auto run = [&](bool spec, int64_t n) {
    rollout::EngineConfig ec(B);
    if (spec) {
      ec.drafter = &b.drafter;
      ec.spec = &b.always;
    }
    rollout::RolloutEngine eng(b.m, b.pool, ec);
    for (auto& r : reqs) r.max_new = n;
    double a = now();
    std::vector<rollout::Completion> out = eng.run(reqs);
    return Timed{now() - a, eng.stats(), std::move(out)};
  };
  run(false, 2);  // warm-up
  Timed p1 = run(false, 1), pn = run(false, b.o.gen_len);
  run(true, 3);
  Timed sn = run(true, b.o.gen_len);
  return BatchRuns{std::move(p1), std::move(pn), std::move(sn)};
}

// The gamma the default ladder ({5, 7, 9, 11}, a rung up after `persistence` rollouts at acceptance >= 0.94, down
// after as many at <= 0.85) reaches from its first rung with this acceptance (measured at --gamma): enough
// rollouts to climb to the top.
int64_t ladder_gamma(const rollout::EngineStats& st) {
  rollout::SpecController ladder{rollout::SpecConfig{}};
  const rollout::SpecConfig& lc = ladder.config();
  for (int64_t k = 0; k < lc.persistence * static_cast<int64_t>(lc.ladder.size() - 1); ++k)
    ladder.end_rollout(st.spec_cycles, st.drafted, st.accepted);
  return ladder.gamma();
}

// A batch size's row: decode throughput of both kinds, acceptance, the cost model's prediction and the times.
nlohmann::json batch_row(const SpecBench& b, int64_t B, const BatchRuns& r) {
  const BenchRolloutOptions& o = b.o;
  const Timed &p1 = r.p1, &pn = r.pn, &sn = r.sn;
  std::vector<int32_t> emitted;
  for (const rollout::Completion& c : sn.out) emitted.insert(emitted.end(), c.tokens.begin(), c.tokens.end());
  // Decode time: the N-token run minus the 1-token run (prefill and the first token) for both.
  const double decode_tokens = static_cast<double>(B * (o.gen_len - 1));
  const double plain_tps = decode_tokens / (pn.s - p1.s), spec_tps = decode_tokens / (sn.s - p1.s);
  rollout::SpecController model_view(b.sc);
  model_view.set_cost_model(b.cost);
  const double L =
      sn.st.spec_cycles > 0 ? 1.0 + static_cast<double>(sn.st.accepted) / static_cast<double>(sn.st.spec_cycles) : 1.0;
  model_view.end_rollout(sn.st.spec_cycles, sn.st.drafted, sn.st.accepted, false);  // predict with the measured L
  const double predicted = model_view.predicted_speedup(B);
  return {{"batch", B},
          {"gamma", o.gamma},
          {"plain_decode_tokens_per_s", std::round(plain_tps * 10) / 10},
          {"spec_decode_tokens_per_s", std::round(spec_tps * 10) / 10},
          {"speedup", r3(spec_tps / plain_tps)},
          {"accept_rate",
           r3(sn.st.drafted > 0 ? static_cast<double>(sn.st.accepted) / static_cast<double>(sn.st.drafted) : 0.0)},
          {"mean_accepted_len", r3(L)},
          {"predicted_speedup", r3(predicted)},
          {"ladder_gamma", ladder_gamma(sn.st)},
          {"drafter_vocab_coverage", r3(b.drafter.vocab_coverage(emitted))},
          {"toggle_on", predicted >= 1.0 + b.sc.margin},
          {"spec_draft_s", r3(sn.st.draft_s)},
          {"spec_verify_s", r3(sn.st.verify_s)},
          {"spec_accept_s", r3(sn.st.accept_s)},
          {"spec_total_s", r3(sn.s)},
          {"plain_total_s", r3(pn.s)},
          {"plain_steps", pn.st.steps},
          {"spec_steps", sn.st.steps}};
}

// The closing line: the settings, the drafter's size, the setup times and the calibrated cost model.
nlohmann::json summary(const SpecBench& b, double weight_mb, double build_s, double calib_s) {
  const BenchRolloutOptions& o = b.o;
  return {{"engine", "temper"},
          {"model", o.model.empty() ? o.shape : o.model},
          {"gen_len", o.gen_len},
          {"temperature", o.temperature},
          {"threads", num_threads()},
          {"dtype", o.dtype},
          {"drafter_group", b.drafter.layers().front().gu.group},
          {"drafter_head", o.drafter_head},
          {"drafter_vocab", o.drafter_vocab},
          {"drafter_mb", r3(static_cast<double>(b.drafter.bytes()) / (1 << 20))},
          {"model_f32_mb", r3(weight_mb)},
          {"drafter_build_s", r3(build_s)},
          {"calibration_s", r3(calib_s)},
          {"cost_rows", b.cost.rows},
          {"cost_policy_s", b.cost.policy_s},
          {"cost_draft_s", b.cost.draft_s},
          {"cost_sample_s", b.cost.sample_s},
          {"cost_dist_s", b.cost.dist_s}};
}

}  // namespace

int bench_speculative(const BenchRolloutOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  const std::vector<int64_t> batches = parse_batches(o.batches);
  TEMPER_CHECK(!batches.empty() && o.gen_len > 1 && o.gamma >= 1) << "need --batches, --gen-len > 1 and --gamma >= 1";
  std::unique_ptr<Transformer> owned;
  LoadedModel lm;
  Transformer* m = &open_bench_model(o, owned, lm);
  const std::vector<std::vector<int32_t>> prompts = bench_prompts(o, lm, m->config());
  const int64_t bmax = *std::max_element(batches.begin(), batches.end());
  KvPool pool = bench_pool(o, *m, prompts, bmax);

  double t0 = now();
  const DraftHead head = draft_head_named(o.drafter_head, "--drafter-head");
  Int4Drafter drafter(o.drafter_group, 0, head);
  TEMPER_CHECK(o.drafter_vocab >= 0) << "--drafter-vocab must be >= 0 (0: every token), got " << o.drafter_vocab;
  drafter.set_vocab(o.drafter_vocab);
  drafter.refresh(*m);
  const double build_s = now() - t0;
  const double weight_mb = static_cast<double>(m->num_params()) * 4 / (1 << 20);
  if (o.drafter_vocab > 0) rank_drafter_vocab(o, *m, pool, prompts, drafter);
  rollout::SpecConfig sc;
  sc.ladder = {o.gamma};
  sc.toggle = rollout::SpecToggle::always;
  rollout::SpecController always(sc);
  t0 = now();
  rollout::SamplerConfig bench_sampler;
  bench_sampler.temperature = o.temperature;
  const rollout::SpecCostModel cost =
      rollout::calibrate_spec_cost(*m, pool, drafter, std::min<int64_t>(bmax * (o.gamma + 1), 1024), 3, bench_sampler);
  const double calib_s = now() - t0;

  const SpecBench b{o, *m, pool, prompts, drafter, sc, always, cost};
  for (int64_t B : batches) {
    nlohmann::json row = batch_row(b, B, time_batch(b, B));
    add_cpu_fields(row);
    std::printf("%s\n", row.dump().c_str());
    std::fflush(stdout);
  }
  nlohmann::json sum = summary(b, weight_mb, build_s, calib_s);
  add_cpu_fields(sum);
  std::printf("%s\n", sum.dump().c_str());
  return 0;
}

}  // namespace temper::app

#include "temper/app/bench_speculative.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/thread_pool.h"
#include "temper/model/int4_drafter.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/spec_control.h"

namespace temper::app {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double r3(double x) { return std::round(x * 1000) / 1000; }

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

}  // namespace

int bench_speculative(const BenchRolloutOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  std::vector<int64_t> batches;
  {
    std::stringstream ss(o.batches);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        batches.push_back(std::stoll(item));
      } catch (...) {
        TEMPER_FAIL() << "--batches: '" << item << "' is not an integer (expected e.g. 1,2,4,8)";
      }
      TEMPER_CHECK(batches.back() > 0) << "--batches: sizes must be > 0";
    }
  }
  TEMPER_CHECK(!batches.empty() && o.gen_len > 1 && o.gamma >= 1) << "need --batches, --gen-len > 1 and --gamma >= 1";
  std::unique_ptr<Transformer> owned;
  LoadedModel lm;
  Transformer* m = &open_bench_model(o, owned, lm);
  const ModelConfig& c = m->config();
  // Prompts: the texts through the tokenizer, or random tokens of --prompt-len.
  std::vector<std::vector<int32_t>> prompts;
  if (lm.tokenizer) {
    for (const char* t : kTexts) prompts.push_back(lm.tokenizer->encode(t, true));
  } else {
    Rng rng(3, 0);
    for (int i = 0; i < 8; ++i) {
      prompts.emplace_back();
      for (int64_t k = 0; k < o.prompt_len; ++k) prompts.back().push_back(static_cast<int32_t>(rng.next_u32() % c.vocab_size));
    }
  }
  int64_t max_prompt = 0;
  for (const auto& p : prompts) max_prompt = std::max<int64_t>(max_prompt, static_cast<int64_t>(p.size()));
  const int64_t bmax = *std::max_element(batches.begin(), batches.end());
  const int64_t block = kKvBlockSize, per_seq = (max_prompt + o.gen_len + o.gamma + 2 + block - 1) / block + 1;
  const int64_t seqs = std::max<int64_t>(bmax, o.drafter_vocab > 0 ? 4 * static_cast<int64_t>(prompts.size()) : 0);
  KvPool pool(c, block, seqs * per_seq + 64, kv_dtype(m->precision()));

  double t0 = now();
  const DraftHead head = draft_head_named(o.drafter_head, "--drafter-head");
  Int4Drafter drafter(o.drafter_group, 0, head);
  TEMPER_CHECK(o.drafter_vocab >= 0) << "--drafter-vocab must be >= 0 (0: every token), got " << o.drafter_vocab;
  drafter.set_vocab(o.drafter_vocab);
  drafter.refresh(*m);
  const double build_s = now() - t0;
  const double weight_mb = static_cast<double>(m->num_params()) * 4 / (1 << 20);
  if (o.drafter_vocab > 0) {
    // The subset ranked by the tokens of earlier samples of these prompts (4 each, other seeds, --gen-len
    // tokens), as a training run ranks it by its earlier steps' rollouts.
    std::vector<rollout::RolloutRequest> seen(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      seen[i].prompt = prompts[i];
      seen[i].group_size = 4;
      seen[i].max_new = o.gen_len;
      seen[i].sampler.temperature = o.temperature;
      seen[i].seed = 100000 + i;
    }
    rollout::RolloutEngine eng(*m, pool, rollout::EngineConfig(static_cast<int64_t>(4 * prompts.size())));
    for (const rollout::Completion& c : eng.run(seen)) drafter.observe(c.tokens);
    drafter.refresh(*m);
  }
  rollout::SpecConfig sc;
  sc.ladder = {o.gamma};
  sc.toggle = rollout::SpecToggle::always;
  rollout::SpecController always(sc);
  t0 = now();
  rollout::SamplerConfig bench_sampler;
  bench_sampler.temperature = o.temperature;
  rollout::SpecCostModel cost =
      rollout::calibrate_spec_cost(*m, pool, drafter, std::min<int64_t>(bmax * (o.gamma + 1), 1024), 3, bench_sampler);
  const double calib_s = now() - t0;

  nlohmann::json rows = nlohmann::json::array();
  for (int64_t B : batches) {
    std::vector<rollout::RolloutRequest> reqs(static_cast<size_t>(B));
    for (int64_t i = 0; i < B; ++i) {
      rollout::RolloutRequest& r = reqs[static_cast<size_t>(i)];
      r.prompt = prompts[static_cast<size_t>(i) % prompts.size()];
      r.sampler.temperature = o.temperature;
      r.seed = 1000 + static_cast<uint64_t>(i);
    }
    struct Timed {
      double s;
      rollout::EngineStats st;
      std::vector<rollout::Completion> out;
    };
    auto run = [&](bool spec, int64_t n) {
      rollout::EngineConfig ec(B);
      if (spec) {
        ec.drafter = &drafter;
        ec.spec = &always;
      }
      rollout::RolloutEngine eng(*m, pool, ec);
      for (auto& r : reqs) r.max_new = n;
      double a = now();
      std::vector<rollout::Completion> out = eng.run(reqs);
      return Timed{now() - a, eng.stats(), std::move(out)};
    };
    run(false, 2);  // warm-up
    Timed p1 = run(false, 1), pn = run(false, o.gen_len);
    run(true, 3);
    Timed sn = run(true, o.gen_len);
    std::vector<int32_t> emitted;
    for (const rollout::Completion& c : sn.out) emitted.insert(emitted.end(), c.tokens.begin(), c.tokens.end());
    // Decode time: the N-token run minus the 1-token run (prefill and the first token) for both.
    const double decode_tokens = static_cast<double>(B * (o.gen_len - 1));
    const double plain_tps = decode_tokens / (pn.s - p1.s), spec_tps = decode_tokens / (sn.s - p1.s);
    rollout::SpecController model_view(sc);
    model_view.set_cost_model(cost);
    const double L = sn.st.spec_cycles > 0 ? 1.0 + static_cast<double>(sn.st.accepted) / static_cast<double>(sn.st.spec_cycles) : 1.0;
    model_view.end_rollout(sn.st.spec_cycles, sn.st.drafted, sn.st.accepted, false);  // predict with the measured L
    const double predicted = model_view.predicted_speedup(B);
    // The gamma the default ladder ({5, 7, 9, 11}, a rung up after `persistence` rollouts at acceptance >= 0.94, down
    // after as many at <= 0.85) reaches from its first rung with this acceptance (measured at --gamma): enough
    // rollouts to climb to the top.
    rollout::SpecController ladder{rollout::SpecConfig{}};
    const rollout::SpecConfig& lc = ladder.config();
    for (int64_t k = 0; k < lc.persistence * static_cast<int64_t>(lc.ladder.size() - 1); ++k)
      ladder.end_rollout(sn.st.spec_cycles, sn.st.drafted, sn.st.accepted);
    nlohmann::json j = {
        {"batch", B},
        {"gamma", o.gamma},
        {"plain_decode_tokens_per_s", std::round(plain_tps * 10) / 10},
        {"spec_decode_tokens_per_s", std::round(spec_tps * 10) / 10},
        {"speedup", r3(spec_tps / plain_tps)},
        {"accept_rate",
         r3(sn.st.drafted > 0 ? static_cast<double>(sn.st.accepted) / static_cast<double>(sn.st.drafted) : 0.0)},
        {"mean_accepted_len", r3(L)},
        {"predicted_speedup", r3(predicted)},
        {"ladder_gamma", ladder.gamma()},
        {"drafter_vocab_coverage", r3(drafter.vocab_coverage(emitted))},
        {"toggle_on", predicted >= 1.0 + sc.margin},
        {"spec_draft_s", r3(sn.st.draft_s)},
        {"spec_verify_s", r3(sn.st.verify_s)},
        {"spec_accept_s", r3(sn.st.accept_s)},
        {"spec_total_s", r3(sn.s)},
        {"plain_total_s", r3(pn.s)},
        {"plain_steps", pn.st.steps},
        {"spec_steps", sn.st.steps}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    rows.push_back(j);
  }
  nlohmann::json summary = {{"engine", "temper"},
                            {"model", o.model.empty() ? o.shape : o.model},
                            {"gen_len", o.gen_len},
                            {"temperature", o.temperature},
                            {"threads", num_threads()},
                            {"dtype", o.dtype},
                            {"drafter_group", drafter.layers().front().gu.group},
                            {"drafter_head", o.drafter_head},
                            {"drafter_vocab", o.drafter_vocab},
                            {"drafter_mb", r3(static_cast<double>(drafter.bytes()) / (1 << 20))},
                            {"model_f32_mb", r3(weight_mb)},
                            {"drafter_build_s", r3(build_s)},
                            {"calibration_s", r3(calib_s)},
                            {"cost_rows", cost.rows},
                            {"cost_policy_s", cost.policy_s},
                            {"cost_draft_s", cost.draft_s},
                            {"cost_sample_s", cost.sample_s},
                            {"cost_dist_s", cost.dist_s}};
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace temper::app

// The trainer's speculative-rollout state (speculative_rollouts.h): drafter refreshes, the cost model's
// calibration, acceptance and vocabulary statistics, checkpoint text. Leaves the decoding to the engine.
#include "temper/rl/speculative_rollouts.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "temper/core/clock.h"
#include "temper/core/error.h"
#include "temper/core/log.h"

namespace temper::rl {

namespace {

int rank_of(const dist::Communicator* comm) {
  return comm ? comm->rank() : 0;
}

nlohmann::json cost_json(const rollout::SpecCostModel& m) {
  return {{"rows", m.rows},
          {"policy_s", m.policy_s},
          {"draft_s", m.draft_s},
          {"sample_s", m.sample_s},
          {"dist_s", m.dist_s}};
}

}  // namespace

void SpeculativeConfig::visit(KeyVisitor& v) {
  v("gamma", gamma, "a fixed gamma: tokens drafted per cycle (0: the adaptive ladder)");
  v("ladder", control.ladder, "gamma rungs the controller moves between at the measured acceptance");
  control.visit(v);
  v("group", group, "inputs per int4 scale of the drafter (a multiple of 32)");
  v("lag", lag, "the drafter from this many updates earlier (0: this step's weights)");
  v("head", head, "the drafter's LM head: bf16, int4, f32 (the policy's own)", kDraftHeadNames);
  v("vocab", vocab, "the drafter head's tokens: the K most sampled in earlier rollouts (0: every token)");
  if (gamma > 0) {
    TEMPER_CHECK(control.ladder == rollout::SpecConfig{}.ladder || control.ladder == std::vector<int64_t>{gamma})
        << "gives both gamma (fixed) and ladder (adaptive); keep one";
    control.ladder = {gamma};
  }
}

void SpeculativeConfig::validate() const {
  control.validate();
  TEMPER_CHECK(vocab >= 0) << "vocab must be >= 0 (0: every token), got " << vocab;
  TEMPER_CHECK(vocab == 0 || head != DraftHead::f32)
      << "vocab = " << vocab << " needs head = \"bf16\" or \"int4\" (the f32 head is the policy's own, every token)";
  TEMPER_CHECK(group >= 32 && group % 32 == 0) << "group must be a positive multiple of 32, got " << group;
  TEMPER_CHECK(lag >= 0 && lag <= 16) << "lag must be in [0, 16], got " << lag;
}

SpeculativeRollouts::SpeculativeRollouts(const SpeculativeConfig& cfg, Transformer& policy, KvPool& pool,
                                         rollout::RolloutEngine& engine, const rollout::SamplerConfig& sampler)
    : cfg_(cfg), policy_(policy), pool_(pool), engine_(engine), sampler_(sampler) {
  cfg_.control.validate();
  drafter_ = std::make_unique<Int4Drafter>(cfg_.group, cfg_.lag, cfg_.head);
  drafter_->set_vocab(cfg_.vocab);
  spec_ = std::make_unique<rollout::SpecController>(cfg_.control);
  engine_.set_speculative(drafter_.get(), spec_.get(), [this] { refresh_drafter(); });
}

// The drafter from the current weights (its time counts toward the rollout), and once per run the cost
// model (measured on rank 0, the same on every rank: the toggle then decides alike wherever it runs, and a
// resumed run reads it from the checkpoint). With lag 0 the drafter is re-quantized lazily: only in steps
// whose rollout turns speculation on (the engine's on_spec_start), from the same weights an eager refresh
// would read (they do not change during the rollout), so the tokens are the same and steps that never
// speculate skip the cost.
void SpeculativeRollouts::begin_step(dist::Communicator* comm) {
  sum_ = {};
  vocab_tokens_ = vocab_hits_ = 0;
  if (cfg_.vocab > 0) vocab_ids_ = draft_vocabulary(drafter_->counts(), policy_.config().vocab_size, cfg_.vocab);
  requant_s_ = 0;
  drafter_fresh_ = false;
  const bool calibrating = cfg_.control.toggle == rollout::SpecToggle::cost && !spec_->cost_model().calibrated();
  if (cfg_.lag > 0 || calibrating) refresh_drafter();  // lag k keeps a history: one copy per step
  if (calibrating) calibrate(comm);
}

void SpeculativeRollouts::calibrate(dist::Communicator* comm) {
  std::string bytes;
  if (rank_of(comm) == 0) {
    // Up to 64 rows (a verify of 5 sequences at gamma 11): speculation pays only at small live
    // batches; beyond the last point the times extrapolate linearly.
    const int64_t rows = engine_.config().max_seqs * (cfg_.control.ladder.back() + 1);
    rollout::SpecCostModel m =
        rollout::calibrate_spec_cost(policy_, pool_, *drafter_, std::min<int64_t>(rows, 64), 2, sampler_);
    bytes = cost_json(m).dump();
  }
  if (comm && comm->size() > 1) comm->broadcast(bytes, 0);
  nlohmann::json j = nlohmann::json::parse(bytes);
  spec_->set_cost_model({j["rows"].get<std::vector<double>>(), j["policy_s"].get<std::vector<double>>(),
                         j["draft_s"].get<std::vector<double>>(), j["sample_s"].get<double>(),
                         j["dist_s"].get<double>()});
  if (rank_of(comm) == 0) {
    const rollout::SpecCostModel& m = spec_->cost_model();
    int64_t breakeven = 0;
    for (int64_t b = 1; b <= engine_.config().max_seqs; ++b)
      if (spec_->turn_on(b)) breakeven = b;
    TEMPER_LOG(info) << "speculative: cost model calibrated: one forward " << m.policy(1) * 1e3 << " ms (policy), "
                     << m.draft(1) * 1e3 << " ms (4-bit drafter, " << drafter_->bytes() / (1 << 20) << " MB); at gamma "
                     << spec_->gamma() << " and accepted length " << spec_->expected_len()
                     << " speculation pays while at most " << breakeven << " sequences are live";
  }
}

void SpeculativeRollouts::refresh_drafter() {
  if (drafter_fresh_) return;
  auto t0 = Clock::now();
  drafter_->refresh(policy_);
  requant_s_ += seconds_since(t0);
  drafter_fresh_ = true;
}

void SpeculativeRollouts::observe(const rollout::EngineStats& es, const std::vector<rollout::Completion>& done) {
  sum_.steps += es.steps;
  sum_.spec_steps += es.spec_steps;
  sum_.spec_cycles += es.spec_cycles;
  sum_.drafted += es.drafted;
  sum_.accepted += es.accepted;
  sum_.decode_tokens += es.decode_tokens;
  if (cfg_.vocab == 0) return;
  // Every rank sees every completion: the same counts everywhere. The share of these tokens inside the head
  // ranked at the step's start (the one the step's first round drafts from, or would have, had speculation
  // turned on), then the counts (a later round's head ranks them too).
  for (const rollout::Completion& c : done) {
    vocab_hits_ += vocabulary_coverage(vocab_ids_, c.tokens) * static_cast<double>(c.tokens.size());
    vocab_tokens_ += static_cast<double>(c.tokens.size());
    drafter_->observe(c.tokens);
  }
}

void SpeculativeRollouts::metrics(Metrics& out, dist::Communicator* comm) {
  double v[6] = {static_cast<double>(sum_.spec_cycles), static_cast<double>(sum_.drafted),
                 static_cast<double>(sum_.accepted),    static_cast<double>(sum_.spec_steps),
                 static_cast<double>(sum_.steps),       static_cast<double>(sum_.decode_tokens)};
  if (comm && comm->size() > 1) comm->allreduce_sum(v, 6);
  const int64_t gamma = spec_->gamma();
  spec_->end_rollout(static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2]), true);
  out.emplace_back("spec_gamma", static_cast<double>(gamma));
  out.emplace_back("spec_accept_rate", v[1] > 0 ? v[2] / v[1] : 0.0);
  out.emplace_back("spec_accepted_len", v[0] > 0 ? 1.0 + v[2] / v[0] : 0.0);
  out.emplace_back("spec_steps_frac", v[4] > 0 ? v[3] / v[4] : 0.0);  // engine steps that were speculative cycles
  out.emplace_back("spec_requant_s", requant_s_);
  out.emplace_back("spec_drafter_mb", drafter_->ready() ? static_cast<double>(drafter_->bytes()) / (1 << 20) : 0.0);
  if (cfg_.vocab > 0)  // this step's sampled tokens inside the drafter's head (as ranked at its start)
    out.emplace_back("spec_vocab_coverage", vocab_tokens_ > 0 ? vocab_hits_ / vocab_tokens_ : 1.0);
}

std::string SpeculativeRollouts::state() const {
  const rollout::SpecState& s = spec_->state();
  nlohmann::json j = {{"rung", s.rung},
                      {"up", s.up},
                      {"down", s.down},
                      {"accepted_len", s.accepted_len},
                      {"cost", cost_json(spec_->cost_model())}};
  if (cfg_.vocab > 0) {  // the token counts that rank the drafter's head: [[id, count], ...]
    nlohmann::json counts = nlohmann::json::array();
    const std::vector<uint64_t>& c = drafter_->counts();
    for (size_t t = 0; t < c.size(); ++t)
      if (c[t] > 0) counts.push_back({t, c[t]});
    j["vocab_counts"] = std::move(counts);
  }
  return j.dump();
}

void SpeculativeRollouts::load_state(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text);
  rollout::SpecState s;
  s.rung = j.at("rung").get<int64_t>();
  s.up = j.at("up").get<int64_t>();
  s.down = j.at("down").get<int64_t>();
  s.accepted_len = j.at("accepted_len").get<double>();
  spec_->set_state(s);
  const nlohmann::json& c = j.at("cost");
  // sample_s and dist_s: 0 in a checkpoint from before they were measured (its predictions are unchanged)
  spec_->set_cost_model({c.at("rows").get<std::vector<double>>(), c.at("policy_s").get<std::vector<double>>(),
                         c.at("draft_s").get<std::vector<double>>(), c.value("sample_s", 0.0), c.value("dist_s", 0.0)});
  if (auto it = j.find("vocab_counts"); it != j.end()) {
    std::vector<uint64_t> counts;
    for (const nlohmann::json& e : *it) {
      const size_t t = e.at(0).get<size_t>();
      TEMPER_CHECK(t < static_cast<size_t>(policy_.config().vocab_size))
          << "rl: the checkpoint's drafter token counts name token " << t << ", past this model's vocabulary of "
          << policy_.config().vocab_size;
      if (t >= counts.size()) counts.resize(t + 1, 0);
      counts[t] = e.at(1).get<uint64_t>();
    }
    drafter_->set_counts(std::move(counts));
  }
}

}  // namespace temper::rl

#include "temper/rl/methods/reves.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/rl/method_spec.h"

namespace temper::rl {

void RevesConfig::visit(KeyVisitor& v) {
  v("rounds", rounds, "R: revisions per seed problem during augmentation");
  v("seeds", seeds, "seed problems per augmentation");
  v("refresh_every", refresh_every, "steps between augmentations (the first at step 0)");
  v("aug_ratio", aug_ratio, "augmented prompts per new prompt each step");
  v("verification", verification, "verification prompts beside the revisions");
  v("rebalance", rebalance, "balance the augmented prompts between revision and verification");
  v("revision_template", revision.revision_template, "the revision prompt: {question}, {attempt}");
  v("verification_template", revision.verification_template, "the verification prompt: {question}, {attempt}");
  v("attempt_tokens", revision.attempt_tokens, "the previous attempt cut to its last N tokens");
}

void RevesConfig::validate() const {
  TEMPER_CHECK(rounds >= 1) << "rl.reves.rounds must be >= 1, got " << rounds;
  TEMPER_CHECK(seeds >= 1) << "rl.reves.seeds must be >= 1, got " << seeds;
  TEMPER_CHECK(refresh_every >= 1) << "rl.reves.refresh_every must be >= 1, got " << refresh_every;
  TEMPER_CHECK(aug_ratio >= 0 && std::isfinite(aug_ratio)) << "rl.reves.aug_ratio must be >= 0, got " << aug_ratio;
  revision.validate();
}

std::vector<RevesRecord> reves_records(int64_t index, const RevisionTrace& t, bool verification) {
  std::vector<RevesRecord> out;
  if (t.solved_at < 1) return out;  // solved at once, or never: nothing
  for (int64_t r = 1; r <= t.solved_at; ++r) {
    out.push_back({index, false, false, t.attempts[static_cast<size_t>(r - 1)]});  // revise after attempt r-1
    if (verification) out.push_back({index, true, static_cast<bool>(t.correct[static_cast<size_t>(r)]), t.attempts[static_cast<size_t>(r)]});
  }
  return out;
}

tasks::Problem Reves::build(const RevesRecord& r) const {
  tasks::Problem p = env_.task->problem(tasks::Split::train, static_cast<uint64_t>(r.index));
  return r.verification ? verification_problem(p, r.attempt, r.label, cfg_.revision, *env_.codec)
                        : revision_problem(p, r.attempt, cfg_.revision, *env_.codec);
}

void Reves::augment(int64_t step) {
  const int64_t size = env_.task->size(tasks::Split::train);
  std::vector<tasks::Problem> seeds;
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < cfg_.seeds; ++i) {  // a stream of train indices apart from the trainer's cursor
    uint64_t k = mix_seed(mix_seed(cfg_.seed ^ env_.seed, 0x2E7E5ull), static_cast<uint64_t>(step * cfg_.seeds + i)) >> 24;
    if (size > 0) k %= static_cast<uint64_t>(size);
    idx.push_back(static_cast<int64_t>(k));
    seeds.push_back(env_.task->problem(tasks::Split::train, k));
  }
  ReviseSettings rs;
  rs.rounds = cfg_.rounds;
  rs.sampler = env_.sampler;
  rs.max_new = env_.max_new;
  rs.context = env_.context;
  rs.seed = mix_seed(mix_seed(cfg_.seed ^ env_.seed, 0xA06ull), static_cast<uint64_t>(step));
  std::vector<RevisionTrace> tr = revise(seeds, rs, cfg_.revision, *env_.codec, env_.generate, env_.verify);
  pool_.clear();
  aug_ = Aug{};
  aug_.seeds = cfg_.seeds;
  int64_t false_labels = 0;
  std::vector<RevesRecord> trues;  // rebalance: first-try-correct attempts as True verifications
  for (size_t i = 0; i < tr.size(); ++i) {
    const RevisionTrace& t = tr[i];
    if (t.solved_at == 0) {
      ++aug_.first_correct;
      if (cfg_.verification && cfg_.rebalance) trues.push_back({idx[i], true, true, t.attempts[0]});
      continue;
    }
    std::vector<RevesRecord> rec = reves_records(idx[i], t, cfg_.verification);
    if (rec.empty()) continue;
    ++aug_.recovered;
    aug_.turns += t.solved_at;
    for (const RevesRecord& r : rec) false_labels += r.verification && !r.label;
    pool_.insert(pool_.end(), rec.begin(), rec.end());
  }
  const int64_t true_labels = aug_.recovered;  // one True per recovery
  for (size_t i = 0; i < trues.size() && static_cast<int64_t>(i) < false_labels - true_labels; ++i) pool_.push_back(trues[i]);
  // A prompt that leaves no room to answer is not kept (the trainer refuses prompts beyond the context).
  pool_.erase(std::remove_if(pool_.begin(), pool_.end(),
                             [&](const RevesRecord& r) {
                               return static_cast<int64_t>(env_.codec->encode_prompt(build(r)).size()) + 2 > env_.context;
                             }),
              pool_.end());
}

std::vector<tasks::Problem> Reves::extra_problems(int64_t step, int64_t new_problems) {
  n_ = StepCounts{};
  if (step % cfg_.refresh_every == 0) augment(step);
  std::vector<tasks::Problem> out;
  int64_t k = std::min<int64_t>(static_cast<int64_t>(pool_.size()),
                                static_cast<int64_t>(std::floor(cfg_.aug_ratio * static_cast<double>(new_problems) + 1e-9)));
  if (k == 0) return out;
  std::vector<size_t> order(pool_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Rng rng(mix_seed(mix_seed(cfg_.seed ^ env_.seed, 0xD2A3ull), static_cast<uint64_t>(step)), 0);
  for (int64_t i = 0; i < k; ++i)  // partial Fisher-Yates: k distinct records
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(tasks::rand_int(rng, i, static_cast<int64_t>(order.size()) - 1))]);
  for (int64_t i = 0; i < k; ++i) out.push_back(build(pool_[order[static_cast<size_t>(i)]]));
  n_.drawn = k;
  return out;
}

void Reves::after_rollout(Batch& b) {  // verification prompts are scored by their verdict, not the task
  for (Trajectory& t : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    if (t.scored || p.index >= 0 || !is_verification(p)) continue;
    tasks::Verdict v = verify_verdict(p, t.text);
    t.reward = v.reward;
    t.correct = v.correct;
    t.scored = true;
  }
}

void Reves::after_reward(Batch& b) {
  for (const Trajectory& t : b.traj) {
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    if (p.index >= 0 || t.lineage.parent >= 0) continue;
    const bool ver = is_verification(p);
    const bool rev = is_revision(p);
    if (ver) ++n_.ver, n_.ver_correct += t.correct;
    if (rev) ++n_.rev, n_.rev_correct += t.correct;
  }
}

void Reves::metrics(Metrics& m) const {
  auto frac = [](int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  int64_t ver = 0, trues = 0;
  for (const RevesRecord& r : pool_) ver += r.verification, trues += r.verification && r.label;
  m.emplace_back("reves_pool", static_cast<double>(pool_.size()));
  m.emplace_back("reves_pool_verification", static_cast<double>(ver));
  m.emplace_back("reves_pool_true_frac", frac(trues, ver));
  m.emplace_back("reves_aug_first_correct", frac(aug_.first_correct, aug_.seeds));
  m.emplace_back("reves_aug_recovered", frac(aug_.recovered, aug_.seeds));
  m.emplace_back("reves_aug_turns_mean", frac(aug_.turns, aug_.recovered));
  m.emplace_back("reves_drawn", static_cast<double>(n_.drawn));
  m.emplace_back("reves_revision_acc", frac(n_.rev_correct, n_.rev));
  m.emplace_back("reves_verification_acc", frac(n_.ver_correct, n_.ver));
}

std::string Reves::save_state() const {
  nlohmann::json j;
  j["aug"] = {aug_.seeds, aug_.first_correct, aug_.recovered, aug_.turns};
  nlohmann::json pool = nlohmann::json::array();
  for (const RevesRecord& r : pool_) pool.push_back({r.index, r.verification, r.label, r.attempt});
  j["pool"] = pool;
  return j.dump();
}

void Reves::load_state(const std::string& s) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(s);
    auto a = j.at("aug");
    aug_ = Aug{a.at(0).get<int64_t>(), a.at(1).get<int64_t>(), a.at(2).get<int64_t>(), a.at(3).get<int64_t>()};
    pool_.clear();
    for (const auto& r : j.at("pool"))
      pool_.push_back({r.at(0).get<int64_t>(), r.at(1).get<bool>(), r.at(2).get<bool>(), r.at(3).get<std::string>()});
  } catch (const nlohmann::json::exception& e) {
    TEMPER_FAIL() << "reves: the checkpointed state is not valid (" << e.what() << ")";
  }
}

namespace {
class RevesSetup final : public MethodSetupOf<RevesConfig> {
  // The same revision prompts at test time.
  void configure(RunSettings& run) const override { run.eval.revision = cfg.revision; }
  std::unique_ptr<Method> make(const MethodDeps& deps) const override { return std::make_unique<Reves>(seeded(deps)); }
};
}  // namespace

const MethodSpec kRevesMethod{"reves", "rl.reves", 40, "REVES: revision and verification training",
                              []() -> std::unique_ptr<MethodSetup> { return std::make_unique<RevesSetup>(); }};

}  // namespace temper::rl

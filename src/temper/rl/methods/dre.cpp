#include "temper/rl/methods/dre.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/rl/method_spec.h"
#include "temper/text/regex.h"

namespace temper::rl {

void DreConfig::visit(KeyVisitor& v) {
  v("mode", mode, "online (fork at the first verified answer while generating), offline, measure (metrics only)",
    kDreModeNames);
  v("compose", compose, "how edits join the group: add_beside, add_and_prefer, replace", kDreComposeNames);
  v("delta", delta, "add_and_prefer: the original's reward falls by this");
  v("min_tail", min_tail, "tokens an edit must save");
  v("answer_budget", answer_budget, "tokens the policy may write after the forced close");
  v("max_edits_per_group", max_edits_per_group, "edits per group at most (0: every qualifying rollout)");
  v("detector", detector,
    "where an answer first appears: task (the task's own rule), gsm8k (a line's last number; close \"#### \"), boxed "
    "(a line's \\boxed{}), think (inside <think>: \\boxed{}, \"the answer is\", or a line's last number; close "
    "\"</think>\"), regex (rl.dre.regex)",
    kDreDetectorNames);
  v("regex", regex,
    "detector = \"regex\": a PCRE2 pattern whose last match in a line is the answer (\\K drops a prefix)");
  v("close", close, "the text forced to close the reasoning before the answer; empty: the detector's own");
}

void DreConfig::validate() const {
  TEMPER_CHECK(delta >= 0 && delta <= 1) << "rl.dre.delta must be in [0, 1], got " << delta;
  TEMPER_CHECK(min_tail >= 1) << "rl.dre.min_tail must be >= 1 token, got " << min_tail;
  TEMPER_CHECK(answer_budget >= 1) << "rl.dre.answer_budget must be >= 1 token, got " << answer_budget;
  TEMPER_CHECK(max_edits_per_group >= 0) << "rl.dre.max_edits_per_group must be >= 0 (0: all), got "
                                         << max_edits_per_group;
  TEMPER_CHECK(detector == DreDetector::regex || regex.empty())
      << "rl.dre.regex is set but rl.dre.detector = \"" << enum_name(kDreDetectorNames, detector)
      << "\": set detector = \"regex\" to use it";
  if (detector == DreDetector::regex) {
    TEMPER_CHECK(!regex.empty()) << "rl.dre.regex: detector = \"regex\" needs a PCRE2 pattern whose match is the "
                                    "answer (e.g. \"answer: \\\\K-?[0-9]+\"), got nothing";
    text::Regex check(regex, "rl.dre.regex");  // throws naming the key and PCRE2's message
  }
}

Emergence find_emergence(const AnswerDetector& det, const tasks::Problem& p, const PromptCodec& codec,
                         const std::vector<int32_t>& tokens, const std::function<bool(const std::string&)>& accept) {
  Emergence e;
  std::string text;
  for (int32_t t : tokens) text.append(codec.token_bytes(t));
  const size_t section = det.answer_section(text, /*finished=*/true);  // no reasoning from here on
  std::string partial;
  for (size_t i = 0; i < tokens.size(); ++i) {
    partial.append(codec.token_bytes(tokens[i]));
    if (section != std::string::npos && partial.size() > section) {
      e.close = static_cast<int64_t>(i);  // the token where the answer section starts
      break;
    }
    if (e.at < 0 && partial.back() == '\n') {
      if (auto cand = det.candidate(p, partial); cand && accept(*cand)) e.at = static_cast<int64_t>(i) + 1;
    }
  }
  return e;
}

Emergence find_emergence(const tasks::Task& task, const tasks::Problem& p, const PromptCodec& codec,
                         const std::vector<int32_t>& tokens, const std::function<bool(const std::string&)>& accept) {
  const AnswerDetector det(DreDetector::task, "", "",
                           std::shared_ptr<const tasks::Task>(std::shared_ptr<const tasks::Task>(), &task));
  return find_emergence(det, p, codec, tokens, accept);
}

// ---- online: the hook ------------------------------------------------------------------------------------------

void DreHook::reset(const MethodEnv* env, const AnswerDetector* det, const RolloutRound& round,
                    std::vector<int32_t> close, int64_t budget) {
  env_ = env;
  det_ = det;
  round_ = round;
  close_ = std::move(close);
  budget_ = budget;
  done_.clear();
  forked_.clear();
}

rollout::HookDecision DreHook::after_token(const rollout::RolloutRequest&, const rollout::Completion& c) {
  rollout::HookDecision d;
  if (c.parent >= 0 || c.tokens.empty()) return d;  // forks are edits already
  auto key = std::make_pair(static_cast<int64_t>(round_.first) + round_.index(c.request), c.member);
  if (done_.count(key)) return d;
  const PromptCodec& codec = *env_->codec;
  if (codec.token_bytes(c.tokens.back()).find('\n') == std::string_view::npos) return d;  // not a step boundary
  std::string text;
  for (int32_t t : c.tokens) text.append(codec.token_bytes(t));
  if (text.back() != '\n') return d;
  if (det_->answer_section(text, false) != std::string::npos) {  // the answer section came first: nothing to edit
    done_.insert(key);
    return d;
  }
  const tasks::Problem& p = round_.problem(c.request);
  auto cand = det_->candidate(p, text);
  if (!cand || !det_->accepts(p, *cand)) return d;
  done_.insert(key);
  forked_.insert(key);
  d.forks = 1;
  d.fork_forced = close_;
  d.fork_max_new = static_cast<int64_t>(close_.size()) + budget_;
  return d;
}

// ---- the method -------------------------------------------------------------------------------------------------

void Dre::attach(const MethodEnv& env) {
  env_ = env;
  TEMPER_CHECK(env_.task && env_.codec && env_.codec->encode_text && env_.codec->token_bytes)
      << "dre: needs the task and a codec that encodes plain text and gives token bytes";
  TEMPER_CHECK(cfg_.detector != DreDetector::task || task_has_answer_detector(*env_.task))
      << "rl.dre.detector: task '" << env_.task->name() << "' has no answer detector of its own";
  det_.emplace(cfg_.detector, cfg_.regex, cfg_.close, env_.task);
  close_ = env_.codec->encode_text(det_->close());
  TEMPER_CHECK(!close_.empty()) << "dre: the close '" << det_->close() << "' encodes to no tokens";
}

rollout::RolloutHook* Dre::rollout_hook(const RolloutRound& round) {
  if (stats_step_ != round.step) stats_ = {}, stats_step_ = round.step;
  if (cfg_.mode != DreMode::online) return nullptr;
  hook_.reset(&env_, &*det_, round, close_, cfg_.answer_budget);
  return &hook_;
}

void Dre::measure(const Batch& b, size_t from) {
  const tasks::Task& task = *env_.task;
  double tail_c = 0, len_c = 0, tail_i = 0, len_i = 0;
  int64_t nc = 0, ni = 0;
  for (size_t i = from; i < b.traj.size(); ++i) {
    const Trajectory& t = b.traj[i];
    if (t.lineage.parent >= 0) continue;
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    std::optional<std::string> own = t.correct ? std::nullopt : task.extract_answer(t.text);
    auto accept = [&](const std::string& cand) { return t.correct ? det_->accepts(p, cand) : own && cand == *own; };
    Emergence e = find_emergence(*det_, p, *env_.codec, t.tokens, accept);
    double len = static_cast<double>(t.tokens.size());
    double tail =
        e.at < 0 ? 0.0 : static_cast<double>((e.close < 0 ? static_cast<int64_t>(t.tokens.size()) : e.close) - e.at);
    (t.correct ? tail_c : tail_i) += std::max(0.0, tail);
    (t.correct ? len_c : len_i) += len;
    ++(t.correct ? nc : ni);
  }
  // Running sums over the step's rounds, kept as means weighted by counts.
  auto add = [](double& mean, int64_t n_old, double sum, int64_t n_new) {
    mean = n_old + n_new ? (mean * static_cast<double>(n_old) + sum) / static_cast<double>(n_old + n_new) : 0.0;
  };
  auto add_ratio = [](double& ratio, double len_old_mean, int64_t n_old, double tail, double len) {
    double old_len = len_old_mean * static_cast<double>(n_old), old_tail = ratio * old_len;
    ratio = old_len + len > 0 ? (old_tail + tail) / (old_len + len) : 0.0;
  };
  add_ratio(stats_.overthink_correct, stats_.len_correct, stats_.n_correct, tail_c, len_c);
  add_ratio(stats_.overthink_incorrect, stats_.len_incorrect, stats_.n_incorrect, tail_i, len_i);
  add(stats_.len_correct, stats_.n_correct, len_c, nc);
  add(stats_.len_incorrect, stats_.n_incorrect, len_i, ni);
  stats_.n_correct += nc;
  stats_.n_incorrect += ni;
}

void Dre::regenerate(Batch& b) {
  std::vector<rollout::RolloutRequest> reqs;
  std::vector<std::pair<size_t, int64_t>> src;  // (trajectory, prefix tokens)
  for (size_t i = 0; i < b.traj.size(); ++i) {
    const Trajectory& o = b.traj[i];
    if (o.lineage.parent >= 0 || !o.correct) continue;
    const tasks::Problem& p = b.problems[static_cast<size_t>(o.problem)];
    Emergence e =
        find_emergence(*det_, p, *env_.codec, o.tokens, [&](const std::string& c) { return det_->accepts(p, c); });
    if (e.at < 0 || e.close < 0 || e.close - e.at < cfg_.min_tail) continue;  // no early answer, or too little after it
    std::vector<int32_t> prompt = o.prompt;
    prompt.insert(prompt.end(), o.tokens.begin(), o.tokens.begin() + e.at);
    rollout::RolloutRequest r = rollout::make_request(
        std::move(prompt), 1, static_cast<int64_t>(close_.size()) + cfg_.answer_budget, env_.context, env_.sampler,
        env_.codec->stop_ids,
        mix_seed(mix_seed(cfg_.seed ^ env_.seed, static_cast<uint64_t>(b.step)), static_cast<uint64_t>(o.group)),
        static_cast<uint64_t>(o.member));
    r.forced = close_;
    if (r.max_new < static_cast<int64_t>(close_.size()) + 1) continue;
    reqs.push_back(std::move(r));
    src.emplace_back(i, e.at);
  }
  if (reqs.empty()) return;
  std::vector<rollout::Completion> done = env_.generate(reqs);
  TEMPER_CHECK(done.size() == reqs.size()) << "dre: the regeneration returned " << done.size() << " of " << reqs.size();
  for (size_t k = 0; k < done.size(); ++k) {
    const Trajectory& o = b.traj[src[k].first];
    const int64_t at = src[k].second;
    const rollout::Completion& c = done[k];
    Trajectory f;
    f.problem = o.problem;
    f.group = o.group;
    f.member = -1;
    f.lineage.parent = o.member;
    f.lineage.fork_pos = at;
    f.lineage.forced = c.forced;
    f.lineage.forced_pos = at;
    f.prompt = o.prompt;
    auto cat = [&](const auto& a, const auto& bb) {
      std::decay_t<decltype(a)> v(a.begin(), a.begin() + at);
      v.insert(v.end(), bb.begin(), bb.end());
      return v;
    };
    f.tokens = cat(o.tokens, c.tokens);
    f.sample_logprob = cat(o.sample_logprob, c.sample_logprob);
    f.old_logprob = cat(o.old_logprob, c.policy_logprob);
    f.entropy = cat(o.entropy, c.entropy);
    f.finish = c.finish;
    f.text = env_.codec->decode(f.tokens);
    tasks::Verdict v = env_.verify(b.problems[static_cast<size_t>(o.problem)], f.text);
    f.reward = v.reward;
    f.rewards = v.rewards;
    f.correct = v.correct;
    f.scored = true;
    f.tags.push_back("fork");
    b.traj.push_back(std::move(f));
  }
  stats_.candidates += static_cast<int64_t>(done.size());
}

void Dre::compose(Batch& b, const std::set<std::pair<int64_t, int64_t>>& edits_of) {
  std::map<std::pair<int64_t, int64_t>, size_t> original;
  for (size_t i = 0; i < b.traj.size(); ++i)
    if (b.traj[i].lineage.parent < 0) original[{b.traj[i].group, b.traj[i].member}] = i;
  std::map<int64_t, int64_t> per_group;
  std::vector<uint8_t> drop(b.traj.size(), 0);
  for (size_t i = 0; i < b.traj.size(); ++i) {
    Trajectory& f = b.traj[i];
    if (f.lineage.parent < 0 || !edits_of.count({f.group, f.lineage.parent})) continue;
    auto it = original.find({f.group, f.lineage.parent});
    if (it == original.end()) {  // its original was dropped by another method
      drop[i] = 1;
      continue;
    }
    Trajectory& o = b.traj[it->second];
    const int64_t saved = static_cast<int64_t>(o.tokens.size()) - static_cast<int64_t>(f.tokens.size());
    const bool keep = o.correct && f.correct && saved >= cfg_.min_tail &&
                      (cfg_.max_edits_per_group == 0 || per_group[f.group] < cfg_.max_edits_per_group);
    if (!keep) {
      drop[i] = 1;
      continue;
    }
    ++per_group[f.group];
    ++stats_.edits;
    stats_.saved_tokens += saved;
    f.tags.push_back("dre_edit");
    switch (cfg_.compose) {
      case DreCompose::add_beside:
        break;
      case DreCompose::add_and_prefer:
        o.reward -= cfg_.delta;
        o.tags.push_back("dre_overthinking");
        break;
      case DreCompose::replace:
        drop[it->second] = 1;
        break;
    }
  }
  size_t w = 0;
  for (size_t i = 0; i < b.traj.size(); ++i)
    if (!drop[i]) {
      if (w != i) b.traj[w] = std::move(b.traj[i]);
      ++w;
    }
  b.traj.resize(w);
}

void Dre::after_reward(Batch& b) {
  if (stats_step_ != b.step) stats_ = {}, stats_step_ = b.step;
  measure(b, 0);
  if (cfg_.mode == DreMode::measure) return;
  std::set<std::pair<int64_t, int64_t>> edits_of;
  if (cfg_.mode == DreMode::online) {
    edits_of = hook_.forked();
    stats_.candidates += static_cast<int64_t>(edits_of.size());
  } else {
    size_t before = b.traj.size();
    regenerate(b);
    for (size_t i = before; i < b.traj.size(); ++i) edits_of.insert({b.traj[i].group, b.traj[i].lineage.parent});
  }
  compose(b, edits_of);
}

void Dre::metrics(Metrics& m) const {
  m.emplace_back("dre_candidates", static_cast<double>(stats_.candidates));
  m.emplace_back("dre_edits", static_cast<double>(stats_.edits));
  m.emplace_back("dre_saved_tokens_mean",
                 stats_.edits ? static_cast<double>(stats_.saved_tokens) / static_cast<double>(stats_.edits) : 0.0);
  m.emplace_back("dre_len_correct", stats_.len_correct);
  m.emplace_back("dre_len_incorrect", stats_.len_incorrect);
  m.emplace_back("dre_overthink_correct", stats_.overthink_correct);
  m.emplace_back("dre_overthink_incorrect", stats_.overthink_incorrect);
}

namespace {
class DreSetup final : public MethodSetupOf<DreConfig> {
  MethodEffects effects() const override {
    MethodEffects e;
    e.forks_rollouts = cfg.mode == DreMode::online;
    e.appends_after_reward = cfg.mode == DreMode::offline;  // regenerations
    e.detail = "mode = \"" + std::string(enum_name(kDreModeNames, cfg.mode)) + "\"";
    return e;
  }
  // Refused before the model loads: a task without an answer convention of its own (a dataset) and no preset, where
  // DRE would never find an answer and log zeros; and a preset that cannot be built (a regex that does not compile).
  void check_task(const tasks::Task& task) const override {
    TEMPER_CHECK(cfg.detector != DreDetector::task || task_has_answer_detector(task))
        << "rl.dre.detector: task '" << task.name()
        << "' has no answer detector of its own (DRE would never see an answer and edit nothing); set rl.dre.detector "
           "= \"gsm8k\" (lines ending in the number, \"#### <answer>\"), \"boxed\" (\\boxed{...}), \"think\" "
           "(<think> ... </think> then the answer) or \"regex\" (with rl.dre.regex)";
    const AnswerDetector check(cfg.detector, cfg.regex, cfg.close,
                               std::shared_ptr<const tasks::Task>(std::shared_ptr<const tasks::Task>(), &task));
  }
  std::unique_ptr<Method> make(const MethodDeps& deps) const override { return std::make_unique<Dre>(seeded(deps)); }
};
}  // namespace

const MethodSpec kDreMethod{"dre", "rl.dre", 60, "DRE: dynamic rollout editing against overthinking",
                            []() -> std::unique_ptr<MethodSetup> { return std::make_unique<DreSetup>(); }};

}  // namespace temper::rl

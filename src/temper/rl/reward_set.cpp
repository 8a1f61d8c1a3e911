#include "temper/rl/reward_set.h"

#include <cmath>

#include "temper/core/bytes.h"
#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/reward/forked_calls.h"
#include "temper/rl/program_term.h"

namespace temper::rl {

void JudgeConfig::visit(KeyVisitor& v) {
  v("model", model, "the judge model: a Hugging Face directory or a GGUF file");
  v("template", prompt_template,
    "the judge's prompt: {question}, {completion}, {answer} and {rubric} are replaced by the sample's");
  v("parse", parse, "how the judgement is read: a number in [min_score, max_score], or one of `labels`",
    kJudgeParseNames);
  v("min_score", min_score, "parse = \"score\": the lowest score (reward 0)");
  v("max_score", max_score, "parse = \"score\": the highest score (reward 1)");
  v("labels", labels, "parse = \"choice\": the labels the judge chooses among, comma-separated");
  v("label_rewards", label_rewards, "parse = \"choice\": each label's reward (default: 1 for the first, 0 for the rest)");
  v("max_new", max_new, "the judge's longest answer in tokens");
  v("temperature", temperature, "the judge's sampling temperature (0: greedy, reproducible scores)");
  v("device", device, "where the judge runs: \"cpu\" or the policy's \"cuda\"");
}

void JudgeConfig::validate(const std::string& term) const {
  const std::string where = "reward '" + term + "': judge";
  TEMPER_CHECK(!model.empty()) << where << ".model is required (a Hugging Face directory or a GGUF file)";
  TEMPER_CHECK(!prompt_template.empty() && prompt_template.find("{completion}") != std::string::npos)
      << where << ".template must contain {completion}";
  if (parse == JudgeParse::score)
    TEMPER_CHECK(std::isfinite(min_score) && std::isfinite(max_score) && max_score > min_score)
        << where << ": max_score must be above min_score, got [" << min_score << ", " << max_score << "]";
  if (parse == JudgeParse::choice) {
    TEMPER_CHECK(labels.size() >= 2) << where << ".labels must name at least two labels for parse = \"choice\"";
    TEMPER_CHECK(label_rewards.empty() || label_rewards.size() == labels.size())
        << where << ".label_rewards must give one reward per label (" << labels.size() << "), got "
        << label_rewards.size();
  }
  TEMPER_CHECK(max_new >= 1) << where << ".max_new must be >= 1, got " << max_new;
  TEMPER_CHECK(temperature >= 0) << where << ".temperature must be >= 0, got " << temperature;
}

void RewardTermConfig::visit(KeyVisitor& v) {
  v("name", name, "the term's name: metrics reward/<name>, samples.jsonl");
  v("weight", weight, "the term's weight in the total reward");
  v("builtin", builtin, "true: the task's verifier");
  v.strings("program", program, "a reward program's command, e.g. [\"python3\", \"my_reward.py\"]");
  v("workers", workers, "program: worker processes per rank; a step's samples are split across them");
  v("timeout_s", timeout_s, "program: seconds a worker may take for its share of a step; then it is killed");
  v("start_timeout_s", start_timeout_s, "program: seconds from start to the worker's {\"ready\": true}");
  v("on_failure", on_failure, "the term's value for a sample it failed to score (counted in reward_failures)");
}

RewardSource RewardTermConfig::source() const {
  if (judge) return RewardSource::judge;
  if (!program.empty()) return RewardSource::program;
  return RewardSource::builtin;
}

void RewardTermConfig::validate() const {
  TEMPER_CHECK(!name.empty()) << "[[reward]]: every term needs a name";
  for (char c : name)
    TEMPER_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')
        << "reward '" << name << "': a name may hold letters, digits, '_' and '-' only";
  const int sources = (builtin ? 1 : 0) + (program.empty() ? 0 : 1) + (judge ? 1 : 0);
  TEMPER_CHECK(sources == 1) << "reward '" << name
                             << "': give exactly one source: builtin = true, program = [\"cmd\", ...] or judge = { ... }"
                             << (sources == 0 ? " (none given)" : " (several given)");
  TEMPER_CHECK(std::isfinite(weight)) << "reward '" << name << "': weight must be a finite number";
  TEMPER_CHECK(std::isfinite(on_failure)) << "reward '" << name << "': on_failure must be a finite number";
  if (judge) judge->validate(name);
}

RewardSet::RewardSet(std::shared_ptr<const tasks::Task> task, reward::SafeReward& safe,
                     std::vector<RewardTermConfig> configs, const JudgeFactory& make_judge,
                     std::vector<std::string> env, VerifierIsolation isolation)
    : task_(std::move(task)), safe_(safe), configs_(std::move(configs)), isolation_(isolation) {
  for (size_t i = 0; i < configs_.size(); ++i) {
    const RewardTermConfig& c = configs_[i];
    c.validate();
    for (size_t j = 0; j < i; ++j)
      TEMPER_CHECK(configs_[j].name != c.name) << "[[reward]]: two terms are named '" << c.name << "'";
    switch (c.source()) {
      case RewardSource::builtin: terms_.push_back(nullptr); break;
      case RewardSource::program: terms_.push_back(make_program_term(c, env)); break;
      case RewardSource::judge:
        TEMPER_CHECK(make_judge) << "reward '" << c.name << "': an LLM judge cannot run here";
        terms_.push_back(make_judge(c));
        break;
    }
  }
}

void RewardSet::start() {
  for (auto& t : terms_)
    if (t) t->start();
}

int64_t RewardSet::failures() const {
  int64_t n = safe_.failures() + batch_failures_;
  for (const auto& t : terms_)
    if (t) n += t->failures();
  return n;
}

std::vector<ScoredCompletion> RewardSet::score(const std::vector<RewardQuery>& qs, int64_t step) {
  std::vector<ScoredCompletion> out(qs.size());
  std::vector<uint8_t> failed;
  std::vector<tasks::Verdict> verdicts = verify_batch(qs, failed);
  std::vector<TermScore> verifier(qs.size());  // the builtin term's values
  for (size_t i = 0; i < qs.size(); ++i) {
    out[i].verdict = std::move(verdicts[i]);
    verifier[i].value = out[i].verdict.reward;
    verifier[i].failed = failed[i] != 0;
  }
  if (configs_.empty()) return out;
  for (ScoredCompletion& s : out) s.verdict.reward = 0, s.terms.assign(configs_.size(), 0.0);
  for (size_t k = 0; k < configs_.size(); ++k) {
    const RewardTermConfig& c = configs_[k];
    std::vector<TermScore> got;
    if (terms_[k]) {
      got = terms_[k]->score(qs, step);
      TEMPER_CHECK(got.size() == qs.size()) << "reward '" << c.name << "': " << got.size() << " scores for "
                                            << qs.size() << " samples";
    } else {
      got = verifier;
    }
    for (size_t i = 0; i < qs.size(); ++i) {
      ScoredCompletion& s = out[i];
      TermScore& t = got[i];
      const double value = t.failed ? c.on_failure : t.value;
      s.terms[k] = value;
      s.verdict.reward += c.weight * value;
      if (t.correct && !t.failed) s.verdict.correct = *t.correct;
      for (auto& [name, x] : t.components) s.components.emplace_back(c.name + "." + name, x);
      if (!t.info.empty()) s.info += (s.info.empty() ? "" : "\n") + c.name + ": " + t.info;
    }
  }
  return out;
}

namespace {

std::string verdict_bytes(const tasks::Verdict& v) {
  ByteWriter w;
  w.put(v.reward), w.put<uint8_t>(v.correct), w.put<uint8_t>(v.extracted.has_value());
  w.put(v.extracted.value_or(std::string())), w.put(v.rewards);
  return w.bytes();
}

tasks::Verdict verdict_from(const std::string& bytes) {
  tasks::Verdict v;
  ByteReader in(bytes);
  uint8_t correct = 0, has = 0;
  std::string extracted;
  in.get(v.reward), in.get(correct), in.get(has), in.get(extracted), in.get(v.rewards);
  v.correct = correct != 0;
  if (has) v.extracted = std::move(extracted);
  return v;
}

}  // namespace

// The task's verdicts for a batch: on a worker thread (thread mode; one call alone goes through SafeReward) or in a
// forked child (process mode); thread mode moves to process mode for good once hung calls reach the limit.
std::vector<tasks::Verdict> RewardSet::verify_batch(const std::vector<RewardQuery>& qs, std::vector<uint8_t>& failed) {
  failed.assign(qs.size(), 0);
  std::vector<std::string> why;
  std::vector<std::optional<std::string>> got;
  if (verifier_starved() && qs.size() > 1) {
    const tasks::Task& task = *task_;
    got = reward::run_forked(
        qs.size(), [&](size_t i) { return verdict_bytes(task.verify(*qs[i].problem, *qs[i].completion)); },
        safe_.options().timeout_s, nullptr, &why);
  } else if (qs.size() > 1 && safe_.options().timeout_s > 0) {
    // The thread may outlive this call (a hang is abandoned): it owns copies of what it reads.
    auto items = std::make_shared<std::vector<std::pair<tasks::Problem, std::string>>>();
    for (const RewardQuery& q : qs) items->emplace_back(*q.problem, *q.completion);
    got = threaded_.run(
        qs.size(),
        [items, task = task_](size_t i) { return verdict_bytes(task->verify((*items)[i].first, (*items)[i].second)); },
        safe_.options().timeout_s, &why);
  } else {
    std::vector<tasks::Verdict> out(qs.size());
    for (size_t i = 0; i < qs.size(); ++i) {
      const int64_t f0 = safe_.failures();
      out[i] = tasks::verify_safely(safe_, task_, *qs[i].problem, *qs[i].completion);
      failed[i] = safe_.failures() != f0;
    }
    return out;
  }
  std::vector<tasks::Verdict> out(qs.size());
  for (size_t i = 0; i < qs.size(); ++i) {
    if (got[i]) {
      out[i] = verdict_from(*got[i]);
      continue;
    }
    failed[i] = 1;
    ++batch_failures_;
    if (batch_failures_ <= 10 || batch_failures_ % 1000 == 0)
      TEMPER_LOG(warn) << "reward: the task's verifier failed on " << qs[i].problem->id << ": " << why[i]
                       << "; scored 0 (verifier failures so far " << batch_failures_ << ")";
  }
  return out;
}

// Thread mode: once the abandoned (hung) calls reach SafeReward's limit, the verifier moves to a child process for
// good (a child can be killed), and says so.
bool RewardSet::verifier_starved() {
  if (isolation_ == VerifierIsolation::process) return true;
  const int64_t hung = safe_.stats().abandoned_running + threaded_.abandoned_running();
  if (safe_.options().timeout_s <= 0 || hung < safe_.options().max_abandoned) return false;
  TEMPER_LOG(error) << "reward: the task's verifier has " << hung
                    << " calls that ran past task.reward_timeout_s = " << safe_.options().timeout_s
                    << " s and never returned (a verifier that hangs); from now on it runs in a child process that "
                       "is killed at the timeout (task.reward_isolation = \"process\" starts that way)";
  isolation_ = VerifierIsolation::process;
  return true;
}

tasks::Verdict RewardSet::verify(const tasks::Problem& p, const std::string& completion, int64_t step) {
  RewardQuery q{&p, &completion, std::to_string(step) + "/m" + std::to_string(verify_calls_++)};
  return std::move(score({q}, step)[0].verdict);
}

}  // namespace temper::rl

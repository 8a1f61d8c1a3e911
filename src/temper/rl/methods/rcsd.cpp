#include "temper/rl/methods/rcsd.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "temper/core/base64.h"
#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/rl/derived_problem.h"
#include "temper/rl/judge_reward.h"
#include "temper/rl/method_spec.h"

namespace temper::rl {

void RcsdConfig::visit(KeyVisitor& v) {
  v("combine", combine, "replace (the advantage is RCSD's alone) or add (to the task's advantage)", kRcsdCombineNames);
  v("coef", coef, "scale of the per-token advantage A_t");
  v("clip", clip, "bound on |A_t|");
  v("template", tmpl, "the teacher's prompt: {rubric}, {question}");
  v("teacher", teacher, "policy (the current weights) or initial (the frozen weights as RL started)",
    kRcsdTeacherNames);
  v("mode", mode, "sampled (per-token advantage) or reverse_kl (full-vocabulary KL; tokens x V x 4 bytes per step)",
    kRcsdModeNames);
  v("rubric_writer", rubric_writer,
    "a model that writes a rubric for problems without one (once per problem, greedy): a Hugging Face directory "
    "or a GGUF file; empty: such problems get none");
  v("rubric_prompt", rubric_prompt, "rubric_writer: its prompt, with {question} and {answer}");
  v("rubric_max_new", rubric_max_new, "rubric_writer: a rubric's tokens at most");
  v("rubric_device", rubric_device, "rubric_writer: where it runs, \"cpu\" or the policy's \"cuda\"");
}

void RcsdConfig::validate() const {
  TEMPER_CHECK(coef > 0 && std::isfinite(coef)) << "rl.rcsd.coef must be > 0, got " << coef;
  TEMPER_CHECK(clip > 0) << "rl.rcsd.clip must be > 0, got " << clip;
  TEMPER_CHECK(tmpl.find("{rubric}") != std::string::npos && tmpl.find("{question}") != std::string::npos)
      << "rl.rcsd.template must contain {rubric} and {question}, got '" << tmpl << "'";
  if (!rubric_writer.empty()) {
    JudgeTemplate(rubric_prompt, {"question", "answer"}, "rl.rcsd.rubric_prompt");
    TEMPER_CHECK(rubric_max_new >= 1) << "rl.rcsd.rubric_max_new must be >= 1, got " << rubric_max_new;
    TEMPER_CHECK(rubric_device == "cpu" || rubric_device == "cuda")
        << "rl.rcsd.rubric_device must be \"cpu\" or \"cuda\", got '" << rubric_device << "'";
  }
}

tasks::Problem rcsd_teacher_problem(const tasks::Problem& p, const PromptCodec& codec, const std::string& rubric,
                                    const std::string& tmpl) {
  return derive_problem(p, codec, "rl.rcsd", [&](const std::string& question) {
    return fill_template(tmpl, {{"{rubric}", rubric}, {"{question}", question}});
  });
}

Rcsd::Rcsd(RcsdConfig cfg, RcsdRubricWriter writer) : cfg_(std::move(cfg)), writer_(std::move(writer)) {
  cfg_.validate();
}

void Rcsd::attach(const MethodEnv& env) {
  env_ = env;
  if (cfg_.rubric_writer.empty() || writer_) return;
  std::shared_ptr<JudgeModel> m = load_judge_model(cfg_.rubric_writer, cfg_.rubric_device, "rl.rcsd.rubric_writer");
  writer_ = [m](const std::vector<std::string>& prompts, int64_t max_new) {
    std::vector<std::string> out;
    for (JudgeAnswer& a : m->ask(prompts, max_new, 0)) out.push_back(std::move(a.text));  // too long: ""
    return out;
  };
}

std::string Rcsd::rubric(const tasks::Problem& p) const {
  std::string r = env_.task->rubric(p);
  if (!r.empty() || !writer_) return r;
  auto it = written_.find(p.id);
  return it == written_.end() ? std::string() : it->second;
}

void Rcsd::write_rubrics(const Batch& b) {
  if (!writer_) return;
  const JudgeTemplate t(cfg_.rubric_prompt, {"question", "answer"}, "rl.rcsd.rubric_prompt");
  std::vector<std::string> ids, asks;
  for (const tasks::Problem& p : b.problems) {
    if (!env_.task->rubric(p).empty() || written_.count(p.id) || std::find(ids.begin(), ids.end(), p.id) != ids.end())
      continue;
    ids.push_back(p.id);
    asks.push_back(t.fill({p.prompt, p.answer}));
  }
  if (asks.empty()) return;
  std::vector<std::string> got = writer_(asks, cfg_.rubric_max_new);
  TEMPER_CHECK(got.size() == asks.size())
      << "rl.rcsd.rubric_writer answered " << got.size() << " of " << asks.size() << " prompts";
  int64_t empty = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string r = std::move(got[i]);
    while (!r.empty() && std::isspace(static_cast<unsigned char>(r.back()))) r.pop_back();
    empty += r.empty();
    written_[ids[i]] = std::move(r);  // empty (or a prompt too long): none, and not asked again
  }
  TEMPER_LOG(info) << "rcsd: rubric_writer asked for " << ids.size() << " rubrics, " << empty << " empty ("
                   << written_.size() << " problems asked so far)";
}

bool Rcsd::advantages(Batch& b) {
  if (cfg_.combine != RcsdCombine::replace) return false;
  compute(b, false);
  return true;
}

void Rcsd::adjust_advantages(Batch& b) {
  if (cfg_.combine == RcsdCombine::add) compute(b, true);
}

void Rcsd::compute(Batch& b, bool add) {
  adv_sum_ = adv_abs_ = clipped_ = teacher_s_ = 0;
  tokens_ = with_rubric_ = sequences_ = 0;
  // The rubric in context, no gradient, every rollout in one batched teacher pass: the same weights, or the
  // frozen starting ones.
  write_rubrics(b);
  std::vector<size_t> rows;
  std::vector<std::vector<int32_t>> prompts, completions;
  for (size_t k = 0; k < b.traj.size(); ++k) {
    Trajectory& t = b.traj[k];
    ++sequences_;
    if (!add) t.advantage.assign(t.tokens.size(), 0.f);
    const tasks::Problem& p = b.problems[static_cast<size_t>(t.problem)];
    const std::string r = rubric(p);
    if (r.empty() || t.tokens.empty()) continue;
    rows.push_back(k);
    prompts.push_back(env_.codec->encode_prompt(rcsd_teacher_problem(p, *env_.codec, r, cfg_.tmpl)));
    completions.push_back(t.tokens);
  }
  with_rubric_ = static_cast<int64_t>(rows.size());
  if (rows.empty()) return;
  std::vector<std::vector<float>> lp, dists;
  const bool full = cfg_.mode == RcsdMode::reverse_kl;
  const auto t0 = std::chrono::steady_clock::now();
  env_.score_batch(prompts, completions, cfg_.teacher == RcsdTeacher::initial, lp, full ? &dists : nullptr);
  teacher_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  TEMPER_CHECK(lp.size() == rows.size()) << "rcsd: the teacher scored " << lp.size() << " of " << rows.size() << " rollouts";
  for (size_t j = 0; j < rows.size(); ++j) {
    Trajectory& t = b.traj[rows[j]];
    TEMPER_CHECK(lp[j].size() == t.tokens.size()) << "rcsd: the teacher scored " << lp[j].size() << " of " << t.tokens.size() << " tokens";
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      const double gap = static_cast<double>(lp[j][i]) - static_cast<double>(t.old_logprob[i]);
      const double a = std::clamp(gap, -cfg_.clip, cfg_.clip) * cfg_.coef;
      clipped_ += std::fabs(gap) > cfg_.clip ? 1 : 0;
      if (!full) t.advantage[i] = static_cast<float>(add ? t.advantage[i] + a : a);  // reverse_kl: the gap is reported only
      adv_sum_ += a, adv_abs_ += std::fabs(a);
      ++tokens_;
    }
    if (full) t.loss_terms.teacher_logq = std::move(dists[j]);
  }
  if (full) b.reverse_kl_coef = cfg_.coef;
}

void Rcsd::metrics(Metrics& m) const {
  const double n = std::max<double>(1.0, static_cast<double>(tokens_));
  m.emplace_back("rcsd_adv_mean", adv_sum_ / n);
  m.emplace_back("rcsd_adv_abs_mean", adv_abs_ / n);
  m.emplace_back("rcsd_clip_frac", clipped_ / n);
  m.emplace_back("rcsd_teacher_s", teacher_s_);
  if (writer_) {  // problems the writer gave a rubric (an empty answer is none)
    int64_t n = 0;
    for (const auto& [id, r] : written_) n += !r.empty();
    m.emplace_back("rcsd_rubrics_written", static_cast<double>(n));
  }
  m.emplace_back("rcsd_rubric_frac", sequences_ ? static_cast<double>(with_rubric_) / static_cast<double>(sequences_) : 0.0);
}

// {"written": {problem id: base64 of the rubric}}: a rubric cut at rubric_max_new may end inside a UTF-8 character,
// which JSON text cannot hold, and the resumed run must read back the very bytes.
std::string Rcsd::save_state() const {
  if (written_.empty()) return {};
  nlohmann::json w = nlohmann::json::object();
  for (const auto& [id, r] : written_) w[id] = base64_encode(r);
  return nlohmann::json{{"written", w}}.dump();
}

void Rcsd::load_state(const std::string& s) {
  std::map<std::string, std::string> written;
  try {
    const nlohmann::json j = nlohmann::json::parse(s);
    for (const auto& [id, v] : j.at("written").items()) {
      std::optional<std::string> r = base64_decode(v.get<std::string>());
      TEMPER_CHECK(r) << "rcsd: the checkpointed rubric of problem '" << id << "' is not base64";
      written[id] = std::move(*r);
    }
  } catch (const nlohmann::json::exception& e) {
    TEMPER_FAIL() << "rcsd: the checkpointed state (the written rubrics) is not valid (" << e.what() << ")";
  }
  written_ = std::move(written);
}

namespace {
class RcsdSetup final : public MethodSetupOf<RcsdConfig> {
  MethodNeeds needs() const override {
    MethodNeeds n;
    n.reference = cfg.teacher == RcsdTeacher::initial;
    return n;
  }
  MethodEffects effects() const override {
    MethodEffects e;
    e.sets_advantages = cfg.combine == RcsdCombine::replace;
    if (e.sets_advantages) e.detail = "combine = \"replace\"";
    return e;
  }
  std::unique_ptr<Method> make(const MethodDeps&) const override { return std::make_unique<Rcsd>(cfg); }
};
}  // namespace

const MethodSpec kRcsdMethod{"rcsd", "rl.rcsd", 80, "rubric-conditioned self-distillation",
                             []() -> std::unique_ptr<MethodSetup> { return std::make_unique<RcsdSetup>(); }};

}  // namespace temper::rl

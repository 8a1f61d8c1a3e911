#include "temper/rl/revision.h"

#include <algorithm>
#include <cctype>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/rl/derived_problem.h"

namespace temper::rl {

void RevisionConfig::validate() const {
  TEMPER_CHECK(revision_template.find("{question}") != std::string::npos && revision_template.find("{attempt}") != std::string::npos)
      << "revision template must contain {question} and {attempt}";
  TEMPER_CHECK(verification_template.find("{question}") != std::string::npos &&
               verification_template.find("{attempt}") != std::string::npos)
      << "verification template must contain {question} and {attempt}";
  TEMPER_CHECK(attempt_tokens >= 1) << "attempt_tokens must be >= 1, got " << attempt_tokens;
}

namespace {

std::string cut(const std::string& attempt, int64_t budget, const PromptCodec& codec) {
  std::string body = attempt;
  while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.pop_back();
  std::vector<int32_t> ids = codec.encode_text(body);
  if (static_cast<int64_t>(ids.size()) <= budget) return body;
  return "..." + codec.decode(std::vector<int32_t>(ids.end() - budget, ids.end()));
}

tasks::Problem derived(const tasks::Problem& p, const std::string& tmpl, const std::string& attempt,
                       const std::string& suffix, const PromptCodec& codec) {
  tasks::Problem q = derive_problem(p, codec, "revision", [&](const std::string& question) {
    return fill_template(tmpl, {{"{question}", question}, {"{attempt}", attempt}});
  });
  q.index = -1;
  q.id = p.id + suffix;
  return q;
}

}  // namespace

tasks::Problem revision_problem(const tasks::Problem& p, const std::string& attempt, const RevisionConfig& cfg,
                                const PromptCodec& codec) {
  return derived(p, cfg.revision_template, cut(attempt, cfg.attempt_tokens, codec), "#rev", codec);
}

tasks::Problem verification_problem(const tasks::Problem& p, const std::string& attempt, bool label,
                                    const RevisionConfig& cfg, const PromptCodec& codec) {
  tasks::Problem q = derived(p, cfg.verification_template, cut(attempt, cfg.attempt_tokens, codec), "#ver", codec);
  q.answer = label ? "True" : "False";
  q.gold_solution = "#### " + q.answer;
  return q;
}

namespace {
bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::char_traits<char>::length(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}
}  // namespace

bool is_verification(const tasks::Problem& p) { return ends_with(p.id, "#ver"); }
bool is_revision(const tasks::Problem& p) { return ends_with(p.id, "#rev"); }

std::optional<bool> parse_verdict(const std::string& completion) {
  std::string s;
  size_t at = completion.rfind("####");
  size_t boxed = completion.rfind("\\boxed{");
  if (at != std::string::npos) {
    s = completion.substr(at + 4);
  } else if (boxed != std::string::npos) {
    size_t end = completion.find('}', boxed);
    if (end == std::string::npos) return std::nullopt;
    s = completion.substr(boxed + 7, end - boxed - 7);
  } else {
    return std::nullopt;
  }
  std::string w;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!w.empty() && (w.back() == '.' || w.back() == '}')) w.pop_back();
  if (w == "true") return true;
  if (w == "false") return false;
  return std::nullopt;
}

tasks::Verdict verify_verdict(const tasks::Problem& v, const std::string& completion) {
  tasks::Verdict out;
  std::optional<bool> got = parse_verdict(completion);
  if (got) out.extracted = *got ? "True" : "False";
  out.correct = got && (*got ? "True" : "False") == v.answer;
  out.reward = out.correct ? 1.0 : 0.0;
  return out;
}

std::vector<RevisionTrace> revise(const std::vector<tasks::Problem>& problems, const ReviseSettings& s,
                                  const RevisionConfig& cfg, const PromptCodec& codec, const GenerateFn& generate,
                                  const VerifyFn& verify) {
  cfg.validate();
  TEMPER_CHECK(s.rounds >= 0) << "revision rounds must be >= 0, got " << s.rounds;
  std::vector<RevisionTrace> out(problems.size());
  std::vector<size_t> live(problems.size());
  for (size_t i = 0; i < live.size(); ++i) live[i] = i;
  for (int64_t round = 0; round <= s.rounds && !live.empty(); ++round) {
    std::vector<rollout::RolloutRequest> reqs;
    std::vector<size_t> who;
    std::vector<tasks::Problem> asked;
    for (size_t i : live) {
      tasks::Problem q = round == 0 ? problems[i] : revision_problem(problems[i], out[i].attempts.back(), cfg, codec);
      rollout::RolloutRequest r;
      r.prompt = codec.encode_prompt(q);
      if (static_cast<int64_t>(r.prompt.size()) + 1 >= s.context) continue;  // no room: this problem stops
      r.group_size = 1;
      r.max_new = std::min<int64_t>(s.max_new, s.context - static_cast<int64_t>(r.prompt.size()));
      r.sampler = s.sampler;
      r.sampler.greedy = s.greedy;
      r.stop_ids = codec.stop_ids;
      r.seed = mix_seed(s.seed, static_cast<uint64_t>(round));
      r.stream = static_cast<uint64_t>(i);
      reqs.push_back(std::move(r));
      who.push_back(i);
      asked.push_back(std::move(q));
    }
    if (reqs.empty()) break;
    std::vector<rollout::Completion> done = generate(reqs);
    std::vector<size_t> next;
    for (const rollout::Completion& c : done) {
      const size_t i = who[static_cast<size_t>(c.request)];
      std::string text = codec.decode(c.tokens);
      bool ok = verify(problems[i], text).correct;  // the original question's checker
      out[i].attempts.push_back(text);
      out[i].correct.push_back(ok);
      if (ok) out[i].solved_at = round;
      else next.push_back(i);
    }
    std::sort(next.begin(), next.end());
    live = std::move(next);
  }
  return out;
}

std::vector<double> solved_within(const std::vector<RevisionTrace>& traces, int64_t rounds) {
  TEMPER_CHECK(rounds >= 0) << "solved_within: rounds must be >= 0, got " << rounds;
  std::vector<double> curve(static_cast<size_t>(rounds + 1), 0.0);
  if (traces.empty()) return curve;
  const double w = 1.0 / static_cast<double>(traces.size());
  for (const RevisionTrace& t : traces)
    if (t.solved_at >= 0)
      for (int64_t r = t.solved_at; r <= rounds; ++r) curve[static_cast<size_t>(r)] += w;
  return curve;
}

}  // namespace temper::rl

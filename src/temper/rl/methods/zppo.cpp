#include "temper/rl/methods/zppo.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/core/trim.h"
#include "temper/rl/derived_problem.h"
#include "temper/rl/method_spec.h"

namespace temper::rl {

void ZppoConfig::visit(KeyVisitor& v) {
  v("mode", mode,
    "zppo, buffer (GRPO-dagger: replay hard questions), inject (the teacher's response as a group member)",
    kZppoModeNames);
  v("hard_threshold", hard_threshold, "a question with group accuracy below this is hard (admitted; graduates at it)");
  v("capacity", capacity, "hard questions the buffer holds (FIFO eviction)");
  v("replay_ratio", replay_ratio, "replayed hard questions per new question each step");
  v("aug_ratio", aug_ratio, "BCQ + NCQ prompts per new question each step");
  v("bcq", bcq, "binary-choice questions: the teacher's and a wrong rollout as candidates");
  v("ncq", ncq, "negative-choice questions: the wrong answers listed");
  v("teacher_samples", teacher_samples, "G_T: teacher responses asked per hard question");
  v("teacher_ratio", teacher_ratio,
    "the teacher samples at most ceil(teacher_ratio x new questions) hard questions per step (the spec's rho_aug)");
  v("group_size", group_size, "G_S: samples per reformulated prompt (0: rl.group_size)");
  v("candidate_tokens", candidate_tokens, "each candidate cut to its last N tokens");
  v("match_candidates", match_candidates, "a BCQ's candidates stripped of markdown and cut to the same length");
  v("ncq_traces", ncq_traces, "wrong traces shown in an NCQ");
  v("rewrite", rewrite,
    "who restates the candidates: auto (the teacher when it is a model, else strip), teacher (a model teacher), "
    "strip (markdown stripped, lengths matched)",
    kZppoRewriteNames);
  v("rewrite_template", rewrite_template, "the teacher's rewrite prompt: {question}, {response}");
  v("bcq_template", bcq_template, "the BCQ prompt: {question}, {candidates}");
  v("ncq_template", ncq_template, "the NCQ prompt: {question}, {candidates}, {wrong_answers}");
}

void ZppoConfig::validate() const {
  TEMPER_CHECK(hard_threshold > 0 && hard_threshold <= 1)
      << "rl.zppo.hard_threshold must be in (0, 1], got " << hard_threshold;
  TEMPER_CHECK(capacity >= 0) << "rl.zppo.capacity must be >= 0, got " << capacity;
  TEMPER_CHECK(replay_ratio >= 0 && std::isfinite(replay_ratio))
      << "rl.zppo.replay_ratio must be >= 0, got " << replay_ratio;
  TEMPER_CHECK(aug_ratio >= 0 && std::isfinite(aug_ratio)) << "rl.zppo.aug_ratio must be >= 0, got " << aug_ratio;
  TEMPER_CHECK(teacher_samples >= 1) << "rl.zppo.teacher_samples must be >= 1, got " << teacher_samples;
  TEMPER_CHECK(teacher_ratio > 0 && std::isfinite(teacher_ratio))
      << "rl.zppo.teacher_ratio must be > 0 (hard questions the teacher samples per new question), got "
      << teacher_ratio;
  TEMPER_CHECK(rewrite_template.find("{response}") != std::string::npos)
      << "rl.zppo.rewrite_template must contain {response} (the candidate the teacher restates)";
  TEMPER_CHECK(group_size >= 0) << "rl.zppo.group_size must be >= 0 (0: rl.group_size), got " << group_size;
  TEMPER_CHECK(candidate_tokens >= 1) << "rl.zppo.candidate_tokens must be >= 1, got " << candidate_tokens;
  TEMPER_CHECK(ncq_traces >= 0) << "rl.zppo.ncq_traces must be >= 0, got " << ncq_traces;
  TEMPER_CHECK(bcq_template.find("{question}") != std::string::npos &&
               bcq_template.find("{candidates}") != std::string::npos)
      << "rl.zppo.bcq_template must contain {question} and {candidates}";
  TEMPER_CHECK(ncq_template.find("{question}") != std::string::npos &&
               ncq_template.find("{wrong_answers}") != std::string::npos)
      << "rl.zppo.ncq_template must contain {question} and {wrong_answers}";
}

namespace {}  // namespace

std::string zppo_candidate(const PromptCodec& codec, const std::string& text, int64_t budget) {
  std::string body(trim(text));
  std::vector<int32_t> ids = codec.encode_text(body);
  if (static_cast<int64_t>(ids.size()) > budget) {
    std::vector<int32_t> tail(ids.end() - budget, ids.end());
    body = "..." + codec.decode(tail);
  }
  return "<candidate>\n" + body + "\n</candidate>\n";
}

std::string zppo_plain(const std::string& text) {
  auto alnum = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; };
  std::string out, line;
  bool space = false;
  auto end_line = [&] {
    if (!line.empty()) out += (out.empty() ? "" : "\n") + line;
    line.clear();
    space = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    // "**" / "__" as markdown marks; between letters or digits ("2**3", "a__b") they are text.
    if ((c == '*' || c == '_') && i + 1 < text.size() && text[i + 1] == c &&
        !(i > 0 && alnum(text[i - 1]) && i + 2 < text.size() && alnum(text[i + 2]))) {
      ++i;
      continue;
    }
    if (text.compare(i, 11, "<candidate>") == 0 || text.compare(i, 12, "</candidate>") == 0) {
      i = text.find('>', i);  // a tag the student echoed from an earlier candidate prompt
      space = true;
      continue;
    }
    if (c == '`' || c == '\r') continue;
    if (c == '\n') {
      end_line();
      continue;
    }
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !line.empty()) line += ' ';
    space = false;
    line += c;
  }
  end_line();
  return out;
}

std::pair<std::string, std::string> zppo_bcq_candidates(const PromptCodec& codec, const std::string& teacher,
                                                        const std::string& student, int64_t budget) {
  const std::string a = zppo_plain(teacher), b = zppo_plain(student);
  TEMPER_CHECK(!a.empty() && !b.empty())
      << "zppo: a BCQ candidate is empty once plain (the caller skips such rollouts)";
  const std::vector<int32_t> ia = codec.encode_text(a), ib = codec.encode_text(b);
  const int64_t n = std::min<int64_t>(budget, static_cast<int64_t>(std::min(ia.size(), ib.size())));
  const bool cut = static_cast<int64_t>(ia.size()) > n || static_cast<int64_t>(ib.size()) > n;
  auto block = [&](const std::vector<int32_t>& ids, const std::string& text) {
    std::string body = text;
    if (static_cast<int64_t>(ids.size()) > n) {
      body = codec.decode(std::vector<int32_t>(ids.end() - n, ids.end()));
      // A cut inside a UTF-8 character: its continuation bytes, or the replacement character a decoder made of
      // them, would mark this candidate as the cut one.
      size_t k = 0;
      while (k < body.size()) {
        if ((static_cast<unsigned char>(body[k]) & 0xC0) == 0x80)
          ++k;
        else if (body.compare(k, 3, "\xEF\xBF\xBD") == 0)
          k += 3;
        else
          break;
      }
      body = body.substr(k);
    }
    return "<candidate>\n" + std::string(cut ? "..." : "") + body + "\n</candidate>\n";
  };
  return {block(ia, a), block(ib, b)};
}

tasks::Problem zppo_rewrite_request(const tasks::Problem& p, const std::string& tmpl, const std::string& response) {
  tasks::Problem q;
  q.id = p.id + "#rewrite";
  q.index = -1;
  q.prompt = fill_template(tmpl, {{"{question}", p.prompt}, {"{response}", std::string(trim(response))}});
  if (!p.messages.empty()) q.messages = {{"user", q.prompt}};
  return q;
}

tasks::Problem zppo_reformulate(const tasks::Problem& p, const PromptCodec& codec, const std::string& tmpl,
                                const std::string& candidates, const std::string& wrong_answers,
                                const std::string& kind) {
  tasks::Problem q = derive_problem(p, codec, "zppo", [&](const std::string& question) {
    return fill_template(tmpl,
                         {{"{question}", question}, {"{candidates}", candidates}, {"{wrong_answers}", wrong_answers}});
  });
  q.index = -1;
  q.id = p.id + "#" + kind;
  return q;
}

Zppo::Zppo(const ZppoConfig& cfg, std::shared_ptr<Teacher> teacher)
    : cfg_(cfg), teacher_(std::move(teacher)), buffer_(cfg.capacity) {
  cfg_.validate();
  TEMPER_CHECK(teacher_ || cfg_.mode == ZppoMode::buffer || (cfg_.mode == ZppoMode::zppo && !cfg_.bcq))
      << "zppo: this mode needs a teacher ([teacher] source = \"gold\", \"dataset\" or \"model\")";
  TEMPER_CHECK(cfg_.rewrite != ZppoRewrite::teacher || cfg_.mode != ZppoMode::zppo || rewrites())
      << "rl.zppo.rewrite = \"teacher\": the teacher restates the candidates, so it must be a model ([teacher] source "
         "= "
         "\"model\"); the "
      << (teacher_ ? "\"" + teacher_->name() + "\" teacher only gives its fixed text"
                   : std::string("run has no teacher"))
      << " (rewrite = \"auto\" strips and matches the candidates instead)";
}

bool Zppo::rewrites() const {
  return cfg_.rewrite != ZppoRewrite::strip && teacher_ && teacher_->name() != "gold" && teacher_->name() != "dataset";
}

std::vector<tasks::Problem> Zppo::extra_problems(int64_t step, int64_t new_problems) {
  step_ = step;
  n_ = StepCounts{};
  new_ = new_problems;
  std::vector<tasks::Problem> out;
  int64_t k = static_cast<int64_t>(std::floor(cfg_.replay_ratio * static_cast<double>(new_problems) + 1e-9));
  for (int64_t idx :
       buffer_.sample(k, mix_seed(mix_seed(cfg_.seed ^ env_.seed, 0x2E91A7ull), static_cast<uint64_t>(step)))) {
    out.push_back(env_.task->problem(tasks::Split::train, static_cast<uint64_t>(idx)));
    out.back().index = idx;
  }
  n_.replayed = static_cast<int64_t>(out.size());
  round_ = 0;
  return out;
}

void Zppo::after_reward(Batch& b) {
  // The round's groups of task problems (new or replayed): the student's own samples only.
  std::map<int64_t, std::pair<int64_t, int64_t>> acc;  // group -> (correct, total)
  std::vector<int64_t> order;
  for (const Trajectory& t : b.traj) {
    if (t.lineage.parent >= 0 || t.lineage.off_policy || b.problems[static_cast<size_t>(t.problem)].index < 0) continue;
    auto [it, fresh] = acc.try_emplace(t.group, 0, 0);
    if (fresh) order.push_back(t.group);
    it->second.first += t.correct ? 1 : 0;
    it->second.second += 1;
  }
  std::vector<int64_t> hard;
  for (int64_t g : order) {
    const auto [c, n] = acc[g];
    double a = static_cast<double>(c) / static_cast<double>(n);
    // group ids are problem indices in the batch (the trainer's convention)
    const tasks::Problem& p = b.problems[static_cast<size_t>(g)];
    PromptBuffer::Event e = buffer_.visit(p.index, a, cfg_.hard_threshold);
    n_.admitted += e == PromptBuffer::Event::admitted;
    n_.graduated += e == PromptBuffer::Event::graduated;
    n_.task_groups += 1;
    n_.all_wrong += c == 0;
    if (a < cfg_.hard_threshold) hard.push_back(g);
  }
  n_.hard += static_cast<int64_t>(hard.size());
  if (cfg_.mode == ZppoMode::inject && teacher_) inject(b, hard);
  if (cfg_.mode == ZppoMode::zppo) {
    // The step's budget: ceil(aug_ratio x the step's new questions), shared by its rounds.
    const int64_t budget = static_cast<int64_t>(std::ceil(cfg_.aug_ratio * static_cast<double>(new_) - 1e-9));
    reformulate(b, hard, budget - n_.bcq - n_.ncq);
  }
  ++round_;
}

std::vector<std::vector<std::string>> Zppo::correct_teacher_responses(const std::vector<tasks::Problem>& ps,
                                                                      uint64_t seed) {
  std::vector<std::vector<std::string>> all = teacher_->respond(ps, cfg_.teacher_samples, seed), out(ps.size());
  for (size_t i = 0; i < ps.size(); ++i)
    for (const std::string& r : all[i]) {
      ++n_.teacher_asked;
      if (env_.verify(ps[i], r).correct) {
        ++n_.teacher_correct;
        out[i].push_back(r);
      }
    }
  return out;
}

// Hard questions reformulated: a seeded order of them, the teacher's correct answers for the first few, the prompts
// planned (BCQ, NCQ) up to the cap, their candidates restated by the teacher where it rewrites, the prompts built, and
// the student's answers to them added to the batch as groups of their own.
void Zppo::reformulate(Batch& b, const std::vector<int64_t>& hard_groups, int64_t cap) {
  if (hard_groups.empty() || cap <= 0 || (!cfg_.bcq && !cfg_.ncq)) return;
  const uint64_t seed = mix_seed(mix_seed(cfg_.seed ^ env_.seed, static_cast<uint64_t>(step_)),
                                 0x2990ull + static_cast<uint64_t>(round_));
  Rng rng(seed, 0);
  std::vector<int64_t> take = hard_groups;  // seeded shuffle: which hard questions get the budget
  for (size_t i = take.size(); i > 1; --i)
    std::swap(take[i - 1], take[static_cast<size_t>(tasks::rand_int(rng, 0, static_cast<int64_t>(i) - 1))]);
  std::vector<tasks::Problem> ps;
  for (int64_t g : take) ps.push_back(b.problems[static_cast<size_t>(g)]);
  const std::vector<std::vector<std::string>> good = teacher_answers(ps, seed);
  std::vector<PromptPlan> plans = plan_prompts(b, take, ps, good, cap, rng);
  if (rewrites() && !plans.empty()) rewrite_candidates(plans, ps, seed);
  const std::vector<tasks::Problem> built = build_prompts(plans, ps);
  if (!built.empty()) answer_prompts(b, built, seed);
}

// The teacher samples the first ceil(teacher_ratio x new) hard questions of the order (over the step's rounds): the
// correct responses per question (empty past the cap, or without BCQs or a teacher).
std::vector<std::vector<std::string>> Zppo::teacher_answers(const std::vector<tasks::Problem>& ps, uint64_t seed) {
  std::vector<std::vector<std::string>> good(ps.size());
  if (!cfg_.bcq || !teacher_) return good;
  const int64_t limit = static_cast<int64_t>(std::ceil(cfg_.teacher_ratio * static_cast<double>(new_) - 1e-9));
  const size_t n =
      static_cast<size_t>(std::clamp<int64_t>(limit - n_.teacher_questions, 0, static_cast<int64_t>(ps.size())));
  if (n == 0) return good;
  std::vector<std::vector<std::string>> some = correct_teacher_responses(
      std::vector<tasks::Problem>(ps.begin(), ps.begin() + static_cast<std::ptrdiff_t>(n)), mix_seed(seed, 0x7EAull));
  std::move(some.begin(), some.end(), good.begin());
  n_.teacher_questions += static_cast<int64_t>(n);
  return good;
}

// Prompts in the order until the cap: a question without a correct teacher sample gets an NCQ only, and one without
// a wrong parsable answer leaves its slot to the next.
std::vector<Zppo::PromptPlan> Zppo::plan_prompts(const Batch& b, const std::vector<int64_t>& take,
                                                 const std::vector<tasks::Problem>& ps,
                                                 const std::vector<std::vector<std::string>>& good, int64_t cap,
                                                 Rng& rng) const {
  std::vector<PromptPlan> plans;
  int64_t made = 0;
  for (size_t k = 0; k < take.size() && made < cap; ++k) {
    const int64_t g = take[k];
    std::vector<const Trajectory*> wrong;
    for (const Trajectory& t : b.traj)
      if (t.group == g && t.lineage.parent < 0 && !t.lineage.off_policy && !t.correct) wrong.push_back(&t);
    if (wrong.empty()) continue;
    // A rollout with nothing left once plain (empty, or only marks) would be an empty candidate: the wrong one.
    std::vector<const Trajectory*> shown = wrong;
    if (cfg_.match_candidates) std::erase_if(shown, [](const Trajectory* t) { return zppo_plain(t->text).empty(); });
    if (cfg_.bcq && !good[k].empty() && !shown.empty() && made < cap) {
      const std::string& right =
          good[k][static_cast<size_t>(tasks::rand_int(rng, 0, static_cast<int64_t>(good[k].size()) - 1))];
      const Trajectory* w = shown[static_cast<size_t>(tasks::rand_int(rng, 0, static_cast<int64_t>(shown.size()) - 1))];
      PromptPlan pl;
      pl.k = k, pl.bcq = true;
      pl.teacher_first = (rng.next_u32() & 1u) != 0;
      pl.texts = {right, w->text};
      plans.push_back(std::move(pl));
      ++made;
    }
    if (cfg_.ncq && made < cap) {
      std::vector<std::string> answers;  // distinct wrong final answers, first-seen order
      std::vector<std::string> traces;
      for (const Trajectory* t : wrong) {
        std::optional<std::string> x = env_.verify(ps[k], t->text).extracted;  // as the checker reads it
        if (!x || x->empty() || std::find(answers.begin(), answers.end(), *x) != answers.end()) continue;
        answers.push_back(*x);
        if (static_cast<int64_t>(traces.size()) < cfg_.ncq_traces) traces.push_back(t->text);
      }
      if (answers.empty()) continue;
      PromptPlan pl;
      pl.k = k;
      for (size_t i = 0; i < answers.size(); ++i) pl.answers += (i ? ", " : "") + answers[i];
      pl.texts = std::move(traces);
      plans.push_back(std::move(pl));
      ++made;
    }
  }
  return plans;
}

// The teacher restates every candidate with the same prompt. A rewrite is kept only where it keeps the verdict (the
// teacher's response still correct, a wrong one still wrong) and is not empty once plain; a BCQ keeps both or
// neither, so the two candidates always come from the same writer.
void Zppo::rewrite_candidates(std::vector<PromptPlan>& plans, const std::vector<tasks::Problem>& ps, uint64_t seed) {
  std::vector<tasks::Problem> asks;
  for (const PromptPlan& pl : plans)
    for (const std::string& text : pl.texts)
      asks.push_back(zppo_rewrite_request(ps[pl.k], cfg_.rewrite_template, text));
  const std::vector<std::vector<std::string>> out = teacher_->respond(asks, 1, mix_seed(seed, 0x3E7ull));
  size_t at = 0;
  for (PromptPlan& pl : plans) {
    std::vector<std::string> now = pl.texts;
    int64_t kept = 0;
    for (size_t i = 0; i < now.size(); ++i, ++at) {
      const bool want_correct = pl.bcq && i == 0;
      const bool have = at < out.size() && !out[at].empty() && !zppo_plain(out[at][0]).empty();
      if (have && env_.verify(ps[pl.k], out[at][0]).correct == want_correct) now[i] = out[at][0], ++kept;
    }
    const int64_t n = static_cast<int64_t>(now.size());
    if (pl.bcq && kept < n) {  // one writer for both: a dropped rewrite takes its partner's back
      n_.rewrite_dropped += n;
      continue;
    }
    n_.rewritten += kept;
    n_.rewrite_dropped += n - kept;
    pl.texts = std::move(now);
    pl.rewritten = pl.bcq;
  }
}

std::vector<tasks::Problem> Zppo::build_prompts(const std::vector<PromptPlan>& plans,
                                                const std::vector<tasks::Problem>& ps) {
  std::vector<tasks::Problem> built;
  for (const PromptPlan& pl : plans) {
    if (pl.bcq) {
      std::string a, c;
      if (pl.rewritten) {  // the teacher gave both one style and length: stripped, each cut to the budget alone
        a = zppo_candidate(*env_.codec, zppo_plain(pl.texts[0]), cfg_.candidate_tokens);
        c = zppo_candidate(*env_.codec, zppo_plain(pl.texts[1]), cfg_.candidate_tokens);
      } else if (cfg_.match_candidates) {
        std::tie(a, c) = zppo_bcq_candidates(*env_.codec, pl.texts[0], pl.texts[1], cfg_.candidate_tokens);
      } else {
        a = zppo_candidate(*env_.codec, pl.texts[0], cfg_.candidate_tokens);
        c = zppo_candidate(*env_.codec, pl.texts[1], cfg_.candidate_tokens);
      }
      built.push_back(
          zppo_reformulate(ps[pl.k], *env_.codec, cfg_.bcq_template, pl.teacher_first ? a + c : c + a, "", "bcq"));
      n_.teacher_first += pl.teacher_first;
      ++n_.bcq;
    } else {
      std::string cands;
      for (const std::string& t : pl.texts) cands += zppo_candidate(*env_.codec, t, cfg_.candidate_tokens);
      built.push_back(zppo_reformulate(ps[pl.k], *env_.codec, cfg_.ncq_template, cands, pl.answers, "ncq"));
      ++n_.ncq;
    }
  }
  return built;
}

// The student answers each reformulated prompt as its own group.
void Zppo::answer_prompts(Batch& b, const std::vector<tasks::Problem>& built, uint64_t seed) {
  const int64_t G = cfg_.group_size > 0 ? cfg_.group_size : env_.group_size;
  std::vector<rollout::RolloutRequest> reqs;
  std::vector<size_t> which;
  for (size_t i = 0; i < built.size(); ++i) {
    std::vector<int32_t> prompt = env_.codec->encode_prompt(built[i]);
    if (static_cast<int64_t>(prompt.size()) + 2 > env_.context) continue;  // no room to answer
    rollout::RolloutRequest r = env_.request(std::move(prompt), G, mix_seed(seed, 0x5A3Dull),
                                             static_cast<uint64_t>(i) * static_cast<uint64_t>(G));
    reqs.push_back(std::move(r));
    which.push_back(i);
  }
  std::vector<rollout::Completion> done = env_.generate(reqs);
  std::vector<int64_t> index_of(built.size(), -1);
  for (size_t j = 0; j < which.size(); ++j) {
    index_of[which[j]] = static_cast<int64_t>(b.problems.size());
    b.problems.push_back(built[which[j]]);
  }
  for (rollout::Completion& c : done) {
    const size_t bi = which[static_cast<size_t>(c.request)];
    const int64_t pi = index_of[bi];
    const tasks::Problem& p = b.problems[static_cast<size_t>(pi)];
    std::string text = env_.codec->decode(c.tokens);
    Trajectory t = trajectory_from(std::move(c), pi, reqs[static_cast<size_t>(c.request)].prompt, std::move(text));
    tasks::Verdict v = env_.verify(p, t.text);
    t.reward = v.reward;
    t.rewards = v.rewards;
    t.correct = v.correct;
    t.scored = true;
    const bool is_bcq = p.id.size() > 4 && p.id.compare(p.id.size() - 4, 4, "#bcq") == 0;
    t.tags.push_back(is_bcq ? "zppo_bcq" : "zppo_ncq");
    (is_bcq ? n_.bcq_samples : n_.ncq_samples) += 1;
    (is_bcq ? n_.bcq_correct : n_.ncq_correct) += t.correct ? 1 : 0;
    b.traj.push_back(std::move(t));
  }
}

void Zppo::inject(Batch& b, const std::vector<int64_t>& hard_groups) {
  if (hard_groups.empty()) return;
  std::vector<tasks::Problem> ps;
  for (int64_t g : hard_groups) ps.push_back(b.problems[static_cast<size_t>(g)]);
  const uint64_t seed =
      mix_seed(mix_seed(cfg_.seed ^ env_.seed, static_cast<uint64_t>(step_)), 0x1E7ull + static_cast<uint64_t>(round_));
  std::vector<std::vector<std::string>> good = correct_teacher_responses(ps, seed);
  for (size_t k = 0; k < hard_groups.size(); ++k) {
    if (good[k].empty()) continue;
    const int64_t g = hard_groups[k];
    const Trajectory* any = nullptr;
    int64_t members = 0;
    for (const Trajectory& t : b.traj)
      if (t.group == g) any = any ? any : &t, members = std::max(members, t.member + 1);
    if (!any) continue;
    Trajectory t;
    t.problem = any->problem;
    t.group = g;
    t.member = members;
    t.prompt = any->prompt;
    t.tokens = env_.codec->encode_completion(good[k][0]);
    if (static_cast<int64_t>(t.prompt.size() + t.tokens.size()) > env_.context) continue;
    env_.score_tokens(t.prompt, t.tokens, t.old_logprob, t.entropy);
    t.sample_logprob = t.old_logprob;
    t.text = good[k][0];
    t.finish = rollout::FinishReason::stop;
    tasks::Verdict v = env_.verify(b.problems[static_cast<size_t>(g)], t.text);
    t.reward = v.reward;
    t.rewards = v.rewards;
    t.correct = v.correct;
    t.scored = true;
    t.lineage.off_policy = true;
    t.tags.push_back("teacher");
    ++n_.injected;
    b.traj.push_back(std::move(t));
  }
}

void Zppo::metrics(Metrics& m) const {
  auto frac = [](int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  m.emplace_back("zppo_buffer", static_cast<double>(buffer_.size()));
  m.emplace_back("zppo_replayed", static_cast<double>(n_.replayed));
  m.emplace_back("zppo_admitted", static_cast<double>(n_.admitted));
  m.emplace_back("zppo_graduated", static_cast<double>(n_.graduated));
  m.emplace_back("zppo_hard_frac", frac(n_.hard, n_.task_groups));
  m.emplace_back("zppo_all_wrong_frac", frac(n_.all_wrong, n_.task_groups));
  m.emplace_back("zppo_admitted_zero_total", static_cast<double>(buffer_.admitted_at_zero()));
  m.emplace_back("zppo_graduated_zero_rate", frac(buffer_.graduated_from_zero(), buffer_.admitted_at_zero()));
  if (cfg_.mode == ZppoMode::zppo) {
    m.emplace_back("zppo_bcq", static_cast<double>(n_.bcq));
    m.emplace_back("zppo_ncq", static_cast<double>(n_.ncq));
    m.emplace_back("zppo_bcq_acc", frac(n_.bcq_correct, n_.bcq_samples));
    m.emplace_back("zppo_ncq_acc", frac(n_.ncq_correct, n_.ncq_samples));
    m.emplace_back("zppo_bcq_teacher_first", frac(n_.teacher_first, n_.bcq));
  }
  if (cfg_.mode != ZppoMode::buffer) m.emplace_back("zppo_teacher_acc", frac(n_.teacher_correct, n_.teacher_asked));
  if (cfg_.mode == ZppoMode::zppo) {
    m.emplace_back("zppo_teacher_questions", static_cast<double>(n_.teacher_questions));  // sampled (the cap)
    m.emplace_back("zppo_rewritten", static_cast<double>(n_.rewritten));              // candidates the teacher restated
    m.emplace_back("zppo_rewrite_dropped", static_cast<double>(n_.rewrite_dropped));  // kept as they were
  }
  if (cfg_.mode == ZppoMode::inject) m.emplace_back("zppo_injected", static_cast<double>(n_.injected));
}

namespace {
// ZPPO's recipe (spec, methods-llm-rl section 3, steps 6-7), for its baselines too (the buffer, the teacher
// injected: the paper's GRPO-dagger runs in the same pipeline): batch-level normalisation over the groups whose
// rewards differ, 4 update epochs per batch, clip-higher eps_high 0.28.
class ZppoSetup final : public MethodSetupOf<ZppoConfig> {
  void change_defaults(RecipeDefaults& d) const override {
    d.set("rl.epochs", "4");
    d.set("rl.scale_rewards", "\"batch_active\"");
    d.set("rl.eps_high", "0.28");
  }
  MethodNeeds needs() const override {
    MethodNeeds n;
    n.teacher = cfg.mode == ZppoMode::inject || (cfg.mode == ZppoMode::zppo && cfg.bcq);
    return n;
  }
  MethodEffects effects() const override {  // reformulated groups or the teacher's members, after the rewards
    MethodEffects e;
    e.appends_after_reward = cfg.mode == ZppoMode::inject || (cfg.mode == ZppoMode::zppo && (cfg.bcq || cfg.ncq));
    e.detail = "mode = \"" + std::string(enum_name(kZppoModeNames, cfg.mode)) + "\"";
    return e;
  }
  std::unique_ptr<Method> make(const MethodDeps& deps) const override {
    return std::make_unique<Zppo>(seeded(deps), deps.teacher);
  }
};
}  // namespace

const MethodSpec kZppoMethod{"zppo", "rl.zppo", 50, "ZPPO: the teacher in the prompt for hard questions",
                             []() -> std::unique_ptr<MethodSetup> { return std::make_unique<ZppoSetup>(); }};

}  // namespace temper::rl

#include "temper/rl/pairwise_judge.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "temper/core/error.h"
#include "temper/rl/judge_reward.h"
#include "temper/tasks/user_sim.h"

namespace temper::rl {
namespace {

double upper_share(const std::string& s) {
  int64_t letters = 0, upper = 0;
  for (char ch : s) {
    unsigned char u = static_cast<unsigned char>(ch);
    if (std::isalpha(u)) ++letters, upper += std::isupper(u) ? 1 : 0;
  }
  return letters ? static_cast<double>(upper) / static_cast<double>(letters) : 0.0;
}

char last_char(const std::string& s) {
  size_t e = s.find_last_not_of(" \t\r\n");
  return e == std::string::npos ? '\0' : s[e];
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with_any(const std::string& s, std::initializer_list<const char*> xs) {
  for (const char* x : xs)
    if (s.rfind(x, 0) == 0) return true;
  return false;
}

bool contains_any(const std::string& s, std::initializer_list<const char*> xs) {
  for (const char* x : xs)
    if (s.find(x) != std::string::npos) return true;
  return false;
}

}  // namespace

int rating_from_gap(double gap) {
  if (gap <= -2) return 1;
  if (gap <= -1) return 2;
  if (gap <= -0.25) return 3;
  if (gap < 0.25) return 4;
  if (gap < 1) return 5;
  if (gap < 2) return 6;
  return 7;
}

TurnScore ScriptedJudge::score(const tasks::Problem& p, const std::string& turn) {
  TurnScore s;
  const std::vector<std::string> words = tasks::turn_words(turn);
  if (words.empty()) return s;
  // target
  std::set<std::string> ctx;
  for (const std::string& w : tasks::turn_words(p.context))
    if (w.size() >= 4) ctx.insert(w);
  for (const std::string& w : words)
    if (ctx.count(w)) s.target = 1;
  // goal
  if (p.history.empty()) {
    s.goal = 1;
  } else {
    double mean = 0;
    for (const std::string& h : p.history) mean += static_cast<double>(tasks::word_count(h));
    mean /= static_cast<double>(p.history.size());
    s.goal = std::exp(-std::fabs(std::log((static_cast<double>(tasks::word_count(turn)) + 1) / (mean + 1))));
  }
  // style
  double casing = 1, habit = 1, ending = 1;
  if (!p.history.empty()) {
    std::string all;
    std::map<std::string, int64_t> turns_with;
    std::map<char, int64_t> ends;
    for (const std::string& h : p.history) {
      all += h + " ";
      std::vector<std::string> hw = tasks::turn_words(h);
      for (const std::string& w : std::set<std::string>(hw.begin(), hw.end())) ++turns_with[w];
      ++ends[last_char(h)];
    }
    casing = 1 - std::fabs(upper_share(turn) - upper_share(all));
    const int64_t need = std::max<int64_t>(2, static_cast<int64_t>((p.history.size() + 1) / 2));
    std::set<std::string> mine(words.begin(), words.end());
    int64_t habitual = 0, used = 0;
    for (const auto& [w, n] : turns_with)
      if (n >= need) ++habitual, used += mine.count(w) ? 1 : 0;
    if (habitual) habit = static_cast<double>(used) / static_cast<double>(habitual);
    char common = '\0';
    int64_t best = 0;
    for (const auto& [c, n] : ends)
      if (n > best) best = n, common = c;
    ending = last_char(turn) == common ? 1.0 : 0.0;
  }
  s.style = (casing + habit + ending) / 3;
  // penalties
  const std::string low = lower(turn);
  double copy = 0;
  if (words.size() >= 5) {
    std::vector<std::string> src = tasks::turn_words(p.context);
    for (const std::string& h : p.history) {
      std::vector<std::string> hw = tasks::turn_words(h);
      src.push_back("\x1f");  // no span across turns
      src.insert(src.end(), hw.begin(), hw.end());
    }
    std::set<std::string> grams;
    for (size_t i = 0; i + 5 <= src.size(); ++i) grams.insert(src[i] + " " + src[i + 1] + " " + src[i + 2] + " " + src[i + 3] + " " + src[i + 4]);
    for (size_t i = 0; i + 5 <= words.size() && !copy; ++i)
      if (grams.count(words[i] + " " + words[i + 1] + " " + words[i + 2] + " " + words[i + 3] + " " + words[i + 4])) copy = 1;
  }
  const double role = starts_with_any(low, {"assistant:", "user:", "[human]", "human:", "ai:", "system:"}) ||
                              contains_any(low, {"\nassistant:", "\nuser:"})
                          ? 1.0 : 0.0;
  const double reframe = contains_any(low, {"as an ai", "language model", "i am human", "i'm human", "i am a real", "i'm a real", "real user"}) ? 1.0 : 0.0;
  const double assistant = starts_with_any(low, {"sure", "certainly", "of course", "i'd be happy", "i would be happy", "great question"}) ||
                                   contains_any(low, {"how can i help", "let me know if", "hope this helps"})
                               ? 1.0 : 0.0;
  s.penalty = 3 * (copy + role + reframe + assistant) / 4;
  return s;
}

int ScriptedJudge::rate(const tasks::Problem& p, const std::string& a, const std::string& b) {
  return rating_from_gap(score(p, b).total() - score(p, a).total());
}

const char* const kModelJudgeTemplate =
    "One of two candidate messages was written by a real user, the other by an AI imitating that user.\n\n"
    "The user's earlier messages:\n{history}\n\nThe conversation so far:\n{context}\n\n"
    "Candidate A: {a}\nCandidate B: {b}\n\n"
    "Judge each candidate on whether it answers the conversation, fits what this user wants, and sounds like the "
    "user's own style; an assistant-like, copied or role-confused message is the AI's. How likely is it that B, "
    "not A, is the real user's message? Reply with \"Score: N\", N from 1 to 7 (1: surely A, 4: cannot tell, 7: "
    "surely B).";

namespace {
const std::vector<std::string>& pair_names() {
  static const std::vector<std::string> names = {"history", "context", "a", "b"};
  return names;
}
}  // namespace

ModelJudge::ModelJudge(std::shared_ptr<JudgeModel> model, const std::string& tmpl, int64_t max_new,
                       const std::string& where)
    : model_(std::move(model)), tmpl_(tmpl), max_new_(max_new) {
  TEMPER_CHECK(model_) << where << ": no judge model";
  TEMPER_CHECK(max_new_ >= 1) << where << ": max_new must be >= 1, got " << max_new_;
  JudgeTemplate t(tmpl_, pair_names(), where);
  TEMPER_CHECK(t.uses(2) && t.uses(3)) << where << " must contain {a} and {b} (the two candidates)";
}

int ModelJudge::rating_of(const std::string& judgement) {
  std::optional<double> s = parse_judge_score(judgement);
  if (!s || !(*s >= 0.5 && *s < 7.5)) return 0;
  return static_cast<int>(std::lround(*s));
}

std::vector<int> ModelJudge::rate_all(const std::vector<Pair>& pairs) {
  JudgeTemplate t(tmpl_, pair_names(), "rl.turing.judge_template");
  std::vector<std::string> turns;
  turns.reserve(pairs.size());
  for (const Pair& x : pairs) {
    std::string history;
    for (const std::string& h : x.p->history) history += (history.empty() ? "- " : "\n- ") + h;
    turns.push_back(t.fill({history.empty() ? "(none)" : history, x.p->context, *x.a, *x.b}));
  }
  std::vector<JudgeAnswer> got = model_->ask(turns, max_new_, 0);
  std::vector<int> out(pairs.size(), 4);
  for (size_t i = 0; i < got.size(); ++i) {
    const int r = got[i].too_long ? 0 : rating_of(got[i].text);
    if (r == 0)
      ++failures_;
    else
      out[i] = r;
  }
  return out;
}

}  // namespace temper::rl

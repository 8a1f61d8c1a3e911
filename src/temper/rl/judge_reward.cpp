#include "temper/rl/judge_reward.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "temper/core/error.h"
#include "temper/core/fnv1a.h"

namespace temper::rl {

// ---- templates -------------------------------------------------------------------------------------------

JudgeTemplate::JudgeTemplate(const std::string& text, const std::vector<std::string>& names, const std::string& where) {
  std::string lit;
  auto flush = [&] {
    if (!lit.empty()) pieces_.emplace_back(std::move(lit), -1);
    lit.clear();
  };
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '}') {
      lit += '}';
      i += (i + 1 < text.size() && text[i + 1] == '}') ? 2 : 1;
      continue;
    }
    if (c != '{') {
      lit += c;
      ++i;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '{') {
      lit += '{';
      i += 2;
      continue;
    }
    const size_t close = text.find('}', i + 1);
    TEMPER_CHECK(close != std::string::npos)
        << where << ": an unclosed '{' at character " << i << " (write {{ for a literal brace)";
    const std::string name = text.substr(i + 1, close - i - 1);
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "{" : ", {") + n + "}";
      TEMPER_FAIL() << where << ": unknown placeholder {" << name << "} (known: " << known
                    << "; write {{ and }} for literal braces)";
    }
    flush();
    pieces_.emplace_back("", static_cast<int>(it - names.begin()));
    i = close + 1;
  }
  flush();
}

std::string JudgeTemplate::fill(const std::vector<std::string>& values) const {
  std::string out;
  for (const auto& [lit, k] : pieces_) out += k < 0 ? lit : values.at(static_cast<size_t>(k));
  return out;
}

bool JudgeTemplate::uses(size_t name) const {
  return std::any_of(pieces_.begin(), pieces_.end(), [&](const auto& p) { return p.second == static_cast<int>(name); });
}

const std::vector<std::string>& judge_placeholders() {
  static const std::vector<std::string> names = {"question", "completion", "answer", "rubric"};
  return names;
}

// ---- parsers ---------------------------------------------------------------------------------------------

namespace {

bool is_word(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}
char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

struct Number {
  double value = 0;
  size_t begin = 0, end = 0;  // [begin, end) in the text, sign included
};

// The number starting at or after `from`: its first digit, with a sign right before it unless that follows a
// letter or digit ("7-10" is 7 then 10, "x-1" is 1).
std::optional<Number> next_number(std::string_view s, size_t from) {
  for (size_t i = from; i < s.size(); ++i) {
    if (!is_digit(s[i])) continue;
    if (i > 0 && is_word(s[i - 1]) && !is_digit(s[i - 1])) {  // "v2", "x1": part of a word
      while (i < s.size() && is_word(s[i])) ++i;
      continue;
    }
    Number n;
    n.begin = i;
    if (i > 0 && (s[i - 1] == '-' || s[i - 1] == '+') && (i < 2 || !is_word(s[i - 2]))) n.begin = i - 1;
    size_t e = i;
    while (e < s.size() && is_digit(s[e])) ++e;
    if (e + 1 < s.size() && s[e] == '.' && is_digit(s[e + 1])) {
      ++e;
      while (e < s.size() && is_digit(s[e])) ++e;
    }
    n.end = e;
    n.value = std::strtod(std::string(s.substr(n.begin, e - n.begin)).c_str(), nullptr);
    return n;
  }
  return std::nullopt;
}

size_t find_ci(std::string_view s, std::string_view word, size_t from) {
  if (word.empty() || s.size() < word.size()) return std::string_view::npos;
  for (size_t i = from; i + word.size() <= s.size(); ++i) {
    size_t k = 0;
    while (k < word.size() && lower(s[i + k]) == lower(word[k])) ++k;
    if (k == word.size()) return i;
  }
  return std::string_view::npos;
}

// A whole-word occurrence of `word` at or after `from` (case-insensitive).
size_t find_word(std::string_view s, std::string_view word, size_t from) {
  for (size_t i = find_ci(s, word, from); i != std::string_view::npos; i = find_ci(s, word, i + 1)) {
    const bool left = i == 0 || !is_word(s[i - 1]) || !is_word(word.front());
    const size_t e = i + word.size();
    const bool right = e >= s.size() || !is_word(s[e]) || !is_word(word.back());
    if (left && right) return i;
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<double> parse_judge_score(std::string_view s) {
  // 1. "score" then, across a few characters of punctuation or "is"/"of", a number.
  for (size_t w = find_word(s, "score", 0); w != std::string_view::npos; w = find_word(s, "score", w + 1)) {
    size_t i = w + 5;
    for (int hops = 0; hops < 4 && i < s.size(); ++hops) {
      while (i < s.size() &&
             (s[i] == ' ' || s[i] == ':' || s[i] == '*' || s[i] == '=' || s[i] == '\t' || s[i] == '"' || s[i] == '\''))
        ++i;
      if (find_ci(s.substr(i, 3), "is ", 0) == 0 || find_ci(s.substr(i, 3), "of ", 0) == 0)
        i += 3;
      else
        break;
    }
    if (i < s.size() && (is_digit(s[i]) || ((s[i] == '-' || s[i] == '+') && i + 1 < s.size() && is_digit(s[i + 1]))))
      if (auto n = next_number(s, i); n && n->begin <= i) return n->value;
  }
  // 2. "N/M" or "N out of M": N.
  std::optional<double> first;
  for (auto n = next_number(s, 0); n; n = next_number(s, n->end)) {
    if (!first) first = n->value;
    size_t e = n->end;
    while (e < s.size() && s[e] == ' ') ++e;
    if (e < s.size() && s[e] == '/') {
      size_t d = e + 1;
      while (d < s.size() && s[d] == ' ') ++d;
      if (d < s.size() && is_digit(s[d])) return n->value;
    }
    if (find_ci(s.substr(e, 7), "out of ", 0) == 0 && e + 7 < s.size() && is_digit(s[e + 7])) return n->value;
  }
  // 3. The first number.
  return first;
}

std::optional<size_t> parse_judge_choice(std::string_view s, const std::vector<std::string>& labels) {
  std::optional<size_t> best;
  size_t best_pos = std::string_view::npos;
  for (size_t k = 0; k < labels.size(); ++k) {
    const size_t pos = find_word(s, labels[k], 0);
    if (pos == std::string_view::npos) continue;
    if (!best || pos < best_pos || (pos == best_pos && labels[k].size() > labels[*best].size()))
      best = k, best_pos = pos;
  }
  return best;
}

std::string judge_info(std::string_view text, size_t max_chars) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() > max_chars) {
    size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
    out = out.substr(0, cut) + "...";
  }
  return out;
}

std::optional<double> judge_value(const JudgeConfig& j, std::string_view judgement, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<double> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (j.parse == JudgeParse::score) {
    std::optional<double> s = parse_judge_score(judgement);
    if (!s) return fail("no score in the judgement");
    if (!(*s >= j.min_score && *s <= j.max_score)) {
      std::ostringstream o;
      o << "score " << *s << " outside [" << j.min_score << ", " << j.max_score << "]";
      return fail(o.str());
    }
    return (*s - j.min_score) / (j.max_score - j.min_score);
  }
  std::optional<size_t> k = parse_judge_choice(judgement, j.labels);
  if (!k) return fail("none of the labels in the judgement");
  if (!j.label_rewards.empty()) return j.label_rewards[*k];
  return *k == 0 ? 1.0 : 0.0;
}

// ---- the model -------------------------------------------------------------------------------------------

JudgeModel::JudgeModel(std::unique_ptr<Transformer> model, PromptCodec codec, JudgeModelConfig cfg, std::string name)
    : model_(std::move(model)), codec_(std::move(codec)), name_(std::move(name)) {
  TEMPER_CHECK(model_) << name_ << ": no model";
  TEMPER_CHECK(cfg.max_seqs > 0) << name_ << ": max_seqs must be > 0, got " << cfg.max_seqs;
  engine_ = std::make_unique<rollout::PooledEngine>(
      *model_, cfg.kv_memory_mb, rollout::EngineConfig{cfg.max_seqs, codec_.token_bytes}, name_ + " KV memory");
}

std::vector<JudgeAnswer> JudgeModel::ask(const std::vector<std::string>& user_turns, int64_t max_new,
                                         double temperature, uint64_t seed, const std::vector<uint64_t>& streams) {
  TEMPER_CHECK(streams.empty() || streams.size() == user_turns.size())
      << name_ << ": " << streams.size() << " streams for " << user_turns.size() << " questions";
  std::vector<JudgeAnswer> out(user_turns.size());
  const int64_t ctx = model_->config().max_position_embeddings;
  rollout::SamplerConfig sampler;
  sampler.greedy = temperature == 0;
  sampler.temperature = temperature > 0 ? static_cast<float>(temperature) : 1.0f;
  std::vector<rollout::RolloutRequest> reqs;
  std::vector<size_t> which;
  for (size_t i = 0; i < user_turns.size(); ++i) {
    tasks::Problem p;
    p.prompt = user_turns[i];
    std::vector<int32_t> prompt = codec_.encode_prompt(p);
    if (static_cast<int64_t>(prompt.size()) + 1 >= ctx) {
      out[i].too_long = true;
      continue;
    }
    reqs.push_back(rollout::make_request(std::move(prompt), 1, max_new, ctx, sampler, codec_.stop_ids, seed,
                                         streams.empty() ? i : streams[i]));
    which.push_back(i);
  }
  if (reqs.empty()) return out;
  for (const rollout::Completion& c : engine_->engine().run(reqs)) {
    JudgeAnswer& a = out[which[static_cast<size_t>(c.request)]];
    a.text = codec_.decode(c.tokens);
    a.cut = c.finish == rollout::FinishReason::length;
  }
  return out;
}

namespace {

std::mutex g_loader_mu;
JudgeModelLoader g_loader;

}  // namespace

void set_judge_model_loader(JudgeModelLoader loader) {
  std::lock_guard<std::mutex> lock(g_loader_mu);
  g_loader = std::move(loader);
}

std::shared_ptr<JudgeModel> load_judge_model(const std::string& path, const std::string& device,
                                             const std::string& who) {
  JudgeModelLoader loader;
  {
    std::lock_guard<std::mutex> lock(g_loader_mu);
    loader = g_loader;
  }
  TEMPER_CHECK(loader) << who << ": a judge model cannot be loaded here (only `temper train` loads judges)";
  TEMPER_CHECK(!path.empty()) << who << ": no model path";
  return loader(path, device);
}

// ---- the reward term -------------------------------------------------------------------------------------

uint64_t judge_stream(std::string_view query_id) {
  return fnv1a(query_id, kFnv1aShortBasis);
}

namespace {

class JudgeTerm final : public RewardTerm {
 public:
  JudgeTerm(const RewardTermConfig& c, std::shared_ptr<JudgeModel> model)
      : name_(c.name), cfg_(*c.judge), model_(std::move(model)) {
    TEMPER_CHECK(model_) << "reward '" << name_ << "': no judge model";
    cfg_.validate(name_);
    tmpl_ = JudgeTemplate(cfg_.prompt_template, judge_placeholders(), "reward '" + name_ + "': judge.template");
  }

  std::vector<TermScore> score(const std::vector<RewardQuery>& qs, int64_t step) override {
    std::vector<std::string> turns;
    std::vector<uint64_t> streams;
    turns.reserve(qs.size());
    for (const RewardQuery& q : qs) {
      const tasks::Problem& p = *q.problem;
      turns.push_back(tmpl_.fill({p.shown(), *q.completion, p.answer, p.rubric}));
      streams.push_back(judge_stream(q.id));
    }
    const uint64_t seed = 0x6a75646765ull ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull);
    std::vector<JudgeAnswer> got = model_->ask(turns, cfg_.max_new, cfg_.temperature, seed, streams);
    std::vector<TermScore> out(qs.size());
    for (size_t i = 0; i < qs.size(); ++i) {
      TermScore& t = out[i];
      std::string why;
      std::optional<double> v;
      if (got[i].too_long)
        why = "the judge's prompt does not fit its context";
      else
        v = judge_value(cfg_, got[i].text, &why);
      t.failed = !v;
      t.value = v.value_or(0);
      t.info = v ? judge_info(got[i].text) : "failed: " + why + ": " + judge_info(got[i].text);
      if (!v) ++failures_;
    }
    return out;
  }
  int64_t failures() const override { return failures_; }

 private:
  std::string name_;
  JudgeConfig cfg_;
  JudgeTemplate tmpl_;
  std::shared_ptr<JudgeModel> model_;
  std::atomic<int64_t> failures_{0};
};

}  // namespace

std::unique_ptr<RewardTerm> make_judge_term(const RewardTermConfig& c, std::shared_ptr<JudgeModel> model) {
  TEMPER_CHECK(c.judge) << "reward '" << c.name << "': not a judge term";
  return std::make_unique<JudgeTerm>(c, std::move(model));
}

}  // namespace temper::rl

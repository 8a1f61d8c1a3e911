#include "temper/tasks/compose.h"

#include <algorithm>

#include "temper/core/error.h"
#include "temper/core/settings.h"
#include "temper/tasks/string_ops.h"

namespace temper::tasks {
namespace {

constexpr int kMaxDepth = 8;
constexpr int kMaxLen = 32;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

bool contains(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

const std::vector<std::string> kSets = {"sft", "rl", "atomic", "all", "seen", "unseen", "deeper", "holdout"};

// The result of one step: `skill` through `routing` at step i (0-based) of states y (y[0] = input).
std::string route(const std::string& skill, const std::string& routing, const std::vector<std::string>& y, const ComposeConfig& c) {
  const std::string& prev = y.back();
  std::string out;
  if (routing == "prev") {
    out = compose_skill(skill, prev, c.alphabet);
  } else if (routing == "orig") {
    out = compose_skill(skill, y.front(), c.alphabet);
  } else if (routing == "cat") {
    out = compose_skill(skill, (y.size() >= 2 ? y[y.size() - 2] : y.front()) + prev, c.alphabet);
  } else if (routing == "half") {
    const size_t h = std::max<size_t>(1, prev.size() / 2);
    out = compose_skill(skill, prev.substr(0, h), c.alphabet) + prev.substr(h);
  } else {
    TEMPER_FAIL() << "task 'compose': unknown routing '" << routing << "' (expected one of " << join(compose_routings_all(), ", ") << ")";
  }
  if (static_cast<int>(out.size()) > c.cap) out.resize(static_cast<size_t>(c.cap));
  return out;
}

}  // namespace

std::vector<std::string> compose_states(const std::string& x, const std::vector<std::pair<std::string, std::string>>& steps,
                                        const ComposeConfig& cfg) {
  std::vector<std::string> y = {x};
  for (const auto& [s, r] : steps) y.push_back(route(s, r, y, cfg));
  y.erase(y.begin());
  return y;
}

const std::vector<std::string>& compose_skills_all() {
  static const std::vector<std::string> k = {"rev", "rotl", "swap", "repl", "dupf", "dropl", "sort", "shift"};
  return k;
}

const std::vector<std::string>& compose_routings_all() {
  static const std::vector<std::string> k = {"prev", "orig", "cat", "half"};
  return k;
}

std::string compose_skill(std::string_view skill, const std::string& s, const std::string& alphabet) {
  if (skill == "rev" || skill == "rotl" || skill == "swap" || skill == "shift") return string_op_apply(skill, s, alphabet);
  std::string r = s;
  if (skill == "repl") {
    std::replace(r.begin(), r.end(), alphabet[0], alphabet[1]);
  } else if (skill == "dupf") {
    if (!r.empty()) r.insert(r.begin(), r.front());
  } else if (skill == "dropl") {
    if (r.size() > 1) r.pop_back();
  } else if (skill == "sort") {
    std::sort(r.begin(), r.end(), [&](char a, char b) { return alphabet.find(a) < alphabet.find(b); });
  } else {
    TEMPER_FAIL() << "task 'compose': unknown skill '" << skill << "' (expected one of " << join(compose_skills_all(), ", ") << ")";
  }
  return r;
}

void ComposeConfig::validate() const {
  TEMPER_CHECK(depth >= 1 && depth <= kMaxDepth && deep_depth >= 1 && deep_depth <= kMaxDepth)
      << "task 'compose': depth and deep_depth must be in [1, " << kMaxDepth << "], got " << depth << " and " << deep_depth;
  TEMPER_CHECK(min_len >= 1 && min_len <= max_len && max_len <= cap && cap <= kMaxLen)
      << "task 'compose': expected 1 <= min_len <= max_len <= cap <= " << kMaxLen << ", got " << min_len << ", " << max_len
      << ", " << cap;
  TEMPER_CHECK(!skills.empty() && !routings.empty()) << "task 'compose': skills and routings must not be empty";
  for (const auto& s : skills)
    TEMPER_CHECK(contains(compose_skills_all(), s))
        << "task 'compose': skills: expected a comma list of " << join(compose_skills_all(), ",") << ", got '" << s << "'";
  for (const auto& r : routings)
    TEMPER_CHECK(contains(compose_routings_all(), r))
        << "task 'compose': routings: expected a comma list of " << join(compose_routings_all(), ",") << ", got '" << r << "'";
  TEMPER_CHECK(holdout.empty() || contains(skills, holdout))
      << "task 'compose': holdout: expected one of the skills (" << join(skills, ",") << "), got '" << holdout << "'";
  TEMPER_CHECK(sft_share >= 0 && rl_share >= 0 && sft_share + rl_share < 1)
      << "task 'compose': sft_share and rl_share must be >= 0 with a sum below 1 (the rest is the unseen test), got "
      << sft_share << " and " << rl_share;
  TEMPER_CHECK(contains({"sft", "rl", "atomic", "all"}, train_set))
      << "task 'compose': train_set: expected sft, rl, atomic or all, got '" << train_set << "'";
  TEMPER_CHECK(contains(kSets, eval_set)) << "task 'compose': eval_set: expected one of " << join(kSets, ", ") << ", got '" << eval_set << "'";
  TEMPER_CHECK(eval_set != "holdout" || !holdout.empty()) << "task 'compose': eval_set = \"holdout\" needs a holdout skill";
  TEMPER_CHECK(alphabet.size() >= 2) << "task 'compose': alphabet: expected at least 2 characters, got '" << alphabet << "'";
  for (size_t i = 0; i < alphabet.size(); ++i) {
    char ch = alphabet[i];
    TEMPER_CHECK(ch >= 'a' && ch <= 'z' && alphabet.find(ch) == i)
        << "task 'compose': alphabet: expected distinct lowercase letters, got '" << alphabet << "'";
  }
}

ComposeConfig ComposeConfig::from_params(const TaskParams& params) {
  ParamReader r("compose", params);
  ComposeConfig c;
  c.seed = r.get_seed("seed", c.seed);
  c.split_seed = r.get_seed("split_seed", c.split_seed);
  c.depth = static_cast<int>(r.get_int("depth", c.depth, 1, kMaxDepth));
  c.deep_depth = static_cast<int>(r.get_int("deep_depth", c.deep_depth, 1, kMaxDepth));
  c.min_len = static_cast<int>(r.get_int("min_len", c.min_len, 1, kMaxLen));
  c.max_len = static_cast<int>(r.get_int("max_len", std::max(c.max_len, c.min_len), 1, kMaxLen));
  c.cap = static_cast<int>(r.get_int("cap", std::max(c.cap, c.max_len), 1, kMaxLen));
  if (auto s = r.get_optional("skills")) c.skills = split_words(*s);
  if (auto s = r.get_optional("routings")) c.routings = split_words(*s);
  c.alphabet = r.get_string("alphabet", c.alphabet);
  c.sft_share = r.get_double("sft_share", c.sft_share, 0, 1);
  c.rl_share = r.get_double("rl_share", c.rl_share, 0, 1);
  c.holdout = r.get_string("holdout", c.holdout);
  c.train_set = r.get_string("train_set", c.train_set);
  c.eval_set = r.get_string("eval_set", c.eval_set);
  r.finish();
  c.validate();
  return c;
}

ComposeTask::ComposeTask(ComposeConfig cfg) : cfg_(std::move(cfg)) { cfg_.validate(); }

std::vector<std::string> ComposeTask::module_inventory() const {
  std::vector<std::string> m = cfg_.skills;
  for (const auto& r : cfg_.routings) m.push_back("route:" + r);
  return m;
}

std::string ComposeTask::set_of(const std::string& composition) const {
  const double u = static_cast<double>(stable_hash(std::to_string(cfg_.split_seed) + "/" + composition) % 1000000) / 1e6;
  const bool held = !cfg_.holdout.empty() && (composition.rfind(cfg_.holdout + ":", 0) == 0 ||
                                              composition.find("|" + cfg_.holdout + ":") != std::string::npos);
  if (u < cfg_.sft_share) return held ? "rl" : "sft";  // the held-out skill's share of the support goes to RL
  return u < cfg_.sft_share + cfg_.rl_share ? "rl" : "test";
}

Problem ComposeTask::problem(Split split, uint64_t index) const {
  const std::string& want = split == Split::train ? cfg_.train_set : cfg_.eval_set;
  const int depth = want == "atomic" ? 1 : want == "deeper" ? cfg_.deep_depth : cfg_.depth;
  const int64_t ns = static_cast<int64_t>(cfg_.skills.size()), nr = static_cast<int64_t>(cfg_.routings.size());
  const int64_t na = static_cast<int64_t>(cfg_.alphabet.size());
  Rng rng = problem_rng("compose", cfg_.seed, split, index);
  for (int attempt = 0; attempt < kMaxGenerateAttempts; ++attempt) {
    std::vector<std::pair<const std::string*, const std::string*>> steps;
    std::string key;
    bool held = false;
    for (int d = 0; d < depth; ++d) {
      const std::string& s = cfg_.skills[static_cast<size_t>(rand_int(rng, 0, ns - 1))];
      const std::string& r = cfg_.routings[static_cast<size_t>(rand_int(rng, 0, nr - 1))];
      steps.emplace_back(&s, &r);
      key += (d ? "|" : "") + s + ":" + r;
      held = held || s == cfg_.holdout;
    }
    const int len = static_cast<int>(rand_int(rng, cfg_.min_len, cfg_.max_len));
    std::string x;
    for (int i = 0; i < len; ++i) x += cfg_.alphabet[static_cast<size_t>(rand_int(rng, 0, na - 1))];
    bool ok;
    if (want == "sft" || want == "seen") ok = set_of(key) == "sft";
    else if (want == "rl") ok = set_of(key) == "rl";
    else if (want == "unseen") ok = set_of(key) == "test" && !held;
    else if (want == "holdout") ok = set_of(key) == "test" && held;
    else if (want == "all") ok = true;
    else ok = !held;  // atomic, deeper
    if (!ok || split_of(x + "|" + key) != split) continue;
    std::vector<std::string> y = {x};
    std::string gold;
    Problem p;
    for (auto& [s, r] : steps) {
      y.push_back(route(*s, *r, y, cfg_));  // as compose_states
      gold += *s + ":" + *r + "=" + y.back() + "\n";
      if (!contains(p.modules, *s)) p.modules.push_back(*s);
      if (!contains(p.modules, "route:" + *r)) p.modules.push_back("route:" + *r);
    }
    p.id = problem_id("compose", split, index);
    p.prompt = x + "|" + key + "=";
    p.answer = y.back();
    p.gold_solution = gold + "#### " + y.back();
    p.difficulty = depth;
    return p;
  }
  TEMPER_FAIL() << "task 'compose': no " << split_name(split) << " problem of set '" << want << "' found in "
                << kMaxGenerateAttempts << " attempts; check sft_share, rl_share and holdout";
}

Verdict ComposeTask::verify(const Problem& p, const std::string& completion) const {
  Verdict v;
  v.extracted = extract_answer(completion);
  v.correct = v.extracted && *v.extracted == p.answer;
  v.reward = v.correct ? 1.0 : 0.0;
  return v;
}

std::vector<std::string> ComposeTask::intermediate_states(const Problem&, const std::string& completion) const {
  std::vector<std::string> out;
  for (std::string_view line : reasoning_lines(completion)) {
    size_t colon = line.find(':'), eq = line.find('=');
    if (colon == std::string_view::npos || eq == std::string_view::npos || eq < colon) continue;
    std::string skill(line.substr(0, colon));
    skill.erase(0, skill.find_first_not_of(' '));
    if (!contains(compose_skills_all(), skill)) continue;
    std::string_view s = line.substr(eq + 1);
    while (!s.empty() && (s.front() == ' ' || s.back() == ' ' || s.back() == '\r')) s = s.front() == ' ' ? s.substr(1) : s.substr(0, s.size() - 1);
    if (!s.empty()) out.emplace_back(s);
  }
  return out;
}

}  // namespace temper::tasks

#include "temper/tasks/string_ops.h"

#include <algorithm>

#include "temper/core/error.h"
#include "temper/core/settings.h"

namespace temper::tasks {
namespace {

constexpr int kMaxDepth = 16;
constexpr int kMaxLen = 32;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

}  // namespace

const std::vector<std::string>& string_ops_all() {
  static const std::vector<std::string> kOps = {"rev", "rotl", "rotr", "swap", "shift", "drop", "dup"};
  return kOps;
}

std::string string_op_apply(std::string_view op, const std::string& s, const std::string& alphabet) {
  std::string r = s;
  if (op == "rev") {
    std::reverse(r.begin(), r.end());
  } else if (op == "rotl") {
    if (!r.empty()) std::rotate(r.begin(), r.begin() + 1, r.end());
  } else if (op == "rotr") {
    if (!r.empty()) std::rotate(r.rbegin(), r.rbegin() + 1, r.rend());
  } else if (op == "swap") {
    for (size_t i = 0; i + 1 < r.size(); i += 2) std::swap(r[i], r[i + 1]);
  } else if (op == "shift") {
    for (char& c : r) {
      size_t k = alphabet.find(c);
      if (k != std::string::npos) c = alphabet[(k + 1) % alphabet.size()];
    }
  } else if (op == "drop") {
    if (!r.empty()) r.erase(0, 1);
  } else if (op == "dup") {
    if (!r.empty()) r += r.back();
  } else {
    TEMPER_FAIL() << "string_ops: unknown op '" << op << "' (expected one of " << join(string_ops_all(), ", ") << ")";
  }
  return r;
}

void StringOpsConfig::validate() const {
  auto range = [](const char* what, int lo, int hi, int max) {
    TEMPER_CHECK(lo >= 1 && lo <= hi && hi <= max)
        << "task 'string_ops': expected 1 <= min_" << what << " <= max_" << what << " <= " << max << ", got " << lo
        << " and " << hi;
  };
  range("depth", min_depth, max_depth, kMaxDepth);
  range("depth (eval)", eval_min_depth < 0 ? min_depth : eval_min_depth, eval_max_depth < 0 ? max_depth : eval_max_depth,
        kMaxDepth);
  range("len", min_len, max_len, kMaxLen);
  range("len (eval)", eval_min_len < 0 ? min_len : eval_min_len, eval_max_len < 0 ? max_len : eval_max_len, kMaxLen);
  TEMPER_CHECK(!ops.empty()) << "task 'string_ops': ops: expected a comma list of " << join(string_ops_all(), ",")
                             << ", got nothing";
  for (const std::string& o : ops) {
    const auto& all = string_ops_all();
    TEMPER_CHECK(std::find(all.begin(), all.end(), o) != all.end())
        << "task 'string_ops': ops: expected a comma list of " << join(string_ops_all(), ",") << ", got '" << o << "'";
  }
  TEMPER_CHECK(alphabet.size() >= 2) << "task 'string_ops': alphabet: expected at least 2 characters, got '" << alphabet
                                     << "'";
  for (size_t i = 0; i < alphabet.size(); ++i) {
    char c = alphabet[i];
    bool ok = c > ' ' && c < 127 && c != '|' && c != '=' && c != '#' && alphabet.find(c) == i;
    TEMPER_CHECK(ok) << "task 'string_ops': alphabet: expected distinct printable ASCII characters other than space, "
                        "'|', '=' and '#', got '"
                     << alphabet << "'";
  }
}

StringOpsConfig StringOpsConfig::from_params(const TaskParams& params) {
  ParamReader r("string_ops", params);
  StringOpsConfig c;
  c.seed = r.get_seed("seed", c.seed);
  c.min_depth = static_cast<int>(r.get_int("min_depth", c.min_depth, 1, kMaxDepth));
  c.max_depth = static_cast<int>(r.get_int("max_depth", std::max(c.max_depth, c.min_depth), 1, kMaxDepth));
  c.eval_min_depth = static_cast<int>(r.get_int("eval_min_depth", -1, -1, kMaxDepth));
  c.eval_max_depth = static_cast<int>(r.get_int("eval_max_depth", -1, -1, kMaxDepth));
  c.min_len = static_cast<int>(r.get_int("min_len", c.min_len, 1, kMaxLen));
  c.max_len = static_cast<int>(r.get_int("max_len", std::max(c.max_len, c.min_len), 1, kMaxLen));
  c.eval_min_len = static_cast<int>(r.get_int("eval_min_len", -1, -1, kMaxLen));
  c.eval_max_len = static_cast<int>(r.get_int("eval_max_len", -1, -1, kMaxLen));
  if (auto o = r.get_optional("ops")) c.ops = split_words(*o);
  c.alphabet = r.get_string("alphabet", c.alphabet);
  r.finish();
  c.validate();
  return c;
}

StringOpsTask::StringOpsTask(StringOpsConfig cfg) : cfg_(std::move(cfg)) { cfg_.validate(); }

Problem StringOpsTask::problem(Split split, uint64_t index) const {
  int dlo = cfg_.min_depth, dhi = cfg_.max_depth, llo = cfg_.min_len, lhi = cfg_.max_len;
  if (split == Split::eval) {
    dlo = cfg_.eval_min_depth < 0 ? dlo : cfg_.eval_min_depth;
    dhi = cfg_.eval_max_depth < 0 ? dhi : cfg_.eval_max_depth;
    llo = cfg_.eval_min_len < 0 ? llo : cfg_.eval_min_len;
    lhi = cfg_.eval_max_len < 0 ? lhi : cfg_.eval_max_len;
  }
  const int64_t na = static_cast<int64_t>(cfg_.alphabet.size());
  Rng rng = problem_rng("string_ops", cfg_.seed, split, index);
  for (int attempt = 0; attempt < kMaxGenerateAttempts; ++attempt) {
    int depth = static_cast<int>(rand_int(rng, dlo, dhi));
    int len = static_cast<int>(rand_int(rng, llo, lhi));
    std::string cur;
    for (int i = 0; i < len; ++i) cur += cfg_.alphabet[rand_int(rng, 0, na - 1)];
    std::string prompt = cur, gold, prev;
    bool ok = true;
    for (int d = 0; d < depth && ok; ++d) {
      std::vector<std::pair<const std::string*, std::string>> cand;
      for (const std::string& op : cfg_.ops) {
        std::string r = string_op_apply(op, cur, cfg_.alphabet);
        if (r != cur && r != prev && !r.empty()) cand.emplace_back(&op, std::move(r));
      }
      if (cand.empty()) {
        ok = false;
        break;
      }
      auto& [op, next] = cand[rand_int(rng, 0, static_cast<int64_t>(cand.size()) - 1)];
      prompt += "|" + *op;
      gold += *op + "=" + next + "\n";
      prev = std::move(cur);
      cur = next;
    }
    if (!ok || split_of(prompt) != split) continue;
    Problem p;
    p.id = problem_id("string_ops", split, index);
    p.prompt = prompt + "=";
    p.answer = cur;
    p.gold_solution = gold + "#### " + cur;
    p.difficulty = depth;
    return p;
  }
  TEMPER_FAIL() << "task 'string_ops': no " << split_name(split) << " problem found in " << kMaxGenerateAttempts
                << " attempts; widen the length range, the alphabet or the ops";
}

Verdict StringOpsTask::verify(const Problem& p, const std::string& completion) const {
  Verdict v;
  v.extracted = extract_answer(completion);
  v.correct = v.extracted && *v.extracted == p.answer;
  v.reward = v.correct ? 1.0 : 0.0;
  return v;
}

std::vector<std::string> StringOpsTask::intermediate_states(const Problem&, const std::string& completion) const {
  std::vector<std::string> out;
  const auto& all = string_ops_all();
  for (std::string_view line : reasoning_lines(completion)) {
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string op(line.substr(0, eq));
    op.erase(0, op.find_first_not_of(' '));
    op.erase(op.find_last_not_of(' ') + 1);
    if (std::find(all.begin(), all.end(), op) == all.end()) continue;
    std::string_view s = line.substr(eq + 1);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    if (!s.empty()) out.emplace_back(s);
  }
  return out;
}

}  // namespace temper::tasks

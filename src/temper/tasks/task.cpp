#include "temper/tasks/task.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "temper/core/error.h"
#include "temper/core/fnv1a.h"
#include "temper/core/settings.h"
#include "temper/reward/math_answer.h"
#include "temper/reward/safe_reward.h"
#include "temper/tasks/arithmetic.h"
#include "temper/tasks/code.h"
#include "temper/tasks/compose.h"
#include "temper/tasks/constraints.h"
#include "temper/tasks/countdown.h"
#include "temper/tasks/dataset.h"
#include "temper/tasks/episodes.h"
#include "temper/tasks/mixture.h"
#include "temper/tasks/rubric_proxy.h"
#include "temper/tasks/string_ops.h"
#include "temper/tasks/user_sim.h"

namespace temper::tasks {

const char* split_name(Split s) { return s == Split::train ? "train" : "eval"; }

std::optional<std::string> Task::extract_answer(const std::string& completion) const {
  return reward::extract_gsm8k(completion);
}

std::vector<std::string> Task::intermediate_states(const Problem&, const std::string&) const { return {}; }

std::optional<std::string> Task::answer_candidate(const Problem&, std::string_view partial) const {
  if (partial.empty() || partial.back() != '\n' || partial.find("####") != std::string_view::npos) return std::nullopt;
  std::string_view body = partial.substr(0, partial.size() - 1);
  size_t nl = body.rfind('\n');
  std::string_view line = nl == std::string_view::npos ? body : body.substr(nl + 1);
  size_t eq = line.rfind('=');
  if (eq == std::string_view::npos) return std::nullopt;
  std::string_view v = line.substr(eq + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.remove_suffix(1);
  if (v.empty() || v.size() > 64) return std::nullopt;
  return std::string(v);
}

bool Task::accepts(const Problem& p, const std::string& candidate) const {
  return verify(p, answer_close() + candidate).correct;
}

// ---- Registry ----------------------------------------------------------------------------------------------

namespace {

using Factory = std::function<std::unique_ptr<Task>(const TaskParams&)>;

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> kTasks = {
      {"arithmetic",
       [](const TaskParams& p) { return std::make_unique<ArithmeticTask>(ArithmeticConfig::from_params(p)); }},
      {"code", [](const TaskParams& p) { return std::make_unique<CodeTask>(CodeConfig::from_params(p)); }},
      {"countdown",
       [](const TaskParams& p) { return std::make_unique<CountdownTask>(CountdownConfig::from_params(p)); }},
      {"string_ops",
       [](const TaskParams& p) { return std::make_unique<StringOpsTask>(StringOpsConfig::from_params(p)); }},
      {"dataset", [](const TaskParams& p) { return std::make_unique<DatasetTask>(DatasetConfig::from_params(p)); }},
      {"episodes", [](const TaskParams& p) { return std::make_unique<EpisodesTask>(p); }},
      {"constraints",
       [](const TaskParams& p) { return std::make_unique<ConstraintsTask>(ConstraintsConfig::from_params(p)); }},
      {"mixture", [](const TaskParams& p) { return std::make_unique<MixtureTask>(p); }},
      {"compose", [](const TaskParams& p) { return std::make_unique<ComposeTask>(ComposeConfig::from_params(p)); }},
      {"rubric_proxy",
       [](const TaskParams& p) { return std::make_unique<RubricProxyTask>(RubricProxyConfig::from_params(p)); }},
      {"user_sim", [](const TaskParams& p) { return std::make_unique<UserSimTask>(UserSimConfig::from_params(p)); }},
  };
  return kTasks;
}

std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<std::string> task_names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : registry()) out.push_back(name);
  return out;
}

std::unique_ptr<Task> make_task(const std::string& name, const TaskParams& params) {
  auto it = registry().find(name);
  TEMPER_CHECK(it != registry().end()) << "task: unknown task '" << name << "' (expected one of "
                                       << join_names(task_names()) << ")";
  return it->second(params);
}

Verdict verify_safely(reward::SafeReward& safe, std::shared_ptr<const Task> task, const Problem& problem,
                      const std::string& completion) {
  TEMPER_CHECK(task != nullptr) << "verify_safely: no task";
  std::string what = problem.id;
  return safe.call<Verdict>([task = std::move(task), p = problem, c = completion]() { return task->verify(p, c); },
                            Verdict{}, what);
}

// ---- Parameters --------------------------------------------------------------------------------------------

void ParamReader::fail(const std::string& key, const std::string& expected) const {
  auto it = params_.find(key);
  TEMPER_FAIL() << "task '" << task_ << "': parameter '" << key << "': expected " << expected << ", got '"
                << (it == params_.end() ? std::string("(missing)") : it->second) << "'";
}

int64_t ParamReader::get_int(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  known_.insert(key);
  auto it = params_.find(key);
  if (it == params_.end()) return def;
  std::string expected = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  auto v = parse_int(it->second);
  if (!v || *v < lo || *v > hi) fail(key, expected);
  return *v;
}

uint64_t ParamReader::get_seed(const std::string& key, uint64_t def) {
  known_.insert(key);
  auto it = params_.find(key);
  if (it == params_.end()) return def;
  const std::string& s = it->second;
  bool digits = !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) fail(key, "a non-negative integer below 2^64");
  return v;
}

double ParamReader::get_double(const std::string& key, double def, double lo, double hi) {
  known_.insert(key);
  auto it = params_.find(key);
  if (it == params_.end()) return def;
  const std::string& s = it->second;
  char* end = nullptr;
  double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < lo || v > hi)
    fail(key, "a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::string ParamReader::get_string(const std::string& key, const std::string& def) {
  known_.insert(key);
  auto it = params_.find(key);
  return it == params_.end() ? def : it->second;
}

std::optional<std::string> ParamReader::get_optional(const std::string& key) {
  known_.insert(key);
  auto it = params_.find(key);
  if (it == params_.end()) return std::nullopt;
  return it->second;
}

void ParamReader::finish() const {
  for (const auto& [key, value] : params_) {
    if (known_.count(key)) continue;
    std::string known;
    for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
    TEMPER_FAIL() << "task '" << task_ << "': unknown parameter '" << key << "' = '" << value << "' (expected one of "
                  << known << ")";
  }
}

// ---- Shared rules of procedural families -------------------------------------------------------------------

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t stable_hash(std::string_view s) {
  return splitmix64(fnv1a(s));
}

Split split_of(std::string_view canonical) { return stable_hash(canonical) % 10 == 0 ? Split::eval : Split::train; }

int64_t rand_int(Rng& rng, int64_t lo, int64_t hi) {
  TEMPER_CHECK(lo <= hi) << "rand_int: empty range [" << lo << ", " << hi << "]";
  uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;  // 0: the full 2^64
  auto draw = [&] { return (static_cast<uint64_t>(rng.next_u32()) << 32) | rng.next_u32(); };
  if (range == 0) return static_cast<int64_t>(draw());
  uint64_t limit = UINT64_MAX - UINT64_MAX % range;  // accept draws below a multiple of range
  uint64_t x = draw();
  while (x >= limit) x = draw();
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + x % range);
}

Rng problem_rng(std::string_view family, uint64_t seed, Split split, uint64_t index) {
  uint64_t key = splitmix64(seed ^ stable_hash(family));
  return Rng(key, 2 * index + (split == Split::eval ? 1 : 0), 0);
}

std::string problem_id(std::string_view family, Split split, uint64_t index) {
  return std::string(family) + "/" + split_name(split) + "/" + std::to_string(index);
}

std::vector<std::string_view> reasoning_lines(std::string_view completion) {
  std::vector<std::string_view> out;
  size_t b = 0;
  while (b <= completion.size()) {
    size_t e = completion.find('\n', b);
    if (e == std::string_view::npos) e = completion.size();
    std::string_view line = completion.substr(b, e - b);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string_view::npos && line.substr(first, 4) == "####") break;
    out.push_back(line);
    b = e + 1;
  }
  return out;
}

std::optional<int64_t> parse_int(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  bool neg = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    neg = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return neg ? -v : v;
}

std::optional<int64_t> exact_int_op(int64_t a, char op, int64_t b, int64_t max_abs) {
  int64_t r = 0;
  switch (op) {
    case '+':
      if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
      break;
    case '-':
      if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
      break;
    case '*':
      if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
      break;
    case '/':
      if (b == 0 || a % b != 0) return std::nullopt;
      r = a / b;
      break;
    default: return std::nullopt;
  }
  if (r > max_abs || r < -max_abs) return std::nullopt;
  return r;
}

std::string unique_chars(std::string_view s) {
  std::string u;
  for (char c : s)
    if (u.find(c) == std::string::npos) u += c;
  return u;
}

}  // namespace temper::tasks

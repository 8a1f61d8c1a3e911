#include "temper/tasks/code.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <set>

#include "temper/core/error.h"
#include "temper/core/settings.h"
#include "temper/sandbox/python_tests.h"

namespace temper::tasks {
namespace {

// A Python value of the families' inputs and outputs: an int, a str (lowercase letters and spaces) or a list of ints.
struct Val {
  enum Kind { kInt, kStr, kList } kind = kInt;
  int64_t i = 0;
  std::string s;
  std::vector<int64_t> l;
  static Val num(int64_t v) { return Val{kInt, v, {}, {}}; }
  static Val str(std::string v) { return Val{kStr, 0, std::move(v), {}}; }
  static Val list(std::vector<int64_t> v) { return Val{kList, 0, {}, std::move(v)}; }
};

std::string repr(const Val& v) {
  switch (v.kind) {
    case Val::kInt:
      return std::to_string(v.i);
    case Val::kStr:
      return "'" + v.s + "'";
    case Val::kList: {
      std::string out = "[";
      for (size_t k = 0; k < v.l.size(); ++k) out += (k ? ", " : "") + std::to_string(v.l[k]);
      return out + "]";
    }
  }
  return "";
}

enum class Input { str, runs, words, list, small };

struct Family {
  const char* name;
  int level;
  Input input;
  int klo, khi;      // the family's constant k, drawn per problem (0, 0: none); {k} in texts, {c} = "abcde"[k]
  const char* desc;  // what the function does
  const char* body;  // the reference body, lines indented by 4
  std::function<Val(const Val&, int64_t)> ref;
};

std::string word_map(const std::string& s, const std::function<std::string(const std::string&)>& f) {
  std::string out, w;
  for (size_t k = 0; k <= s.size(); ++k) {
    if (k == s.size() || s[k] == ' ') {
      if (!w.empty()) out += (out.empty() ? "" : " ") + f(w);
      w.clear();
    } else {
      w += s[k];
    }
  }
  return out;
}

const std::vector<Family>& families() {
  using V = const Val&;
  static const std::vector<Family> kFamilies = {
      {"reverse_string", 1, Input::str, 0, 0, "return s reversed", "return s[::-1]",
       [](V v, int64_t) { return Val::str(std::string(v.s.rbegin(), v.s.rend())); }},
      {"add_k", 1, Input::list, 1, 9, "add {k} to each element", "return [x + {k} for x in xs]",
       [](V v, int64_t k) {
         std::vector<int64_t> o;
         for (int64_t x : v.l) o.push_back(x + k);
         return Val::list(o);
       }},
      {"count_char", 1, Input::str, 0, 4, "count the '{c}' in s", "return s.count('{c}')",
       [](V v, int64_t k) { return Val::num(std::count(v.s.begin(), v.s.end(), "abcde"[k])); }},
      {"scale_list", 1, Input::list, 2, 5, "multiply each element by {k}", "return [x * {k} for x in xs]",
       [](V v, int64_t k) {
         std::vector<int64_t> o;
         for (int64_t x : v.l) o.push_back(x * k);
         return Val::list(o);
       }},
      {"sum_list", 1, Input::list, 0, 0, "return the sum of xs", "return sum(xs)",
       [](V v, int64_t) {
         int64_t t = 0;
         for (int64_t x : v.l) t += x;
         return Val::num(t);
       }},
      {"repeat_string", 1, Input::str, 2, 3, "return s repeated {k} times", "return s * {k}",
       [](V v, int64_t k) {
         std::string o;
         for (int64_t r = 0; r < k; ++r) o += v.s;
         return Val::str(o);
       }},
      {"reverse_words", 2, Input::words, 0, 0, "reverse the order of the words", "return ' '.join(s.split()[::-1])",
       [](V v, int64_t) {
         std::vector<std::string> w;
         word_map(v.s, [&](const std::string& x) {
           w.push_back(x);
           return x;
         });
         std::string o;
         for (size_t k = w.size(); k-- > 0;) o += (o.empty() ? "" : " ") + w[k];
         return Val::str(o);
       }},
      {"count_vowels", 2, Input::str, 0, 0, "count the vowels (aeiou) in s", "return sum(1 for c in s if c in 'aeiou')",
       [](V v, int64_t) {
         int64_t n = 0;
         for (char c : v.s) n += std::string("aeiou").find(c) != std::string::npos;
         return Val::num(n);
       }},
      {"keep_greater", 2, Input::list, 0, 9, "keep the elements greater than {k}", "return [x for x in xs if x > {k}]",
       [](V v, int64_t k) {
         std::vector<int64_t> o;
         for (int64_t x : v.l)
           if (x > k) o.push_back(x);
         return Val::list(o);
       }},
      {"rotate_left", 2, Input::list, 1, 3, "rotate xs left by {k}",
       "if not xs:\n    return []\nk = {k} % len(xs)\nreturn xs[k:] + xs[:k]",
       [](V v, int64_t k) {
         std::vector<int64_t> o = v.l;
         if (!o.empty()) std::rotate(o.begin(), o.begin() + k % static_cast<int64_t>(o.size()), o.end());
         return Val::list(o);
       }},
      {"dedupe", 2, Input::small, 0, 0, "drop repeats, keeping first occurrences in order",
       "out = []\nfor x in xs:\n    if x not in out:\n        out.append(x)\nreturn out",
       [](V v, int64_t) {
         std::vector<int64_t> o;
         for (int64_t x : v.l)
           if (std::find(o.begin(), o.end(), x) == o.end()) o.push_back(x);
         return Val::list(o);
       }},
      {"running_sum", 2, Input::list, 0, 0, "return the running sums of xs",
       "out = []\ntotal = 0\nfor x in xs:\n    total += x\n    out.append(total)\nreturn out",
       [](V v, int64_t) {
         std::vector<int64_t> o;
         int64_t t = 0;
         for (int64_t x : v.l) o.push_back(t += x);
         return Val::list(o);
       }},
      {"run_length", 3, Input::runs, 0, 0, "run-length encode s ('aab' -> 'a2b1')",
       "out = ''\ni = 0\nwhile i < len(s):\n    j = i\n    while j < len(s) and s[j] == s[i]:\n        j += 1\n"
       "    out += s[i] + str(j - i)\n    i = j\nreturn out",
       [](V v, int64_t) {
         std::string o;
         for (size_t a = 0; a < v.s.size();) {
           size_t b = a;
           while (b < v.s.size() && v.s[b] == v.s[a]) ++b;
           o += v.s[a] + std::to_string(b - a);
           a = b;
         }
         return Val::str(o);
       }},
      {"chunk_sums", 3, Input::list, 2, 3, "sum each run of {k} consecutive elements (the last may be shorter)",
       "return [sum(xs[i:i + {k}]) for i in range(0, len(xs), {k})]",
       [](V v, int64_t k) {
         std::vector<int64_t> o;
         for (size_t a = 0; a < v.l.size(); a += static_cast<size_t>(k)) {
           int64_t t = 0;
           for (size_t b = a; b < std::min(v.l.size(), a + static_cast<size_t>(k)); ++b) t += v.l[b];
           o.push_back(t);
         }
         return Val::list(o);
       }},
      {"alternate_case", 3, Input::str, 0, 0, "uppercase the letters at even positions",
       "return ''.join(c.upper() if i % 2 == 0 else c for i, c in enumerate(s))",
       [](V v, int64_t) {
         std::string o = v.s;
         for (size_t k = 0; k < o.size(); k += 2) o[k] = static_cast<char>(std::toupper(o[k]));
         return Val::str(o);
       }},
      {"pairwise_sums", 3, Input::list, 0, 0, "return the sums of neighbouring pairs",
       "return [xs[i] + xs[i + 1] for i in range(len(xs) - 1)]",
       [](V v, int64_t) {
         std::vector<int64_t> o;
         for (size_t k = 0; k + 1 < v.l.size(); ++k) o.push_back(v.l[k] + v.l[k + 1]);
         return Val::list(o);
       }},
      {"capitalize_words", 3, Input::words, 0, 0, "capitalize each word",
       "return ' '.join(w.capitalize() for w in s.split())",
       [](V v, int64_t) {
         return Val::str(word_map(v.s, [](const std::string& w) {
           std::string c = w;
           c[0] = static_cast<char>(std::toupper(c[0]));
           return c;
         }));
       }},
      {"max_gap", 3, Input::list, 0, 0, "return the largest absolute difference of neighbours (0 if none)",
       "return max([abs(a - b) for a, b in zip(xs, xs[1:])], default=0)",
       [](V v, int64_t) {
         int64_t m = 0;
         for (size_t k = 0; k + 1 < v.l.size(); ++k) m = std::max<int64_t>(m, std::llabs(v.l[k] - v.l[k + 1]));
         return Val::num(m);
       }},
  };
  return kFamilies;
}

std::string fill(std::string text, int64_t k) {
  for (size_t at; (at = text.find("{k}")) != std::string::npos;) text.replace(at, 3, std::to_string(k));
  for (size_t at; (at = text.find("{c}")) != std::string::npos;) text.replace(at, 3, std::string(1, "abcde"[k]));
  return text;
}

Val draw_input(Rng& rng, Input in, int max_len) {
  static const std::string kLetters = "abcdeiostu";
  auto letters = [&](int lo, int hi) {
    std::string s;
    for (int64_t n = rand_int(rng, lo, hi); n > 0; --n) s += kLetters[rand_int(rng, 0, 9)];
    return s;
  };
  auto ints = [&](int lo, int hi, int64_t vlo, int64_t vhi) {
    std::vector<int64_t> l;
    for (int64_t n = rand_int(rng, lo, hi); n > 0; --n) l.push_back(rand_int(rng, vlo, vhi));
    return l;
  };
  switch (in) {
    case Input::str:
      return Val::str(letters(0, max_len + 1));
    case Input::runs: {
      std::string s;
      for (int64_t n = rand_int(rng, 0, (max_len + 2) / 2); n > 0; --n)
        s += std::string(rand_int(rng, 1, 3), "abc"[rand_int(rng, 0, 2)]);
      return Val::str(s);
    }
    case Input::words: {
      std::string s;
      for (int64_t n = rand_int(rng, 1, (max_len + 2) / 2); n > 0; --n) s += (s.empty() ? "" : " ") + letters(1, 4);
      return Val::str(s);
    }
    case Input::list:
      return Val::list(ints(0, max_len, -5, 12));
    case Input::small:
      return Val::list(ints(0, max_len + 1, 0, 4));
  }
  return {};
}

std::string arg_name(Input in) {
  return in == Input::list || in == Input::small ? "xs" : "s";
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

}  // namespace

std::vector<std::pair<std::string, int>> code_families() {
  std::vector<std::pair<std::string, int>> out;
  for (const Family& f : families()) out.emplace_back(f.name, f.level);
  return out;
}

void CodeConfig::validate() const {
  TEMPER_CHECK(min_level >= 1 && min_level <= max_level && max_level <= 3)
      << "task 'code': expected 1 <= min_level <= max_level <= 3, got " << min_level << " and " << max_level;
  TEMPER_CHECK(examples >= 0 && tests >= 0 && examples + tests >= 1 && examples + tests <= 32)
      << "task 'code': expected examples + tests in [1, 32], got " << examples << " + " << tests;
  for (const std::string& f : families) {
    bool known = false;
    for (const Family& g : temper::tasks::families()) known |= f == g.name;
    std::vector<std::string> names;
    for (const auto& [n, l] : code_families()) names.push_back(n);
    TEMPER_CHECK(known) << "task 'code': families: expected a comma list of " << join(names, ",") << ", got '" << f
                        << "'";
  }
  limits.validate();
}

CodeConfig CodeConfig::from_params(const TaskParams& params) {
  ParamReader r("code", params);
  CodeConfig c;
  c.seed = r.get_seed("seed", c.seed);
  c.min_level = static_cast<int>(r.get_int("min_level", c.min_level, 1, 3));
  c.max_level = static_cast<int>(r.get_int("max_level", std::max(c.max_level, c.min_level), 1, 3));
  if (auto f = r.get_optional("families")) c.families = split_words(*f);
  c.examples = static_cast<int>(r.get_int("examples", c.examples, 0, 32));
  c.tests = static_cast<int>(r.get_int("tests", c.tests, 0, 32));
  c.max_len = static_cast<int>(r.get_int("max_len", c.max_len, 1, 16));
  std::string reward = r.get_string("reward", "fraction");
  if (reward == "fraction")
    c.reward = CodeReward::fraction;
  else if (reward == "all")
    c.reward = CodeReward::all;
  else
    r.fail("reward", "\"fraction\" or \"all\"");
  c.limits.cpu_s = r.get_double("cpu_s", c.limits.cpu_s, 0.01, 3600);
  c.limits.wall_s = r.get_double("wall_s", c.limits.wall_s, 0.01, 3600);
  c.limits.memory_mb = r.get_int("memory_mb", c.limits.memory_mb, 16, 1 << 20);
  r.finish();
  c.validate();
  return c;
}

CodeTask::CodeTask(CodeConfig cfg) : cfg_(std::move(cfg)) {
  cfg_.validate();
  const auto& all = families();
  for (size_t i = 0; i < all.size(); ++i) {
    bool level = all[i].level >= cfg_.min_level && all[i].level <= cfg_.max_level;
    bool named = cfg_.families.empty() ||
                 std::find(cfg_.families.begin(), cfg_.families.end(), all[i].name) != cfg_.families.end();
    if (named && (level || !cfg_.families.empty())) families_.push_back(static_cast<int>(i));
  }
  TEMPER_CHECK(!families_.empty()) << "task 'code': no family in levels " << cfg_.min_level << ".." << cfg_.max_level;
  sandbox::sandbox_check(sandbox::kSandboxPython);
}

Problem CodeTask::problem(Split split, uint64_t index) const {
  Rng rng = problem_rng("code", cfg_.seed, split, index);
  const int n = cfg_.examples + cfg_.tests;
  for (int attempt = 0; attempt < kMaxGenerateAttempts; ++attempt) {
    const Family& f = families()[static_cast<size_t>(families_[rand_int(rng, 0, (int64_t)families_.size() - 1)])];
    const int64_t k = rand_int(rng, f.klo, f.khi);
    std::vector<std::string> calls, results;
    std::set<std::string> seen;
    for (int t = 0, tries = 0; t < n && tries < 50 * n; ++tries) {
      Val in = draw_input(rng, f.input, cfg_.max_len);
      std::string call = std::string(f.name) + "(" + repr(in) + ")";
      if (!seen.insert(call).second && tries < 20 * n) continue;  // distinct inputs where the space allows
      calls.push_back(call);
      results.push_back(repr(f.ref(in, k)));
      ++t;
    }
    if (static_cast<int>(calls.size()) < n) continue;
    std::string canonical = std::string(f.name) + "|" + std::to_string(k) + "|" + join(calls, "|");
    if (split_of(canonical) != split) continue;
    const std::string arg = arg_name(f.input);
    Problem p;
    p.id = problem_id("code", split, index);
    p.prompt = "Write " + std::string(f.name) + "(" + arg + "): " + fill(f.desc, k) + ".\n";
    for (int t = 0; t < cfg_.examples; ++t)
      p.prompt += calls[static_cast<size_t>(t)] + " == " + results[static_cast<size_t>(t)] + "\n";
    std::vector<std::string> tests;
    for (int t = 0; t < n; ++t)
      tests.push_back("assert " + calls[static_cast<size_t>(t)] + " == " + results[static_cast<size_t>(t)]);
    p.answer = join(tests, "\n");
    std::string body = "    " + fill(f.body, k);
    for (size_t at = 0; (at = body.find('\n', at)) != std::string::npos; at += 5) body.replace(at, 1, "\n    ");
    p.gold_solution = "```python\ndef " + std::string(f.name) + "(" + arg + "):\n" + body + "\n```";
    p.difficulty = f.level;
    return p;
  }
  TEMPER_FAIL() << "task 'code': no " << split_name(split) << " problem found in " << kMaxGenerateAttempts
                << " attempts";
}

std::optional<std::string> CodeTask::extract_answer(const std::string& completion) const {
  std::string code;
  size_t fence = completion.find("```");
  if (fence == std::string::npos) {
    code = completion;
  } else {
    size_t start = completion.find('\n', fence);
    if (start == std::string::npos) return std::nullopt;
    size_t end = completion.find("```", start + 1);
    code = completion.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
  }
  if (code.find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
  return code;
}

Verdict CodeTask::verify(const Problem& p, const std::string& completion) const {
  Verdict v;
  v.extracted = extract_answer(completion);
  if (!v.extracted) return v;
  const std::string key = *v.extracted + '\x01' + p.answer;
  std::pair<int, int> score{-1, 0};
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) score = it->second;
  }
  if (score.first < 0) {
    std::vector<std::string> tests;
    for (size_t a = 0; a <= p.answer.size();) {
      size_t nl = std::min(p.answer.find('\n', a), p.answer.size());
      if (nl > a) tests.push_back(p.answer.substr(a, nl - a));
      a = nl + 1;
    }
    sandbox::TestOutcome o = sandbox::run_python_tests(*v.extracted, tests, cfg_.limits);
    score = {o.passed, o.total};
    if (!o.timed_out) {  // a timeout may be the machine's load, not the code: not remembered
      std::lock_guard<std::mutex> lock(cache_mu_);
      if (cache_.size() >= 8192) cache_.clear();
      cache_.emplace(key, score);
    }
  }
  v.correct = score.second > 0 && score.first == score.second;
  v.reward = cfg_.reward == CodeReward::all
                 ? (v.correct ? 1.0 : 0.0)
                 : (score.second > 0 ? static_cast<double>(score.first) / score.second : 0.0);
  return v;
}

}  // namespace temper::tasks

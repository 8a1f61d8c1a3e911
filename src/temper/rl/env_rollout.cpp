// EnvRollout (env_rollout.h): the episodes' resets on the call pool, one engine run whose RunDriver sends
// each finished assistant turn to the environment and hands the observation back as a continuation, then
// the trajectories with the episodes' returns.
#include "temper/rl/env_rollout.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/rollout/run_driver.h"

namespace temper::rl {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;

// A few threads running environment calls (blocking, possibly slow) off the engine's thread.
class CallPool {
 public:
  explicit CallPool(int64_t n) {
    for (int64_t i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
  }
  ~CallPool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  // Runs f(i) for i in [0, n) on the pool and waits for all.
  void for_each(size_t n, const std::function<void(size_t)>& f) {
    std::mutex m;
    std::condition_variable done;
    size_t left = n;
    for (size_t i = 0; i < n; ++i)
      submit([&, i] {
        f(i);
        std::lock_guard<std::mutex> lk(m);
        if (--left == 0) done.notify_all();
      });
    std::unique_lock<std::mutex> lk(m);
    done.wait(lk, [&] { return left == 0; });
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

struct Episode {
  std::string id;
  size_t problem = 0;  // index into the round's problems
  json messages, tools;
  std::vector<int32_t> prompt;
  int64_t request = 0, member = 0;
  int64_t turns = 0, tool_calls = 0, malformed = 0, turn_start = 0;
  double ret = 0;
  bool ok = true, done = false, truncated = false, parked = false;
  std::optional<bool> correct;
  std::string error;
};

}  // namespace

struct EnvRollout::Impl : rollout::RunDriver {
  Impl(EnvRollout& o, std::vector<Episode>& eps) : owner(o), episodes(eps) {}

  Episode& of(const rollout::Completion& c) { return episodes[index.at({c.request, c.member})]; }

  bool turn_ended(const rollout::Completion& c, rollout::FinishReason why, bool can_continue) override {
    std::lock_guard<std::mutex> lk(mu);
    Episode& e = of(c);
    ++e.turns;
    // A turn cut at its token cap still goes to the environment (closed by the end-of-turn token); the
    // conversation's cap, or a hook, ends the episode.
    const bool cut = why == rollout::FinishReason::length;
    if (!e.ok || why == rollout::FinishReason::hook || (cut && !can_continue)) {
      e.truncated = e.ok;
      return false;
    }
    const std::vector<int32_t> turn(c.tokens.begin() + e.turn_start, c.tokens.end());
    json msg = owner.codec_.assistant_message(turn);
    if (msg.contains("tool_calls") && msg["tool_calls"].is_array())
      e.tool_calls += static_cast<int64_t>(msg["tool_calls"].size());
    if (msg.contains("parse_errors") && msg["parse_errors"].is_array())
      e.malformed += static_cast<int64_t>(msg["parse_errors"].size());
    e.parked = can_continue;
    if (e.parked) due.emplace(std::make_pair(c.request, c.member), clock + owner.cfg_.answer_steps);
    ++in_flight;
    const int64_t end = static_cast<int64_t>(c.tokens.size());
    pool->submit([this, &e, msg = std::move(msg), end, cut] { step(e, msg, end, cut); });
    return can_continue;
  }

  // One environment step for e's finished turn (cut: at its token cap) (on a pool thread); its continuation when e is
  // parked.
  void step(Episode& e, const json& msg, int64_t end, bool cut) {
    const Clock::time_point t0 = Clock::now();
    env::EnvReply r;
    try {
      r = owner.env_.step(e.id, msg);
    } catch (const std::exception& ex) {
      r.ok = false;
      r.error = ex.what();
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    bool finish = !r.ok || r.done || e.turns >= owner.cfg_.max_turns;
    std::vector<int32_t> append;
    if (!finish) {
      try {
        if (cut && owner.codec_.end_of_turn >= 0) append.push_back(owner.codec_.end_of_turn);
        const std::vector<int32_t> more = owner.codec_.encode_continuation(r.messages, e.tools);
        append.insert(append.end(), more.begin(), more.end());
      } catch (const std::exception& ex) {
        r.ok = false;
        r.error = std::string("rendering the observation: ") + ex.what();
        finish = true;
      }
    }
    std::lock_guard<std::mutex> lk(mu);
    env_s += s;
    ++env_calls;
    if (!r.ok) {
      e.ok = false;
      e.error = r.error;
    } else {
      e.ret += r.reward;
      if (r.correct) e.correct = r.correct;
      e.done = r.done;
    }
    if (e.parked) {
      e.turn_start = end + static_cast<int64_t>(append.size());
      ready[{e.request, e.member}] = {e.request, e.member, finish, std::move(append), owner.cfg_.turn_max_new};
      e.parked = false;
    }
    --in_flight;
    cv.notify_all();
  }

  // Deterministic: a poll is a tick of the run's clock (the engine polls once per step, and again when it is idle); the
  // answer to a turn that ended before tick t goes back at tick t + answer_steps, waited for if it is late (an idle
  // engine moves the clock on to the next answer due). Continuations go back in (request, member) order. So which
  // sequences decode together is a function of the tokens, never of the environment's timing.
  void poll(std::vector<rollout::Continuation>& out, bool wait) override {
    std::unique_lock<std::mutex> lk(mu);
    if (!owner.cfg_.deterministic) {
      if (wait) cv.wait(lk, [&] { return !ready.empty() || in_flight == 0; });
      for (auto& [key, k] : ready) out.push_back(std::move(k)), due.erase(key);
      ready.clear();
      return;
    }
    ++clock;
    if (due.empty()) {
      if (wait) cv.wait(lk, [&] { return in_flight == 0; });  // the episodes' last calls: the run ends after them
      return;
    }
    if (wait) {  // idle: the clock moves on to the next answer due
      int64_t next = due.begin()->second;
      for (const auto& [key, at] : due) next = std::min(next, at);
      clock = std::max(clock, next);
    }
    cv.wait(lk, [&] {
      for (const auto& [key, at] : due)
        if (at <= clock && !ready.count(key)) return false;
      return true;
    });
    for (auto it = due.begin(); it != due.end();)
      if (it->second <= clock) {
        out.push_back(std::move(ready.at(it->first)));
        ready.erase(it->first);
        it = due.erase(it);
      } else {
        ++it;
      }
  }
  bool closed() const override {
    std::lock_guard<std::mutex> lk(mu);
    return in_flight == 0;
  }

  EnvRollout& owner;
  std::vector<Episode>& episodes;
  std::map<std::pair<int64_t, int64_t>, size_t> index;  // (request, member) -> episode
  CallPool* pool = nullptr;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int64_t, int64_t>, rollout::Continuation> ready;  // (request, member) -> its continuation
  std::map<std::pair<int64_t, int64_t>, int64_t> due;  // parked (request, member) -> the tick its answer goes back
  int64_t clock = 0;                                   // deterministic: polls so far
  int64_t in_flight = 0, env_calls = 0;
  double env_s = 0;
};

void EnvRolloutConfig::validate() const {
  TEMPER_CHECK(max_turns >= 1) << "env.max_turns must be >= 1, got " << max_turns;
  TEMPER_CHECK(turn_max_new >= 0) << "env.turn_max_new must be >= 0 (0: no per-turn cap), got " << turn_max_new;
  TEMPER_CHECK(threads >= 1 && threads <= 256) << "env.threads must be in [1, 256], got " << threads;
  TEMPER_CHECK(answer_steps >= 1 && answer_steps <= 1024)
      << "env.answer_steps must be in [1, 1024], got " << answer_steps;
}

EnvRollout::EnvRollout(env::Environment& env, ConversationCodec codec, EnvRolloutConfig cfg)
    : env_(env), codec_(std::move(codec)), cfg_(cfg) {
  cfg_.validate();
  TEMPER_CHECK(codec_.encode_start && codec_.encode_continuation && codec_.assistant_message && codec_.decode)
      << "env rollouts need a chat template (the model's tokenizer has none)";
}

EnvRollout::~EnvRollout() = default;

nlohmann::ordered_json env_row(const tasks::Problem& p, const char* split) {
  if (p.row) {
    json row = json::parse(*p.row, nullptr, false);
    if (row.is_object()) return row;
  }
  return json{{"index", p.index}, {"split", split}, {"id", p.id}, {"prompt", p.prompt}, {"answer", p.answer}};
}

std::vector<Trajectory> EnvRollout::run(rollout::RolloutEngine& engine, const std::vector<tasks::Problem>& problems,
                                        size_t first, int64_t group_size, const rollout::RolloutRequest& request,
                                        int64_t context, const std::string& episode_prefix, size_t offset) {
  stats_ = {};
  std::vector<Episode> eps;
  for (size_t p = first; p < problems.size(); ++p)
    for (int64_t g = 0; g < group_size; ++g) {
      Episode& e = eps.emplace_back();
      e.id = episode_prefix + "/" + std::to_string(offset + p) + "/" + std::to_string(g);
      e.problem = p;
    }
  CallPool pool(cfg_.threads);
  // Resets, in parallel; a problem whose episodes cannot start is left out (counted as failures).
  pool.for_each(eps.size(), [&](size_t i) {
    Episode& e = eps[i];
    try {
      env::EnvReply r = env_.reset(e.id, env_row(problems[e.problem], "train"));
      if (!r.ok) throw Error(r.error);
      e.messages = std::move(r.messages);
      e.tools = std::move(r.tools);
      e.prompt = codec_.encode_start(e.messages, e.tools);
    } catch (const std::exception& ex) {
      e.ok = false;
      e.error = ex.what();
    }
  });
  // Requests: a problem's G episodes share one request when their prompts agree, else one request each.
  std::vector<rollout::RolloutRequest> reqs;
  Impl drv(*this, eps);
  drv.pool = &pool;
  for (size_t i = 0; i < eps.size(); i += static_cast<size_t>(group_size)) {
    bool all_ok = true, same = true;
    for (int64_t g = 0; g < group_size; ++g) {
      all_ok = all_ok && eps[i + g].ok;
      same = same && eps[i + g].prompt == eps[i].prompt;
    }
    if (!all_ok) {
      for (int64_t g = 0; g < group_size; ++g)
        if (!eps[i + g].ok) {
          TEMPER_LOG(warn) << "env: episode " << eps[i + g].id << " did not start: " << eps[i + g].error;
        }
      stats_.failures += group_size;
      continue;
    }
    TEMPER_CHECK(static_cast<int64_t>(eps[i].prompt.size()) < context)
        << "env: the first prompt of episode " << eps[i].id << " has " << eps[i].prompt.size()
        << " tokens, the model's context is " << context;
    const uint64_t stream =
        request.stream + static_cast<uint64_t>(offset + eps[i].problem - first) * static_cast<uint64_t>(group_size);
    for (int64_t g = 0; g < (same ? 1 : group_size); ++g) {
      rollout::RolloutRequest q =
          rollout::make_request(eps[i + g].prompt, same ? group_size : 1, request.max_new, context, request.sampler,
                                codec_.stop_ids, request.seed, stream + g);
      q.turn_max_new = cfg_.turn_max_new;
      const int64_t r = static_cast<int64_t>(reqs.size());
      for (int64_t m = 0; m < q.group_size; ++m) {
        Episode& e = eps[i + g + m];
        e.request = r;
        e.member = m;
        drv.index[{r, m}] = i + g + m;
      }
      reqs.push_back(std::move(q));
    }
  }
  std::vector<rollout::Completion> done = engine.run(reqs, nullptr, &drv);
  {  // every step answered (the run ends only when none is in flight)
    std::unique_lock<std::mutex> lk(drv.mu);
    drv.cv.wait(lk, [&] { return drv.in_flight == 0; });
  }
  std::vector<Trajectory> out;
  for (rollout::Completion& c : done) {
    Episode& e = drv.of(c);
    std::string text = codec_.decode(c.tokens);
    Trajectory t = trajectory_from(std::move(c), static_cast<int64_t>(e.problem), e.prompt, std::move(text));
    t.scored = true;
    t.reward = e.ok ? e.ret : cfg_.failure_reward;
    t.correct = e.ok && e.correct.value_or(false);
    t.reward_info = e.error;
    t.reward_components = {{"env.turns", double(e.turns)},
                           {"env.tool_calls", double(e.tool_calls)},
                           {"env.malformed_calls", double(e.malformed)}};
    t.tags.push_back("env");
    out.push_back(std::move(t));
    ++stats_.episodes;
    stats_.turns += e.turns;
    stats_.tool_calls += e.tool_calls;
    stats_.malformed_calls += e.malformed;
    stats_.failures += e.ok ? 0 : 1;
    stats_.truncated += e.truncated ? 1 : 0;
    stats_.solved += t.correct ? 1 : 0;
    if (!e.ok) {
      TEMPER_LOG(warn) << "env: episode " << e.id << " failed: " << e.error;
    }
  }
  pool.for_each(eps.size(), [&](size_t i) {
    try {
      env_.close(eps[i].id);
    } catch (const std::exception&) {  // the episode is over either way
    }
  });
  stats_.env_calls = drv.env_calls;
  stats_.env_s = drv.env_s;
  return out;
}

void EnvRollout::metrics(Metrics& m) const {
  const double n = std::max<double>(1, static_cast<double>(stats_.episodes));
  m.emplace_back("env/turns", static_cast<double>(stats_.turns) / n);
  m.emplace_back("env/tool_calls", static_cast<double>(stats_.tool_calls) / n);
  m.emplace_back("env/malformed_calls", static_cast<double>(stats_.malformed_calls));
  m.emplace_back("env/failures", static_cast<double>(stats_.failures));
  m.emplace_back("env/truncated", static_cast<double>(stats_.truncated) / n);
  m.emplace_back("env/solved", static_cast<double>(stats_.solved) / n);
  m.emplace_back("env/call_s", stats_.env_calls ? stats_.env_s / static_cast<double>(stats_.env_calls) : 0.0);
  m.emplace_back("env/episodes", static_cast<double>(stats_.episodes));
  m.emplace_back("env/step_calls", static_cast<double>(stats_.env_calls));
}

void EnvRollout::merge_metrics(Metrics& into, const Metrics& block) const {
  merge_metric_blocks(into, block,
                      {{"env/turns", "env/episodes"},
                       {"env/tool_calls", "env/episodes"},
                       {"env/malformed_calls", ""},
                       {"env/failures", ""},
                       {"env/truncated", "env/episodes"},
                       {"env/solved", "env/episodes"},
                       {"env/call_s", "env/step_calls"},
                       {"env/episodes", ""},
                       {"env/step_calls", ""}});
}

// Every value is computed from the two sides' values before either changes (a mean reads its count's, unmerged).
void merge_metric_blocks(Metrics& into, const Metrics& block, const std::vector<MetricMerge>& rules) {
  for (const auto& [name, x] : block)
    TEMPER_CHECK(std::any_of(rules.begin(), rules.end(), [&](const MetricMerge& r) { return r.name == name; }))
        << "env metrics: no rule merges " << name << " over blocks of a round (ConversationSource::merge_metrics)";
  if (into.empty()) {
    into = block;
    return;
  }
  auto find = [](const Metrics& m, const std::string& name) -> const double* {
    for (const auto& [k, x] : m)
      if (k == name) return &x;
    return nullptr;
  };
  auto count = [&](const Metrics& m, const std::string& name, const std::string& of) {
    const double* x = find(m, name);
    TEMPER_CHECK(x) << "env metrics: " << of << " is a mean over " << name << ", which the blocks' metrics lack";
    return *x;
  };
  TEMPER_CHECK(into.size() == block.size()) << "env metrics: merging blocks of " << into.size() << " and "
                                            << block.size() << " metrics (each block's run reports them all)";
  Metrics out = into;
  for (auto& [name, x] : out) {
    const MetricMerge* rule = nullptr;
    for (const MetricMerge& r : rules)
      if (r.name == name) rule = &r;
    TEMPER_CHECK(rule) << "env metrics: no rule merges " << name << " over blocks of a round (ConversationSource::"
                       << "merge_metrics)";
    const double* y = find(block, name);
    TEMPER_CHECK(y) << "env metrics: a block's metrics lack " << name;
    if (rule->over.empty()) {
      x += *y;
      continue;
    }
    const double wa = count(into, rule->over, name), wb = count(block, rule->over, name);
    x = wa + wb > 0 ? (x * wa + *y * wb) / (wa + wb) : 0.0;
  }
  into = std::move(out);
}

}  // namespace temper::rl

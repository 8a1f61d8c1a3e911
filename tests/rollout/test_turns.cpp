// The rollout engine with a RunDriver: multi-turn sequences keep their KV cache across turns (only the
// appended tokens are prefilled), every sampled token's recorded log-prob equals the training forward's
// over the whole conversation (f32, <= 1e-5), appended tokens are recorded and marked, sequences waiting
// for their environment leave the batch while the others decode, the tokens do not depend on when the
// continuations arrive, on preemption or on evicted parked KV, and requests that arrive while a run
// goes on give the tokens a batch run gives.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/models.h"
#include "temper/core/error.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/run_driver.h"

using namespace temper;
using namespace temper::rollout;

namespace {

using Fixture = test::RandomModel;
constexpr int32_t kEndOfTurn = 3;

RolloutRequest request(std::vector<int32_t> prompt, int64_t g, int64_t max_new, uint64_t seed, uint64_t stream = 0) {
  RolloutRequest r;
  r.prompt = std::move(prompt);
  r.group_size = g;
  r.max_new = max_new;
  r.seed = seed;
  r.stream = stream;
  r.sampler.temperature = 1.2f;
  r.stop_ids = {kEndOfTurn};
  r.turn_max_new = 8;
  return r;
}

// Continues each sequence for `turns` turns, appending an observation that depends on the sequence and
// the turn, from a thread after `delay_ms` (0: at once, from the engine's thread) with the next turn
// capped at `turn_cap` tokens. Counts the live sequences the engine had while a continuation was pending.
class Conversation : public RunDriver {
 public:
  Conversation(int turns, int delay_ms, int64_t turn_cap) : turns_(turns), delay_ms_(delay_ms), cap_(turn_cap) {}
  ~Conversation() override {
    for (std::thread& t : threads_) t.join();
  }
  static std::vector<int32_t> observation(int64_t request, int64_t member, int turn) {
    std::vector<int32_t> o;
    for (int i = 0; i < 2 + turn; ++i)
      o.push_back(static_cast<int32_t>(10 + (request * 7 + member * 3 + turn * 5 + i) % 90));
    return o;
  }
  bool turn_ended(const Completion& c, FinishReason why, bool can_continue) override {
    ends_.push_back(why);
    int& t = turn_[{c.request, c.member}];
    if (++t >= turns_ || !can_continue) return false;
    Continuation k{c.request, c.member, false, observation(c.request, c.member, t), cap_};
    std::lock_guard<std::mutex> lk(mu_);
    ++in_flight_;
    if (delay_ms_ == 0) {
      ready_.push_back(std::move(k));
    } else {
      threads_.emplace_back([this, k = std::move(k), ms = delay_ms_ * (1 + (c.member % 3))]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        std::lock_guard<std::mutex> lk(mu_);
        ready_.push_back(std::move(k));
        cv_.notify_all();
      });
    }
    return true;
  }
  void poll(std::vector<Continuation>& out, bool wait) override {
    std::unique_lock<std::mutex> lk(mu_);
    if (wait) {
      ++waits_;
      cv_.wait(lk, [&] { return !ready_.empty(); });
    }
    in_flight_ -= static_cast<int>(ready_.size());
    for (Continuation& k : ready_) out.push_back(std::move(k));
    ready_.clear();
  }
  void finished(Completion& c) override { finished_.push_back({c.request, c.member}); }

  int turns_, delay_ms_;
  int64_t cap_;
  std::map<std::pair<int64_t, int64_t>, int> turn_;
  std::vector<FinishReason> ends_;
  std::vector<std::pair<int64_t, int64_t>> finished_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Continuation> ready_;
  std::vector<std::thread> threads_;
  int in_flight_ = 0, waits_ = 0;
};

// |recorded policy log-prob - the training forward's| at every sampled token, the largest.
double worst_sampled_gap(Transformer& model, const std::vector<RolloutRequest>& reqs,
                         const std::vector<Completion>& out) {
  double worst = 0;
  for (const Completion& c : out) {
    const std::vector<int32_t>& prompt = reqs[static_cast<size_t>(c.request)].prompt;
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), c.tokens.begin(), c.tokens.end());
    const int64_t T = static_cast<int64_t>(seq.size());
    std::vector<int32_t> targets(T, -1);
    for (int64_t t = 0; t + 1 < T; ++t) targets[t] = seq[t + 1];
    std::vector<float> lp(T), ent(T);
    model.forward_logprobs(seq.data(), targets.data(), 1, T, lp.data(), ent.data());
    std::vector<bool> appended(c.tokens.size(), false);
    for (auto [at, n] : c.appended)
      for (int64_t i = at; i < at + n; ++i) appended[static_cast<size_t>(i)] = true;
    for (size_t i = 0; i < c.tokens.size(); ++i)
      if (!appended[i]) worst = std::max(worst, double(std::fabs(lp[prompt.size() - 1 + i] - c.policy_logprob[i])));
  }
  return worst;
}

std::vector<RolloutRequest> conversations() {
  return {request({1, 2, 3, 4, 5}, 3, 60, 11), request({9, 8, 7}, 2, 60, 12, 100), request({5, 6}, 1, 60, 13, 200)};
}

}  // namespace

TEST(RolloutTurns, ConversationsKeepTheirCacheAndRecordObservations) {
  Fixture f;
  KvPool pool(f.cfg, 8, 256);
  RolloutEngine eng(f.model, pool);
  const std::vector<RolloutRequest> reqs = conversations();
  Conversation conv(3, 0, 8);
  const std::vector<Completion> out = eng.run(reqs, nullptr, &conv);
  ASSERT_EQ(out.size(), 6u);
  int64_t appended = 0, prompts = 0;
  for (const RolloutRequest& q : reqs) prompts += static_cast<int64_t>(q.prompt.size());
  for (const Completion& c : out) {
    // Each turn ended by the stop id or the turn's cap of 8 tokens; two observations were appended where they fit.
    EXPECT_LE(c.appended.size(), 2u);
    EXPECT_GE(c.appended.size(), 1u) << "completion " << c.request << "/" << c.member;
    int turn = 0;
    int64_t prev_end = 0;
    for (auto [at, n] : c.appended) {
      ++turn;
      EXPECT_GT(at, prev_end);  // a sampled turn before each observation
      const std::vector<int32_t> want = Conversation::observation(c.request, c.member, turn);
      ASSERT_EQ(n, static_cast<int64_t>(want.size()));
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(c.tokens[static_cast<size_t>(at + i)], want[static_cast<size_t>(i)]);
        EXPECT_EQ(c.policy_logprob[static_cast<size_t>(at + i)], 0.f);
        EXPECT_EQ(c.sample_logprob[static_cast<size_t>(at + i)], 0.f);
      }
      // The turn before it ended by its stop id or after at most 8 sampled tokens.
      EXPECT_TRUE(c.tokens[static_cast<size_t>(at - 1)] == kEndOfTurn || at - prev_end <= 8) << at << " " << prev_end;
      prev_end = at + n;
      appended += n;
    }
  }
  EXPECT_LT(worst_sampled_gap(f.model, reqs, out), 1e-5);
  // No re-prefill: the prompts once, then each continuation's appended tokens only.
  EXPECT_EQ(eng.stats().prefill_tokens, prompts + appended);
  EXPECT_EQ(eng.stats().appended_tokens, appended);
  EXPECT_EQ(eng.stats().recomputed_tokens, 0);
  EXPECT_EQ(conv.finished_.size(), 6u);
  EXPECT_EQ(pool.free_blocks(), 256);
}

// Continuations from other threads, late and in any order; a tight pool that preempts live sequences and
// frees parked ones' KV: the same tokens as the immediate run.
TEST(RolloutTurns, TokensDoNotDependOnWhenContinuationsArriveOrOnEvictions) {
  Fixture f;
  const std::vector<RolloutRequest> reqs = conversations();
  KvPool big(f.cfg, 8, 256);
  RolloutEngine roomy(f.model, big);
  Conversation now(3, 0, 8);
  const std::vector<Completion> want = roomy.run(reqs, nullptr, &now);

  KvPool pool(f.cfg, 8, 256);
  RolloutEngine eng(f.model, pool);
  Conversation late(3, 15, 8);
  const std::vector<Completion> got = eng.run(reqs, nullptr, &late);
  EXPECT_GT(late.waits_, 0);  // the engine ran out of work while environments were busy
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "completion " << i;
    EXPECT_EQ(got[i].appended, want[i].appended) << "completion " << i;
  }

  KvPool small(f.cfg, 4, 24);  // six sequences of up to ~67 tokens: live ones preempted, parked ones evicted
  EngineConfig ec;
  ec.max_seqs = 4;
  RolloutEngine tight(f.model, small, ec);
  Conversation slow(3, 5, 8);
  const std::vector<Completion> squeezed = tight.run(reqs, nullptr, &slow);
  EXPECT_GT(tight.stats().preemptions + tight.stats().parked_evictions, 0);
  ASSERT_EQ(squeezed.size(), want.size());
  for (size_t i = 0; i < squeezed.size(); ++i) {
    EXPECT_EQ(squeezed[i].tokens, want[i].tokens) << "completion " << i;
    for (size_t t = 0; t < want[i].tokens.size(); ++t)
      EXPECT_NEAR(squeezed[i].policy_logprob[t], want[i].policy_logprob[t], 1e-5);
  }
  EXPECT_LT(worst_sampled_gap(f.model, reqs, squeezed), 1e-5);
  EXPECT_EQ(small.free_blocks(), 24);
}

// Every sequence's continuation arrives at once, each too long for the blocks left: the first to resume frees the KV
// of the others queued behind it (it would otherwise wait forever for blocks they hold), and the tokens are the
// roomy pool's.
TEST(RolloutTurns, ContinuationsArrivingTogetherFreeTheKvOfThoseQueuedBehind) {
  Fixture f;
  struct AllAtOnce : RunDriver {  // one more turn each; the continuations are handed over once every turn ended
    bool turn_ended(const Completion& c, FinishReason, bool can) override {
      if (!can || turns[c.request]++ > 0) return false;
      held.push_back({c.request, c.member, false, std::vector<int32_t>(16, static_cast<int32_t>(20 + c.request)), 4});
      if (held.size() == 2) ready.swap(held);
      return true;
    }
    void poll(std::vector<Continuation>& out, bool) override {
      for (Continuation& k : ready) out.push_back(k);
      ready.clear();
    }
    std::map<int64_t, int> turns;
    std::vector<Continuation> held, ready;
  };
  std::vector<RolloutRequest> reqs;
  for (int i = 0; i < 2; ++i) {
    reqs.push_back(request({static_cast<int32_t>(5 + i), 6, 7}, 1, 40, 70 + i));
    reqs.back().stop_ids = {};  // the first turn runs its 8 tokens
  }
  KvPool big(f.cfg, 4, 64);
  RolloutEngine roomy(f.model, big);
  AllAtOnce a;
  const std::vector<Completion> want = roomy.run(reqs, nullptr, &a);
  // 10 blocks of 4: parked, each holds 10 rows in 3 blocks (4 free); resumed, the first needs 7 blocks and a spare.
  KvPool small(f.cfg, 4, 10);
  RolloutEngine tight(f.model, small);
  AllAtOnce b;
  const std::vector<Completion> got = tight.run(reqs, nullptr, &b);
  EXPECT_EQ(tight.stats().parked_evictions, 1);
  EXPECT_EQ(roomy.stats().parked_evictions, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens.size(), 8u + 16 + 4) << "completion " << i;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "completion " << i;
  }
  EXPECT_EQ(small.free_blocks(), 10);
}

// The request's max_new caps the whole conversation: an observation that does not fit is cut and the
// sequence ends with `length`; a continuation may also end a sequence.
TEST(RolloutTurns, TheCapCoversObservationsAndContinuationsCanFinish) {
  Fixture f;
  KvPool pool(f.cfg, 8, 64);
  struct Capped : RunDriver {
    bool turn_ended(const Completion& c, FinishReason, bool can) override {
      if (!can) return false;
      ready.push_back({c.request, c.member, c.member == 1, std::vector<int32_t>(40, 7), 0});
      return true;
    }
    void poll(std::vector<Continuation>& out, bool) override {
      for (Continuation& k : ready) out.push_back(k);
      ready.clear();
    }
    std::vector<Continuation> ready;
  } d;
  RolloutRequest q = request({1, 2, 3}, 2, 30, 5);
  q.stop_ids = {};
  q.max_new = 30;
  RolloutEngine eng(f.model, pool);
  // Each member's first turn is capped by hook-free length: use a 2-token first turn via forced tokens.
  q.forced = {kEndOfTurn};
  q.stop_ids = {kEndOfTurn};
  auto out = eng.run({q}, nullptr, &d);
  ASSERT_EQ(out.size(), 2u);
  // Member 0: one sampled (forced) token, then 29 of the 40 appended tokens: the cap, finish length.
  EXPECT_EQ(out[0].tokens.size(), 30u);
  ASSERT_EQ(out[0].appended.size(), 1u);
  EXPECT_EQ(out[0].appended[0], (std::pair<int64_t, int64_t>{1, 29}));
  EXPECT_EQ(out[0].finish, FinishReason::length);
  // Member 1: its continuation finished it (no tokens appended), the finish reason its turn's.
  EXPECT_EQ(out[1].tokens, std::vector<int32_t>{kEndOfTurn});
  EXPECT_TRUE(out[1].appended.empty());
  EXPECT_EQ(out[1].finish, FinishReason::stop);
  EXPECT_EQ(pool.free_blocks(), 64);
}

// A server's run: requests arrive while it goes on, then the driver closes; each completion equals the
// batch run's of the same requests (per-request streams).
TEST(RolloutTurns, RequestsArrivingDuringARunGiveTheBatchRunsTokens) {
  Fixture f;
  std::vector<RolloutRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    reqs.push_back(request({static_cast<int32_t>(20 + i), 4, 5}, 1 + i % 2, 24, 40 + i, 10 * i));
    reqs.back().stop_ids = {};  // every sequence runs its 24 tokens
    reqs.back().turn_max_new = 0;
  }
  KvPool big(f.cfg, 8, 256);
  RolloutEngine batch(f.model, big);
  const std::vector<Completion> want = batch.run(reqs);

  struct Arrivals : RunDriver {
    explicit Arrivals(std::vector<RolloutRequest> r) : reqs(std::move(r)) {}
    void incoming(std::vector<RolloutRequest>& add) override {
      // One new request every third call, after the first two came together.
      if (next < reqs.size() && (next < 2 || ++calls % 3 == 0)) add.push_back(reqs[next++]);
    }
    void poll(std::vector<Continuation>&, bool) override {}
    bool closed() const override { return next == reqs.size(); }
    void finished(Completion& c) override { done.push_back(std::move(c.tokens)); }
    std::vector<RolloutRequest> reqs;
    size_t next = 0;
    int calls = 0;
    std::vector<std::vector<int32_t>> done;
  } server(reqs);
  KvPool pool(f.cfg, 8, 256);
  RolloutEngine eng(f.model, pool);
  const std::vector<Completion> got = eng.run({}, nullptr, &server);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(server.done.size(), want.size());
  std::multiset<std::vector<int32_t>> finished(server.done.begin(), server.done.end());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].request, want[i].request);
    EXPECT_TRUE(got[i].tokens.empty());  // moved out by finished()
    EXPECT_EQ(finished.count(want[i].tokens), 1u) << "completion " << i;
  }
  EXPECT_GT(eng.stats().steps, 24);      // arrivals spread over the run
  EXPECT_LT(eng.stats().steps, 24 * 6);  // but batched together
}

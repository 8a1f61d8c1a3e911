// The rollout engine behind temper serve (EngineBackend, a RunDriver): requests that arrive while it
// runs share its batch (8 concurrent requests take far fewer steps than 8 times one), their tokens
// equal a plain batch run's, streamed tokens equal the final ones, a cancelled job stops, top_logprobs
// are the policy's, and shutdown finishes what is in flight.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "common/models.h"
#include "temper/serve/engine_backend.h"
#include "temper/serve/openai_schema.h"

namespace temper::serve {
namespace {

using namespace std::chrono_literals;

struct Done {
  std::vector<GenEvent> done;                  // per member
  std::vector<std::vector<int32_t>> streamed;  // token events per member
  std::string error;
};

// Waits for every member's done event (or an error).
Done collect(GenJob& job, int64_t n) {
  Done d;
  d.done.resize(static_cast<size_t>(n));
  d.streamed.resize(static_cast<size_t>(n));
  for (int64_t left = n; left > 0;) {
    GenEvent e;
    if (!job.pop(e, 30s)) {
      d.error = "timeout";
      break;
    }
    if (e.kind == GenEvent::Kind::error) {
      d.error = e.error;
      break;
    }
    if (e.kind == GenEvent::Kind::token) {
      d.streamed[static_cast<size_t>(e.member)].push_back(e.token);
      continue;
    }
    const size_t m = static_cast<size_t>(e.member);
    d.done[m] = std::move(e);
    --left;
  }
  return d;
}

std::shared_ptr<GenJob> make_job(int64_t i, int64_t max_new, bool greedy = false, int64_t n = 1) {
  auto j = std::make_shared<GenJob>();
  rollout::RolloutRequest& r = j->request;
  for (int64_t t = 0; t < 5 + i % 3; ++t) r.prompt.push_back(static_cast<int32_t>((7 * i + 3 * t + 1) % 100));
  r.group_size = n;
  r.max_new = max_new;
  r.sampler.greedy = greedy;
  r.seed = 100 + static_cast<uint64_t>(i);
  return j;
}

struct Served {
  test::RandomModel rm;
  KvPool pool{rm.cfg, kKvBlockSize, 64};
  EngineBackend backend{rm.model, pool, rollout::EngineConfig{16}};
  Served() { backend.start(); }
};

TEST(ServeEngineBackend, ConcurrentRequestsShareTheBatch) {
  Served s;
  auto one = make_job(0, 24);
  s.backend.submit(one);
  Done d1 = collect(*one, 1);
  ASSERT_EQ(d1.error, "");
  ASSERT_EQ(d1.done[0].tokens.size(), 24u);
  std::this_thread::sleep_for(50ms);  // the last step's count comes after its tokens
  const int64_t steps_one = s.backend.steps();
  EXPECT_GE(steps_one, 24);

  // 8 requests submitted back to back (a request that comes a step later joins then; 8 handler threads starting
  // at once are cli_serve_openai's case: on a loaded 2-core machine their start alone spreads over many steps).
  std::vector<std::shared_ptr<GenJob>> jobs;
  for (int64_t i = 0; i < 8; ++i) jobs.push_back(make_job(i, 24));
  for (auto& j : jobs) s.backend.submit(j);
  std::vector<Done> got;
  for (auto& j : jobs) got.push_back(collect(*j, 1));
  std::this_thread::sleep_for(50ms);
  const int64_t steps_eight = s.backend.steps() - steps_one;
  for (const Done& d : got) {
    ASSERT_EQ(d.error, "");
    EXPECT_EQ(d.done[0].tokens.size(), 24u);
  }
  std::printf("engine steps: one request %lld, 8 concurrent requests %lld (8x one: %lld)\n",
              static_cast<long long>(steps_one), static_cast<long long>(steps_eight),
              static_cast<long long>(8 * steps_one));
  EXPECT_LE(steps_eight, 2 * steps_one) << "concurrent requests must share the engine's steps";

  // The same tokens as one plain batch run of these requests (per-member Philox streams: the batch
  // a request shares does not change its tokens).
  s.backend.shutdown();
  KvPool pool2(s.rm.cfg, kKvBlockSize, 64);
  rollout::RolloutEngine eng(s.rm.model, pool2, rollout::EngineConfig{16});
  std::vector<rollout::RolloutRequest> reqs;
  for (auto& j : jobs) reqs.push_back(j->request);
  const auto plain = eng.run(reqs);
  ASSERT_EQ(plain.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i].done[0].tokens, plain[i].tokens) << "request " << i;
    ASSERT_EQ(got[i].done[0].logprobs.size(), plain[i].policy_logprob.size());
    for (size_t t = 0; t < plain[i].policy_logprob.size(); ++t)
      EXPECT_EQ(got[i].done[0].logprobs[t], plain[i].policy_logprob[t]);
  }
}

TEST(ServeEngineBackend, StreamingGroupsCancelAndTopLogprobs) {
  Served s;
  // Streamed tokens are the final tokens; n = 3 members of one request.
  auto st = make_job(1, 12, false, 3);
  st->stream = true;
  s.backend.submit(st);
  Done d = collect(*st, 3);
  ASSERT_EQ(d.error, "");
  for (size_t m = 0; m < 3; ++m) {
    EXPECT_EQ(d.done[m].member, static_cast<int64_t>(m));
    EXPECT_EQ(d.streamed[m], d.done[m].tokens) << "member " << m;
    EXPECT_EQ(d.done[m].finish, rollout::FinishReason::length);
  }
  EXPECT_NE(d.done[0].tokens, d.done[1].tokens) << "members draw from their own streams";

  // A stop id ends a sample: the stop token is its last and never a token event.
  auto stop = make_job(2, 20, true);
  stop->stream = true;
  {
    auto probe = make_job(2, 20, true);
    s.backend.submit(probe);
    Done p = collect(*probe, 1);
    ASSERT_EQ(p.error, "");
    stop->request.stop_ids = {p.done[0].tokens[4]};
  }
  s.backend.submit(stop);
  Done ds = collect(*stop, 1);
  ASSERT_EQ(ds.error, "");
  EXPECT_EQ(ds.done[0].finish, rollout::FinishReason::stop);
  ASSERT_FALSE(ds.done[0].tokens.empty());
  EXPECT_TRUE(stop->request.stop_ids.count(ds.done[0].tokens.back()));
  EXPECT_EQ(ds.streamed[0].size() + 1, ds.done[0].tokens.size());

  // A cancelled job stops at its next token.
  auto c = make_job(3, 100);
  c->cancel();
  s.backend.submit(c);
  Done dc = collect(*c, 1);
  ASSERT_EQ(dc.error, "");
  EXPECT_EQ(dc.done[0].finish, rollout::FinishReason::hook);
  EXPECT_LE(dc.done[0].tokens.size(), 2u);

  // top_logprobs: the policy's k best at each position, most likely first; greedy picks the first, with
  // the log-prob the engine recorded.
  auto t = make_job(4, 10, true);
  t->top_logprobs = 5;
  s.backend.submit(t);
  Done dt = collect(*t, 1);
  ASSERT_EQ(dt.error, "");
  const GenEvent& e = dt.done[0];
  ASSERT_EQ(e.top.size(), e.tokens.size());
  for (size_t i = 0; i < e.tokens.size(); ++i) {
    ASSERT_EQ(e.top[i].size(), 5u);
    EXPECT_EQ(e.top[i][0].first, e.tokens[i]) << "position " << i;
    EXPECT_NEAR(e.top[i][0].second, e.logprobs[i], 1e-4) << "position " << i;
    double mass = 0;
    for (size_t k = 0; k < 5; ++k) {
      if (k > 0) {
        EXPECT_LE(e.top[i][k].second, e.top[i][k - 1].second);
      }
      mass += std::exp(e.top[i][k].second);
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
}

TEST(ServeEngineBackend, ShutdownFinishesWhatIsInFlight) {
  Served s;
  std::vector<std::shared_ptr<GenJob>> jobs;
  for (int64_t i = 0; i < 4; ++i) {
    jobs.push_back(make_job(i, 40));
    s.backend.submit(jobs.back());
  }
  s.backend.shutdown();  // returns once the engine thread has ended
  for (auto& j : jobs) {
    Done d = collect(*j, 1);
    ASSERT_EQ(d.error, "");
    EXPECT_EQ(d.done[0].tokens.size(), 40u);
  }
  EXPECT_EQ(s.backend.jobs_done(), 4);
  EXPECT_THROW(s.backend.submit(make_job(9, 4)), ApiError);
}

}  // namespace
}  // namespace temper::serve

// Spotlight's pieces without processes: the weight store's staleness bound, the work queue's re-queue protocol (once,
// or tries - 1 times), the wire framing (a partial frame is never a message; a large blob is read in place), the
// planner's order, selection and bandit.
#include <gtest/gtest.h>

#include <cstring>

#include "temper/core/error.h"
#include "temper/spotlight/planner.h"
#include "temper/spotlight/weight_store.h"
#include "temper/spotlight/wire.h"
#include "temper/spotlight/work_queue.h"

namespace temper::spotlight {
namespace {

ExploreRequest req(int64_t step, int64_t group, uint64_t first = 0) {
  ExploreRequest r;
  r.step = step, r.group = group, r.label = static_cast<int32_t>(group % 3), r.first_seed = first, r.count = 4;
  return r;
}

ExploreResult res(int64_t request, int64_t version) {
  ExploreResult r;
  r.request = request, r.version = version, r.seeds = {1, 2}, r.rewards = {0.5, -0.5};
  return r;
}

TEST(SpotlightWeights, KeepsCurrentAndStalenessBound) {
  WeightStore s(1);
  EXPECT_EQ(s.current(), -1);
  s.push(0, std::vector<float>{1, 2});
  EXPECT_EQ(s.explorer_version(), 0);  // early: the oldest held
  s.push(1, std::vector<float>{3, 4});
  s.push(2, std::vector<float>{5, 6});
  EXPECT_EQ(s.current(), 2);
  EXPECT_EQ(s.oldest(), 1);
  EXPECT_FALSE(s.has(0));
  EXPECT_EQ(s.explorer_version(), 1);
  EXPECT_EQ(s.get(1), (std::vector<float>{3, 4}));
  EXPECT_THROW(s.get(0), Error);
  EXPECT_THROW(s.push(4, std::vector<float>{0, 0}), Error);     // skips a version
  EXPECT_THROW(s.push(3, std::vector<float>{0, 0, 0}), Error);  // another size
  WeightStore s2(2);
  for (int v = 0; v < 5; ++v) s2.push(v, std::vector<float>{static_cast<float>(v)});
  EXPECT_EQ(s2.oldest(), 2);
  EXPECT_EQ(s2.explorer_version(), 2);
}

TEST(SpotlightQueue, RequeuesOnceThenDrops) {
  WorkQueue q;
  const std::vector<int64_t> ids = q.add({req(2, 0), req(2, 1), req(2, 2)});
  ASSERT_EQ(ids.size(), 3u);
  // Worker 0 finishes the first request, takes the second and dies: the second goes back to the front.
  auto a = q.pull(0);
  ASSERT_TRUE(a);
  EXPECT_TRUE(q.commit(0, res(a->id, 1)));
  auto b = q.pull(0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->id, ids[1]);
  EXPECT_EQ(q.worker_lost(0), std::vector<int64_t>{ids[1]});
  EXPECT_FALSE(q.commit(0, res(b->id, 1)));  // a dead worker's late frame is not kept
  auto c = q.pull(1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, ids[1]);  // re-queued at the front, once
  EXPECT_EQ(c->failures, 1);
  EXPECT_TRUE(q.worker_lost(1).empty());  // its second explorer dies too: dropped
  QueueCounters n = q.counters();
  EXPECT_EQ(n.requeued, 1);
  EXPECT_EQ(n.dropped, 1);
  EXPECT_EQ(n.committed, 1);
  EXPECT_FALSE(q.step_done(2));  // ids[2] pending
  auto d = q.pull(1);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->id, ids[2]);
  EXPECT_FALSE(q.commit(0, res(d->id, 1)));  // held by worker 1, not 0
  EXPECT_TRUE(q.commit(1, res(d->id, 1)));
  EXPECT_TRUE(q.step_done(2));
  const std::vector<ExploreResult> r = q.take(2);
  ASSERT_EQ(r.size(), 2u);  // the committed results survive their explorer's death
  EXPECT_EQ(r[0].request, ids[0]);
  EXPECT_EQ(r[0].worker, 0);
  EXPECT_EQ(r[1].request, ids[2]);
  EXPECT_EQ(r[1].group, 2);
}

TEST(SpotlightQueue, StartedStepsExpireAndLateResultsAreDiscarded) {
  WorkQueue q;
  q.add({req(3, 0), req(3, 1), req(4, 0)});
  auto a = q.pull(0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->step, 3);
  EXPECT_TRUE(q.take(3).empty());  // step 3 starts: its pending request expires, the held one will be late
  EXPECT_FALSE(q.commit(0, res(a->id, 2)));
  auto b = q.pull(0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->step, 4);
  EXPECT_TRUE(q.worker_lost(0).size() == 1);  // step 4 not started: re-queued
  QueueCounters n = q.counters();
  EXPECT_EQ(n.expired, 1);
  EXPECT_EQ(n.late, 1);
  EXPECT_EQ(n.requeued, 1);
  EXPECT_TRUE(q.add({req(2, 0)}).empty());  // a request for a started step is refused (expired)
  EXPECT_TRUE(q.wait_step_done(9, 0.01));
  EXPECT_FALSE(q.wait_step_done(4, 0.01));
}

TEST(SpotlightWire, FramesRoundTripAndPartialFramesWait) {
  Message m{MsgType::result, {{"id", 7}, {"version", 3}}, to_blob(std::vector<double>{0.1, -2.5e-300, 1.0 / 3})};
  const std::string bytes = encode(m) + encode({MsgType::pull, {{"version", 3}}, {}});
  FrameReader r;
  r.feed(bytes.data(), bytes.size() - 1);  // the second frame lacks its last byte
  auto a = r.next();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->type, MsgType::result);
  EXPECT_EQ(a->head.at("id").get<int>(), 7);
  EXPECT_EQ(from_blob<double>(a->blob), (std::vector<double>{0.1, -2.5e-300, 1.0 / 3}));  // bits unchanged
  EXPECT_FALSE(r.next());
  r.feed(bytes.data() + bytes.size() - 1, 1);
  auto b = r.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->type, MsgType::pull);
  FrameReader bad;
  bad.feed("garbage-garbage-garbage", 23);
  EXPECT_THROW(bad.next(), Error);
}

TEST(SpotlightQueue, MoreTriesRequeueUntilTheLastAndPayloadsTravel) {
  WorkQueue q(3);  // [rl.async]'s explorer processes: a block may be handed to 3 explorers
  ExploreRequest r = req(1, 0);
  r.payload = std::string("r\0block", 7);
  const int64_t id = q.add({r})[0];
  for (int worker = 0; worker < 2; ++worker) {
    auto a = q.pull(worker);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->payload, r.payload);
    EXPECT_EQ(a->failures, worker);
    EXPECT_EQ(q.worker_lost(worker), std::vector<int64_t>{id});  // re-queued after the first and the second death
  }
  auto c = q.pull(2);
  ASSERT_TRUE(c);
  EXPECT_TRUE(q.worker_lost(2).empty());  // the third: dropped
  EXPECT_EQ(q.counters().requeued, 2);
  EXPECT_EQ(q.counters().dropped, 1);
  EXPECT_TRUE(q.step_done(1));
  EXPECT_TRUE(q.take(1).empty());  // nothing committed: the caller sees the block missing
}

// A large blob is read straight into its message: FrameReader::take_partial hands over a frame whose head is buffered
// and whose blob is not (more than min_rest bytes missing), never one it holds whole or a partial header.
TEST(SpotlightWire, TakePartialHandsOverOnlyAFrameStillMissingItsBlob) {
  std::vector<float> w(1000);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i) - 7.25f;
  const std::string frame = encode_frame(MsgType::weights, {{"version", 4}},
                                         std::string_view(reinterpret_cast<const char*>(w.data()), w.size() * 4));
  EXPECT_EQ(frame, encode({MsgType::weights, {{"version", 4}}, to_blob(w)}));  // the same bytes as encode()
  size_t have = 0;
  FrameReader head_only;
  head_only.feed(frame.data(), 10);  // a partial header
  EXPECT_FALSE(head_only.take_partial(0, have));
  FrameReader whole;
  whole.feed(frame.data(), frame.size());
  whole.feed(frame.data(), 20);               // and the start of the next frame
  EXPECT_FALSE(whole.take_partial(0, have));  // whole: next() takes it
  ASSERT_TRUE(whole.next());
  EXPECT_EQ(whole.buffered(), 20u);
  const size_t cut = frame.size() - 3000;  // 3000 of the 4000 blob bytes missing
  FrameReader part;
  part.feed(frame.data(), cut);
  EXPECT_FALSE(part.take_partial(3000, have));  // not more than min_rest missing: read into the buffer as usual
  auto m = part.take_partial(2999, have);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->head.at("version").get<int>(), 4);
  EXPECT_EQ(have, 1000u);
  ASSERT_EQ(m->blob.size(), 4000u);
  std::memcpy(m->blob.data() + have, frame.data() + cut, frame.size() - cut);  // as SocketReader reads the rest
  EXPECT_EQ(from_blob<float>(m->blob), w);
  EXPECT_EQ(part.buffered(), 0u);
}

TEST(SpotlightPlanner, SelectsTheSpreadAndOrdersByIndex) {
  const std::vector<double> r{0.3, -1.0, 2.0, 0.1, 5.0, -3.0, 0.0, 0.2};
  const std::vector<size_t> keep = select_spread(r, 4);
  EXPECT_EQ(keep, (std::vector<size_t>{5, 1, 2, 4}));  // two lowest, two highest
  std::vector<double> kept, first(r.begin(), r.begin() + 4);
  for (size_t i : keep) kept.push_back(r[i]);
  EXPECT_GT(population_std(kept), population_std(first));
  EXPECT_EQ(select_spread(r, 3).size(), 3u);

  PlannerConfig c;
  c.group = 4, c.seeds_per_class = 12, c.chunk = 4;
  Planner p(c, 3);
  EXPECT_EQ(p.rounds(), 3);
  // Every arm unplayed: plain order; chunk 0 of each group first.
  std::vector<ExploreRequest> all = p.plan(5, {0, 1, 2}, 0);
  ASSERT_EQ(all.size(), 9u);
  EXPECT_EQ(all[0].group, 0);
  EXPECT_EQ(all[2].group, 2);
  EXPECT_EQ(all[0].first_seed, seed_id(5, 0, 0));
  EXPECT_EQ(all[3].first_seed, seed_id(5, 0, 4));
  p.observe(0, 1.0, 10), p.observe(1, 5.0, 10), p.observe(2, 2.0, 10);
  EXPECT_GT(p.index(1), p.index(2));
  EXPECT_GT(p.index(2), p.index(0));
  const std::vector<ExploreRequest> cut = p.plan(5, {0, 1, 2}, 5);
  ASSERT_EQ(cut.size(), 5u);  // chunk 0 of all three, then the extra chunks by index: class 1, then 2
  EXPECT_EQ(cut[3].group, 1);
  EXPECT_EQ(cut[4].group, 2);
  Planner q(c, 3);
  q.restore(p.state());
  EXPECT_EQ(q.index(1), p.index(1));
  EXPECT_THROW(Planner(c, 4).restore(p.state()), Error);
  c.seeds_per_class = 2;
  EXPECT_THROW(c.validate(), Error);  // fewer candidates than the group
}

}  // namespace
}  // namespace temper::spotlight

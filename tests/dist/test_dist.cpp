// The process group without MPI: shards cover a batch exactly once, the one-process group's
// collectives are the identity; byte messages and completions survive the wire and a truncated
// message is an error, not garbage.
#include <gtest/gtest.h>

#include "temper/core/bytes.h"
#include "temper/dist/communicator.h"
#include "temper/rollout/sharded.h"

using namespace temper;

TEST(Dist, ShardsCoverTheBatchOnceInContiguousBlocks) {
  for (int64_t n : {0, 1, 5, 7, 64})
    for (int size : {1, 2, 3, 8}) {
      int64_t next = 0, smallest = n, largest = 0;
      for (int r = 0; r < size; ++r) {
        dist::Range s = dist::shard(n, r, size);
        EXPECT_EQ(s.begin, next) << n << " rows over " << size;
        EXPECT_LE(s.begin, s.end);
        smallest = std::min(smallest, s.end - s.begin);
        largest = std::max(largest, s.end - s.begin);
        next = s.end;
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1);
    }
}

TEST(Dist, OneProcessGroupIsTheIdentity) {
  dist::Communicator& c = dist::single();
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_TRUE(c.is_root());
  float f[2] = {1.5f, -2.f};
  c.allreduce_sum(f, 2);
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -2.f);
  std::string s = "x";
  c.broadcast(s, 0);
  EXPECT_EQ(c.allgather("abc"), std::vector<std::string>{"abc"});
  if (!dist::launched_by_mpi()) {
    EXPECT_STREQ(dist::world().backend(), "single");
  }
}

TEST(Dist, BytesRoundTripAndTruncationIsAnError) {
  ByteWriter w;
  w.put<int32_t>(-7);
  w.put(std::vector<float>{1.f, 2.5f});
  w.put(std::string("he\0llo", 6));
  w.put(std::vector<int64_t>{});
  std::string bytes = w.bytes();
  ByteReader r(bytes);
  int32_t i = 0;
  std::vector<float> v;
  std::string s;
  std::vector<int64_t> e = {9};
  r.get(i), r.get(v), r.get(s), r.get(e);
  EXPECT_EQ(i, -7);
  EXPECT_EQ(v, (std::vector<float>{1.f, 2.5f}));
  EXPECT_EQ(s, std::string("he\0llo", 6));
  EXPECT_TRUE(e.empty());
  EXPECT_TRUE(r.done());
  const std::string short_bytes = bytes.substr(0, bytes.size() - 8 - 3);  // into the string
  ByteReader cut(short_bytes);
  cut.get(i), cut.get(v);
  EXPECT_THROW(cut.get(s), Error);
}

TEST(Dist, CompletionsSurviveTheWire) {
  std::vector<rollout::Completion> in(2);
  in[0].request = 3, in[0].member = 1, in[0].stream = 77, in[0].tokens = {4, 5};
  in[0].sample_logprob = {-0.5f, -1.f}, in[0].policy_logprob = {-0.4f, -1.1f}, in[0].entropy = {2.f, 1.f};
  in[0].finish = rollout::FinishReason::stop, in[0].stop_string = 2;
  in[1].parent = 0, in[1].fork_pos = 1, in[1].forced = 2, in[1].forced_pos = 1, in[1].finish = rollout::FinishReason::hook;
  in[1].tokens = {6, 7, 8, 9}, in[1].appended = {{1, 2}, {3, 1}};
  std::vector<rollout::Completion> out(1);  // decoding appends
  rollout::decode_completions(rollout::encode_completions(in), out);
  ASSERT_EQ(out.size(), 3u);
  for (size_t k = 0; k < 2; ++k) {
    const rollout::Completion &a = in[k], &b = out[k + 1];
    EXPECT_EQ(a.request, b.request);
    EXPECT_EQ(a.member, b.member);
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_EQ(a.fork_pos, b.fork_pos);
    EXPECT_EQ(a.forced, b.forced);
    EXPECT_EQ(a.forced_pos, b.forced_pos);
    EXPECT_EQ(a.stream, b.stream);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.sample_logprob, b.sample_logprob);
    EXPECT_EQ(a.policy_logprob, b.policy_logprob);
    EXPECT_EQ(a.entropy, b.entropy);
    EXPECT_EQ(a.finish, b.finish);
    EXPECT_EQ(a.stop_string, b.stop_string);
    EXPECT_EQ(a.appended, b.appended);
  }
  EXPECT_THROW(rollout::decode_completions(rollout::encode_completions(in) + "x", out), Error);
}

// The appended spans' bytes (the gather's and the async checkpoint's): one int64 vector [at, n, at, n, ...], as
// checkpoints written before the shared codec hold them; an odd list is refused naming the message.
TEST(Dist, AppendedSpansAreAFlatInt64List) {
  ByteWriter w, flat;
  rollout::put_appended(w, {{1, 2}, {5, 3}});
  flat.put(std::vector<int64_t>{1, 2, 5, 3});
  EXPECT_EQ(w.bytes(), flat.bytes());
  ByteReader r(w.bytes());
  EXPECT_EQ(rollout::get_appended(r, "test"), (std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {5, 3}}));
  EXPECT_TRUE(r.done());
  ByteWriter odd;
  odd.put(std::vector<int64_t>{1, 2, 5});
  ByteReader o(odd.bytes());
  try {
    rollout::get_appended(o, "the test message");
    ADD_FAILURE() << "an odd span list was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the test message: odd appended-span list"), std::string::npos) << e.what();
  }
}

TEST(Dist, OneProcessShardHoldsEveryRequest) {
  EXPECT_EQ(rollout::shard_requests(4, nullptr), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(rollout::shard_requests(3, &dist::single()), (std::vector<int64_t>{0, 1, 2}));
}

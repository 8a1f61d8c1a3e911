// Explorer ranks of [rl.async] (async_remote.h): the role split, the trainer's side and the explorer's loop.
#include "temper/rl/async_remote.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "temper/core/bytes.h"
#include "temper/core/clock.h"
#include "temper/core/error.h"
#include "temper/model/lora.h"
#include "temper/rl/async_state.h"
#include "temper/rollout/sharded.h"

namespace temper::rl {

namespace {

constexpr int kJobTag = 7101, kWeightsTag = 7102, kDoneTag = 7103;
constexpr uint8_t kRequests = 0, kStop = 1, kConversations = 2;  // a job message's first byte

}  // namespace

AsyncRoles split_async_roles(dist::Communicator& world, int64_t explorer_ranks) {
  TEMPER_CHECK(world.size() > 1) << "rl.async.explorer_ranks = " << explorer_ranks
                                 << ": explorer ranks need mpirun -np R with R > " << explorer_ranks
                                 << " (one process: set it 0 for the explorer thread)";
  TEMPER_CHECK(explorer_ranks >= 1 && explorer_ranks < world.size())
      << "rl.async.explorer_ranks = " << explorer_ranks << " with " << world.size() << " ranks: expected 1 to "
      << world.size() - 1 << " (the last N ranks explore, at least one rank trains)";
  AsyncRoles r;
  r.first_explorer = world.size() - static_cast<int>(explorer_ranks);
  const bool explorer = world.rank() >= r.first_explorer;
  std::unique_ptr<dist::Communicator> group = world.split(explorer ? 1 : 0, world.rank());
  (explorer ? r.explorers : r.trainers) = std::move(group);
  if (world.rank() == 0)
    std::fprintf(stderr, "temper: [rl.async] ranks 0-%d train, ranks %d-%d explore\n", r.first_explorer - 1,
                 r.first_explorer, world.size() - 1);
  return r;
}

void enter_async_roles(int64_t explorer_ranks) {
  if (explorer_ranks == 0) return;
  dist::Communicator& world = dist::world();
  AsyncRoles r = split_async_roles(world, explorer_ranks);
  const bool explorer = r.explorer();
  // The explorers' own group (their loading steps' collectives); the trainers keep theirs.
  std::unique_ptr<dist::Communicator> g = explorer ? std::move(r.explorers) : std::move(r.trainers);
  dist::set_group(std::move(g), dist::Role{explorer, r.first_explorer});
}

std::string encode_requests(const std::vector<rollout::RolloutRequest>& reqs, size_t begin, size_t end) {
  ByteWriter w;
  w.put<int64_t>(static_cast<int64_t>(end - begin));
  for (size_t i = begin; i < end; ++i) {
    const rollout::RolloutRequest& q = reqs[i];
    w.put(q.prompt), w.put(q.group_size), w.put(q.max_new), w.put(q.sampler);
    w.put(std::vector<int32_t>(q.stop_ids.begin(), q.stop_ids.end()));
    w.put<int64_t>(static_cast<int64_t>(q.stop_strings.size()));
    for (const std::string& s : q.stop_strings) w.put(s);
    w.put(q.seed), w.put(q.stream), w.put(q.forced), w.put(q.turn_max_new);
  }
  return w.bytes();
}

void decode_requests(const std::string& bytes, std::vector<rollout::RolloutRequest>& out) {
  ByteReader r(bytes);
  int64_t n = 0;
  r.get(n);
  TEMPER_CHECK(n >= 0 && n < (int64_t{1} << 32)) << "rl.async: an explorer job with " << n << " requests";
  for (int64_t i = 0; i < n; ++i) {
    rollout::RolloutRequest q;
    std::vector<int32_t> stop;
    int64_t ns = 0;
    r.get(q.prompt), r.get(q.group_size), r.get(q.max_new), r.get(q.sampler), r.get(stop), r.get(ns);
    q.stop_ids.insert(stop.begin(), stop.end());
    q.stop_strings.resize(static_cast<size_t>(ns));
    for (std::string& s : q.stop_strings) r.get(s);
    r.get(q.seed), r.get(q.stream), r.get(q.forced), r.get(q.turn_max_new);
    out.push_back(std::move(q));
  }
  TEMPER_CHECK(r.done()) << "rl.async: an explorer job has bytes after its last request";
}

RemoteExplorer::RemoteExplorer(dist::Communicator& world, dist::Communicator& trainers, int first_explorer)
    : world_(world), trainers_(trainers), first_(first_explorer) {}

RemoteExplorer::~RemoteExplorer() {
  try {
    if (in_flight_) wait();
    if (trainers_.rank() != 0) return;
    ByteWriter w;
    w.put<uint8_t>(kStop);
    for (int e = first_; e < world_.size(); ++e) world_.send(w.bytes(), e, kJobTag);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "temper: [rl.async] stopping the explorer ranks: %s\n", e.what());
  }
}

// Trainer rank 0: each explorer its contiguous block of the requests, then the weights. The other trainers only count
// the version.
void RemoteExplorer::launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) {
  const int n_exp = world_.size() - first_;
  begin_.assign(static_cast<size_t>(n_exp) + 1, 0);
  for (int e = 0; e <= n_exp; ++e)
    begin_[static_cast<size_t>(e)] = dist::shard(static_cast<int64_t>(reqs.size()), e, n_exp).begin;
  std::vector<std::string> jobs;
  if (trainers_.rank() == 0)
    for (int e = 0; e < n_exp; ++e)
      jobs.push_back(encode_requests(reqs, static_cast<size_t>(begin_[static_cast<size_t>(e)]),
                                     static_cast<size_t>(begin_[static_cast<size_t>(e) + 1])));
  send_job(policy, kRequests, jobs);
}

// Each explorer its contiguous block of the round's problems (as launch() splits requests), with the conversations'
// request, the episodes' prefix and where its block starts: its episodes are named and seeded as in the whole round.
void RemoteExplorer::launch_conversations(const Transformer& policy, ConversationJob job) {
  const int n_exp = world_.size() - first_;
  const int64_t n = static_cast<int64_t>(job.problems.size());
  begin_.assign(static_cast<size_t>(n_exp) + 1, 0);
  for (int e = 0; e <= n_exp; ++e) begin_[static_cast<size_t>(e)] = dist::shard(n, e, n_exp).begin;
  std::vector<std::string> jobs;
  if (trainers_.rank() == 0) {
    TEMPER_CHECK(job.source) << "rl.async: a conversation job without the trainer's source (its metrics' merge rules)";
    source_ = job.source;
    for (int e = 0; e < n_exp; ++e)
      jobs.push_back(
          encode_conversation_block(job, begin_[static_cast<size_t>(e)], begin_[static_cast<size_t>(e) + 1]));
  }
  send_job(policy, kConversations, jobs);
}

// The weights are staged and sent without waiting: the trainer updates its live weights at once.
void RemoteExplorer::send_job(const Transformer& policy, uint8_t kind, const std::vector<std::string>& jobs) {
  TEMPER_CHECK(!in_flight_) << "rl.async: the explorer ranks' previous job was not collected";
  if (trainers_.rank() == 0) {
    world_.wait_sends();  // the previous version's (long done: its explorer replied)
    // A version: the flat weights, or under LoRA the adapters alone (the base is frozen).
    const LoraAdapters* a = policy.lora();
    const int64_t n = a ? a->size() : policy.flat_size();
    const float* src = a ? a->params() : policy.params();
    staging_.assign(src, src + n);
    for (size_t e = 0; e < jobs.size(); ++e) {
      ByteWriter w;
      w.put<uint8_t>(kind), w.put(version_), w.put(n), w.put(jobs[e]);
      world_.send(w.bytes(), first_ + static_cast<int>(e), kJobTag);
      world_.isend(staging_.data(), n, first_ + static_cast<int>(e), kWeightsTag);
    }
  }
  ++version_;
  in_flight_ = true;
  conversing_ = kind == kConversations;
}

// Trainer rank 0 collects every explorer's completions (request indices back to the job's) or conversations
// (problem indices back to the round's, in block order, so in (problem, member) order; their env/ metrics merged by
// the source's rules), then every trainer gets them, or the first error an explorer reported, naming its rank.
std::vector<rollout::Completion> RemoteExplorer::wait() {
  TEMPER_CHECK(in_flight_) << "rl.async: no explorer job to wait for";
  in_flight_ = false;
  const auto t0 = Clock::now();
  std::string all;
  if (trainers_.rank() == 0) {
    ByteWriter w;
    std::string error;
    std::vector<rollout::Completion> done;
    Conversations conv;
    double job_s = 0;
    for (int e = 0; e < world_.size() - first_; ++e) {
      std::string reply;
      world_.recv(reply, first_ + e, kDoneTag);
      ByteReader r(reply);
      int64_t version = 0;
      double s = 0;
      std::string err, bytes;
      r.get(version), r.get(s), r.get(err), r.get(bytes);
      job_s = std::max(job_s, s);
      const std::string rank = "explorer rank " + std::to_string(first_ + e) + ": ";
      if (!err.empty()) {
        if (error.empty()) error = rank + err;
        continue;
      }
      const int64_t begin = begin_[static_cast<size_t>(e)];
      try {  // on trainer rank 0 alone: reported to every trainer after the broadcast
        TEMPER_CHECK(version == version_ - 1) << "returned version " << version << ", expected " << version_ - 1;
        if (conversing_) {
          ByteReader c(bytes);
          Conversations block;
          get_conversations(c, block.trajectories, block.metrics);
          TEMPER_CHECK(c.done()) << "its conversations have bytes after their metrics";
          for (Trajectory& t : block.trajectories) {
            t.problem += begin, t.group += begin;
            conv.trajectories.push_back(std::move(t));
          }
          source_->merge_metrics(conv.metrics, block.metrics);
          continue;
        }
        const size_t k = done.size();
        rollout::decode_completions(bytes, done);
        for (size_t i = k; i < done.size(); ++i) done[i].request += begin;
      } catch (const std::exception& x) {
        if (error.empty()) error = rank + x.what();
      }
    }
    std::string out;
    if (conversing_) {
      ByteWriter c;
      put_conversations(c, conv.trajectories, conv.metrics);
      out = std::move(c.bytes());
    } else {
      out = rollout::encode_completions(done);
    }
    w.put(job_s), w.put(error), w.put(out);
    all = w.bytes();
  }
  if (trainers_.size() > 1) trainers_.broadcast(all, 0);
  ByteReader r(all);
  std::string error, bytes;
  r.get(job_s_), r.get(error), r.get(bytes);
  waited_s_ = seconds_since(t0);
  TEMPER_CHECK(error.empty()) << "[rl.async] " << error;
  std::vector<rollout::Completion> out;
  if (!conversing_) {
    rollout::decode_completions(bytes, out);
    return out;
  }
  conv_ = {};
  ByteReader c(bytes);
  get_conversations(c, conv_.trajectories, conv_.metrics);
  TEMPER_CHECK(c.done()) << "rl.async: the explorers' conversations have bytes after their metrics";
  return out;
}

std::string encode_conversation_block(const ConversationJob& job, int64_t begin, int64_t end) {
  ByteWriter w;
  put_problems(w, std::vector<tasks::Problem>(job.problems.begin() + begin, job.problems.begin() + end));
  w.put(job.group_size), w.put(job.context), w.put(encode_requests({job.request}, 0, 1)), w.put(job.episode_prefix),
      w.put(job.offset + begin);
  return std::move(w.bytes());
}

std::string converse_block(const std::string& bytes, ConversationSource* source, rollout::RolloutEngine& engine) {
  TEMPER_CHECK(source) << "a conversation job, but this explorer has no [env] (trainer and explorers must run the same "
                          "recipe)";
  ConversationJob job;
  ByteReader r(bytes);
  std::string request;
  get_problems(r, job.problems);
  r.get(job.group_size), r.get(job.context), r.get(request), r.get(job.episode_prefix), r.get(job.offset);
  TEMPER_CHECK(r.done()) << "rl.async: a conversation job has bytes after its block's offset";
  std::vector<rollout::RolloutRequest> reqs;
  decode_requests(request, reqs);
  TEMPER_CHECK(reqs.size() == 1) << "rl.async: a conversation job holds " << reqs.size() << " requests, expected 1";
  job.request = std::move(reqs[0]);
  const Conversations c = run_conversations(job, *source, engine);
  ByteWriter w;
  put_conversations(w, c.trajectories, c.metrics);
  return std::move(w.bytes());
}

void serve_explorer(dist::Communicator& world, int root, Transformer& model, rollout::RolloutEngine& engine,
                    ConversationSource* source) {
  for (;;) {
    std::string job;
    world.recv(job, root, kJobTag);
    ByteReader r(job);
    uint8_t kind = 0;
    r.get(kind);
    if (kind == kStop) return;
    TEMPER_CHECK(kind == kRequests || kind == kConversations) << "rl.async: an explorer job of kind " << int(kind);
    int64_t version = 0, sent = 0;
    std::string bytes;
    r.get(version), r.get(sent), r.get(bytes);
    std::vector<rollout::RolloutRequest> reqs;
    if (kind == kRequests) decode_requests(bytes, reqs);
    LoraAdapters* a = model.lora();
    const int64_t n = a ? a->size() : model.flat_size();
    TEMPER_CHECK(sent == n) << "rl.async: the trainer sends " << sent << " weights a version, this explorer rank's "
                            << (a ? "LoRA adapters hold " : "model holds ") << n
                            << " (trainer and explorer ranks must run the same model and [lora])";
    world.recv(a ? a->params() : model.params(), n, root, kWeightsTag);
    if (!a) model.params_updated();  // adapters are read as they are (the base is frozen)
    ByteWriter w;
    std::string error, done;
    const auto t0 = Clock::now();
    try {
      done = kind == kRequests ? rollout::encode_completions(engine.run(reqs)) : converse_block(bytes, source, engine);
    } catch (const std::exception& e) {
      error = e.what();
    }
    w.put(version), w.put(seconds_since(t0)), w.put(error), w.put(done);
    world.send(w.bytes(), root, kDoneTag);
  }
}

}  // namespace temper::rl

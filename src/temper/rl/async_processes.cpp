// Explorer processes of [rl.async] (async_processes.h): the trainer's side and the explorer program's scorer.
#include "temper/rl/async_processes.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "temper/core/bytes.h"
#include "temper/core/clock.h"
#include "temper/core/error.h"
#include "temper/core/interrupt.h"
#include "temper/rl/async_remote.h"
#include "temper/rl/async_state.h"
#include "temper/rollout/sharded.h"

namespace temper::rl {

ProcessExplorer::ProcessExplorer(spotlight::ExplorerCommand cmd, const AsyncConfig& cfg, int trainer_threads,
                                 uint64_t seed)
    : cfg_(cfg), trainer_threads_(std::max(1, trainer_threads)) {
  pool_ = std::make_unique<spotlight::ExplorerPool>(queue_, std::move(cmd));
  pool_->set_respawn(cfg_.respawn_delay_s >= 0, std::max(cfg_.respawn_delay_s, 0.0));
  pool_->set_preemption(cfg_.preempt_every_s, seed);
  for (int64_t i = 0; i < cfg_.explorer_processes; ++i) pool_->spawn();
  if (cfg_.explorer_listen.empty()) return;
  const char* token = std::getenv("TEMPER_EXPLORER_TOKEN");
  const int port = pool_->listen(cfg_.explorer_listen, token ? token : "");
  const std::string host = spotlight::split_address(cfg_.explorer_listen, "rl.async.explorer_listen").first;
  std::fprintf(
      stderr,
      "temper train: [rl.async] explorers may join on %s:%d: temper train --connect HOST:%d [--threads N] on a "
      "machine with this run's model.path%s\n",
      host.c_str(), port, port, token ? " and the same TEMPER_EXPLORER_TOKEN" : "");
}

ProcessExplorer::~ProcessExplorer() {
  pool_->stop();
}

namespace {
constexpr char kRequests = 'r', kConversations = 'c';  // a block's payload starts with its kind
}  // namespace

void ProcessExplorer::launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) {
  launch_blocks(policy, static_cast<int64_t>(reqs.size()), [&](int64_t b, int64_t e) {
    return kRequests + encode_requests(reqs, static_cast<size_t>(b), static_cast<size_t>(e));
  });
  source_ = nullptr;
}

// Blocks of the round's problems, each conversed by one explorer through its own source (built from the same [env]),
// its episodes named and seeded by their index in the whole round (as explorer ranks do, async_remote.h).
void ProcessExplorer::launch_conversations(const Transformer& policy, ConversationJob job) {
  TEMPER_CHECK(job.source) << "rl.async: a conversation job without the trainer's source (its metrics' merge rules)";
  launch_blocks(policy, static_cast<int64_t>(job.problems.size()),
                [&](int64_t b, int64_t e) { return kConversations + encode_conversation_block(job, b, e); });
  source_ = job.source;
}

// The version's weights (or adapters) to the pool, which sends them to every explorer from this copy; then the job's
// blocks of request_prompts requests (problems) on the queue, in order.
void ProcessExplorer::launch_blocks(const Transformer& policy, int64_t count,
                                    const std::function<std::string(int64_t, int64_t)>& payload) {
  TEMPER_CHECK(!in_flight_) << "rl.async: the explorer processes' previous job was not collected";
  ++version_;
  const LoraAdapters* a = policy.lora();
  const int64_t n = a ? a->size() : policy.flat_size();
  const float* src = a ? a->params() : policy.params();
  pool_->set_weights(version_, {src, static_cast<size_t>(n)});
  const int64_t per = cfg_.request_prompts;
  begin_.clear();
  std::vector<spotlight::ExploreRequest> blocks;
  for (int64_t b = 0; b < count; b += per) {
    spotlight::ExploreRequest q;
    q.step = version_, q.group = static_cast<int64_t>(blocks.size());
    q.payload = payload(b, std::min(b + per, count));
    begin_.push_back(b);
    blocks.push_back(std::move(q));
  }
  begin_.push_back(count);
  queue_.add(std::move(blocks));
  pool_->notify();
  launched_at_ = queue_.now();
  in_flight_ = true;
}

void ProcessExplorer::launched(int64_t step) {
  const auto& k = cfg_.kill_steps;
  if (std::find(k.begin(), k.end(), step + 1) == k.end()) return;
  const int killed = pool_->kill_busy(5.0);
  std::fprintf(stderr, "temper train: [rl.async] kill_steps: %s during step %lld's rollouts\n",
               killed >= 0 ? ("SIGKILLed explorer " + std::to_string(killed)).c_str() : "no explorer held a block",
               static_cast<long long>(step + 1));
}

// Every block committed, back in request order: a block's completions name its requests from 0.
std::vector<rollout::Completion> ProcessExplorer::wait() {
  TEMPER_CHECK(in_flight_) << "rl.async: no explorer job to wait for";
  in_flight_ = false;
  const auto t0 = Clock::now();
  bool told = false;
  while (!queue_.wait_step_done(version_, 0.2)) {
    // A stop while only explorers from other machines could finish the batch (none alive, no replacement due here):
    // nothing would; the run ends at its last checkpoint. Otherwise the step finishes and the run checkpoints after it.
    TEMPER_CHECK(!interrupt_requested() || pool_->alive() > 0 ||
                 pool_->alive_or_coming() > (pool_->listening() ? 1 : 0))
        << "[rl.async] stopped by a signal while no explorer was running or starting: the step's batch cannot finish";
    if (!told && pool_->alive() == 0 && pool_->listening() && seconds_since(t0) > 5) {
      std::fprintf(stderr, "temper train: [rl.async] waiting for an explorer to join (rl.async.explorer_listen)\n");
      told = true;
    }
    TEMPER_CHECK(pool_->alive_or_coming() > 0)
        << "[rl.async] every explorer process has died and none is due to replace it (rl.async.respawn_delay_s < 0, "
           "or starting one failed: see the messages above); the run stops here";
    const int64_t failed = pool_->failed_starts_in_row();
    TEMPER_CHECK(failed < kFailedStarts || pool_->ready() > 0)
        << "[rl.async] " << failed
        << " explorer processes in a row died before they were set up and none is running (their "
        << "messages are above: the model, [lora] or rl.kv_memory_mb as the explorer program reads them)";
  }
  std::vector<spotlight::ExploreResult> done = queue_.take(version_);
  std::sort(done.begin(), done.end(), [](const auto& x, const auto& y) { return x.group < y.group; });
  const size_t blocks = begin_.size() - 1;
  std::vector<bool> seen(blocks, false);
  std::vector<rollout::Completion> out;
  conv_ = {};
  double last = launched_at_;
  for (spotlight::ExploreResult& r : done) {
    TEMPER_CHECK(r.version == version_) << "[rl.async] explorer process " << r.worker << " rolled out block " << r.group
                                        << " on version " << r.version << ", expected " << version_;
    const int64_t begin = begin_[static_cast<size_t>(r.group)];
    if (source_) {  // the block's conversations back in (problem, member) order, its env/ metrics merged
      ByteReader c(r.payload);
      Conversations block;
      get_conversations(c, block.trajectories, block.metrics);
      TEMPER_CHECK(c.done()) << "[rl.async] explorer process " << r.worker << ": bytes after a block's metrics";
      for (Trajectory& t : block.trajectories) {
        t.problem += begin, t.group += begin;
        conv_.trajectories.push_back(std::move(t));
      }
      source_->merge_metrics(conv_.metrics, block.metrics);
    } else {
      const size_t k = out.size();
      rollout::decode_completions(r.payload, out);
      for (size_t i = k; i < out.size(); ++i) out[i].request += begin;
    }
    seen[static_cast<size_t>(r.group)] = true;
    last = std::max(last, r.arrived);
  }
  for (size_t b = 0; b < blocks; ++b)
    TEMPER_CHECK(seen[b]) << "[rl.async] block " << b << " of the batch (requests " << begin_[b] << " to "
                          << begin_[b + 1] - 1 << ") was dropped: " << kTries
                          << " explorer processes died holding it (a block that kills its explorer: out of memory? "
                             "check rl.kv_memory_mb and the machine's memory)";
  job_s_ = last - launched_at_;
  waited_s_ = seconds_since(t0);
  return out;
}

// The step's explorer events: deaths, replacements and their join time (spawn to ready), requeued blocks.
void ProcessExplorer::add_metrics(Metrics& m) {
  const spotlight::PoolStats s = pool_->stats();
  const spotlight::QueueCounters q = queue_.counters();
  m.emplace_back("async_explorers", pool_->alive());
  m.emplace_back("async_deaths", static_cast<double>(s.deaths - last_deaths_));
  m.emplace_back("async_requeued", static_cast<double>(q.requeued - last_requeued_));
  m.emplace_back("async_lost_s", s.lost_seconds - last_lost_s_);
  double join = -1;  // the slowest join that completed since the last step (the first step: the starts)
  joined_.resize(s.joins.size(), false);
  for (size_t i = 0; i < s.joins.size(); ++i)
    if (s.joins[i].ready >= 0 && !joined_[i])
      join = std::max(join, s.joins[i].ready - s.joins[i].spawned), joined_[i] = true;
  if (join >= 0) m.emplace_back("async_join_s", join);
  last_deaths_ = s.deaths, last_requeued_ = q.requeued, last_lost_s_ = s.lost_seconds;
}

RolloutScorer::RolloutScorer(std::unique_ptr<Transformer> model, std::unique_ptr<LoraAdapters> lora,
                             int64_t kv_memory_mb, rollout::EngineConfig engine, std::unique_ptr<env::Environment> env,
                             std::unique_ptr<ConversationSource> source)
    : model_(std::move(model)),
      lora_(std::move(lora)),
      engine_(*model_, kv_memory_mb, engine, "rl.kv_memory_mb"),
      env_(std::move(env)),
      source_(std::move(source)) {}

RolloutScorer::~RolloutScorer() = default;  // the source before the environment it talks to (members' order)

int64_t RolloutScorer::param_count() const {
  return lora_ ? lora_->size() : model_->flat_size();
}

void RolloutScorer::set_params(std::span<const float> p) {
  std::copy(p.begin(), p.end(), lora_ ? lora_->params() : model_->params());
  if (!lora_) model_->params_updated();  // adapters are read as they are (the base is frozen)
}

spotlight::Message RolloutScorer::answer(const spotlight::Message& request) {
  TEMPER_CHECK(!request.blob.empty() && (request.blob[0] == kRequests || request.blob[0] == kConversations))
      << "rl.async explorer: a block of unknown kind";
  const std::string bytes = request.blob.substr(1);
  if (request.blob[0] == kConversations)
    return {spotlight::MsgType::result, nlohmann::json::object(),
            converse_block(bytes, source_.get(), engine_.engine())};
  std::vector<rollout::RolloutRequest> reqs;
  decode_requests(bytes, reqs);
  return {spotlight::MsgType::result, nlohmann::json::object(),
          rollout::encode_completions(engine_.engine().run(reqs))};
}

}  // namespace temper::rl

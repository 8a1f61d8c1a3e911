// EngineRun (engine_run.h) with a RunDriver (run_driver.h): requests that arrive while the run goes on,
// turns that end with the sequence parked (its KV held), continuations that append tokens and send it
// back through resume_ (only the appended tokens are prefilled), and parked KV freed when the pool
// cannot otherwise hold a sequence that must run.
#include <algorithm>

#include "temper/core/error.h"
#include "temper/rollout/engine_run.h"

namespace temper::rollout {

bool EngineRun::take_driver_input(bool wait) {
  if (!driver_) return false;
  continuations_.clear();
  incoming_.clear();
  driver_->poll(continuations_, wait);
  driver_->incoming(incoming_);
  for (RolloutRequest& q : incoming_) {
    added_.push_back(std::move(q));
    add_request(added_.back(), n_requests() - 1);
  }
  for (Continuation& k : continuations_) continue_turn(k);
  return !incoming_.empty() || !continuations_.empty();
}

// The driver keeps the sequence when it can go on and the driver wants it.
bool EngineRun::park(Live& s, FinishReason why) {
  const RolloutRequest& q = rq(s.req);
  const Completion& c = out_[static_cast<size_t>(s.out)];
  const int64_t len = static_cast<int64_t>(c.tokens.size());
  const bool room =
      len < q.max_new && static_cast<int64_t>(q.prompt.size()) + len < model_.config().max_position_embeddings;
  if (!driver_->turn_ended(c, why, room) || !room) return false;
  const auto key = std::make_pair(c.request, c.member);
  TEMPER_CHECK(!parked_.count(key)) << "rollout: completion (" << c.request << ", " << c.member << ") parked twice";
  parked_.emplace(key, std::move(s));
  return true;
}

// Appends the continuation's tokens (cut to the completion's cap) and queues the sequence to prefill
// them; a sequence with no room left, or one the driver ends, is final.
void EngineRun::continue_turn(Continuation& k) {
  auto it = parked_.find({k.request, k.member});
  TEMPER_CHECK(it != parked_.end()) << "rollout: a continuation for completion (" << k.request << ", " << k.member
                                    << ") that is not waiting for one";
  Live s = std::move(it->second);
  parked_.erase(it);
  Completion& c = out_[static_cast<size_t>(s.out)];
  const RolloutRequest& q = rq(s.req);
  for (int32_t t : k.append)
    TEMPER_CHECK(t >= 0 && t < V_) << "rollout: continuation of completion (" << k.request << ", " << k.member
                                   << "): token " << t << " outside the vocabulary [0, " << V_ << ")";
  const int64_t len = static_cast<int64_t>(c.tokens.size());
  const int64_t n = k.finish ? 0 : std::min<int64_t>(static_cast<int64_t>(k.append.size()), q.max_new - len);
  if (n > 0) {
    c.tokens.insert(c.tokens.end(), k.append.begin(), k.append.begin() + n);
    for (auto* v : {&c.sample_logprob, &c.policy_logprob, &c.entropy}) v->resize(c.tokens.size(), 0.f);
    c.appended.emplace_back(len, n);
  }
  if (k.finish || len + n >= q.max_new) {  // ended by the driver, or no room left to sample (cut: length)
    if (!k.finish) c.finish = FinishReason::length;
    pool_.release(s.kv);
    driver_->finished(c);
    return;
  }
  stats_.appended_tokens += n;
  ++stats_.turns_continued;
  s.pending = c.tokens.back();
  s.tail.clear();  // stop strings match within a turn
  s.forced.clear();
  const int64_t turn_cap = k.turn_max_new > 0 ? k.turn_max_new : q.turn_max_new;
  s.max_len = turn_cap > 0 ? std::min(q.max_new, len + n + turn_cap) : q.max_new;
  s.continuing = true;
  resume_.push_back(std::move(s));
}

// Frees the KV of waiting sequences until `blocks` are free: parked ones (they recompute it when they continue),
// then continued ones queued behind s, the last first (without them, continuations arriving together could hold
// every block while the first of them waits for one).
bool EngineRun::make_room_for(const Live& s, int64_t blocks) {
  auto evict = [&](Live& p) {
    if (pool_.free_blocks() >= blocks || &p == &s || p.kv.blocks.empty()) return;
    pool_.release(p.kv);
    ++stats_.parked_evictions;
  };
  for (auto& [key, p] : parked_) evict(p);
  for (auto it = resume_.rbegin(); it != resume_.rend(); ++it) evict(*it);
  return pool_.free_blocks() >= blocks;
}

}  // namespace temper::rollout

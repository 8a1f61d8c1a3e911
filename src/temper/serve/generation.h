// What an HTTP request hands the generator and gets back: a GenJob holds one rollout request (n
// samples of one prompt) and a queue of events the generating thread pushes (tokens as they come
// for a streaming request, then each sample's final record) and the HTTP thread pops. A Backend
// takes jobs: the rollout engine on its own thread (serve/engine_backend.h) or a test's fake.
// Leaves out: priorities, timeouts (a client that goes away cancels its job instead).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "temper/rollout/engine.h"

namespace temper::serve {

// The k most likely tokens at one position, most likely first: (id, log-prob under the policy).
using TopLogprobs = std::vector<std::pair<int32_t, float>>;

struct GenEvent {
  enum class Kind { token, done, error } kind = Kind::token;
  int64_t member = 0;  // which of the n samples
  // token: the newest token of `member` and its log-prob under the policy (temperature 1, full vocabulary).
  int32_t token = -1;
  float logprob = 0;
  // done: the sample's tokens (the stop token included when a stop id ended it), their log-probs, the
  // top-k per token when the job asked (else empty), why it ended and which stop string ended it.
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<TopLogprobs> top;
  rollout::FinishReason finish = rollout::FinishReason::length;
  int32_t stop_string = -1;
  std::string error;  // error: what failed (the job is over)
};

class GenJob {
 public:
  rollout::RolloutRequest request;  // group_size = n
  bool stream = false;              // token events as tokens come (else only `done` events)
  int64_t top_logprobs = 0;         // > 0: the policy's top-k at every generated position
  std::string client;               // the request's bearer token (Authorization header); empty: none
  // Sees every event as it is pushed, on the generating thread (a recorder: client-mode RL); null: none.
  std::function<void(const GenEvent&)> observer;

  void push(GenEvent e) {
    if (observer) observer(e);
    {
      std::lock_guard<std::mutex> l(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_one();
  }
  // The next event; false when none came within `timeout`.
  bool pop(GenEvent& e, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, timeout, [&] { return !events_.empty(); })) return false;
    e = std::move(events_.front());
    events_.pop_front();
    return true;
  }
  // The client went away: the generator stops the job's samples at their next token.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenEvent> events_;
  std::atomic<bool> cancelled_{false};
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Queues a job; its events arrive on the job. Throws ApiError 503 once the backend is shutting down.
  virtual void submit(std::shared_ptr<GenJob> job) = 0;
  // Engine steps taken so far (a forward over the batch each).
  virtual int64_t steps() const = 0;
};

}  // namespace temper::serve

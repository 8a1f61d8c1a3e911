// An explorer process's side of Spotlight (wire.h): read the setup, build a scorer from it, then serve the
// trainer: weights messages replace the scorer's parameters (the version the trainer sent: one behind its own),
// each request is answered (the flow's: seeds and rewards; [rl.async]'s explorer processes: completions) with the
// version and the seconds it took; the explorer asks for work (pull) once it holds weights, and each result asks for
// the next. Ends at stop or end of stream (the trainer is gone). A setup key min_request_s (tests) makes each request
// last at least that long. The scorer for flow models is flow_scorer.h, the language model's rl/async_processes.h;
// what the setup holds is the caller's (app).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "temper/spotlight/wire.h"

namespace temper::spotlight {

class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual int64_t param_count() const = 0;
  virtual void set_params(std::span<const float> p) = 0;
  // The result of `request` under the current parameters: its head's fields (explorer_serve adds id, version and
  // seconds) and its blob.
  virtual Message answer(const Message& request) = 0;
  // >= 0: the scorer already holds weights of this version (read by itself): the explorer pulls at once.
  virtual int64_t loaded_version() const { return -1; }
};

// The flow's scorers: a request is a class label and a chunk of seeds {label, first_seed, count}; the result the seeds
// (head) and their rewards (blob, f64).
class SeedScorer : public Scorer {
 public:
  // Rewards of candidate seeds of class `label` under the current parameters.
  virtual std::vector<double> score(int32_t label, const std::vector<uint64_t>& seeds) = 0;
  Message answer(const Message& request) override;
};

using ScorerFactory = std::function<std::unique_ptr<Scorer>(const Message& setup)>;

// Serves one trainer on socket `fd`; returns 0 at stop or end of stream, kNoSetup when the stream ended before the
// setup (a trainer that turned the explorer away). Throws on a protocol error.
constexpr int kNoSetup = 3;
int explorer_serve(int fd, const ScorerFactory& make);

}  // namespace temper::spotlight

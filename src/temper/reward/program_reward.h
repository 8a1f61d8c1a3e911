// A reward program: long-lived worker processes, in any language, speaking JSON lines on stdin/stdout
// (protocol 1, recipes/README.md "Reward programs"; python/temper_reward.py implements the worker side):
//   temper -> worker  {"type": "hello", "protocol": 1, "name": NAME, "worker": K, "workers": N}
//   worker -> temper  {"ready": true}
//   temper -> worker  {"type": "score", "step": S, "items": [ITEM, ...]}     (ITEM: an object the caller builds)
//   worker -> temper  {"results": [RESULT, ...]}   one per item, in order; RESULT is a number (the reward) or
//                     {"reward": x, "components": {"name": x, ...}, "info": "text", "correct": bool} or
//                     {"error": "text"} (that item fails)
// A batch is split into contiguous chunks, one per worker, scored in parallel. Failures cost samples, never the
// run: a worker that misses timeout_s is killed; one that exits, crashes or answers malformed JSON (or the wrong
// number of results) likewise; their items fail (the caller scores them on_failure), the log names the worker and
// the last lines of its stderr, and the worker is restarted for the next batch. A worker that cannot be started
// at start() is an error naming the command.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "temper/reward/child_process.h"

namespace temper::reward {

inline constexpr int kRewardProtocol = 1;

struct ProgramOptions {
  std::string name;                  // the reward term's name (messages, the greeting)
  std::vector<std::string> command;  // argv
  int64_t workers = 1;
  double timeout_s = 60;        // one batch chunk, per worker
  double start_timeout_s = 60;  // from spawn to {"ready": true}
  std::vector<std::string> env;  // "KEY=value" for the workers (added to this process's environment)
  void validate() const;
};

struct ProgramScore {
  bool ok = false;
  double reward = 0;
  std::vector<std::pair<std::string, double>> components;
  std::string info;
  std::optional<bool> correct;
  std::string error;  // why not ok
};

class ProgramReward {
 public:
  explicit ProgramReward(ProgramOptions opt);
  ~ProgramReward();
  // Starts every worker and waits for its greeting; throws temper::Error naming the command, the worker and
  // why (not found, exited with its stderr, no answer within start_timeout_s, a malformed greeting).
  void start();
  // One result per item (JSON object texts), in order.
  std::vector<ProgramScore> score(const std::vector<std::string>& items, int64_t step);
  int64_t failures() const { return failures_.load(); }  // items that failed, so far
  int64_t restarts() const { return restarts_.load(); }  // workers started again after a failure
  const ProgramOptions& options() const { return opt_; }

 private:
  struct Worker {
    int index = 0;
    std::unique_ptr<ChildProcess> proc;  // null: to be (re)started
    bool started_once = false;
  };
  void start_worker(Worker& w);  // throws temper::Error
  void score_chunk(Worker& w, const std::vector<std::string>& items, size_t begin, size_t end, int64_t step,
                   std::vector<ProgramScore>& out);
  void fail_chunk(Worker& w, std::vector<ProgramScore>& out, size_t begin, size_t end, const std::string& why,
                  bool kill);
  std::string worker_name(int k) const;

  ProgramOptions opt_;
  std::vector<Worker> workers_;
  std::atomic<int64_t> failures_{0}, restarts_{0}, logged_{0};
  std::mutex log_mu_;
};

// Parses a worker's reply to a batch of n items; throws temper::Error saying what is wrong.
std::vector<ProgramScore> parse_program_reply(const std::string& line, size_t n);
// A worker's answer to the greeting (reward and environment programs): "" when it is {"ready": true}, else why
// not ("answered the greeting ..."). Never throws.
std::string program_greeting_problem(const std::string& line);

}  // namespace temper::reward

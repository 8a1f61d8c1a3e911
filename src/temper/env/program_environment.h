// An environment program: long-lived worker processes, in any language, speaking JSON lines on stdin/stdout
// (protocol 1, recipes/README.md "Environment programs"; python/temper_env.py implements the worker side):
//   temper -> {"type": "hello", "protocol": 1, "name": NAME, "worker": K, "workers": N, "params": {...}}
//   worker -> {"ready": true}
//   temper -> {"type": "reset", "episode": E, "row": {...}}      worker -> {"messages": [...], "tools": [...]?}
//   temper -> {"type": "step", "episode": E, "message": {...}}   worker -> {"messages": [...], "reward": x,
//             "done": b, "correct"?: b, "components"?: {"name": x}, "info"?: "text"}
//   temper -> {"type": "close", "episode": E}                    worker -> {"ok": true}
// Client mode ([env] mode = "client"): the worker runs the user's agent for a whole episode against an
// OpenAI-compatible endpoint temper serves on loopback with the policy (every token it samples is recorded):
//   temper -> {"type": "run", "episode": E, "row": {...}, "base_url": U, "api_key": K, "model": M}
//   worker -> {"reward": x, "correct"?: b, "components"?: {...}, "info"?: "text"}   (timeout_s covers the episode)
// A reply {"error": "text"}, or one that is JSON but breaks the rules (a field missing or of the wrong type), fails
// that episode only. Episodes are pinned to a worker at reset (the least loaded); a worker serves one request at
// a time, so N workers serve N episodes' calls at once. Failures cost episodes, never the run: a worker that misses
// timeout_s, exits or crashes, or answers a line that is not a JSON object is killed (its process group); the call
// fails, every other episode pinned to it is lost (its later calls fail: "episode lost: worker K was restarted
// after ..."), the log names the worker and quotes its stderr, and the worker is started again for later episodes.
// A worker that cannot start at start() is a temper::Error naming the command.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "temper/env/environment.h"
#include "temper/reward/child_process.h"

namespace temper::env {

class ProgramEnvironment : public Environment {
 public:
  explicit ProgramEnvironment(EnvOptions opt);  // validates opt (kind "program")
  ~ProgramEnvironment() override;
  std::string name() const override { return name_; }
  // Starts every worker and waits for its greeting; throws temper::Error naming the command, the worker and why
  // (not found, exited with its stderr, no answer within start_timeout_s, a malformed greeting).
  void start() override;
  EnvReply reset(const std::string& episode, const nlohmann::ordered_json& row) override;
  EnvReply step(const std::string& episode, const nlohmann::ordered_json& message) override;
  void close(const std::string& episode) override;
  EnvReply run(const std::string& episode, const nlohmann::ordered_json& row,
               const nlohmann::ordered_json& endpoint) override;
  int64_t failures() const override { return failures_.load(); }
  int64_t restarts() const override { return restarts_.load(); }
  int worker_of(const std::string& episode) const;  // the worker an open episode is pinned to; -1: none
  const EnvOptions& options() const { return opt_; }

 private:
  struct Worker {
    int index = 0;
    std::mutex mu;                               // one request at a time
    std::unique_ptr<reward::ChildProcess> proc;  // null: to be (re)started
    bool started_once = false;
    int64_t generation = 0;           // +1 at each kill: episodes reset under an older generation are lost
    int64_t load = 0;                 // open episodes pinned here and not lost (guarded by episodes_mu_)
    std::atomic<bool> broken{false};  // its last start failed: new episodes go elsewhere while others work
  };
  struct Episode {
    int worker = 0;
    int64_t generation = -1;  // the worker's generation at reset; -1 until the reset reaches the worker
    std::string failed;       // non-empty: the episode is over, this says why
    bool lost = false;        // failed because its worker was killed (no longer counted in its load)
  };
  struct Call {
    bool ok = false;
    nlohmann::ordered_json reply;  // ok: a JSON object
    std::string why;               // !ok: why (the worker was killed, or could not be started)
  };

  void start_worker(Worker& w);  // w.mu held; throws temper::Error
  Worker* open_episode(const std::string& episode, EnvReply& refusal);  // returns with its mutex held
  Call call(Worker& w, const std::string& episode, const nlohmann::ordered_json& request, const char* what);
  void kill_worker(Worker& w, const std::string& episode, const std::string& why);  // w.mu held
  EnvReply fail(const std::string& episode, const std::string& why);  // marks the episode failed (counted once)
  EnvReply answer(const Worker& w, const std::string& episode, const Call& c, const char* what,
                  EnvReply (*parse)(const nlohmann::ordered_json&));
  std::string worker_name(int k) const;
  void warn(const std::string& text);

  EnvOptions opt_;
  std::string name_;
  std::vector<std::unique_ptr<Worker>> workers_;
  mutable std::mutex episodes_mu_;  // lock order: a worker's mu, then episodes_mu_
  std::unordered_map<std::string, Episode> episodes_;
  std::atomic<int64_t> failures_{0}, restarts_{0}, logged_{0};
  std::mutex log_mu_;
};

// One line a worker answered, as the JSON object every reply is; throws temper::Error ("malformed reply to
// <what>: not JSON (...)" or "...: not a JSON object: ...") and the worker is then killed.
nlohmann::ordered_json parse_reply_line(const std::string& line, const char* what);

// The checks on a worker's replies (each throws temper::Error naming the field, e.g. "step reply: \"done\" must
// be true or false, got \"yes\""). A reply that is {"error": ...} is not checked here.
EnvReply parse_reset_reply(const nlohmann::ordered_json& reply);
EnvReply parse_step_reply(const nlohmann::ordered_json& reply);
EnvReply parse_run_reply(const nlohmann::ordered_json& reply);  // client mode: {"reward", ...}

}  // namespace temper::env

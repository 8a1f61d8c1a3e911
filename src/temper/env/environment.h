// Environments for multi-turn rollouts: reset(row) gives the first messages (and tool schemas), step(assistant
// message) gives observation messages, a per-turn reward and done. Built-ins run in process (calculator, guess);
// "program" runs worker processes in any language speaking JSON lines (program_environment.h, protocol 1,
// recipes/README.md "Environment programs"). The turn and token caps, tokens and the KV cache are the caller's.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace temper::env {

inline constexpr int kEnvProtocol = 1;

struct EnvReply {
  bool ok = true;  // false: the call failed (error says why); the episode is over
  std::string error;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // reset: the first messages (system/user);
                                                                      // step: observation messages (role tool or user)
  nlohmann::ordered_json tools;  // reset only: a list of OpenAI tool schemas, or null
  double reward = 0;             // step: this turn's reward (summed into the episode's return by the caller)
  bool done = false;             // step: the episode is over
  std::optional<bool> correct;   // optional: solved (metrics)
  std::vector<std::pair<std::string, double>> components;  // optional named metrics
  std::string info;
};

// Thread-safe: calls for different episodes may come from several threads at once (one episode's calls in order).
class Environment {
 public:
  virtual ~Environment() = default;
  virtual std::string name() const = 0;
  virtual void start() {}  // throws temper::Error when it cannot start
  // episode: a unique id string chosen by the caller; row: the dataset row (a JSON object; procedural envs get
  // {"index": i, "split": "train"|"eval", "seed": s}).
  virtual EnvReply reset(const std::string& episode, const nlohmann::ordered_json& row) = 0;
  // message: the assistant's turn as an OpenAI message {role: assistant, content, tool_calls?: [...]}, plus
  // "parse_errors": [..] when its tool calls were malformed (the env answers with an error observation).
  virtual EnvReply step(const std::string& episode, const nlohmann::ordered_json& message) = 0;
  virtual void close(const std::string& /*episode*/) {}  // frees the episode's state (always called once)
  // Client mode: the user's agent plays the whole episode against the OpenAI endpoint `endpoint` ({"base_url",
  // "api_key", "model"}) and the reply's reward is its return (done). Only programs run agents.
  virtual EnvReply run(const std::string& /*episode*/, const nlohmann::ordered_json& /*row*/,
                       const nlohmann::ordered_json& /*endpoint*/) {
    EnvReply r;
    r.ok = false;
    r.error = "env '" + name() + "' does not run agents (client mode needs kind = \"program\")";
    return r;
  }
  virtual int64_t failures() const { return 0; }         // episodes that failed (errors, lost to a worker restart)
  virtual int64_t restarts() const { return 0; }         // workers started again after a failure
};

struct EnvOptions {
  std::string kind;                  // "program" or a built-in name (environment_names())
  std::vector<std::string> program;  // kind "program": the worker's argv
  int64_t workers = 1;               // program: worker processes
  double timeout_s = 30;             // program: seconds for one call (reset, step, close)
  double start_timeout_s = 60;       // program: spawn to {"ready": true}
  std::vector<std::string> env;      // program: "KEY=value" for the workers
  nlohmann::ordered_json params = nlohmann::ordered_json::object();  // built-ins: their params; programs: sent in
                                                                     // the greeting ("name" names the env)
  void validate() const;  // throws temper::Error naming the field ("env.workers: ...")
};

std::unique_ptr<Environment> make_environment(const EnvOptions& opt);  // validates; names the bad field on error
std::vector<std::string> environment_names();                          // the built-ins: calculator, guess

// Reply checks shared by the program environment and tests: each throws temper::Error naming the field
// ("messages[1].content must be a string, got 3").
void check_messages(const nlohmann::ordered_json& messages, const std::string& what);
void check_tools(const nlohmann::ordered_json& tools, const std::string& what);

// Helpers for built-ins reading an assistant message.
struct ToolCall {
  std::string id;  // "" when the message gave none
  std::string name;
  nlohmann::ordered_json arguments;  // an object; null when the arguments were not a JSON object
  std::string arguments_error;       // why arguments is null
};
std::vector<ToolCall> message_tool_calls(const nlohmann::ordered_json& message);
std::string message_text(const nlohmann::ordered_json& message);  // content as text ("" for null)
std::vector<std::string> message_parse_errors(const nlohmann::ordered_json& message);
// The last number in text, normalised: thousands commas dropped ("1,234" -> "1234"), leading zeros and a zero
// fraction dropped ("007.00" -> "7"), "-0" -> "0"; std::nullopt when there is none. A number is
// `(?:(?<![A-Za-z0-9_])-)?[0-9]+(?:,[0-9]{3}(?![0-9]))*(?:\.[0-9]+)?`, matched left to right without overlap
// (python/temper_env.py's last_number is the same).
std::optional<std::string> last_number(std::string_view text);

// Shared by the procedural built-ins: the row's split ("train"/"eval", default train) and index (default 0), and
// the seed (the option's, else the row's "seed", else 0); a wrong type is an error naming the field.
struct RowDraw {
  uint64_t seed = 0, index = 0;
  bool eval = false;
};
RowDraw row_draw(const nlohmann::ordered_json& row, const std::optional<uint64_t>& seed_param, const char* env);

}  // namespace temper::env

// Fuzz harness: any bytes as one line an environment program's worker answers (protocol 1,
// env/program_environment.h): read as a reply (a JSON object, else temper::Error: the worker is killed), then
// checked as the reply to reset, step and run (each an EnvReply or temper::Error: the episode fails); as the
// greeting it must be accepted or refused with a reason.
#include <cstdint>
#include <string>

#include "temper/core/error.h"
#include "temper/env/program_environment.h"
#include "temper/reward/program_reward.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  (void)temper::reward::program_greeting_problem(line);
  nlohmann::ordered_json reply;
  try {
    reply = temper::env::parse_reply_line(line, "step");
  } catch (const temper::Error&) {
    return 0;
  }
  for (auto parse : {temper::env::parse_reset_reply, temper::env::parse_step_reply, temper::env::parse_run_reply}) {
    try {
      temper::env::EnvReply r = parse(reply);
      (void)r.messages.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      (void)r.tools.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    } catch (const temper::Error&) {
    }
  }
  return 0;
}

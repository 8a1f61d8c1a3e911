// Fuzz harness: any bytes as one line a reward program's worker answers (protocol 1, reward/program_reward.h):
// as the reply to a batch of 0..4 items it must give one ProgramScore per item or throw temper::Error (the
// batch then fails and the worker is restarted); as the greeting it must be accepted or refused with a reason.
#include <cstdint>
#include <string>

#include "temper/core/error.h"
#include "temper/reward/program_reward.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  for (size_t n = 0; n <= 4; ++n) {
    try {
      auto scores = temper::reward::parse_program_reply(line, n);
      if (scores.size() != n) __builtin_trap();
    } catch (const temper::Error&) {
    }
  }
  (void)temper::reward::program_greeting_problem(line);
  return 0;
}

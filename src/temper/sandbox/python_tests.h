// Python code against unit tests in the sandbox: one sandboxed /usr/bin/python3 (Debian's, never a user's
// pyenv) runs the code, then each test (a Python statement, usually an assert) in the code's namespace, and reports
// each test's outcome on the private channel (fd 3), every line tagged with a per-run random nonce the code never
// sees in its namespace. The code's own prints go to stdout, so printing cannot forge a pass; the harness keeps
// write, compile and exec as locals taken before the code runs, so rebinding os.write or builtins does not either.
// (Code that digs through the interpreter's frames could still reach the harness: the tests are a reward, the
// sandbox is the security boundary.) Tests after one that hangs or kills the process count as failed.
#pragma once

#include <string>
#include <vector>

#include "temper/sandbox/sandbox.h"

namespace temper::sandbox {

struct TestOutcome {
  int passed = 0, total = 0;
  bool loaded = false;     // the code compiled and ran to its end
  bool timed_out = false;  // the wall clock killed the run
  std::string error;       // the first reason something failed: the code's exception, a test's, a timeout, a signal
  std::string output;      // the program's stdout+stderr (capped)
  double wall_s = 0;
  double fraction() const { return total > 0 ? static_cast<double>(passed) / total : 0.0; }
  bool all_passed() const { return total > 0 && passed == total; }
};

constexpr const char* kSandboxPython = "/usr/bin/python3";

// Runs `code` then each of `tests` in one sandboxed interpreter. Throws (sandbox_run) only when the sandbox
// cannot be built; everything the code does is in the outcome.
TestOutcome run_python_tests(const std::string& code, const std::vector<std::string>& tests,
                             const SandboxLimits& limits = {});

// The outcome as the one JSON line of `temper sandbox`: {"passed":k,"total":n,"error":"...","timed_out":false}.
std::string test_outcome_json(const TestOutcome& o);

}  // namespace temper::sandbox

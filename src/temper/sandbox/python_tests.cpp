// run_python_tests: the harness (a fixed Python program passed with -c), the job file it reads and deletes
// before the code runs, and the parsing of its nonce-tagged report lines.
#include "temper/sandbox/python_tests.h"

#include <sys/random.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "temper/core/error.h"

namespace temper::sandbox {
namespace {

constexpr const char* kJobFile = ".temper_job.json";

// Report lines on fd 3: "<nonce> L 1" (the code ran to its end) or "<nonce> L 0 <hex error>";
// "<nonce> T <i> 1" or "<nonce> T <i> 0 <hex error>"; "<nonce> D" (all tests ran).
constexpr const char* kHarness = R"PY(
def _temper_harness():
    import os, json
    _write, _compile, _exec, _len, _type, _str, _bytes = os.write, compile, exec, len, type, str, bytes
    with open('/tmp/.temper_job.json', encoding='utf-8') as f:
        job = json.load(f)
    os.unlink('/tmp/.temper_job.json')
    tag = job['nonce'].encode('ascii') + b' '
    code, tests = job['code'], job['tests']
    del job
    def send(line):
        try:
            _write(3, tag + line + b'\n')
        except BaseException:
            pass
    def why(e, what):
        try:
            msg = _type(e).__name__ + ': ' + _str(e)
        except BaseException:
            msg = 'an exception'
        if msg.endswith(': '):
            msg = msg[:-2] + ' in ' + what
        return msg[:400].encode('utf-8', 'replace').hex().encode('ascii')
    ns = {'__name__': '__main__', '__builtins__': __builtins__}
    try:
        _exec(_compile(code, 'solution.py', 'exec'), ns)
    except BaseException as e:
        send(b'L 0 ' + why(e, 'the code'))
        return
    send(b'L 1')
    i = 0
    for t in tests:
        try:
            _exec(_compile(t, 'test_%d' % i, 'exec'), ns)
            send(b'T %d 1' % i)
        except BaseException as e:
            send(b'T %d 0 ' % i + why(e, t[:200]))
        i += 1
    send(b'D')
_temper_harness()
)PY";

std::string make_nonce() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof(b)) {
    ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
    TEMPER_CHECK(n > 0 || errno == EINTR) << "sandbox: getrandom: " << std::strerror(errno);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += kHex[c >> 4];
    s += kHex[c & 15];
  }
  return s;
}

std::string unhex(std::string_view h) {
  std::string s;
  auto val = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
  for (size_t i = 0; i + 1 < h.size(); i += 2) s += static_cast<char>(val(h[i]) * 16 + val(h[i + 1]));
  return s;
}

}  // namespace

TestOutcome run_python_tests(const std::string& code, const std::vector<std::string>& tests,
                             const SandboxLimits& limits) {
  TestOutcome o;
  o.total = static_cast<int>(tests.size());
  const std::string nonce = make_nonce();
  nlohmann::json job = {{"nonce", nonce}, {"code", code}, {"tests", tests}};
  SandboxRun run;
  run.argv = {kSandboxPython, "-s", "-B", "-c", kHarness};
  run.env = {"PATH=/usr/bin:/bin", "HOME=/tmp",        "TMPDIR=/tmp",
             "LANG=C.UTF-8",       "PYTHONHASHSEED=0", "PYTHONDONTWRITEBYTECODE=1"};
  run.files = {{kJobFile, job.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)}};
  SandboxResult r = sandbox_run(run, limits);
  o.output = std::move(r.output);
  o.timed_out = r.timed_out;
  o.wall_s = r.wall_s;

  const std::string tag = nonce + " ";
  std::set<int> passed;
  std::string first_error;
  bool done = false;
  size_t pos = 0;
  while (pos < r.channel.size()) {
    size_t nl = r.channel.find('\n', pos);
    if (nl == std::string::npos) break;  // an unfinished line counts for nothing
    std::string_view line(r.channel.data() + pos, nl - pos);
    pos = nl + 1;
    if (line.substr(0, tag.size()) != tag) continue;
    line.remove_prefix(tag.size());
    if (line.size() >= 3 && line[0] == 'L') {
      o.loaded = line[2] == '1';
      if (!o.loaded && first_error.empty()) first_error = unhex(line.size() > 4 ? line.substr(4) : "");
    } else if (line.size() >= 5 && line[0] == 'T' && o.loaded) {
      size_t sp = line.find(' ', 2);
      if (sp == std::string_view::npos || sp + 1 >= line.size()) continue;
      int i = std::atoi(std::string(line.substr(2, sp - 2)).c_str());
      if (i < 0 || i >= o.total) continue;
      if (line[sp + 1] == '1')
        passed.insert(i);
      else if (first_error.empty())
        first_error = "test " + std::to_string(i) + ": " + unhex(sp + 3 < line.size() ? line.substr(sp + 3) : "");
    } else if (line == "D") {
      done = true;
    }
  }
  o.passed = static_cast<int>(passed.size());
  if (!first_error.empty()) {
    o.error = first_error;
  } else if (o.timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "timed out after %g s", limits.wall_s);
    o.error = buf;
  } else if (r.signal != 0) {
    o.error = std::string("killed by signal ") + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")" +
              (r.signal == SIGXCPU || r.signal == SIGKILL ? ": CPU time limit?" : "");
  } else if (!done) {
    o.error = "the program exited (status " + std::to_string(r.exit_code) + ") before the tests finished";
  }
  if (o.timed_out && !first_error.empty()) o.error += " (then timed out)";
  if (!done && o.error.empty()) o.error = "the tests did not finish";
  return o;
}

std::string test_outcome_json(const TestOutcome& o) {
  nlohmann::json j = {{"passed", o.passed}, {"total", o.total}, {"error", o.error}, {"timed_out", o.timed_out}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace temper::sandbox

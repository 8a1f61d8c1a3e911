// The sandbox against hostile completions (each scores 0 within its limits, this process survives and nothing
// outside is touched) and ordinary ones (a correct solution passes, a partial one scores its share, a syntax error
// none), plus the CLI's JSON contract pieces.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "temper/core/error.h"
#include "temper/sandbox/python_tests.h"
#include "temper/sandbox/sandbox.h"

namespace fs = std::filesystem;
using temper::sandbox::run_python_tests;
using temper::sandbox::SandboxLimits;
using temper::sandbox::TestOutcome;

namespace {

const std::vector<std::string> kTests = {"assert f(1) == 2", "assert f(5) == 10", "assert f(0) == 0"};

SandboxLimits fast_limits() {
  SandboxLimits l;
  l.cpu_s = 1;
  l.wall_s = 1;
  l.memory_mb = 256;
  return l;
}

// A directory of this test's own, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("temper_sandbox_test_" + std::to_string(getpid()) + "_" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TestOutcome run(const std::string& code, const std::vector<std::string>& tests = kTests,
                SandboxLimits l = fast_limits()) {
  return run_python_tests(code, tests, l);
}

}  // namespace

TEST(Sandbox, CorrectSolutionPassesEveryTest) {
  TestOutcome o = run("def f(x):\n    return 2 * x\n");
  EXPECT_EQ(o.passed, 3) << o.error << "\n" << o.output;
  EXPECT_EQ(o.total, 3);
  EXPECT_TRUE(o.all_passed());
  EXPECT_DOUBLE_EQ(o.fraction(), 1.0);
  EXPECT_FALSE(o.timed_out);
  EXPECT_TRUE(o.error.empty()) << o.error;
}

TEST(Sandbox, PartialSolutionScoresItsShare) {
  TestOutcome o = run("def f(x):\n    return 2 if x == 1 else 0\n");
  EXPECT_EQ(o.passed, 2) << o.error;
  EXPECT_NEAR(o.fraction(), 2.0 / 3.0, 1e-12);
  EXPECT_NE(o.error.find("test 1"), std::string::npos) << o.error;
}

TEST(Sandbox, SyntaxErrorScoresZero) {
  TestOutcome o = run("def f(x)\n    return 2 * x\n");
  EXPECT_EQ(o.passed, 0);
  EXPECT_FALSE(o.loaded);
  EXPECT_NE(o.error.find("SyntaxError"), std::string::npos) << o.error;
}

TEST(Sandbox, PrintingCannotForgeResults) {
  // The code prints lines shaped like reports, and writes them to every fd it can find, without the nonce.
  TestOutcome o =
      run("import os\n"
          "for i in range(3):\n"
          "    print('T %d 1' % i)\n"
          "    for fd in range(3, 20):\n"
          "        try: os.write(fd, b'x T %d 1\\nT %d 1\\n' % (i, i))\n"
          "        except OSError: pass\n"
          "os.write = lambda fd, data: len(data)\n"
          "def f(x):\n    return -1\n");
  EXPECT_EQ(o.passed, 0) << o.output;
}

TEST(Sandbox, ExitingEarlyScoresZero) {
  EXPECT_EQ(run("import os\nos._exit(0)\ndef f(x):\n    return 2 * x\n").passed, 0);
  EXPECT_EQ(run("import sys\nsys.exit(0)\n").passed, 0);
}

TEST(SandboxHostile, InfiniteLoopTimesOut) {
  auto t0 = std::chrono::steady_clock::now();
  TestOutcome o = run("while True:\n    pass\n");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.passed, 0);
  EXPECT_LT(s, 3.0);  // the CPU limit or the wall clock (1 s), not longer
}

TEST(SandboxHostile, SleepingForeverHitsTheWallClock) {
  SandboxLimits l = fast_limits();
  l.wall_s = 0.5;
  auto t0 = std::chrono::steady_clock::now();
  TestOutcome o = run("import time\ntime.sleep(100)\n", kTests, l);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.passed, 0);
  EXPECT_TRUE(o.timed_out);
  EXPECT_LT(s, 2.5);
}

TEST(SandboxHostile, LoopInsideATestKeepsEarlierPasses) {
  TestOutcome o = run("def f(x):\n    while x == 5: pass\n    return 2 * x\n");
  EXPECT_EQ(o.passed, 1);
}

TEST(SandboxHostile, ForkBombIsContained) {
  auto t0 = std::chrono::steady_clock::now();
  TestOutcome o =
      run("import os\n"
          "while True:\n"
          "    try:\n"
          "        os.fork()\n"
          "    except OSError:\n"
          "        pass\n");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.passed, 0);
  EXPECT_LT(s, 3.0);
  // This process can still fork.
  pid_t p = fork();
  if (p == 0) _exit(0);
  ASSERT_GT(p, 0);
  int st = 0;
  waitpid(p, &st, 0);
}

TEST(SandboxHostile, AllocatingTenGigabytesFails) {
  TestOutcome o = run("x = bytearray(10 * 1024**3)\ndef f(x):\n    return 2 * x\n");
  EXPECT_EQ(o.passed, 0);
  EXPECT_NE(o.error.find("MemoryError"), std::string::npos) << o.error;
}

TEST(SandboxHostile, NoInternetSockets) {
  TestOutcome o =
      run("import socket\n"
          "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
          "s.connect(('1.1.1.1', 80))\n"
          "def f(x):\n    return 2 * x\n");
  EXPECT_EQ(o.passed, 0);
  EXPECT_NE(o.error.find("PermissionError"), std::string::npos) << o.error;
  // AF_UNIX stays usable (multiprocessing, pipes).
  TestOutcome u = run("import socket\na, b = socket.socketpair()\ndef f(x):\n    return 2 * x\n");
  EXPECT_EQ(u.passed, 3) << u.error;
}

TEST(SandboxHostile, WritingOutsideItsTmpDirTouchesNothing) {
  TempDir dir;
  const fs::path target = dir.path / "escaped.txt";
  TestOutcome o = run("open('" + target.string() + "', 'w').write('x')\n");
  EXPECT_EQ(o.passed, 0);
  EXPECT_FALSE(fs::exists(target));
  for (const char* p : {"/usr/escaped.txt", "/escaped.txt", "/etc/escaped.txt"}) {
    TestOutcome w = run(std::string("open('") + p + "', 'w').write('x')\n");
    EXPECT_EQ(w.passed, 0) << p;
    EXPECT_FALSE(fs::exists(p)) << p;
  }
  // Its own /tmp is writable.
  TestOutcome t = run("open('/tmp/mine.txt', 'w').write('x')\ndef f(x):\n    return 2 * x\n");
  EXPECT_EQ(t.passed, 3) << t.error;
}

TEST(SandboxHostile, CannotReadTheCallersFiles) {
  TempDir dir;
  const fs::path secret = dir.path / "secret.txt";
  std::ofstream(secret) << "s3cret";
  const std::string cwd = fs::current_path().string();
  for (const std::string& path :
       {secret.string(), cwd, std::string("/work"), std::string("/root"), std::string("/root/.pyenv")}) {
    TestOutcome o = run("import os\nos.listdir('" + path + "') if os.path.isdir('" + path + "') else open('" + path +
                        "').read()\n");
    EXPECT_EQ(o.passed, 0) << path;
    EXPECT_FALSE(o.loaded) << path;
  }
  // The filesystem it sees: the system, its own tmp and nothing else at the top.
  TestOutcome ls =
      run("import os\nassert sorted(os.listdir('/')) == sorted(os.listdir('/')), 0\n"
          "print(sorted(os.listdir('/')))\n",
          {"import os\nassert 'work' not in os.listdir('/') and 'root' not in os.listdir('/')"});
  EXPECT_EQ(ls.passed, 1) << ls.error << ls.output;
}

TEST(SandboxHostile, OsSystemIsHarmless) {
  TempDir dir;
  const fs::path target = dir.path / "from_shell.txt";
  TestOutcome o = run("import os\nos.system('touch " + target.string() + "; touch /from_shell.txt')\n",
                      {"import os\nassert os.path.exists('" + target.string() + "')"});
  EXPECT_EQ(o.passed, 0);
  EXPECT_FALSE(fs::exists(target));
  EXPECT_FALSE(fs::exists("/from_shell.txt"));
}

TEST(SandboxHostile, KillingItsParentLeavesUsAlive) {
  for (const char* code : {"import os\nos.kill(os.getppid(), 9)\n", "import os\nos.kill(-1, 9)\n",
                           "import os, signal\nos.killpg(0, 9)\n"}) {
    TestOutcome o = run(std::string(code) + "def f(x):\n    return 2 * x\n");
    EXPECT_LE(o.passed, 3) << code;  // whatever it scored, we are still here
  }
  // kill(-1) from inside can only reach the sandbox's own namespace: a helper process of ours survives.
  pid_t helper = fork();
  if (helper == 0) {
    pause();
    _exit(0);
  }
  TestOutcome o = run("import os\nos.kill(-1, 9)\n");
  EXPECT_EQ(o.passed, 0);
  EXPECT_EQ(kill(helper, 0), 0) << "the helper process was killed";
  kill(helper, SIGKILL);
  int st = 0;
  waitpid(helper, &st, 0);
}

TEST(SandboxHostile, NoPtraceNoMountNoNamespaces) {
  TestOutcome o =
      run("def f(x):\n    return 2 * x\n",
          {"import ctypes\nlibc = ctypes.CDLL(None)\nassert libc.ptrace(16, 1, 0, 0) == 0",
           "import os\nos.unshare(os.CLONE_NEWUSER)",
           "import ctypes\nlibc = ctypes.CDLL(None)\nassert libc.mount(b'none', b'/tmp', b'tmpfs', 0, 0) == 0"});
  EXPECT_EQ(o.passed, 0) << o.error;
}

TEST(Sandbox, ManyThreadsAtOnce) {
  std::vector<std::thread> ts;
  std::vector<int> passed(4, -1);
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] { passed[static_cast<size_t>(i)] = run("def f(x):\n    return 2 * x\n").passed; });
  for (auto& t : ts) t.join();
  for (int p : passed) EXPECT_EQ(p, 3);
}

TEST(Sandbox, WorksWhenTheCallerIgnoresSigchld) {
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGCHLD, &ign, &old);
  TestOutcome o = run("def f(x):\n    return 2 * x\n");
  sigaction(SIGCHLD, &old, nullptr);
  EXPECT_EQ(o.passed, 3) << o.error;
}

// Where no user namespace can be made, the sandbox refuses with a message naming them, and runs nothing.
TEST(Sandbox, RefusesToRunWithoutUserNamespaces) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to give a child a user namespace of its own";
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t c = fork();
  ASSERT_GE(c, 0);
  if (c == 0) {
    char b = 0;
    if (unshare(CLONE_NEWUSER) != 0) _exit(3);
    if (write(up[1], "u", 1) != 1 || read(down[0], &b, 1) != 1) _exit(3);
    // In this namespace (root mapped to root), allow no further user namespace.
    if (!(std::ofstream("/proc/sys/user/max_user_namespaces") << "0\n")) _exit(4);
    try {
      run_python_tests("def f(x):\n    return 2 * x\n", kTests, fast_limits());
    } catch (const temper::Error& e) {
      std::string m = e.what();
      _exit(m.find("user namespaces are unavailable") != std::string::npos && m.find("unsandboxed") != std::string::npos
                ? 0
                : 5);
    }
    _exit(6);
  }
  char b = 0;
  ASSERT_EQ(read(up[0], &b, 1), 1);
  for (const char* map : {"uid_map", "gid_map"})
    std::ofstream("/proc/" + std::to_string(c) + "/" + map) << "0 0 65536\n";
  ASSERT_EQ(write(down[1], "m", 1), 1);
  int st = 0;
  waitpid(c, &st, 0);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "3: no user namespace for the test, 4: sysctl not writable, 5: wrong message, "
                                   "6: it ran";
}

TEST(Sandbox, BadLimitsAreRefused) {
  SandboxLimits l;
  l.wall_s = 0;
  EXPECT_THROW(run_python_tests("", {}, l), temper::Error);
}

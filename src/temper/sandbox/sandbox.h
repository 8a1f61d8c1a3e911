// The sandbox: runs one program from the read-only system (Debian's /usr/bin/python3 for code rewards) isolated
// from the machine: new user, PID, mount, network, IPC, UTS and cgroup namespaces (no network at all), a fresh tmpfs
// as its only writable directory, a read-only /usr and nothing of the caller's files, a seccomp filter (libseccomp:
// no sockets but AF_UNIX, no ptrace, mount, keyctl, bpf, namespaces, ...), rlimits (CPU, address space, processes,
// file size, open files) and a wall-clock timeout that kills the whole PID namespace. When a namespace or mount it
// needs is refused, it throws naming what is missing: it never runs anything unsandboxed. No cgroups (memory is
// bounded per process by the address-space limit). Thread-safe: every call builds its own sandbox.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::sandbox {

struct SandboxLimits {
  double cpu_s = 2;         // CPU seconds per process (RLIMIT_CPU, rounded up to whole seconds)
  double wall_s = 5;        // wall clock for the whole run; then SIGKILL to the PID namespace
  int64_t memory_mb = 512;  // address space per process (RLIMIT_AS)
  int64_t max_procs = 16;   // processes and threads in the sandbox (RLIMIT_NPROC, counted per user namespace)
  int64_t file_mb = 16;     // largest file (RLIMIT_FSIZE) and size of the writable tmpfs
  int64_t open_files = 64;  // RLIMIT_NOFILE
  int64_t output_kb = 64;   // stdout+stderr kept (the rest is read and dropped)
  void validate() const;    // throws naming the field, its range and the value
};

// A file written into the sandbox's working directory (/tmp inside) before the program starts; `name` is a plain
// file name (no '/').
struct SandboxFile {
  std::string name, content;
};

struct SandboxRun {
  std::vector<std::string> argv;  // argv[0]: an absolute path inside the read-only system, e.g. /usr/bin/python3
  std::vector<std::string> env;   // "KEY=value"; nothing of the caller's environment is passed
  std::vector<SandboxFile> files;
};

struct SandboxResult {
  int exit_code = -1;      // the program's exit status, -1 when killed by a signal
  int signal = 0;          // the signal that killed it (SIGKILL after the wall timeout or RLIMIT_CPU's hard limit)
  bool timed_out = false;  // killed at wall_s
  std::string output;      // stdout and stderr interleaved, at most output_kb
  bool output_truncated = false;
  std::string channel;  // what the program wrote to fd 3 (a private channel: a pipe to this process), at most 1 MiB
  double wall_s = 0;
};

// Runs `run` in a fresh sandbox. Throws temper::Error when the sandbox cannot be built (user namespaces disabled,
// a refused mount, no seccomp), naming the step and the error; the program's own failures are in the result.
SandboxResult sandbox_run(const SandboxRun& run, const SandboxLimits& limits);

// Builds a sandbox once running /usr/bin/true (or the given program) and throws as sandbox_run does when it cannot:
// a task that needs the sandbox checks this at start, before any step.
void sandbox_check(const std::string& program = "/usr/bin/true");

}  // namespace temper::sandbox

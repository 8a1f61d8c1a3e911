// sandbox_run: fork an "outer" child that drops to an unprivileged uid (when root), unshares every namespace, maps
// its uid and sets the rlimits; it forks "init" (PID 1 of the new PID namespace), which builds the new root (a
// tmpfs with a read-only bind of /usr, the host's /bin /lib* symlinks, /dev/{null,zero,urandom}, a fresh /proc,
// a minimal /etc and the writable tmpfs at /tmp), pivots into it, installs the seccomp filter and execs the
// program. The outer child enforces the wall clock (SIGKILL to init tears the namespace down) and reports the
// program's wait status on a private pipe. Between fork and exec only async-signal-safe calls are made: every
// string, path and the BPF program are prepared in the parent, so any thread may call this.
#include "temper/sandbox/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>

#include "temper/core/error.h"

namespace temper::sandbox {
namespace {

constexpr uid_t kSandboxHostUid = 65534;  // the host uid sandboxed processes run as when the caller is root
constexpr uid_t kInsideUid = 1000;        // the uid they see (unprivileged inside too: exec drops all capabilities)
constexpr const char* kRoot = "/tmp";     // where the new root is assembled (a mount over it, in our namespace only)
constexpr size_t kChannelCap = 1 << 20;
constexpr int kSetupFailed = 126;

// ---- seccomp: built once with libseccomp, exported as a BPF program ------------------------------------------

struct SeccompProgram {
  std::vector<sock_filter> code;
  std::string error;  // non-empty: could not be built
};

const SeccompProgram& seccomp_program() {
  static const SeccompProgram prog = [] {
    SeccompProgram p;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
      p.error = "seccomp_init failed";
      return p;
    }
    int rc = 0;
    auto deny = [&](int nr) {
      if (nr < 0) return;  // a syscall this architecture lacks
      if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    };
    // Sockets: only AF_UNIX (no network family, no netlink, no packet sockets).
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    if (rc == 0)
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    // New namespaces through clone's flags; clone3 (flags in memory, not filterable) answers ENOSYS so libc falls
    // back to clone.
    for (uint64_t flag :
         {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP}) {
      if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    }
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    for (int nr : {SCMP_SYS(ptrace),
                   SCMP_SYS(process_vm_readv),
                   SCMP_SYS(process_vm_writev),
                   SCMP_SYS(mount),
                   SCMP_SYS(umount2),
                   SCMP_SYS(pivot_root),
                   SCMP_SYS(chroot),
                   SCMP_SYS(unshare),
                   SCMP_SYS(setns),
                   SCMP_SYS(keyctl),
                   SCMP_SYS(add_key),
                   SCMP_SYS(request_key),
                   SCMP_SYS(bpf),
                   SCMP_SYS(perf_event_open),
                   SCMP_SYS(kexec_load),
                   SCMP_SYS(kexec_file_load),
                   SCMP_SYS(init_module),
                   SCMP_SYS(finit_module),
                   SCMP_SYS(delete_module),
                   SCMP_SYS(reboot),
                   SCMP_SYS(swapon),
                   SCMP_SYS(swapoff),
                   SCMP_SYS(acct),
                   SCMP_SYS(quotactl),
                   SCMP_SYS(syslog),
                   SCMP_SYS(open_by_handle_at),
                   SCMP_SYS(name_to_handle_at),
                   SCMP_SYS(iopl),
                   SCMP_SYS(ioperm),
                   SCMP_SYS(userfaultfd),
                   SCMP_SYS(fanotify_init),
                   SCMP_SYS(lookup_dcookie),
                   SCMP_SYS(settimeofday),
                   SCMP_SYS(clock_settime),
                   SCMP_SYS(clock_adjtime),
                   SCMP_SYS(adjtimex),
                   SCMP_SYS(vhangup),
                   SCMP_SYS(io_uring_setup),
                   SCMP_SYS(io_uring_enter),
                   SCMP_SYS(io_uring_register),
                   SCMP_SYS(open_tree),
                   SCMP_SYS(move_mount),
                   SCMP_SYS(fsopen),
                   SCMP_SYS(fsconfig),
                   SCMP_SYS(fsmount),
                   SCMP_SYS(fspick),
                   SCMP_SYS(mount_setattr),
                   SCMP_SYS(kcmp),
                   SCMP_SYS(personality)})
      deny(nr);
    if (rc != 0) {
      p.error = std::string("seccomp_rule_add: ") + std::strerror(-rc);
      seccomp_release(ctx);
      return p;
    }
    int fd = memfd_create("temper-seccomp", MFD_CLOEXEC);
    if (fd < 0 || (rc = seccomp_export_bpf(ctx, fd)) != 0) {
      p.error = std::string("seccomp_export_bpf: ") + std::strerror(fd < 0 ? errno : -rc);
    } else {
      off_t n = lseek(fd, 0, SEEK_END);
      p.code.resize(static_cast<size_t>(n) / sizeof(sock_filter));
      if (pread(fd, p.code.data(), p.code.size() * sizeof(sock_filter), 0) != static_cast<ssize_t>(n))
        p.error = "seccomp: could not read the exported filter";
    }
    if (fd >= 0) close(fd);
    seccomp_release(ctx);
    return p;
  }();
  return prog;
}

// ---- What the children need, prepared in the parent ---------------------------------------------------------

struct HostLink {
  std::string path;    // kRoot + "/bin"
  std::string target;  // "usr/bin" (a symlink on the host) or empty: bind the directory read-only
  std::string source;  // "/bin"
};

struct Plan {
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;
  std::string uid_map, gid_map;
  uid_t host_uid = 0;
  gid_t host_gid = 0;
  bool drop_root = false;
  rlimit cpu{}, as{}, nproc{}, fsize{}, nofile{}, core{};
  int64_t wall_ms = 0;
  std::string root_usr, root_etc, root_proc, root_dev, root_tmp, passwd_path, group_path;
  std::string passwd, group;
  std::vector<HostLink> links;
  std::vector<std::pair<std::string, std::string>> devs;  // host device, its mount point in the new root
  std::string root_opts, tmp_opts;
  std::vector<std::pair<std::string, std::string>> files;  // path in the new root, content
  sock_fprog prog{};
};

// ---- Async-signal-safe helpers for the children -------------------------------------------------------------

void put(int fd, const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;
    }
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void put_int(int fd, long long v) {
  char buf[24];
  int i = 23;
  buf[i] = 0;
  bool neg = v < 0;
  unsigned long long u = neg ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u && i > 1);
  if (neg) buf[--i] = '-';
  put(fd, buf + i);
}

constexpr int kInfoFd = 4;

// Reports "E<step> <path>|<errno>\n" on the info pipe and exits.
[[noreturn]] void die(const char* step, const char* path = "") {
  int e = errno;
  put(kInfoFd, "E");
  put(kInfoFd, step);
  if (*path) {
    put(kInfoFd, " ");
    put(kInfoFd, path);
  }
  put(kInfoFd, "|");
  put_int(kInfoFd, e);
  put(kInfoFd, "\n");
  _exit(kSetupFailed);
}

bool write_file(const char* path, const char* data, size_t n, int mode = 0644) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close(fd);
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return close(fd) == 0;
}

void close_from(int lo) {
  if (syscall(SYS_close_range, static_cast<unsigned>(lo), ~0u, 0) == 0) return;
  rlimit r{};
  long hi = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? static_cast<long>(r.rlim_cur) : 65536;
  for (long fd = lo; fd < hi; ++fd) close(static_cast<int>(fd));
}

// Remounts a bind mount read-only, keeping the flags a user namespace may not clear (nosuid, nodev, noexec, atime).
void remount_ro(const char* path) {
  struct statvfs sv {};
  if (statvfs(path, &sv) != 0) die("statvfs", path);
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  if (mount(nullptr, path, nullptr, flags, nullptr) != 0) die("remount read-only", path);
}

// PID 1 of the new namespaces: builds the root, pivots into it, execs the program. Never returns.
[[noreturn]] void init_main(const Plan& p) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die("make mounts private");
  if (mount("tmpfs", kRoot, "tmpfs", MS_NOSUID | MS_NODEV, p.root_opts.c_str()) != 0) die("mount tmpfs root", kRoot);
  for (const std::string* d : {&p.root_usr, &p.root_etc, &p.root_proc, &p.root_dev, &p.root_tmp})
    if (mkdir(d->c_str(), 0755) != 0) die("mkdir", d->c_str());
  if (mount("/usr", p.root_usr.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) die("bind /usr");
  remount_ro(p.root_usr.c_str());
  for (const HostLink& l : p.links) {
    if (!l.target.empty()) {
      if (symlink(l.target.c_str(), l.path.c_str()) != 0) die("symlink", l.path.c_str());
    } else {
      if (mkdir(l.path.c_str(), 0755) != 0) die("mkdir", l.path.c_str());
      if (mount(l.source.c_str(), l.path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        die("bind", l.source.c_str());
      remount_ro(l.path.c_str());
    }
  }
  for (const auto& [host, at] : p.devs) {
    if (!write_file(at.c_str(), "", 0)) die("create", at.c_str());
    if (mount(host.c_str(), at.c_str(), nullptr, MS_BIND, nullptr) != 0) die("bind", host.c_str());
  }
  if (!write_file(p.passwd_path.c_str(), p.passwd.data(), p.passwd.size()) ||
      !write_file(p.group_path.c_str(), p.group.data(), p.group.size()))
    die("write /etc");
  // A fresh /proc shows only this namespace's processes; where a container forbids it, the sandbox has none.
  mount("proc", p.root_proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  if (mount("tmpfs", p.root_tmp.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, p.tmp_opts.c_str()) != 0)
    die("mount tmpfs", "/tmp");
  for (const auto& [path, content] : p.files)
    if (!write_file(path.c_str(), content.data(), content.size(), 0600)) die("write", path.c_str());
  if (chdir(kRoot) != 0) die("chdir", kRoot);
  if (syscall(SYS_pivot_root, ".", ".") != 0) die("pivot_root");
  if (umount2(".", MNT_DETACH) != 0) die("detach the old root");
  if (chdir("/") != 0) die("chdir /");
  if (mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    die("remount / read-only");
  if (chdir("/tmp") != 0) die("chdir /tmp");
  sethostname("sandbox", 7);
  setsid();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  close_from(kInfoFd + 1);
  fcntl(kInfoFd, F_SETFD, FD_CLOEXEC);  // open until exec succeeds: a failed exec is still reported
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p.prog) != 0) die("seccomp filter");
  execve(p.argv[0], p.argv.data(), p.envp.data());
  die("exec", p.argv[0]);
}

// The outer child: namespaces, uid map, rlimits, then init; enforces the wall clock and reports init's status.
[[noreturn]] void outer_main(const Plan& p, int out_w, int res_w, int info_w) {
  // fds: 0 /dev/null, 1 and 2 the output pipe, 3 the private channel, 4 the info pipe; nothing else survives.
  int o = fcntl(out_w, F_DUPFD, 10), r = fcntl(res_w, F_DUPFD, 10), i = fcntl(info_w, F_DUPFD, 10);
  int null = open("/dev/null", O_RDONLY);
  if (o < 0 || r < 0 || i < 0 || null < 0) _exit(kSetupFailed);
  if (dup2(null, 0) < 0 || dup2(o, 1) < 0 || dup2(o, 2) < 0 || dup2(r, 3) < 0 || dup2(i, kInfoFd) < 0)
    _exit(kSetupFailed);
  close_from(kInfoFd + 1);
  setsid();
  if (p.drop_root) {
    if (setgroups(0, nullptr) != 0 && getgroups(0, nullptr) != 0) die("setgroups");  // denied here, and needed
    if (setresgid(p.host_gid, p.host_gid, p.host_gid) != 0) die("setresgid");
    if (setresuid(p.host_uid, p.host_uid, p.host_uid) != 0) die("setresuid");
    prctl(PR_SET_DUMPABLE, 1);  // so /proc/self/uid_map stays ours after the uid change
  }
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
              CLONE_NEWCGROUP) != 0)
    die("unshare(user, mount, pid, net, ipc, uts, cgroup namespaces)");
  if (!write_file("/proc/self/setgroups", "deny", 4)) die("write", "/proc/self/setgroups");
  if (!write_file("/proc/self/uid_map", p.uid_map.data(), p.uid_map.size())) die("write", "/proc/self/uid_map");
  if (!write_file("/proc/self/gid_map", p.gid_map.data(), p.gid_map.size())) die("write", "/proc/self/gid_map");
  // After unshare: RLIMIT_NPROC counts the processes of this user namespace only.
  const std::pair<int, const rlimit*> limits[] = {{RLIMIT_CPU, &p.cpu},       {RLIMIT_AS, &p.as},
                                                  {RLIMIT_NPROC, &p.nproc},   {RLIMIT_FSIZE, &p.fsize},
                                                  {RLIMIT_NOFILE, &p.nofile}, {RLIMIT_CORE, &p.core}};
  for (const auto& [res, lim] : limits)
    if (setrlimit(res, lim) != 0) die("setrlimit");
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, nullptr);  // a caller that ignores SIGCHLD would have init reaped behind our back
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  pid_t init = fork();
  if (init < 0) die("fork init");
  if (init == 0) init_main(p);
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(init, &status, WNOHANG);
    if (w == init) break;
    if (w < 0 && errno != EINTR) _exit(kSetupFailed);
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (elapsed >= p.wall_ms) {
      kill(init, SIGKILL);  // PID 1 gone: the kernel kills every process of the namespace
      put(kInfoFd, "T\n");
      while (waitpid(init, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    int64_t left = p.wall_ms - elapsed;
    timespec ts{static_cast<time_t>(left / 1000), static_cast<long>(left % 1000) * 1000000};
    sigtimedwait(&chld, nullptr, &ts);
  }
  put(kInfoFd, "X");
  put_int(kInfoFd, status);
  put(kInfoFd, "\n");
  _exit(0);
}

rlimit both(rlim_t v) {
  return rlimit{v, v};
}

std::string mib_opts(int64_t mb, int64_t inodes, const char* mode) {
  return "size=" + std::to_string(mb) + "m,nr_inodes=" + std::to_string(inodes) + ",mode=" + mode;
}

Plan make_plan(const SandboxRun& run, const SandboxLimits& lim) {
  Plan p;
  TEMPER_CHECK(!run.argv.empty() && !run.argv[0].empty() && run.argv[0][0] == '/')
      << "sandbox: argv[0] must be an absolute path inside the read-only system, got '"
      << (run.argv.empty() ? "" : run.argv[0]) << "'";
  const SeccompProgram& sp = seccomp_program();
  TEMPER_CHECK(sp.error.empty()) << "sandbox: cannot build the seccomp filter (libseccomp): " << sp.error;
  p.prog.len = static_cast<unsigned short>(sp.code.size());
  p.prog.filter = const_cast<sock_filter*>(sp.code.data());
  p.argv_s = run.argv;
  p.env_s = run.env;
  for (auto& s : p.argv_s) p.argv.push_back(s.data());
  p.argv.push_back(nullptr);
  for (auto& s : p.env_s) p.envp.push_back(s.data());
  p.envp.push_back(nullptr);
  p.drop_root = geteuid() == 0;
  p.host_uid = p.drop_root ? kSandboxHostUid : geteuid();
  p.host_gid = p.drop_root ? kSandboxHostUid : getegid();
  p.uid_map = std::to_string(kInsideUid) + " " + std::to_string(p.host_uid) + " 1\n";
  p.gid_map = std::to_string(kInsideUid) + " " + std::to_string(p.host_gid) + " 1\n";
  p.cpu = rlimit{static_cast<rlim_t>(std::ceil(lim.cpu_s)), static_cast<rlim_t>(std::ceil(lim.cpu_s)) + 1};
  p.as = both(static_cast<rlim_t>(lim.memory_mb) << 20);
  p.nproc = both(static_cast<rlim_t>(lim.max_procs + 1));  // + the outer child, which is in the namespace too
  p.fsize = both(static_cast<rlim_t>(lim.file_mb) << 20);
  p.nofile = both(static_cast<rlim_t>(lim.open_files));
  p.core = both(0);
  p.wall_ms = static_cast<int64_t>(std::ceil(lim.wall_s * 1000));
  const std::string root = kRoot;
  p.root_usr = root + "/usr";
  p.root_etc = root + "/etc";
  p.root_proc = root + "/proc";
  p.root_dev = root + "/dev";
  p.root_tmp = root + "/tmp";
  p.passwd_path = root + "/etc/passwd";
  p.group_path = root + "/etc/group";
  p.passwd = "sandbox:x:" + std::to_string(kInsideUid) + ":" + std::to_string(kInsideUid) + "::/tmp:/bin/sh\n";
  p.group = "sandbox:x:" + std::to_string(kInsideUid) + ":\n";
  for (const char* d : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    std::string host = std::string("/") + d;
    struct stat st {};
    if (lstat(host.c_str(), &st) != 0) continue;
    HostLink l{root + host, "", host};
    if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      ssize_t n = readlink(host.c_str(), buf, sizeof(buf) - 1);
      if (n <= 0) continue;
      l.target.assign(buf, static_cast<size_t>(n));
    } else if (!S_ISDIR(st.st_mode)) {
      continue;
    }
    p.links.push_back(std::move(l));
  }
  for (const char* d : {"null", "zero", "urandom", "random"})
    p.devs.emplace_back(std::string("/dev/") + d, root + "/dev/" + d);
  p.root_opts = mib_opts(1, 256, "0755");
  p.tmp_opts = mib_opts(lim.file_mb, 4096, "0700");
  for (const SandboxFile& f : run.files) {
    TEMPER_CHECK(!f.name.empty() && f.name.find('/') == std::string::npos && f.name != "." && f.name != "..")
        << "sandbox: file names must be plain names, got '" << f.name << "'";
    p.files.emplace_back(p.root_tmp + "/" + f.name, f.content);
  }
  return p;
}

std::string setup_error(const std::string& line) {
  // "E<step>|<errno>"
  size_t bar = line.rfind('|');
  std::string step = line.substr(1, bar == std::string::npos ? std::string::npos : bar - 1);
  int e = bar == std::string::npos ? 0 : std::atoi(line.c_str() + bar + 1);
  std::string msg = "sandbox: cannot build the sandbox: " + step + " failed: " + std::strerror(e);
  if (step == "setgroups" || step == "setresgid" || step == "setresuid")
    msg += " (running as root, the sandbox first drops to the unprivileged uid and gid " +
           std::to_string(kSandboxHostUid) +
           "; in a user namespace that does not map them, run temper as a non-root user or map them; temper never "
           "runs code unsandboxed)";
  else if (step.rfind("unshare", 0) == 0 || step.find("uid_map") != std::string::npos ||
           step.find("gid_map") != std::string::npos)
    msg +=
        " (Linux user namespaces are unavailable here: enable them (sysctl user.max_user_namespaces > 0, "
        "kernel.unprivileged_userns_clone = 1, or a container run with a seccomp profile that allows unshare); "
        "temper never runs code unsandboxed)";
  else if (step.rfind("mount", 0) == 0 || step.find("bind") != std::string::npos ||
           step.find("remount") != std::string::npos || step == "pivot_root")
    msg += " (mounts inside a user namespace are refused here; temper never runs code unsandboxed)";
  return msg;
}

}  // namespace

void SandboxLimits::validate() const {
  auto check = [](const char* key, double v, double lo, double hi) {
    TEMPER_CHECK(std::isfinite(v) && v >= lo && v <= hi)
        << "sandbox limits: " << key << ": expected a number in [" << lo << ", " << hi << "], got " << v;
  };
  check("cpu_s", cpu_s, 0.01, 3600);
  check("wall_s", wall_s, 0.01, 3600);
  check("memory_mb", static_cast<double>(memory_mb), 16, 1 << 20);
  check("max_procs", static_cast<double>(max_procs), 1, 4096);
  check("file_mb", static_cast<double>(file_mb), 1, 1 << 16);
  check("open_files", static_cast<double>(open_files), 8, 1 << 16);
  check("output_kb", static_cast<double>(output_kb), 1, 1 << 20);
}

SandboxResult sandbox_run(const SandboxRun& run, const SandboxLimits& limits) {
  limits.validate();
  const Plan plan = make_plan(run, limits);
  const auto t0 = std::chrono::steady_clock::now();
  int out[2], res[2], info[2];
  TEMPER_CHECK(pipe2(out, O_CLOEXEC) == 0) << "sandbox: pipe: " << std::strerror(errno);
  if (pipe2(res, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]);
    TEMPER_FAIL() << "sandbox: pipe: " << std::strerror(errno);
  }
  if (pipe2(info, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]), close(res[0]), close(res[1]);
    TEMPER_FAIL() << "sandbox: pipe: " << std::strerror(errno);
  }
  pid_t outer = fork();
  if (outer == 0) outer_main(plan, out[1], res[1], info[1]);
  const int fork_errno = errno;
  close(out[1]), close(res[1]), close(info[1]);
  if (outer < 0) {
    close(out[0]), close(res[0]), close(info[0]);
    TEMPER_FAIL() << "sandbox: fork: " << std::strerror(fork_errno);
  }

  SandboxResult r;
  std::string info_text;
  const size_t out_cap = static_cast<size_t>(limits.output_kb) << 10;
  // A safety net beyond the outer child's own clock (setup, a stuck outer child): kill it, init follows.
  const auto deadline = t0 + std::chrono::milliseconds(plan.wall_ms + 5000);
  bool killed = false;
  pollfd fds[3] = {{out[0], POLLIN, 0}, {res[0], POLLIN, 0}, {info[0], POLLIN, 0}};
  int open_fds = 3;
  char buf[65536];
  while (open_fds > 0) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline && !killed) {
      kill(outer, SIGKILL);
      killed = true;
      r.timed_out = true;
    }
    int wait_ms =
        killed ? 1000
               : static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1);
    int n = poll(fds, 3, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && killed) break;  // nothing more after the kill: give up on the pipes
    for (int k = 0; k < 3; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[k].fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = k == 0 ? r.output : k == 1 ? r.channel : info_text;
      size_t cap = k == 0 ? out_cap : kChannelCap;
      size_t take = std::min(static_cast<size_t>(got), cap > dst.size() ? cap - dst.size() : 0);
      dst.append(buf, take);
      if (k == 0 && take < static_cast<size_t>(got)) r.output_truncated = true;
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int st = 0;
  while (waitpid(outer, &st, 0) < 0 && errno == EINTR) {
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  size_t pos = 0;
  bool have_status = false;
  while (pos < info_text.size()) {
    size_t nl = info_text.find('\n', pos);
    std::string line = info_text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? info_text.size() : nl + 1;
    if (line.empty()) continue;
    if (line[0] == 'E') TEMPER_FAIL() << setup_error(line);
    if (line[0] == 'T') r.timed_out = true;
    if (line[0] == 'X') {
      int status = std::atoi(line.c_str() + 1);
      have_status = true;
      if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        r.signal = WTERMSIG(status);
      }
    }
  }
  if (!have_status) {
    TEMPER_CHECK(r.timed_out) << "sandbox: the sandbox's supervisor ended without a report (wait status " << st << ")";
    r.signal = SIGKILL;
  }
  return r;
}

void sandbox_check(const std::string& program) {
  static std::mutex mu;
  static bool ok = false;
  std::lock_guard<std::mutex> lock(mu);
  if (ok && program == "/usr/bin/true") return;
  SandboxRun run;
  run.argv = {program};
  SandboxResult r = sandbox_run(run, SandboxLimits{});
  TEMPER_CHECK(r.exit_code == 0) << "sandbox: a trivial program (" << program << ") failed in the sandbox: exit "
                                 << r.exit_code << ", signal " << r.signal << (r.timed_out ? ", timed out" : "")
                                 << "; output: " << r.output.substr(0, 500);
  if (program == "/usr/bin/true") ok = true;
}

}  // namespace temper::sandbox

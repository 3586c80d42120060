#include "io/child_process.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string_view>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace troupe::io {

namespace {

std::string_view env_value(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& entry : env)
    if (entry.size() > key.size() && entry.compare(0, key.size(), key) == 0 && entry[key.size()] == '=')
      return std::string_view(entry).substr(key.size() + 1);
  return {};
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The program a name stands for, looked up in the child's own PATH (posix_spawnp would use the
// parent's, which differs when the configuration sets PATH). Empty when nothing matches.
std::string find_program(const std::string& program, const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos)
    return program;
  std::string_view path = env_value(env, "PATH");
  if (path.empty())
    path = "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = path.find(':');
    std::string dir(path.substr(0, colon));
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (is_executable_file(candidate))
      return candidate;
    if (colon == std::string_view::npos)
      return {};
    path.remove_prefix(colon + 1);
  }
}

class spawn_setup {
public:
  spawn_setup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~spawn_setup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  spawn_setup(const spawn_setup&) = delete;
  spawn_setup& operator=(const spawn_setup&) = delete;

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
};

void route(spawn_setup& setup, int fd, int target, int dev_null_flags) {
  if (fd >= 0)
    posix_spawn_file_actions_adddup2(&setup.actions, fd, target);
  else
    posix_spawn_file_actions_addopen(&setup.actions, target, "/dev/null", dev_null_flags, 0);
}

} // namespace

void unique_fd::reset(int fd) {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = fd;
}

child_process child_process::spawn(const spawn_spec& spec, std::string& error) {
  child_process child;
  auto fail = [&](int err) {
    error = "cannot start " + spec.program + ": " + std::strerror(err);
    return child_process{};
  };
  if (spec.program.empty() || spec.program.find('\0') != std::string::npos)
    return fail(EINVAL);
  std::string path = find_program(spec.program, spec.env);
  if (path.empty())
    return fail(ENOENT);

  std::vector<std::string> argv_text;
  argv_text.reserve(spec.args.size() + 1);
  argv_text.push_back(spec.program);
  argv_text.insert(argv_text.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text = spec.env;
  std::vector<char*> envp;
  for (auto& e : env_text)
    envp.push_back(e.data());
  envp.push_back(nullptr);

  spawn_setup setup;
  route(setup, spec.stdin_fd, 0, O_RDONLY);
  route(setup, spec.stdout_fd, 1, O_WRONLY);
  route(setup, spec.stderr_fd, 2, O_WRONLY);
  if (!spec.working_dir.empty())
    posix_spawn_file_actions_addchdir_np(&setup.actions, spec.working_dir.c_str());
  posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3);
  // Own group so that everything the child starts can be stopped with it; default dispositions and
  // an empty mask so that the parent's (an ignored SIGPIPE, a blocked SIGTERM) do not leak in.
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  posix_spawnattr_setsigmask(&setup.attr, &no_signals);
  sigset_t default_signals;
  sigfillset(&default_signals);
  sigdelset(&default_signals, SIGKILL);
  sigdelset(&default_signals, SIGSTOP);
  posix_spawnattr_setsigdefault(&setup.attr, &default_signals);

  pid_t pid = -1;
  // glibc reports a failed exec (ENOENT, EACCES, ENOEXEC) as posix_spawn's result.
  int rc = ::posix_spawn(&pid, path.c_str(), &setup.actions, &setup.attr, argv.data(), envp.data());
  if (rc != 0)
    return fail(rc);
  child.pid_ = pid;
#ifdef SYS_pidfd_open
  child.pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#endif
  return child;
}

child_process::~child_process() {
  release_all();
}

child_process::child_process(child_process&& other) noexcept
  : pid_(std::exchange(other.pid_, -1)), pidfd_(std::move(other.pidfd_)), status_(other.status_),
    reaped_(std::exchange(other.reaped_, false)) {
}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    release_all();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::move(other.pidfd_);
    status_ = other.status_;
    reaped_ = std::exchange(other.reaped_, false);
  }
  return *this;
}

void child_process::release_all() noexcept {
  if (pid_ > 0 && !reaped_) {
    signal_group(SIGKILL);
    reap();
  }
  pid_ = -1;
  pidfd_.reset();
}

bool child_process::exited() const {
  if (pid_ <= 0 || reaped_)
    return true;
  siginfo_t info{};
  info.si_pid = 0;
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
    return errno == ECHILD; // reaped behind our back (SIGCHLD ignored): gone all the same
  return info.si_pid != 0;
}

bool child_process::wait_exit(std::chrono::milliseconds limit) const {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + limit;
  while (!exited()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0)
      return false;
    if (pidfd_) {
      pollfd fd{pidfd_.get(), POLLIN, 0};
      ::poll(&fd, 1, static_cast<int>(left));
    } else {
      // No pidfd: look again every few milliseconds.
      ::usleep(static_cast<useconds_t>(std::min<long long>(left, 10) * 1000));
    }
  }
  return true;
}

void child_process::signal_group(int sig) const {
  if (pid_ > 0 && !reaped_)
    ::kill(-pid_, sig);
}

void child_process::reap() {
  if (pid_ <= 0 || reaped_)
    return;
  while (::waitpid(pid_, &status_, 0) < 0) {
    if (errno != EINTR) {
      status_ = 0; // ECHILD: someone else reaped it, its status is lost
      break;
    }
  }
  reaped_ = true;
}

void child_process::terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || reaped_)
    return;
  if (!exited()) {
    signal_group(SIGTERM);
    wait_exit(grace);
  }
  // Whatever the leader left in its group (or the leader itself, past its grace) goes now.
  signal_group(SIGKILL);
  reap();
}

std::string child_process::exit_description() const {
  if (WIFSIGNALED(status_))
    return "killed by signal " + std::to_string(WTERMSIG(status_));
  if (WIFEXITED(status_))
    return "exited with code " + std::to_string(WEXITSTATUS(status_));
  return "exited";
}

int child_process::exit_code() const {
  if (WIFEXITED(status_))
    return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_))
    return 128 + WTERMSIG(status_);
  return 0;
}

} // namespace troupe::io

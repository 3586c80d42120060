#include "io/child_process.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string_view>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
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

// The program a name stands for in the child's own PATH (the parent's differs when the configuration
// sets PATH). Empty when nothing matches.
std::string find_program(const std::string& program, const std::vector<std::string>& env) {
  return find_in_path(program, env_value(env, "PATH"));
}

// Where the child's descriptors come from. Sources are copied above every target first, so that a
// source that is itself 0, 1 or 2 (troupe started with a closed stdin) cannot be overwritten.
constexpr int first_private_fd = 64;

[[noreturn]] void child_failed(int report, int err) {
  [[maybe_unused]] auto n = ::write(report, &err, sizeof err);
  ::_exit(127);
}

// The child side of spawn(): only async-signal-safe calls, nothing that allocates. On failure the
// errno goes up `report` (close-on-exec, so a successful exec closes it with nothing written).
[[noreturn]] void run_child(const char* path, char* const* argv, char* const* envp, const spawn_spec& spec,
                            pid_t parent, int report) {
  // Above 0, 1 and 2 first: a report descriptor among them would be overwritten below.
  report = ::fcntl(report, F_DUPFD_CLOEXEC, first_private_fd);
  if (report < 0)
    ::_exit(127);
  auto fail = [report](int err) { child_failed(report, err); };
  // Default dispositions, so the parent's (an ignored SIGPIPE) do not leak in; the mask is cleared
  // last, right before exec.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP)
      ::sigaction(sig, &dfl, nullptr);
  // Own group so that everything the child starts can be stopped with it.
  if (::setpgid(0, 0) != 0)
    fail(errno);
  if (spec.die_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
      fail(errno);
    if (::getppid() != parent)
      ::_exit(127); // the parent died before the signal was armed
  }
  const int sources[3] = {spec.stdin_fd, spec.stdout_fd, spec.stderr_fd};
  int moved[3];
  for (int target = 0; target < 3; ++target) {
    int fd = sources[target] >= 0 ? ::fcntl(sources[target], F_DUPFD_CLOEXEC, first_private_fd)
                                  : ::open("/dev/null", (target == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
    if (fd < 0)
      fail(errno);
    moved[target] = fd;
  }
  for (int target = 0; target < 3; ++target)
    if (::dup2(moved[target], target) < 0)
      fail(errno);
  if (!spec.working_dir.empty() && ::chdir(spec.working_dir.c_str()) != 0)
    fail(errno);
  // Nothing but 0, 1 and 2 crosses the exec.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    long max = ::sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); ++fd)
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(path, argv, envp);
  child_failed(report, errno);
}

} // namespace

std::string find_in_path(const std::string& program, std::string_view path) {
  if (program.find('/') != std::string::npos)
    return program;
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

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return fail(errno);
  unique_fd report_read(report[0]), report_write(report[1]);
  // fork, not posix_spawn: only a child of our own can arm PR_SET_PDEATHSIG before its exec.
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0)
    return fail(errno);
  if (pid == 0)
    run_child(path.c_str(), argv.data(), envp.data(), spec, parent, report_write.get());
  report_write.reset();
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report_read.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return fail(child_errno);
  }
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

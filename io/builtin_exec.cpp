// exec (AS-28): a shell command in the call's workspace, through the exec sandbox, with its output
// bounded, its time limited, and its process group killed when it ends, times out or is cancelled.
#include "io/builtin_tool_support.hpp"

#include "io/child_process.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace troupe::io::builtin {

namespace {

std::string format_seconds(double seconds) {
  if (std::isfinite(seconds) && seconds == std::floor(seconds) && std::fabs(seconds) < 1e15)
    return std::to_string(static_cast<long long>(seconds));
  std::ostringstream out;
  out << seconds;
  return out.str();
}

// One stream of the child: keeps the first exec_stream_keep_bytes, reads and drops the rest.
struct output_stream {
  unique_fd fd;
  std::string kept;

  // Reads what is available, at most `max_reads` chunks so that a flood cannot starve the
  // timeout and cancel checks. Closes the fd at EOF.
  void drain(int max_reads) {
    char buf[16384];
    for (int i = 0; fd && i < max_reads; ++i) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        std::size_t room = exec_stream_keep_bytes - kept.size();
        kept.append(buf, std::min(room, static_cast<std::size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
      fd.reset(); // EOF or a broken pipe
    }
  }
};

// The child's whole environment: never troupe's own, which holds its secrets (AS-28).
std::vector<std::string> exec_environment(const fs::path& home,
                                          const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home.string(),
                                  "LANG=C.UTF-8"};
  for (const auto& [key, value] : extra) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos ||
        key == "HOME")
      continue; // HOME is always the workspace
    std::string entry = key + "=" + value;
    auto same_key = [&](const std::string& e) { return e.compare(0, key.size() + 1, key + "=") == 0; };
    auto it = std::find_if(env.begin(), env.end(), same_key);
    if (it != env.end())
      *it = std::move(entry);
    else
      env.push_back(std::move(entry));
  }
  return env;
}

// A command's shell, started, with its two output pipes read without blocking.
struct running_command {
  child_process child;
  output_stream out;
  output_stream err;
};

running_command start_command(const std::string& command, const workspace_box& box, const fs::path& cwd,
                              const builtin_tools_options& options) {
  // Close-on-exec everywhere so concurrent spawns on other workers cannot inherit these ends.
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw tool_error("exec: cannot create a pipe: " + errno_text(errno));
  unique_fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw tool_error("exec: cannot create a pipe: " + errno_text(errno));
  unique_fd err_read(err_pipe[0]), err_write(err_pipe[1]);

  const exec_sandbox& runner = *options.sandbox;
  if (!runner.unavailable().empty())
    throw tool_error("exec: the sandbox cannot run commands: " + runner.unavailable());
  spawn_spec spec = runner.shell(command, box.root().string(), cwd.string(),
                               exec_environment(box.root(), options.exec_env));
  // bwrap (or, with no sandbox, the shell) dies with this worker thread, so with troupe too.
  spec.die_with_parent = true;
  spec.stdout_fd = out_write.get();
  spec.stderr_fd = err_write.get();
  std::string error;
  // Destroying the child kills its group and reaps it; in the sandbox, bwrap's PID namespace takes
  // every descendant with it (setsid ones too), so no command outlives its call.
  running_command run{child_process::spawn(spec, error), {std::move(out_read), {}}, {std::move(err_read), {}}};
  if (!run.child)
    throw tool_error("exec: " + error);
  ::fcntl(run.out.fd.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(run.err.fd.get(), F_SETFL, O_NONBLOCK);
  return run;
}

// Reads the command's output until its shell exits: nullopt then, else the answer of a call that was
// cancelled or timed out first (its process group killed).
std::optional<tool_outcome> wait_for_shell(running_command& run, const builtin_tools_options& options,
                                           const cancel_signal& cancel) {
  // A pidfd wakes poll when the shell exits even if a background process keeps the pipes open.
  const int pidfd = run.child.exit_fd();
  // Without a pidfd or an eventfd, poll in short slices and check by hand.
  const bool need_slices = pidfd < 0 || cancel.wake_fd < 0;

  using clock = std::chrono::steady_clock;
  const auto deadline =
      clock::now() + std::chrono::duration_cast<clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, options.exec_timeout_seconds)));
  for (;;) {
    if (cancel.requested.load()) {
      run.child.signal_group(SIGKILL);
      run.child.reap();
      return tool_outcome{cancelled_output, true};
    }
    auto now = clock::now();
    if (now >= deadline) {
      run.child.signal_group(SIGKILL);
      run.child.reap();
      return tool_outcome{"[ERROR] Command timed out after " + format_seconds(options.exec_timeout_seconds) +
                          " seconds"};
    }

    pollfd fds[4];
    nfds_t count = 0;
    int out_at = -1, err_at = -1, pid_at = -1;
    if (run.out.fd) {
      out_at = static_cast<int>(count);
      fds[count++] = {run.out.fd.get(), POLLIN, 0};
    }
    if (run.err.fd) {
      err_at = static_cast<int>(count);
      fds[count++] = {run.err.fd.get(), POLLIN, 0};
    }
    if (cancel.wake_fd >= 0)
      fds[count++] = {cancel.wake_fd, POLLIN, 0};
    if (pidfd >= 0) {
      pid_at = static_cast<int>(count);
      fds[count++] = {pidfd, POLLIN, 0};
    }
    auto remaining = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    int wait_ms = static_cast<int>(std::min<long long>(remaining, INT_MAX));
    if (need_slices)
      wait_ms = std::min(wait_ms, 20);
    if (::poll(fds, count, wait_ms) < 0 && errno != EINTR)
      throw tool_error("exec: poll failed: " + errno_text(errno));

    if (out_at >= 0 && fds[out_at].revents != 0)
      run.out.drain(16);
    if (err_at >= 0 && fds[err_at].revents != 0)
      run.err.drain(16);
    bool shell_exited = pid_at >= 0 ? fds[pid_at].revents != 0 : run.child.exited();
    if (shell_exited && !cancel.requested.load())
      return std::nullopt;
  }
}

} // namespace

tool_outcome run_exec(const json::value& args, const std::string& workspace, const builtin_tools_options& options,
                      const cancel_signal& cancel) {
  std::string command = required_string(args, "exec", "command");
  std::optional<std::string> working_dir = optional_string(args, "exec", "working_dir");
  if (command.find('\0') != std::string::npos)
    throw tool_error("exec: command contains a NUL character");
  workspace_box box(workspace);
  fs::path cwd = box.root();
  if (working_dir) {
    cwd = box.resolve(*working_dir);
    std::error_code ec;
    if (!fs::is_directory(cwd, ec))
      throw tool_error("Working directory not found: " + *working_dir);
  }
  if (cancel.requested.load())
    return {cancelled_output, true};

  running_command run = start_command(command, box, cwd, options);
  if (auto early = wait_for_shell(run, options, cancel))
    return std::move(*early);

  // The shell is done; background processes it left would hold the pipes (and the machine)
  // forever, so the group goes with it. What is already in the pipes is read once and no more:
  // a process that escaped the group (setsid) may keep them open or keep writing. 64 reads
  // cover the largest pipe buffer (1 MiB).
  run.child.signal_group(SIGKILL);
  run.out.drain(64);
  run.err.drain(64);
  run.child.reap();

  std::string result = to_text(run.out.kept);
  std::string err_text = to_text(run.err.kept);
  if (!err_text.empty())
    result += "\nSTDERR:\n" + err_text;
  if (int code = run.child.exit_code(); code != 0)
    result += "\nExit code: " + std::to_string(code);
  return {to_text(result, exec_output_max_chars)};
}

} // namespace troupe::io::builtin

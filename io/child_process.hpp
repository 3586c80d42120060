// Child processes for io/: started without a shell in a process group of their own, signalled as a
// group, waited for without blocking forever, and always reaped; optionally killed by the kernel
// when the thread that started them dies (troupe's death included).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace troupe::io {

// An owned file descriptor.
class unique_fd {
public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  ~unique_fd() { reset(); }
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other)
      reset(other.release());
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

private:
  int fd_ = -1;
};

// The program a name stands for in a PATH list (`program` itself when it holds a slash; the usual
// system directories when `path` is empty); empty when nothing there is executable.
std::string find_in_path(const std::string& program, std::string_view path);

// What to start. The child gets exactly `env` (never the parent's environment), default signal
// handling, an empty signal mask and no descriptors but 0, 1 and 2; a descriptor left at -1 is
// /dev/null.
struct spawn_spec {
  std::string program;            // a path, or a name looked up in the PATH of `env`
  std::vector<std::string> args;  // argv[1..]
  std::vector<std::string> env;   // "KEY=value" entries
  std::string working_dir;        // where the child starts; empty: the parent's directory
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // SIGKILL the child when the thread that spawned it ends (PR_SET_PDEATHSIG), so that a troupe
  // killed with -9 leaves no server behind. Only for children started from a thread that lives as
  // long as they should.
  bool die_with_parent = false;
};

// A started child that leads its own process group (pgid == pid). Until it is reaped its pid stays
// reserved, so signalling the group can never hit a stranger; the destructor kills the group and
// reaps, so no child outlives its owner.
class child_process {
public:
  // Starts `spec`; on failure returns an empty child and sets `error` ("cannot start x: reason").
  static child_process spawn(const spawn_spec& spec, std::string& error);

  child_process() = default;
  ~child_process();
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  explicit operator bool() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Readable once the child has exited (a pidfd); -1 where the kernel has none.
  int exit_fd() const { return pidfd_.get(); }

  // Whether the child has exited, without reaping it.
  bool exited() const;
  // Waits up to `limit` for the child to exit, without reaping it.
  bool wait_exit(std::chrono::milliseconds limit) const;
  // Sends `sig` to the whole group while the leader is unreaped (afterwards its id may be reused).
  void signal_group(int sig) const;
  // Blocks until the child is reaped; a no-op once done.
  void reap();
  // SIGTERM to the group, SIGKILL after `grace`, SIGKILL again for what the leader left, reap.
  void terminate(std::chrono::milliseconds grace);

  bool reaped() const { return reaped_; }
  // After reap(): "exited with code N" or "killed by signal N".
  std::string exit_description() const;
  // After reap(): the exit code, or 128 + N for a death by signal N, as a shell reports it.
  int exit_code() const;

private:
  void release_all() noexcept;

  pid_t pid_ = -1;
  unique_fd pidfd_;
  int status_ = 0;
  bool reaped_ = false;
};

} // namespace troupe::io

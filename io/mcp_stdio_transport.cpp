#include "io/mcp_stdio_transport.hpp"

#include "io/child_process.hpp"
#include "io/exec_sandbox.hpp"
#include "io/mcp_handler_call.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace troupe::io {

namespace {

using namespace std::chrono_literals;

constexpr auto term_grace = 2000ms;          // SIGTERM → SIGKILL (mcp_transport contract)
constexpr auto stdout_eof_grace = 2000ms;    // a child that closed stdout gets this long to exit
constexpr std::size_t read_chunk_bytes = 64 * 1024;
constexpr int reads_per_wakeup = 16;         // so a flood on one pipe cannot starve the others
constexpr std::size_t stderr_line_keep_bytes = 4096;
constexpr std::size_t min_outbox_bytes = std::size_t{16} << 20;

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

std::string_view path_of(const std::vector<std::string>& env) {
  for (const auto& entry : env)
    if (entry.rfind("PATH=", 0) == 0)
      return std::string_view(entry).substr(5);
  return {};
}

// troupe's PATH, HOME and LANG, then the server's own env on top; nothing else of troupe's.
std::vector<std::string> server_environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (const char* key : {"PATH", "HOME", "LANG"})
    if (const char* value = std::getenv(key))
      env[key] = value;
  if (!env.count("PATH"))
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& [key, value] : extra) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos ||
        value.find('\0') != std::string::npos)
      continue;
    env[key] = value;
  }
  std::vector<std::string> out;
  for (const auto& [key, value] : env)
    out.push_back(key + "=" + value);
  return out;
}

bool make_pipe(unique_fd& read_end, unique_fd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return false;
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
  return true;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Splits a byte stream into lines; a line longer than the bound fails the splitter.
class line_splitter {
public:
  explicit line_splitter(std::size_t max_line_bytes) : max_(max_line_bytes) {}

  // Appends every line `chunk` completes (without its \n) to `out`; false once a line is too long.
  bool feed(std::string_view chunk, std::vector<std::string>& out) {
    while (!chunk.empty()) {
      auto nl = chunk.find('\n');
      std::string_view part = chunk.substr(0, nl);
      if (partial_.size() + part.size() > max_)
        return false;
      partial_.append(part);
      if (nl == std::string_view::npos)
        return true;
      out.push_back(std::exchange(partial_, {}));
      chunk.remove_prefix(nl + 1);
    }
    return true;
  }

  // The unterminated rest, at EOF.
  std::string take_rest() { return std::exchange(partial_, {}); }

private:
  std::size_t max_;
  std::string partial_;
};

// stderr lines, each cut to stderr_line_keep_bytes, so a chatty server cannot grow troupe's memory.
class stderr_logger {
public:
  explicit stderr_logger(std::string server) : server_(std::move(server)) {}

  void feed(std::string_view chunk) {
    while (!chunk.empty()) {
      auto nl = chunk.find('\n');
      std::string_view part = chunk.substr(0, nl);
      std::size_t room = stderr_line_keep_bytes - std::min(stderr_line_keep_bytes, line_.size());
      line_.append(part.substr(0, room));
      dropped_ += part.size() - std::min(room, part.size());
      if (nl == std::string_view::npos)
        return;
      flush();
      chunk.remove_prefix(nl + 1);
    }
  }

  void flush() {
    if (!line_.empty() && line_.back() == '\r')
      line_.pop_back();
    if (!line_.empty() || dropped_ > 0) {
      if (dropped_ > 0)
        spdlog::debug("mcp: server={} stderr: {} ... ({} more bytes)", server_, line_, dropped_);
      else
        spdlog::debug("mcp: server={} stderr: {}", server_, line_);
    }
    line_.clear();
    dropped_ = 0;
  }

private:
  std::string server_;
  std::string line_;
  std::size_t dropped_ = 0;
};

class stdio_transport final : public mcp_transport {
public:
  stdio_transport(protocol::mcp_server_config config, std::size_t max_line_bytes,
                  std::shared_ptr<const exec_sandbox> containment)
    : config_(std::move(config)), containment_(std::move(containment)), max_line_bytes_(std::max<std::size_t>(1, max_line_bytes)),
      max_outbox_bytes_(std::max(min_outbox_bytes, 4 * max_line_bytes_)), stdout_lines_(max_line_bytes_),
      stderr_log_(config_.name) {}

  ~stdio_transport() override { close(); }

  std::string start(handlers h) override {
    std::lock_guard<std::mutex> serial(lifecycle_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (started_ || stopping_)
        return "mcp server " + config_.name + ": transport already started";
    }
    unique_fd in_read, in_write, out_read, out_write, err_read, err_write;
    if (!make_pipe(in_read, in_write) || !make_pipe(out_read, out_write) || !make_pipe(err_read, err_write))
      return "cannot start " + config_.command + ": cannot create a pipe: " + std::strerror(errno);
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_)
      return "cannot start " + config_.command + ": cannot create an eventfd: " + std::strerror(errno);

    spawn_spec spec;
    spec.program = config_.command;
    spec.args = config_.args;
    spec.env = server_environment(config_.env);
    spec.stdin_fd = in_read.get();
    spec.stdout_fd = out_write.get();
    spec.stderr_fd = err_write.get();
    // The orphan rule: the server dies with troupe (even killed with -9), and what it started in
    // its group dies when it stops (below). Its supervisor's thread lives as long as the server.
    spec.die_with_parent = true;
    if (containment_) {
      // In a PID namespace, so that what the server starts (even with setsid) dies with it and with
      // troupe. The program is found here, so a missing one reads as it does uncontained.
      spec.program = find_in_path(spec.program, path_of(spec.env));
      if (spec.program.empty())
        return "cannot start " + config_.command + ": " + std::strerror(ENOENT);
      spec = containment_->contain(std::move(spec));
    }
    std::string error;
    child_ = child_process::spawn(spec, error);
    if (!child_)
      return error;
    // Our copies of the child's ends go, so EOF on stdout means the child (group) closed it.
    in_read.reset();
    out_write.reset();
    err_write.reset();
    stdin_ = std::move(in_write);
    stdout_ = std::move(out_read);
    stderr_ = std::move(err_read);
    set_nonblocking(stdin_.get());
    set_nonblocking(stdout_.get());
    set_nonblocking(stderr_.get());
    handlers_ = std::move(h);
    spdlog::debug("mcp: server={} started pid={} command={}", config_.name, child_.pid(), config_.command);

    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      child_.terminate(0ms);
      return "cannot start " + config_.command + ": cannot create a thread: " + e.what();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    started_ = true;
    return {};
  }

  void send(std::string message) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!started_ || stopping_ || finished_)
        return;
      outbox_bytes_ += message.size() + 1;
      message += '\n';
      outbox_.push_back(std::move(message));
    }
    wake();
  }

  void close() override {
    std::lock_guard<std::mutex> serial(lifecycle_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake();
    if (!thread_.joinable())
      return;
    if (thread_.get_id() == std::this_thread::get_id())
      return; // from a handler (against the contract): the thread winds down when it returns
    thread_.join();
  }

private:
  enum class ending { none, requested, failed, exited, stdout_closed };

  void wake() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
  }

  // After reap(): how the server ended. bwrap reports a contained server's death by signal N as
  // exit code 128 + N; it is told as the signal, as it is for an uncontained one.
  std::string how_it_ended() const {
    int code = child_.exit_code();
    if (containment_ && code > 128 && code < 128 + NSIG)
      return "killed by signal " + std::to_string(code - 128);
    return child_.exit_description();
  }

  void run() {
    // A write to a dead child's stdin must be an EPIPE here, not a SIGPIPE that ends troupe.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);

    ending end = loop();
    std::string reason;
    switch (end) {
    case ending::requested:
      stdin_.reset(); // EOF first: a well-behaved server exits on its own
      child_.terminate(term_grace);
      break;
    case ending::failed:
      child_.signal_group(SIGKILL);
      child_.reap();
      reason = failure_;
      break;
    case ending::exited:
      drain_after_exit();
      child_.signal_group(SIGKILL); // what the server left running in its group
      child_.reap();
      reason = how_it_ended();
      break;
    case ending::stdout_closed:
      if (wait_for_exit(stdout_eof_grace)) {
        child_.signal_group(SIGKILL);
        child_.reap();
        reason = how_it_ended();
      } else if (stop_requested()) {
        child_.terminate(term_grace);
        end = ending::requested;
      } else {
        child_.terminate(term_grace);
        reason = "closed its stdout and was stopped (" + how_it_ended() + ")";
      }
      break;
    case ending::none:
      break;
    }
    stderr_log_.flush();
    spdlog::debug("mcp: server={} pid={} {}", config_.name, child_.pid(), how_it_ended());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
      outbox_.clear();
      outbox_bytes_ = 0;
      if (stopping_)
        end = ending::requested;
    }
    if (end != ending::requested)
      call_handler(config_.name, [&] {
        if (handlers_.on_closed)
          handlers_.on_closed(reason);
      });
  }

  bool stop_requested() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopping_;
  }

  // The I/O loop: returns why it ended.
  ending loop() {
    std::string writing;          // the message being written
    std::size_t written = 0;
    std::deque<std::string> queue; // taken from outbox_ under the lock
    const bool slices = child_.exit_fd() < 0;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_)
          return ending::requested;
        if (outbox_bytes_ > max_outbox_bytes_) {
          failure_ = "write queue over " + std::to_string(max_outbox_bytes_) +
                     " bytes: the server is not reading its stdin";
          return ending::failed;
        }
        if (!stdin_) { // the child stopped reading: nothing queued can reach it
          outbox_bytes_ = 0;
          writing.clear();
          queue.clear();
        }
        for (auto& m : outbox_)
          if (stdin_)
            queue.push_back(std::move(m));
        outbox_.clear();
      }
      if (writing.empty() && !queue.empty()) {
        writing = std::move(queue.front());
        queue.pop_front();
        written = 0;
      }

      pollfd fds[5];
      nfds_t count = 0;
      int out_at = -1, err_at = -1, in_at = -1, exit_at = -1;
      fds[count++] = {wake_.get(), POLLIN, 0};
      if (stdout_) {
        out_at = static_cast<int>(count);
        fds[count++] = {stdout_.get(), POLLIN, 0};
      }
      if (stderr_) {
        err_at = static_cast<int>(count);
        fds[count++] = {stderr_.get(), POLLIN, 0};
      }
      if (stdin_ && !writing.empty()) {
        in_at = static_cast<int>(count);
        fds[count++] = {stdin_.get(), POLLOUT, 0};
      }
      if (!slices) {
        exit_at = static_cast<int>(count);
        fds[count++] = {child_.exit_fd(), POLLIN, 0};
      }
      if (::poll(fds, count, slices ? 20 : -1) < 0 && errno != EINTR) {
        failure_ = std::string("poll failed: ") + std::strerror(errno);
        return ending::failed;
      }

      if (fds[0].revents != 0) {
        std::uint64_t n = 0;
        [[maybe_unused]] auto r = ::read(wake_.get(), &n, sizeof n);
      }
      if (out_at >= 0 && fds[out_at].revents != 0) {
        switch (read_stdout(reads_per_wakeup)) {
        case read_result::more:
          break;
        case read_result::eof:
          return ending::stdout_closed;
        case read_result::too_long:
          return ending::failed;
        }
      }
      if (err_at >= 0 && fds[err_at].revents != 0)
        read_stderr(reads_per_wakeup);
      if (in_at >= 0 && fds[in_at].revents != 0) {
        write_some(writing, written);
        if (written == writing.size()) {
          writing.clear();
          written = 0;
        }
      }
      bool exited = exit_at >= 0 ? fds[exit_at].revents != 0 : child_.exited();
      if (exited)
        return ending::exited;
    }
  }

  enum class read_result { more, eof, too_long };

  read_result read_stdout(int max_reads) {
    char buf[read_chunk_bytes];
    for (int i = 0; i < max_reads; ++i) {
      ssize_t n = ::read(stdout_.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return read_result::more;
      if (n <= 0) {
        stdout_.reset();
        std::string rest = stdout_lines_.take_rest();
        deliver_line(rest); // a last message without its newline still counts
        return read_result::eof;
      }
      lines_.clear();
      bool ok = stdout_lines_.feed(std::string_view(buf, static_cast<std::size_t>(n)), lines_);
      for (auto& line : lines_)
        deliver_line(line);
      if (!ok) {
        failure_ = "line over " + std::to_string(max_line_bytes_) + " bytes";
        return read_result::too_long;
      }
    }
    return read_result::more;
  }

  void read_stderr(int max_reads) {
    char buf[read_chunk_bytes];
    for (int i = 0; i < max_reads; ++i) {
      ssize_t n = ::read(stderr_.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
      if (n <= 0) {
        stderr_.reset();
        stderr_log_.flush();
        return;
      }
      stderr_log_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    }
  }

  void write_some(const std::string& data, std::size_t& written) {
    while (written < data.size()) {
      ssize_t n = ::write(stdin_.get(), data.data() + written, data.size() - written);
      if (n > 0) {
        written += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
      // EPIPE: the child no longer reads; its exit (or EOF on stdout) ends the transport.
      stdin_.reset();
      written = data.size();
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    outbox_bytes_ -= std::min(outbox_bytes_, data.size());
  }

  // What the child wrote before it exited is still delivered; a bounded number of reads, since a
  // process that escaped the group may keep the pipe open and busy.
  void drain_after_exit() {
    if (stdout_ && read_stdout(64) == read_result::too_long)
      spdlog::debug("mcp: server={} left a line over {} bytes", config_.name, max_line_bytes_);
    if (stderr_)
      read_stderr(64);
  }

  // Waits for the child to exit while still logging its stderr; false when close() interrupts.
  bool wait_for_exit(std::chrono::milliseconds limit) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + limit;
    while (!child_.exited()) {
      if (stop_requested())
        return false;
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
      if (left <= 0)
        return false;
      pollfd fds[3];
      nfds_t count = 0;
      fds[count++] = {wake_.get(), POLLIN, 0};
      if (child_.exit_fd() >= 0)
        fds[count++] = {child_.exit_fd(), POLLIN, 0};
      int err_at = -1;
      if (stderr_) {
        err_at = static_cast<int>(count);
        fds[count++] = {stderr_.get(), POLLIN, 0};
      }
      int wait_ms = static_cast<int>(std::min<long long>(left, child_.exit_fd() >= 0 ? left : 20));
      ::poll(fds, count, wait_ms);
      if (fds[0].revents != 0) {
        std::uint64_t n = 0;
        [[maybe_unused]] auto r = ::read(wake_.get(), &n, sizeof n);
      }
      if (err_at >= 0 && fds[err_at].revents != 0)
        read_stderr(reads_per_wakeup);
    }
    return true;
  }

  void deliver_line(std::string& line) {
    if (blank(line))
      return;
    if (line.back() == '\r')
      line.pop_back();
    call_handler(config_.name, [&] {
      if (handlers_.on_message)
        handlers_.on_message(std::move(line));
    });
  }

  const protocol::mcp_server_config config_;
  const std::shared_ptr<const exec_sandbox> containment_; // null: the server shares troupe's PID namespace
  const std::size_t max_line_bytes_;
  const std::size_t max_outbox_bytes_;
  handlers handlers_;

  std::mutex lifecycle_mutex_; // start() and close() one at a time
  std::mutex mutex_;           // the fields below up to finished_
  std::deque<std::string> outbox_;
  std::size_t outbox_bytes_ = 0; // queued and not yet written
  bool started_ = false;
  bool stopping_ = false;
  bool finished_ = false;

  // Set by start() before the thread exists, then the thread's alone.
  child_process child_;
  unique_fd stdin_, stdout_, stderr_, wake_;
  line_splitter stdout_lines_;
  std::vector<std::string> lines_;
  stderr_logger stderr_log_;
  std::string failure_;
  std::thread thread_;
};

} // namespace

std::unique_ptr<mcp_transport> make_mcp_stdio_transport(const protocol::mcp_server_config& config,
                                                        std::shared_ptr<const exec_sandbox> sandbox,
                                                        std::size_t max_line_bytes) {
  if (sandbox && !sandbox->can_contain())
    sandbox.reset();
  return std::make_unique<stdio_transport>(config, max_line_bytes, std::move(sandbox));
}

} // namespace troupe::io

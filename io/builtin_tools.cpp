#include "io/builtin_tools.hpp"

#include "io/child_process.hpp"

#include "protocol/json.hpp"
#include "protocol/utf8.hpp"
#include "protocol/workspace_path.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace troupe::io {

namespace fs = std::filesystem;
namespace json = protocol::json;

namespace {

constexpr const char* cancelled_output = "[ERROR] Tool call cancelled";
constexpr const char* busy_output = "[ERROR] tool executor is busy";
constexpr int max_symlink_hops = 40; // as the kernel's ELOOP limit

// A failure a tool reports to the model; caught once in run_guarded and turned into "[ERROR] ...".
struct tool_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string errno_text(int err) {
  return std::strerror(err);
}

// ---- text -----------------------------------------------------------------------------------

// Tool output goes into JSON for the model and the event stream, so it must be valid UTF-8:
// every invalid byte becomes U+FFFD, as a lenient decoder would show it. At most `max_chars`
// characters are kept.
std::string to_text(std::string_view bytes, std::size_t max_chars = SIZE_MAX) {
  std::string out;
  out.reserve(std::min(bytes.size(), max_chars));
  std::size_t chars = 0;
  for (std::size_t i = 0; i < bytes.size() && chars < max_chars; ++chars) {
    std::size_t len = protocol::utf8_sequence_length(bytes, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(bytes.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string format_seconds(double seconds) {
  if (std::isfinite(seconds) && seconds == std::floor(seconds) && std::fabs(seconds) < 1e15)
    return std::to_string(static_cast<long long>(seconds));
  std::ostringstream out;
  out << seconds;
  return out.str();
}

// ---- arguments ------------------------------------------------------------------------------

// The call's arguments as an object; text that is not a JSON object reads as {} so that the
// required-argument checks name what is missing.
json::document parse_arguments(const std::string& text) {
  auto doc = json::parse(text);
  if (doc && doc->IsObject())
    return std::move(*doc);
  json::document empty;
  empty.SetObject();
  return empty;
}

std::string required_string(const json::value& args, const char* tool, const char* name) {
  const json::value* v = json::member(args, name);
  if (!v || !v->IsString())
    throw tool_error(std::string(tool) + ": missing required argument '" + name + "'");
  return {v->GetString(), v->GetStringLength()};
}

std::optional<std::string> optional_string(const json::value& args, const char* tool,
                                           const char* name) {
  const json::value* v = json::member(args, name);
  if (!v || v->IsNull())
    return std::nullopt;
  if (!v->IsString())
    throw tool_error(std::string(tool) + ": argument '" + name + "' must be a string");
  return std::string(v->GetString(), v->GetStringLength());
}

// ---- sandbox (AS-26, AS-27) -----------------------------------------------------------------

// Resolves an absolute path the way the kernel would, following `..` and every symlink, even a
// dangling one (which weakly_canonical leaves unresolved, and which a write would follow out
// of the workspace). Components that do not exist yet are appended as they are. nullopt on a
// symlink loop.
std::optional<fs::path> resolve_physical(const fs::path& absolute) {
  std::deque<fs::path> pending(absolute.begin(), absolute.end());
  fs::path result = "/";
  int hops = 0;
  while (!pending.empty()) {
    fs::path part = std::move(pending.front());
    pending.pop_front();
    if (part.empty() || part == "." || part == "/")
      continue;
    if (part == "..") {
      // `result` holds no symlinks, so its lexical parent is its real parent.
      result = result.parent_path();
      continue;
    }
    fs::path candidate = result / part;
    std::error_code ec;
    auto st = fs::symlink_status(candidate, ec);
    if (!ec && fs::is_symlink(st)) {
      if (++hops > max_symlink_hops)
        return std::nullopt;
      fs::path target = fs::read_symlink(candidate, ec);
      if (ec)
        return std::nullopt;
      if (target.is_absolute())
        result = "/";
      pending.insert(pending.begin(), target.begin(), target.end());
      continue;
    }
    result = std::move(candidate);
  }
  return result;
}

// One call's workspace: created (mkdir -p) on first use, and the only place its paths may go.
class sandbox {
public:
  explicit sandbox(const std::string& workspace_dir) {
    if (workspace_dir.empty())
      throw tool_error("no user workspace for this call");
    std::error_code ec;
    fs::path dir = fs::absolute(workspace_dir, ec);
    if (ec)
      throw tool_error("cannot use user workspace: " + ec.message());
    fs::create_directories(dir, ec);
    if (ec)
      throw tool_error("cannot create user workspace: " + ec.message());
    root_ = fs::canonical(dir, ec);
    if (ec)
      throw tool_error("cannot use user workspace: " + ec.message());
  }

  const fs::path& root() const { return root_; }

  // The physical path `user_path` names, relative to the workspace; refused with no side effect
  // when it leaves the workspace by `..`, an absolute path or a symlink.
  fs::path resolve(const std::string& user_path) const {
    if (user_path.find('\0') != std::string::npos)
      throw tool_error("Path outside user workspace: " + to_text(user_path));
    fs::path given(user_path);
    auto resolved = resolve_physical(given.is_absolute() ? given : root_ / given);
    if (!resolved || !protocol::is_within(root_.string(), resolved->string()))
      throw tool_error("Path outside user workspace: " + user_path);
    return *resolved;
  }

private:
  fs::path root_;
};

// ---- file tools (AS-29) ---------------------------------------------------------------------

// The bytes of a regular file of at most read_file_max_bytes; `shown` is the path as the model
// gave it, the only one messages name (host paths stay out of the conversation).
std::string read_small_file(const fs::path& path, const std::string& shown) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      throw tool_error("File not found: " + shown);
    throw tool_error("Cannot read " + shown + ": " + errno_text(errno));
  }
  if (S_ISDIR(st.st_mode))
    throw tool_error("Is a directory, not a file: " + shown);
  if (!S_ISREG(st.st_mode))
    throw tool_error("Not a regular file: " + shown);
  auto too_large = [&](std::uint64_t size) {
    return tool_error("File too large: " + shown + " (" + std::to_string(size) + " bytes > " +
                      std::to_string(read_file_max_bytes) + ")");
  };
  if (static_cast<std::uint64_t>(st.st_size) > read_file_max_bytes)
    throw too_large(static_cast<std::uint64_t>(st.st_size));

  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd)
    throw tool_error("Cannot read " + shown + ": " + errno_text(errno));
  std::string content;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw tool_error("Cannot read " + shown + ": " + errno_text(errno));
    }
    if (n == 0)
      break;
    content.append(buf, static_cast<std::size_t>(n));
    // The file may have grown since stat; the bound holds regardless.
    if (content.size() > read_file_max_bytes)
      throw too_large(content.size());
  }
  return content;
}

void write_whole_file(const fs::path& path, const std::string& shown, std::string_view content,
                      bool create) {
  int flags = O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0);
  unique_fd fd(::open(path.c_str(), flags, 0644));
  if (!fd) {
    if (errno == EISDIR)
      throw tool_error("Cannot write " + shown + ": it is a directory");
    throw tool_error("Cannot write " + shown + ": " + errno_text(errno));
  }
  std::size_t written = 0;
  while (written < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw tool_error("Cannot write " + shown + ": " + errno_text(errno));
    }
    written += static_cast<std::size_t>(n);
  }
  if (::close(fd.release()) != 0)
    throw tool_error("Cannot write " + shown + ": " + errno_text(errno));
}

std::string run_read_file(const json::value& args, const std::string& workspace) {
  std::string path = required_string(args, "read_file", "path");
  sandbox box(workspace);
  return to_text(read_small_file(box.resolve(path), path));
}

std::string run_write_file(const json::value& args, const std::string& workspace) {
  std::string path = required_string(args, "write_file", "path");
  std::string content = required_string(args, "write_file", "content");
  sandbox box(workspace);
  fs::path target = box.resolve(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec)
    throw tool_error("Cannot create the parent directories of " + path + ": " + ec.message());
  write_whole_file(target, path, content, true);
  return "Successfully wrote " + std::to_string(content.size()) + " bytes to " + path;
}

std::string run_edit_file(const json::value& args, const std::string& workspace) {
  std::string path = required_string(args, "edit_file", "path");
  std::string old_text = required_string(args, "edit_file", "old_text");
  std::string new_text = required_string(args, "edit_file", "new_text");
  if (old_text.empty())
    throw tool_error("edit_file: old_text must not be empty");
  sandbox box(workspace);
  fs::path target = box.resolve(path);
  std::string content = read_small_file(target, path);

  std::size_t count = 0;
  std::size_t first = content.find(old_text);
  for (std::size_t at = first; at != std::string::npos;
       at = content.find(old_text, at + old_text.size()))
    ++count;
  if (count == 0)
    throw tool_error("old_text not found in " + path);
  if (count > 1)
    throw tool_error("old_text appears " + std::to_string(count) + " times in " + path +
                     "; provide more context");
  content.replace(first, old_text.size(), new_text);
  write_whole_file(target, path, content, false);
  return "Successfully edited " + path;
}

std::string run_list_dir(const json::value& args, const std::string& workspace) {
  std::string path = optional_string(args, "list_dir", "path").value_or(".");
  sandbox box(workspace);
  fs::path dir = box.resolve(path);
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (st.type() == fs::file_type::not_found)
    throw tool_error("Directory not found: " + path);
  if (ec)
    throw tool_error("Cannot list " + path + ": " + ec.message());
  if (!fs::is_directory(st))
    throw tool_error("Not a directory: " + path);

  std::vector<std::pair<std::string, bool>> entries;
  fs::directory_iterator it(dir, ec);
  if (ec)
    throw tool_error("Cannot list " + path + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    bool is_dir = it->is_directory(type_ec); // follows symlinks, as `ls -F` would show them
    entries.emplace_back(it->path().filename().string(), is_dir);
  }
  if (ec)
    throw tool_error("Cannot list " + path + ": " + ec.message());
  std::sort(entries.begin(), entries.end());

  std::string out;
  for (const auto& [name, is_dir] : entries) {
    if (!out.empty())
      out += '\n';
    out += to_text(name);
    if (is_dir)
      out += '/';
  }
  return out;
}

// ---- the executor ---------------------------------------------------------------------------

// One call from execute() to its `done`.
struct job {
  tool_invocation call;
  tool_port::completion done;
  std::atomic<bool> cancel_requested{false};
  std::atomic<bool> finished{false};
  unique_fd cancel_event; // eventfd that wakes an exec's poll; set before the job is shared

  // execute() opens the gate just before it returns, so `done` never runs inside execute().
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool gate_open = false;

  void open_gate() {
    {
      std::lock_guard<std::mutex> lock(gate_mutex);
      gate_open = true;
    }
    gate_cv.notify_all();
  }

  void wait_gate() {
    std::unique_lock<std::mutex> lock(gate_mutex);
    gate_cv.wait(lock, [this] { return gate_open; });
  }

  void signal_cancel() {
    if (cancel_event) {
      std::uint64_t one = 1;
      // A full counter (impossible here) would still leave the fd readable, so the result is moot.
      [[maybe_unused]] auto n = ::write(cancel_event.get(), &one, sizeof one);
    }
  }
};

// Calls `done` exactly once, whichever of worker, dispatcher or destructor gets there first.
void finish(job& j, tool_outcome outcome) {
  if (j.finished.exchange(true))
    return;
  j.wait_gate();
  if (j.cancel_requested.load())
    outcome.cancelled = true;
  auto done = std::move(j.done);
  j.done = nullptr;
  try {
    if (done)
      done(std::move(outcome));
  } catch (...) {
    // A throwing completion must not take a worker thread (and the process) down with it.
  }
}

// ---- exec (AS-28) ---------------------------------------------------------------------------

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

tool_outcome run_exec(const json::value& args, const std::string& workspace,
                      const builtin_tools_options& options, job& j) {
  std::string command = required_string(args, "exec", "command");
  std::optional<std::string> working_dir = optional_string(args, "exec", "working_dir");
  if (command.find('\0') != std::string::npos)
    throw tool_error("exec: command contains a NUL character");
  sandbox box(workspace);
  fs::path cwd = box.root();
  if (working_dir) {
    cwd = box.resolve(*working_dir);
    std::error_code ec;
    if (!fs::is_directory(cwd, ec))
      throw tool_error("Working directory not found: " + *working_dir);
  }
  if (j.cancel_requested.load())
    return {cancelled_output, true};

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
  child_process child = child_process::spawn(spec, error);
  if (!child)
    throw tool_error("exec: " + error);
  out_write.reset();
  err_write.reset();

  output_stream out{std::move(out_read), {}};
  output_stream err{std::move(err_read), {}};
  ::fcntl(out.fd.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err.fd.get(), F_SETFL, O_NONBLOCK);

  // A pidfd wakes poll when the shell exits even if a background process keeps the pipes open.
  const int pidfd = child.exit_fd();
  // Without a pidfd or an eventfd, poll in short slices and check by hand.
  const bool need_slices = pidfd < 0 || !j.cancel_event;

  using clock = std::chrono::steady_clock;
  const auto deadline =
      clock::now() + std::chrono::duration_cast<clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, options.exec_timeout_seconds)));
  for (;;) {
    if (j.cancel_requested.load()) {
      child.signal_group(SIGKILL);
      child.reap();
      return {cancelled_output, true};
    }
    auto now = clock::now();
    if (now >= deadline) {
      child.signal_group(SIGKILL);
      child.reap();
      return {"[ERROR] Command timed out after " + format_seconds(options.exec_timeout_seconds) +
              " seconds"};
    }

    pollfd fds[4];
    nfds_t count = 0;
    int out_at = -1, err_at = -1, pid_at = -1;
    if (out.fd) {
      out_at = static_cast<int>(count);
      fds[count++] = {out.fd.get(), POLLIN, 0};
    }
    if (err.fd) {
      err_at = static_cast<int>(count);
      fds[count++] = {err.fd.get(), POLLIN, 0};
    }
    if (j.cancel_event)
      fds[count++] = {j.cancel_event.get(), POLLIN, 0};
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
      out.drain(16);
    if (err_at >= 0 && fds[err_at].revents != 0)
      err.drain(16);
    bool shell_exited = pid_at >= 0 ? fds[pid_at].revents != 0 : child.exited();
    if (shell_exited && !j.cancel_requested.load())
      break;
  }

  // The shell is done; background processes it left would hold the pipes (and the machine)
  // forever, so the group goes with it. What is already in the pipes is read once and no more:
  // a process that escaped the group (setsid) may keep them open or keep writing. 64 reads
  // cover the largest pipe buffer (1 MiB).
  child.signal_group(SIGKILL);
  out.drain(64);
  err.drain(64);
  child.reap();

  std::string result = to_text(out.kept);
  std::string err_text = to_text(err.kept);
  if (!err_text.empty())
    result += "\nSTDERR:\n" + err_text;
  if (int code = child.exit_code(); code != 0)
    result += "\nExit code: " + std::to_string(code);
  return {to_text(result, exec_output_max_chars)};
}

bool is_builtin(const std::string& name) {
  return name == "exec" || name == "read_file" || name == "write_file" || name == "edit_file" ||
         name == "list_dir";
}

} // namespace

class builtin_tools::executor {
public:
  explicit executor(builtin_tools_options options) : options_(std::move(options)) {
    options_.worker_threads = std::max<std::size_t>(1, options_.worker_threads);
    dispatcher_ = std::thread([this] { dispatch_loop(); });
    try {
      for (std::size_t i = 0; i < options_.worker_threads; ++i)
        workers_.emplace_back([this] { work_loop(); });
    } catch (...) {
      shutdown();
      throw;
    }
  }

  ~executor() { shutdown(); }

  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  // Queues a call; false when `max_queued` calls already wait beyond the idle workers.
  bool submit(const std::shared_ptr<job>& j) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::size_t idle = options_.worker_threads - std::min(options_.worker_threads, running_.size());
      if (stopping_ || queue_.size() >= options_.max_queued + idle)
        return false;
      queue_.push_back(j);
    }
    work_cv_.notify_one();
    return true;
  }

  // Answers a call without a worker (busy, unknown tool, cancelled while queued).
  void reply(std::shared_ptr<job> j, tool_outcome outcome) {
    {
      std::lock_guard<std::mutex> lock(reply_mutex_);
      replies_.emplace_back(std::move(j), std::move(outcome));
    }
    reply_cv_.notify_one();
  }

  // A queued call is answered at once; a running one is woken (only exec waits on anything).
  void cancel(const std::shared_ptr<job>& j) {
    bool was_queued = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = std::find(queue_.begin(), queue_.end(), j);
      if (it != queue_.end()) {
        queue_.erase(it);
        was_queued = true;
      }
    }
    if (was_queued)
      reply(j, {cancelled_output, true});
    else
      j->signal_cancel();
  }

  void shutdown() {
    std::deque<std::shared_ptr<job>> queued;
    std::vector<std::shared_ptr<job>> running;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_)
        return;
      stopping_ = true;
      queued.swap(queue_);
      running = running_;
    }
    for (auto& j : queued) {
      j->cancel_requested = true;
      reply(j, {cancelled_output, true});
    }
    for (auto& j : running) {
      j->cancel_requested = true;
      j->signal_cancel();
    }
    work_cv_.notify_all();
    for (auto& t : workers_)
      if (t.joinable())
        t.join();
    {
      std::lock_guard<std::mutex> lock(reply_mutex_);
      replies_stopping_ = true;
    }
    reply_cv_.notify_all();
    if (dispatcher_.joinable())
      dispatcher_.join();
  }

private:
  void work_loop() {
    for (;;) {
      std::shared_ptr<job> j;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty())
          return;
        j = std::move(queue_.front());
        queue_.pop_front();
        running_.push_back(j);
      }
      tool_outcome outcome = run_guarded(*j);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        running_.erase(std::find(running_.begin(), running_.end(), j));
      }
      finish(*j, std::move(outcome));
    }
  }

  void dispatch_loop() {
    for (;;) {
      std::pair<std::shared_ptr<job>, tool_outcome> next;
      {
        std::unique_lock<std::mutex> lock(reply_mutex_);
        reply_cv_.wait(lock, [this] { return replies_stopping_ || !replies_.empty(); });
        if (replies_.empty())
          return;
        next = std::move(replies_.front());
        replies_.pop_front();
      }
      finish(*next.first, std::move(next.second));
    }
  }

  // Every failure, expected or not, becomes an "[ERROR] ..." answer (AS-29).
  tool_outcome run_guarded(job& j) {
    const std::string& name = j.call.name;
    try {
      json::document args = parse_arguments(j.call.arguments);
      const std::string& ws = j.call.workspace_dir;
      if (name == "exec")
        return run_exec(args, ws, options_, j);
      if (name == "read_file")
        return {run_read_file(args, ws)};
      if (name == "write_file")
        return {run_write_file(args, ws)};
      if (name == "edit_file")
        return {run_edit_file(args, ws)};
      if (name == "list_dir")
        return {run_list_dir(args, ws)};
      return {"[ERROR] Unknown tool: " + name};
    } catch (const tool_error& e) {
      return {std::string("[ERROR] ") + e.what()};
    } catch (const std::exception& e) {
      return {"[ERROR] " + name + ": " + e.what()};
    } catch (...) {
      return {"[ERROR] " + name + ": unexpected failure"};
    }
  }

  builtin_tools_options options_;

  std::mutex mutex_; // guards queue_, running_, stopping_
  std::condition_variable work_cv_;
  std::deque<std::shared_ptr<job>> queue_;
  std::vector<std::shared_ptr<job>> running_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;

  std::mutex reply_mutex_; // guards replies_, replies_stopping_
  std::condition_variable reply_cv_;
  std::deque<std::pair<std::shared_ptr<job>, tool_outcome>> replies_;
  bool replies_stopping_ = false;
  std::thread dispatcher_;
};

namespace {

class job_handle final : public cancel_handle {
public:
  job_handle(std::shared_ptr<job> j, std::weak_ptr<builtin_tools::executor> ex)
      : job_(std::move(j)), executor_(std::move(ex)) {}

  void cancel() override {
    if (job_->cancel_requested.exchange(true))
      return;
    if (auto ex = executor_.lock())
      ex->cancel(job_);
    else
      job_->signal_cancel(); // the executor is gone, and with it every pending call
  }

private:
  std::shared_ptr<job> job_;
  std::weak_ptr<builtin_tools::executor> executor_;
};

} // namespace

builtin_tools::builtin_tools(builtin_tools_options options)
    : exec_sandboxed_(options.sandbox && options.sandbox->enabled()),
      executor_(std::make_shared<executor>(std::move(options))) {}

builtin_tools::~builtin_tools() {
  executor_->shutdown();
}

std::vector<protocol::tool_schema> builtin_tools::tools() const {
  return {
      {"exec",
       std::string("Run a shell command with /bin/sh -c in the user's workspace and return its output: "
                   "stdout, then stderr after a STDERR: line, then the exit code when it is not zero. The "
                   "command runs with a minimal environment (HOME is the workspace)") +
           (exec_sandboxed_ ? " in a sandbox: no network, and only the workspace and /tmp are writable; "
                              "what it starts ends with it. It"
                            : " and") +
           " is killed after the configured timeout. Output is cut at 10000 characters.",
       R"({"type":"object","properties":{)"
       R"("command":{"type":"string","description":"The shell command to run."},)"
       R"("working_dir":{"type":"string","description":"Directory to run in, relative to the workspace (default: the workspace itself)."}},)"
       R"("required":["command"]})"},
      {"read_file",
       "Read a UTF-8 text file from the user's workspace and return its contents. Files over "
       "1 MiB are refused.",
       R"({"type":"object","properties":{)"
       R"("path":{"type":"string","description":"File path, relative to the workspace."}},)"
       R"("required":["path"]})"},
      {"write_file",
       "Write text to a file in the user's workspace, replacing it if it exists and creating "
       "missing parent directories.",
       R"({"type":"object","properties":{)"
       R"("path":{"type":"string","description":"File path, relative to the workspace."},)"
       R"("content":{"type":"string","description":"The complete new contents of the file."}},)"
       R"("required":["path","content"]})"},
      {"edit_file",
       "Edit a file in the user's workspace by replacing one exact occurrence of old_text with "
       "new_text. old_text must appear exactly once; include surrounding lines to make it unique.",
       R"({"type":"object","properties":{)"
       R"("path":{"type":"string","description":"File path, relative to the workspace."},)"
       R"("old_text":{"type":"string","description":"The exact text to find; it must occur exactly once."},)"
       R"("new_text":{"type":"string","description":"The text to put in its place."}},)"
       R"("required":["path","old_text","new_text"]})"},
      {"list_dir",
       "List a directory in the user's workspace: sorted entry names, one per line, with / "
       "after directories.",
       R"({"type":"object","properties":{)"
       R"("path":{"type":"string","description":"Directory path, relative to the workspace (default: the workspace itself)."}}})"},
  };
}

std::shared_ptr<cancel_handle> builtin_tools::execute(tool_invocation call, completion done) {
  auto j = std::make_shared<job>();
  j->call = std::move(call);
  j->done = std::move(done);
  auto handle = std::make_shared<job_handle>(j, executor_);
  // Whatever happens below, `done` may run once execute() is over, and not before.
  struct gate_opener {
    job& j;
    ~gate_opener() { j.open_gate(); }
  } opener{*j};
  try {
    if (!is_builtin(j->call.name)) {
      executor_->reply(j, {"[ERROR] Unknown tool: " + j->call.name});
    } else {
      if (j->call.name == "exec")
        j->cancel_event.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
      if (!executor_->submit(j))
        executor_->reply(j, {busy_output});
    }
  } catch (...) {
    // Out of memory: still answer once, as for any other failure.
    executor_->reply(j, {"[ERROR] " + j->call.name + ": cannot schedule the call"});
  }
  return handle;
}

} // namespace troupe::io

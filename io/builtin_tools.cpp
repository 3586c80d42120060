// The built-in tools' executor (a bounded worker pool, each call answered exactly once and never
// inside execute()) and the tools it offers; the tools themselves are in io/builtin_file_tools.cpp
// and io/builtin_exec.cpp.
#include "io/builtin_tools.hpp"
#include "io/builtin_tool_support.hpp"

#include "io/child_process.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include <sys/eventfd.h>
#include <unistd.h>

namespace troupe::io {

namespace json = protocol::json;
using builtin::cancelled_output;

namespace {

constexpr const char* busy_output = "[ERROR] tool executor is busy";

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
      json::document args = builtin::parse_arguments(j.call.arguments);
      const std::string& ws = j.call.workspace_dir;
      if (name == "exec")
        return builtin::run_exec(args, ws, options_, {j.cancel_requested, j.cancel_event.get()});
      if (name == "read_file")
        return {builtin::run_read_file(args, ws)};
      if (name == "write_file")
        return {builtin::run_write_file(args, ws)};
      if (name == "edit_file")
        return {builtin::run_edit_file(args, ws)};
      if (name == "list_dir")
        return {builtin::run_list_dir(args, ws)};
      return {"[ERROR] Unknown tool: " + name};
    } catch (const builtin::tool_error& e) {
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


#include "io/builtin_tools.hpp"
#include "protocol/json.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <vector>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using troupe::tool_outcome;
using troupe::io::builtin_tools;
using troupe::io::builtin_tools_options;

// A fresh directory per test, removed afterwards. The workspace inside it is not created: the
// tools must create it on first use.
struct temp_dir {
  fs::path root;

  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "troupe-tools-XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    REQUIRE(made != nullptr);
    root = fs::canonical(made);
    fs::create_directories(outside());
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  fs::path ws() const { return root / "ws"; }
  fs::path outside() const { return root / "outside"; }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void spit(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
}

// One call in flight; wait() blocks on its `done` through a promise (test-only).
struct pending_call {
  std::shared_ptr<std::promise<tool_outcome>> promise = std::make_shared<std::promise<tool_outcome>>();
  std::future<tool_outcome> future = promise->get_future();
  std::shared_ptr<std::atomic<int>> done_count = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<bool>> on_caller_thread = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<troupe::cancel_handle> handle;

  bool ready_within(std::chrono::milliseconds limit) {
    return future.wait_for(limit) == std::future_status::ready;
  }

  tool_outcome wait() {
    REQUIRE(ready_within(20s));
    return future.get();
  }
};

pending_call start(builtin_tools& tools, const std::string& name, const std::string& args,
                   const fs::path& ws) {
  pending_call p;
  auto promise = p.promise;
  auto count = p.done_count;
  auto on_caller = p.on_caller_thread;
  auto caller = std::this_thread::get_id();
  p.handle = tools.execute({"run_1", "call_1", name, args, ws.string(), "", ""},
                           [promise, count, on_caller, caller](tool_outcome outcome) {
                             if (std::this_thread::get_id() == caller)
                               *on_caller = true;
                             if (count->fetch_add(1) == 0)
                               promise->set_value(std::move(outcome));
                           });
  return p;
}

std::string run(builtin_tools& tools, const std::string& name, const std::string& args,
                const fs::path& ws) {
  auto p = start(tools, name, args, ws);
  return p.wait().output;
}

std::string q(const std::string& s) {
  return troupe::protocol::json::quote(s);
}

// Whether `pid` no longer runs. A killed orphan can linger as a zombie until init reaps it; a
// zombie runs nothing, so it counts as gone.
bool process_gone(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    if (::kill(pid, 0) != 0 && errno == ESRCH)
      return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z')
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Options whose exec runs the shell directly (tools.exec.sandbox "none"), for the tests that watch
// the command's processes by the pids it reports: in the sandbox those are its own namespace's.
builtin_tools_options unsandboxed() {
  builtin_tools_options options;
  troupe::io::exec_sandbox_options none;
  none.enabled = false;
  options.sandbox = std::make_shared<troupe::io::exec_sandbox>(none);
  return options;
}

// The host pids of living processes whose command line contains `marker` (such as a sleep of an
// odd duration), from /proc: how a test sees a sandboxed command's processes from outside.
// The text of a /proc file, or "" once its process is gone: read with read(2), since a process that
// exits mid-read makes std::filebuf throw (ESRCH) rather than end the stream.
std::string proc_text(const fs::path& p) {
  std::string text;
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    auto text = proc_text(entry.path() / "cmdline");
    std::replace(text.begin(), text.end(), '\0', ' ');
    if (text.find(marker) == std::string::npos)
      continue;
    auto line = proc_text(entry.path() / "stat");
    auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z')
      continue; // a zombie runs nothing
    found.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return found;
}

// Whether no process with `marker` runs any more, looking again until `limit` has passed.
bool gone_within(const std::string& marker, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!processes_with(marker).empty()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

bool wait_for_file(const fs::path& p) {
  for (int i = 0; i < 500; ++i) {
    if (fs::exists(p))
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

} // namespace

TEST_CASE("the port lists exactly the five built-in tools with object parameter schemas", "[tools]") {
  // AS-29: all five tools exist in every deployment.
  builtin_tools tools;
  auto schemas = tools.tools();
  REQUIRE(schemas.size() == 5);
  const char* names[] = {"exec", "read_file", "write_file", "edit_file", "list_dir"};
  const char* required[][3] = {{"command", nullptr, nullptr},
                               {"path", nullptr, nullptr},
                               {"path", "content", nullptr},
                               {"path", "old_text", "new_text"},
                               {nullptr, nullptr, nullptr}};
  for (std::size_t i = 0; i < 5; ++i) {
    INFO(names[i]);
    CHECK(schemas[i].name == names[i]);
    CHECK(!schemas[i].description.empty());
    auto doc = troupe::protocol::json::parse(schemas[i].parameters);
    REQUIRE(doc);
    CHECK(troupe::protocol::json::get_string(*doc, "type") == "object");
    auto props = troupe::protocol::json::member(*doc, "properties");
    REQUIRE(props);
    REQUIRE(props->IsObject());
    std::size_t n_required = 0;
    for (const char* r : required[i])
      if (r) {
        ++n_required;
        CHECK(props->HasMember(r));
      }
    auto req = troupe::protocol::json::member(*doc, "required");
    CHECK((req ? req->Size() : 0) == n_required);
  }
  auto exec_props = troupe::protocol::json::parse(schemas[0].parameters);
  CHECK((*exec_props)["properties"].HasMember("working_dir"));
  auto list_props = troupe::protocol::json::parse(schemas[4].parameters);
  CHECK((*list_props)["properties"].HasMember("path"));
}

TEST_CASE("write_file creates the workspace and parent directories and reports the bytes written",
          "[tools]") {
  // AS-26 (mkdir -p on first use), AS-29
  temp_dir dir;
  builtin_tools tools;
  REQUIRE_FALSE(fs::exists(dir.ws()));
  CHECK(run(tools, "write_file", R"({"path":"a/b/c.txt","content":"héllo"})", dir.ws()) ==
        "Successfully wrote 6 bytes to a/b/c.txt");
  CHECK(slurp(dir.ws() / "a/b/c.txt") == "héllo");

  // Overwrites.
  CHECK(run(tools, "write_file", R"({"path":"a/b/c.txt","content":"x"})", dir.ws()) ==
        "Successfully wrote 1 bytes to a/b/c.txt");
  CHECK(slurp(dir.ws() / "a/b/c.txt") == "x");
}

TEST_CASE("read_file returns the text, or names a missing or too large file", "[tools]") {
  // AS-29
  temp_dir dir;
  builtin_tools tools;
  spit(dir.ws() / "notes.md", "line 1\nline 2\n");
  CHECK(run(tools, "read_file", R"({"path":"notes.md"})", dir.ws()) == "line 1\nline 2\n");
  CHECK(run(tools, "read_file", R"({"path":"nope.md"})", dir.ws()) ==
        "[ERROR] File not found: nope.md");
  CHECK(run(tools, "read_file", R"({"path":"nope/deeper.md"})", dir.ws()) ==
        "[ERROR] File not found: nope/deeper.md");

  spit(dir.ws() / "exact.bin", std::string(1048576, 'a'));
  CHECK(run(tools, "read_file", R"({"path":"exact.bin"})", dir.ws()).size() == 1048576);
  spit(dir.ws() / "big.bin", std::string(1048577, 'a'));
  CHECK(run(tools, "read_file", R"({"path":"big.bin"})", dir.ws()) ==
        "[ERROR] File too large: big.bin (1048577 bytes > 1048576)");
}

TEST_CASE("read_file shows invalid UTF-8 bytes as replacement characters", "[tools]") {
  // AS-29: the output goes to the model as JSON text.
  temp_dir dir;
  builtin_tools tools;
  spit(dir.ws() / "bin", "a\xFF" "b");
  CHECK(run(tools, "read_file", R"({"path":"bin"})", dir.ws()) == "a\xEF\xBF\xBD" "b");
}

TEST_CASE("edit_file replaces a unique occurrence and refuses a missing or repeated one", "[tools]") {
  // AS-29
  temp_dir dir;
  builtin_tools tools;
  spit(dir.ws() / "f.txt", "alpha beta alpha gamma");

  CHECK(run(tools, "edit_file", R"({"path":"f.txt","old_text":"beta","new_text":"BETA"})",
            dir.ws()) == "Successfully edited f.txt");
  CHECK(slurp(dir.ws() / "f.txt") == "alpha BETA alpha gamma");

  CHECK(run(tools, "edit_file", R"({"path":"f.txt","old_text":"delta","new_text":"x"})", dir.ws()) ==
        "[ERROR] old_text not found in f.txt");
  CHECK(run(tools, "edit_file", R"({"path":"f.txt","old_text":"alpha","new_text":"x"})", dir.ws()) ==
        "[ERROR] old_text appears 2 times in f.txt; provide more context");
  CHECK(slurp(dir.ws() / "f.txt") == "alpha BETA alpha gamma");

  CHECK(run(tools, "edit_file", R"({"path":"gone.txt","old_text":"a","new_text":"b"})", dir.ws()) ==
        "[ERROR] File not found: gone.txt");
}

TEST_CASE("list_dir lists sorted entries one per line with a slash after directories", "[tools]") {
  // AS-29
  temp_dir dir;
  builtin_tools tools;
  spit(dir.ws() / "zeta.txt", "");
  spit(dir.ws() / "Alpha.txt", "");
  spit(dir.ws() / "mid/inner.txt", "");
  fs::create_directories(dir.ws() / "b-dir");
  CHECK(run(tools, "list_dir", "{}", dir.ws()) == "Alpha.txt\nb-dir/\nmid/\nzeta.txt");
  CHECK(run(tools, "list_dir", R"({"path":"."})", dir.ws()) == "Alpha.txt\nb-dir/\nmid/\nzeta.txt");
  CHECK(run(tools, "list_dir", R"({"path":"mid"})", dir.ws()) == "inner.txt");
  CHECK(run(tools, "list_dir", R"({"path":"b-dir"})", dir.ws()).empty());
  CHECK(run(tools, "list_dir", R"({"path":"missing"})", dir.ws()) ==
        "[ERROR] Directory not found: missing");
  CHECK(run(tools, "list_dir", R"({"path":"zeta.txt"})", dir.ws()) ==
        "[ERROR] Not a directory: zeta.txt");
}

TEST_CASE("a path that climbs out of the workspace with .. is refused and nothing is written",
          "[tools]") {
  // AS-27
  temp_dir dir;
  builtin_tools tools;
  CHECK(run(tools, "write_file", R"({"path":"../outside/x.txt","content":"pwned"})", dir.ws()) ==
        "[ERROR] Path outside user workspace: ../outside/x.txt");
  CHECK(run(tools, "write_file", R"({"path":"new/../../outside/y/z.txt","content":"pwned"})",
            dir.ws()) == "[ERROR] Path outside user workspace: new/../../outside/y/z.txt");
  CHECK(fs::is_empty(dir.outside()));
  CHECK_FALSE(fs::exists(dir.ws() / "new")); // no parent directories were made either

  spit(dir.outside() / "secret.txt", "s3cret");
  std::string absolute = (dir.outside() / "secret.txt").string();
  CHECK(run(tools, "read_file", "{\"path\":" + q(absolute) + "}", dir.ws()) ==
        "[ERROR] Path outside user workspace: " + absolute);
  CHECK(run(tools, "list_dir", R"({"path":".."})", dir.ws()) ==
        "[ERROR] Path outside user workspace: ..");
  CHECK(run(tools, "edit_file", R"({"path":"../outside/secret.txt","old_text":"s3cret","new_text":"x"})",
            dir.ws()) == "[ERROR] Path outside user workspace: ../outside/secret.txt");
  CHECK(slurp(dir.outside() / "secret.txt") == "s3cret");
}

TEST_CASE("a .. that stays inside the workspace and an absolute path inside it are allowed",
          "[tools]") {
  // AS-27
  temp_dir dir;
  builtin_tools tools;
  CHECK(run(tools, "write_file", R"({"path":"a/../b.txt","content":"ok"})", dir.ws()) ==
        "Successfully wrote 2 bytes to a/../b.txt");
  CHECK(slurp(dir.ws() / "b.txt") == "ok");
  std::string absolute = (dir.ws() / "b.txt").string();
  CHECK(run(tools, "read_file", "{\"path\":" + q(absolute) + "}", dir.ws()) == "ok");
}

TEST_CASE("a symlink that points outside the workspace is refused for reads and writes",
          "[tools]") {
  // AS-27: symlinks are followed, including for the parent of a new file.
  temp_dir dir;
  builtin_tools tools;
  fs::create_directories(dir.ws());
  spit(dir.outside() / "secret.txt", "s3cret");
  fs::create_directory_symlink(dir.outside(), dir.ws() / "escape");
  fs::create_symlink(dir.outside() / "planted.txt", dir.ws() / "dangling");
  fs::create_symlink("../outside/secret.txt", dir.ws() / "relative");

  CHECK(run(tools, "read_file", R"({"path":"escape/secret.txt"})", dir.ws()) ==
        "[ERROR] Path outside user workspace: escape/secret.txt");
  CHECK(run(tools, "read_file", R"({"path":"relative"})", dir.ws()) ==
        "[ERROR] Path outside user workspace: relative");
  CHECK(run(tools, "write_file", R"({"path":"escape/new/x.txt","content":"pwned"})", dir.ws()) ==
        "[ERROR] Path outside user workspace: escape/new/x.txt");
  // A dangling link would make a write create its target outside.
  CHECK(run(tools, "write_file", R"({"path":"dangling","content":"pwned"})", dir.ws()) ==
        "[ERROR] Path outside user workspace: dangling");
  CHECK(run(tools, "list_dir", R"({"path":"escape"})", dir.ws()) ==
        "[ERROR] Path outside user workspace: escape");
  CHECK(run(tools, "exec", R"({"command":"pwd","working_dir":"escape"})", dir.ws()) ==
        "[ERROR] Path outside user workspace: escape");

  CHECK_FALSE(fs::exists(dir.outside() / "new"));
  CHECK_FALSE(fs::exists(dir.outside() / "planted.txt"));
  CHECK(slurp(dir.outside() / "secret.txt") == "s3cret");
}

TEST_CASE("a symlink that stays inside the workspace is followed", "[tools]") {
  // AS-27
  temp_dir dir;
  builtin_tools tools;
  spit(dir.ws() / "real/data.txt", "inside");
  fs::create_directory_symlink("real", dir.ws() / "alias");
  CHECK(run(tools, "read_file", R"({"path":"alias/data.txt"})", dir.ws()) == "inside");
  CHECK(run(tools, "write_file", R"({"path":"alias/new.txt","content":"n"})", dir.ws()) ==
        "Successfully wrote 1 bytes to alias/new.txt");
  CHECK(slurp(dir.ws() / "real/new.txt") == "n");
}

TEST_CASE("a missing or ill-typed required argument names the tool and the argument", "[tools]") {
  // AS-29: failures become [ERROR] messages, never exceptions.
  temp_dir dir;
  builtin_tools tools;
  CHECK(run(tools, "exec", "{}", dir.ws()) == "[ERROR] exec: missing required argument 'command'");
  CHECK(run(tools, "exec", R"({"command":42})", dir.ws()) ==
        "[ERROR] exec: missing required argument 'command'");
  CHECK(run(tools, "read_file", "not json", dir.ws()) ==
        "[ERROR] read_file: missing required argument 'path'");
  CHECK(run(tools, "read_file", "[1,2]", dir.ws()) ==
        "[ERROR] read_file: missing required argument 'path'");
  CHECK(run(tools, "write_file", R"({"path":"x"})", dir.ws()) ==
        "[ERROR] write_file: missing required argument 'content'");
  CHECK(run(tools, "edit_file", R"({"path":"x","old_text":"a"})", dir.ws()) ==
        "[ERROR] edit_file: missing required argument 'new_text'");
  CHECK(run(tools, "list_dir", R"({"path":7})", dir.ws()) ==
        "[ERROR] list_dir: argument 'path' must be a string");
}

TEST_CASE("an unknown tool name is answered with an error, not a failure", "[tools]") {
  // AS-29
  temp_dir dir;
  builtin_tools tools;
  CHECK(run(tools, "rm_rf", "{}", dir.ws()) == "[ERROR] Unknown tool: rm_rf");
}

TEST_CASE("done runs once, on a worker thread, never on the caller's", "[tools]") {
  // Tool port contract: execute() returns before done runs.
  temp_dir dir;
  builtin_tools tools;
  for (const char* name : {"rm_rf", "list_dir", "exec"}) {
    auto p = start(tools, name, R"({"command":"true"})", dir.ws());
    p.wait();
    std::this_thread::sleep_for(20ms);
    CHECK(*p.done_count == 1);
    CHECK_FALSE(*p.on_caller_thread);
  }
}

TEST_CASE("exec returns stdout, then stderr and a non-zero exit code in the fixed format",
          "[tools]") {
  // AS-28
  temp_dir dir;
  builtin_tools tools;
  CHECK(run(tools, "exec", R"({"command":"echo hello"})", dir.ws()) == "hello\n");
  CHECK(run(tools, "exec", R"({"command":"printf out; printf err >&2; exit 3"})", dir.ws()) ==
        "out\nSTDERR:\nerr\nExit code: 3");
  CHECK(run(tools, "exec", R"({"command":"printf err >&2"})", dir.ws()) == "\nSTDERR:\nerr");
  CHECK(run(tools, "exec", R"({"command":"exit 7"})", dir.ws()) == "\nExit code: 7");
  CHECK(run(tools, "exec", R"({"command":"true"})", dir.ws()).empty());
  CHECK(run(tools, "exec", R"({"command":"kill -9 $$"})", dir.ws()) == "\nExit code: 137");
}

TEST_CASE("exec output is capped at 10000 characters", "[tools]") {
  // AS-28
  temp_dir dir;
  builtin_tools tools;
  auto out = run(tools, "exec", R"({"command":"head -c 200000 /dev/zero | tr '\\000' a"})", dir.ws());
  CHECK(out == std::string(10000, 'a'));
}

TEST_CASE("exec output is capped at 10000 characters, not bytes, an invalid byte counting as one", "[tools]") {
  // AS-28
  temp_dir dir;
  builtin_tools tools;
  auto repeated = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i)
      out += s;
    return out;
  };
  auto accented = run(tools, "exec", R"({"command":"awk 'BEGIN{for(i=0;i<10005;i++) printf \"\\303\\251\"}'"})", dir.ws());
  CHECK(accented == repeated("\xC3\xA9", 10000));
  auto invalid = run(tools, "exec", R"({"command":"head -c 10005 /dev/zero | tr '\\000' '\\377'"})", dir.ws());
  CHECK(invalid == repeated("\xEF\xBF\xBD", 10000));
}

TEST_CASE("exec runs in the workspace or in a confined working_dir", "[tools]") {
  // AS-28
  temp_dir dir;
  builtin_tools tools;
  fs::create_directories(dir.ws() / "sub");
  CHECK(run(tools, "exec", R"({"command":"pwd"})", dir.ws()) == dir.ws().string() + "\n");
  CHECK(run(tools, "exec", R"({"command":"pwd","working_dir":"sub"})", dir.ws()) ==
        (dir.ws() / "sub").string() + "\n");
  CHECK(run(tools, "exec", R"({"command":"pwd","working_dir":".."})", dir.ws()) ==
        "[ERROR] Path outside user workspace: ..");
  CHECK(run(tools, "exec", R"({"command":"pwd","working_dir":"nope"})", dir.ws()) ==
        "[ERROR] Working directory not found: nope");
}

TEST_CASE("exec gets a minimal environment without troupe's variables and HOME set to the workspace",
          "[tools]") {
  // AS-28: never troupe's secrets.
  temp_dir dir;
  ::setenv("TROUPE_SECRET_CANARY", "leaked", 1);
  builtin_tools_options options;
  options.exec_env = {{"EXTRA_VAR", "extra"}, {"HOME", "/not/the/workspace"}};
  builtin_tools tools(options);
  auto out = run(tools, "exec",
                 R"({"command":"printf '%s|%s|%s|%s|%s' \"${TROUPE_SECRET_CANARY-unset}\" \"$HOME\" \"$PATH\" \"$LANG\" \"$EXTRA_VAR\""})",
                 dir.ws());
  ::unsetenv("TROUPE_SECRET_CANARY");
  CHECK(out == "unset|" + dir.ws().string() + "|/usr/local/bin:/usr/bin:/bin|C.UTF-8|extra");
}

TEST_CASE("exec over its timeout answers the timeout marker and kills the whole process group",
          "[tools]") {
  // AS-28
  temp_dir dir;
  builtin_tools_options options = unsandboxed(); // watches the group by its host pids
  options.exec_timeout_seconds = 1;
  builtin_tools tools(options);
  auto started = std::chrono::steady_clock::now();
  auto out = run(tools, "exec", R"({"command":"sleep 5 & echo $! > bg.pid; sleep 5"})", dir.ws());
  auto elapsed = std::chrono::steady_clock::now() - started;
  CHECK(out == "[ERROR] Command timed out after 1 seconds");
  CHECK(elapsed < 3s);
  pid_t background = std::atoi(slurp(dir.ws() / "bg.pid").c_str());
  REQUIRE(background > 0);
  CHECK(process_gone(background));
}

TEST_CASE("exec returns when the shell exits even if it left a process in the background",
          "[tools]") {
  // AS-28: the group goes with the call, so a leftover cannot hold the pipes until the timeout.
  temp_dir dir;
  builtin_tools tools(unsandboxed()); // watches the group by its host pids
  auto started = std::chrono::steady_clock::now();
  auto out = run(tools, "exec", R"({"command":"sleep 5 & echo $! > bg.pid; echo done"})", dir.ws());
  CHECK(out == "done\n");
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  pid_t background = std::atoi(slurp(dir.ws() / "bg.pid").c_str());
  REQUIRE(background > 0);
  CHECK(process_gone(background));
}

TEST_CASE("exec returns when the shell exits even if an escaped process keeps the pipes open",
          "[tools]") {
  // AS-28: a process in its own session is out of the group's reach; the call must not wait for it.
  temp_dir dir;
  builtin_tools tools;
  auto started = std::chrono::steady_clock::now();
  auto out = run(tools, "exec", R"({"command":"setsid sleep 3 & echo ok"})", dir.ws());
  CHECK(out == "ok\n");
  CHECK(std::chrono::steady_clock::now() - started < 2s);
}

TEST_CASE("cancelling a running exec kills it and completes cancelled within 200 ms", "[tools]") {
  // AS-28: cancelling the run kills the group.
  temp_dir dir;
  builtin_tools tools(unsandboxed()); // watches the shell by its host pid
  auto p = start(tools, "exec", R"({"command":"echo $$ > sh.pid; sleep 5"})", dir.ws());
  REQUIRE(wait_for_file(dir.ws() / "sh.pid"));
  std::this_thread::sleep_for(50ms);
  auto started = std::chrono::steady_clock::now();
  p.handle->cancel();
  p.handle->cancel(); // idempotent
  REQUIRE(p.ready_within(2s));
  CHECK(std::chrono::steady_clock::now() - started < 200ms);
  auto outcome = p.future.get();
  CHECK(outcome.cancelled);
  CHECK(outcome.output.rfind("[ERROR]", 0) == 0);
  std::this_thread::sleep_for(20ms);
  CHECK(*p.done_count == 1);
  pid_t shell = std::atoi(slurp(dir.ws() / "sh.pid").c_str());
  REQUIRE(shell > 0);
  CHECK(process_gone(shell));
}

TEST_CASE("a call over the queue bound answers busy, and a queued call cancels at once", "[tools]") {
  // Bounded executor queue (STYLE: everything that grows has a bound).
  temp_dir dir;
  builtin_tools_options options;
  options.worker_threads = 1;
  options.max_queued = 1;
  builtin_tools tools(options);

  auto running = start(tools, "exec", R"({"command":"touch started; sleep 5"})", dir.ws());
  REQUIRE(wait_for_file(dir.ws() / "started"));
  auto queued = start(tools, "exec", R"({"command":"sleep 5"})", dir.ws());
  auto rejected = start(tools, "list_dir", "{}", dir.ws());
  REQUIRE(rejected.ready_within(1s));
  auto busy = rejected.future.get();
  CHECK(busy.output == "[ERROR] tool executor is busy");
  CHECK_FALSE(busy.cancelled);
  CHECK_FALSE(queued.ready_within(50ms));

  auto started = std::chrono::steady_clock::now();
  queued.handle->cancel();
  REQUIRE(queued.ready_within(1s));
  CHECK(std::chrono::steady_clock::now() - started < 200ms);
  CHECK(queued.future.get().cancelled);
  CHECK_FALSE(running.ready_within(0ms));

  running.handle->cancel();
  CHECK(running.wait().cancelled);
}

TEST_CASE("destroying the tools cancels every call in flight and answers each exactly once",
          "[tools]") {
  // Tool port contract: done runs exactly once, also on shutdown.
  temp_dir dir;
  pending_call running, queued;
  auto started = std::chrono::steady_clock::now();
  {
    builtin_tools_options options;
    options.worker_threads = 1;
    builtin_tools tools(options);
    running = start(tools, "exec", R"({"command":"touch started; sleep 5"})", dir.ws());
    REQUIRE(wait_for_file(dir.ws() / "started"));
    queued = start(tools, "exec", R"({"command":"sleep 5"})", dir.ws());
  }
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  REQUIRE(running.ready_within(0ms));
  REQUIRE(queued.ready_within(0ms));
  CHECK(running.future.get().cancelled);
  CHECK(queued.future.get().cancelled);
  CHECK(*running.done_count == 1);
  CHECK(*queued.done_count == 1);
  running.handle->cancel(); // a handle outliving the tools is harmless
}

// ---- the exec sandbox (tools.exec.sandbox "bwrap", AS-28) ------------------------------------

TEST_CASE("in the sandbox exec sees no variable of troupe's, neither in its environment nor in its parent's",
          "[tools][sandbox]") {
  temp_dir dir;
  // /proc/<pid>/environ shows the environment a process started with: one of this test's own
  // variables (not one the command gets too) must not show up.
  std::ifstream self("/proc/self/environ", std::ios::binary);
  std::string own;
  for (std::string entry; std::getline(self, entry, '\0');) {
    auto key = entry.substr(0, entry.find('='));
    if (key != "PATH" && key != "HOME" && key != "LANG" && key != "PWD" && key != "SHLVL" && key != "_" &&
        entry.size() > key.size() + 1) {
      own = entry;
      break;
    }
  }
  REQUIRE_FALSE(own.empty());
  ::setenv("TROUPE_SECRET_CANARY", "leaked", 1);
  builtin_tools tools;
  auto env = run(tools, "exec", R"({"command":"env; tr '\\000' '\\n' < /proc/$PPID/environ"})", dir.ws());
  ::unsetenv("TROUPE_SECRET_CANARY");
  CHECK(env.find("TROUPE_SECRET_CANARY") == std::string::npos);
  CHECK(("\n" + env + "\n").find("\n" + own + "\n") == std::string::npos);
  CHECK(env.find("HOME=" + dir.ws().string()) != std::string::npos);
}

TEST_CASE("in the sandbox exec sees no host process and kill -9 of its parent or of troupe hits nothing",
          "[tools][sandbox]") {
  temp_dir dir;
  builtin_tools tools;
  // The shell's parent is the namespace's init, which ignores the signal; troupe's pid is not there.
  auto out = run(tools, "exec",
                 "{\"command\":\"kill -9 $PPID; kill -9 " + std::to_string(::getpid()) +
                     " 2>/dev/null || echo no-such-process; ls /proc | grep -c '^[0-9]'\"}",
                 dir.ws());
  CHECK(out.find("no-such-process") != std::string::npos);
  // init, the shell, ls and grep: the host's hundreds of processes are out of sight.
  auto count = std::atoi(out.substr(out.rfind("no-such-process\n") + 16).c_str());
  CHECK(count > 0);
  CHECK(count < 10);
  CHECK(run(tools, "exec", R"({"command":"echo still here"})", dir.ws()) == "still here\n");
}

TEST_CASE("in the sandbox a setsid child is gone within 1 s of the call's end", "[tools][sandbox]") {
  temp_dir dir;
  builtin_tools tools;
  // The shell returns only once the child has left its process group, out of a group kill's reach.
  auto out = run(tools, "exec",
                 R"({"command":"setsid sh -c 'touch detached; exec sleep 300.4242' >/dev/null 2>&1 & )"
                 R"(until [ -e detached ]; do sleep 0.01; done; echo started"})",
                 dir.ws());
  CHECK(out == "started\n");
  CHECK(gone_within("sleep 300.4242", 1s));
}

TEST_CASE("in the sandbox a timeout or a cancel takes every descendant with the call, setsid ones too",
          "[tools][sandbox]") {
  temp_dir dir;
  SECTION("timeout") {
    builtin_tools_options options;
    options.exec_timeout_seconds = 1;
    builtin_tools tools(options);
    auto out = run(tools, "exec",
                   R"({"command":"setsid sh -c 'touch detached; exec sleep 300.4343' >/dev/null 2>&1 & )"
                   R"(sleep 300.4344"})",
                   dir.ws());
    REQUIRE(fs::exists(dir.ws() / "detached"));
    CHECK(out == "[ERROR] Command timed out after 1 seconds");
    CHECK(gone_within("sleep 300.434", 1s));
  }
  SECTION("cancel") {
    builtin_tools tools;
    auto p = start(tools, "exec",
                   R"({"command":"setsid sh -c 'touch started; exec sleep 300.4545' >/dev/null 2>&1 & )"
                   R"(sleep 300.4546"})",
                   dir.ws());
    REQUIRE(wait_for_file(dir.ws() / "started"));
    p.handle->cancel();
    REQUIRE(p.ready_within(2s));
    CHECK(p.future.get().cancelled);
    CHECK(gone_within("sleep 300.454", 1s));
  }
}

TEST_CASE("in the sandbox the workspace is the only writable place and the rest of the host is out of sight",
          "[tools][sandbox]") {
  temp_dir dir;
  spit(dir.outside() / "secret.txt", "host secret");
  builtin_tools tools;
  const std::string outside = dir.outside().string();
  auto out = run(tools, "exec",
                 "{\"command\":\"cat " + outside + "/secret.txt; touch " + outside +
                     "/made /usr/made /made 2>/dev/null || echo refused; ls /root /home /var 2>/dev/null | wc -l; "
                     "echo inside > made.txt; test -e /etc/shadow || echo no-shadow\"}",
                 dir.ws());
  // Whatever a failure left on the host goes before the checks, so no later run trips on it.
  std::vector<std::string> planted;
  for (const auto& p : {dir.outside() / "made", fs::path("/usr/made"), fs::path("/made")})
    if (fs::exists(p) && fs::remove(p))
      planted.push_back(p.string());
  CHECK(out.find("host secret") == std::string::npos);
  CHECK(out.find("refused\n0\nno-shadow\n") != std::string::npos);
  CHECK(planted.empty());
  CHECK(slurp(dir.ws() / "made.txt") == "inside\n");
}

TEST_CASE("a hidden directory that a system bind would show is empty in the sandbox", "[tools][sandbox]") {
  // The data directory and the workspaces root are hidden wherever they are; under /usr only a
  // tmpfs over them can hide them. base-files ships /usr/share/common-licenses on Debian.
  temp_dir dir;
  REQUIRE(fs::is_directory("/usr/share/common-licenses"));
  builtin_tools_options options;
  options.sandbox = std::make_shared<troupe::io::exec_sandbox>(
      troupe::io::exec_sandbox_options{true, "bwrap", {"/usr/share/common-licenses"}});
  builtin_tools hiding(options);
  builtin_tools plain;
  const std::string list = R"({"command":"ls /usr/share/common-licenses | wc -l"})";
  CHECK(run(hiding, "exec", list, dir.ws()) == "0\n");
  CHECK(run(plain, "exec", list, dir.ws()) != "0\n");
}

TEST_CASE("without bwrap every exec answers a clear [ERROR] and runs nothing", "[tools][sandbox]") {
  temp_dir dir;
  troupe::io::exec_sandbox_options missing;
  missing.bwrap = (dir.root / "no-such-bwrap").string();
  auto sandbox = std::make_shared<troupe::io::exec_sandbox>(missing);
  CHECK(sandbox->probe(dir.root.string()) == sandbox->unavailable());
  CHECK(sandbox->unavailable().find("bubblewrap") != std::string::npos);
  builtin_tools_options options;
  options.sandbox = sandbox;
  builtin_tools tools(options);
  auto out = run(tools, "exec", R"({"command":"touch ran"})", dir.ws());
  CHECK(out.rfind("[ERROR] exec: the sandbox cannot run commands: bubblewrap (", 0) == 0);
  CHECK(out.find("tools.exec.sandbox") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.ws() / "ran"));
}

TEST_CASE("a bwrap that cannot create the sandbox is caught by the probe, with bwrap's own reason",
          "[tools][sandbox]") {
  temp_dir dir;
  auto fake = dir.root / "bwrap";
  spit(fake, "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n");
  fs::permissions(fake, fs::perms::owner_all);
  troupe::io::exec_sandbox_options failing;
  failing.bwrap = fake.string();
  troupe::io::exec_sandbox sandbox(failing);
  CHECK(sandbox.unavailable().empty());
  auto why = sandbox.probe(dir.root.string());
  CHECK(why == "bubblewrap cannot create the sandbox (exited with code 1): bwrap: No permissions to create new "
               "namespace");
  CHECK(sandbox.unavailable() == why);
  troupe::io::exec_sandbox real;
  CHECK(real.probe(dir.root.string()).empty());
}

TEST_CASE("with the sandbox off (none) exec runs the shell as troupe's own child", "[tools][sandbox]") {
  temp_dir dir;
  spit(dir.outside() / "visible.txt", "seen");
  builtin_tools tools(unsandboxed());
  CHECK(run(tools, "exec", "{\"command\":\"cat " + (dir.outside() / "visible.txt").string() + "; echo $PPID\"}",
            dir.ws()) == "seen" + std::to_string(::getpid()) + "\n");
}

TEST_CASE("in the sandbox exec has no capability, cannot gain privileges and has no network but loopback",
          "[tools][sandbox]") {
  temp_dir dir;
  builtin_tools tools;
  auto out = run(tools, "exec",
                 R"({"command":"grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; tail -n +3 /proc/net/dev | cut -d: -f1"})",
                 dir.ws());
  CHECK(out == "CapEff:\t0000000000000000\nNoNewPrivs:\t1\n    lo\n");
}

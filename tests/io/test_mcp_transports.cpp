// The MCP transports against the fake MCP server (tests/fake_mcp), over real pipes and sockets.
#include "io/exec_sandbox.hpp"
#include "io/mcp_http_transport.hpp"
#include "io/mcp_stdio_transport.hpp"
#include "protocol/json.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef TROUPE_SOURCE_DIR
#error "TROUPE_SOURCE_DIR must name the source tree (tests/CMakeLists.txt)"
#endif

namespace json = troupe::protocol::json;
namespace http = boost::beast::http;
namespace fs = std::filesystem;
using troupe::mcp_transport;
using troupe::protocol::mcp_server_config;
using namespace std::chrono_literals;

namespace {

const char* const fake_script = TROUPE_SOURCE_DIR "/tests/fake_mcp/fake_mcp_server.mjs";

const std::string initialize_line =
  R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"troupe-test","version":"0"}}})";
const std::string initialized_line = R"({"jsonrpc":"2.0","method":"notifications/initialized"})";

std::string tools_list_line(int id) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":"tools/list","params":{}})";
}

std::string call_line(int id, const std::string& tool, const std::string& arguments = "{}") {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":"tools/call","params":{"name":")" +
         tool + R"(","arguments":)" + arguments + "}}";
}

// Polls `condition` until it holds or `limit` passes.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 5000ms) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= until)
      return condition();
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// What a transport handed to its handlers, with waits on deadlines.
class recorder {
public:
  mcp_transport::handlers handlers() {
    mcp_transport::handlers h;
    h.on_message = [this](std::string m) {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_.push_back(std::move(m));
      cv_.notify_all();
    };
    h.on_closed = [this](std::string reason) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++closed_count_;
      closed_ = std::move(reason);
      cv_.notify_all();
    };
    return h;
  }

  // The message answering request `id`, once it came.
  std::optional<json::document> answer(int64_t id, std::chrono::milliseconds limit = 10000ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::optional<json::document> found;
    cv_.wait_for(lock, limit, [&] {
      for (const auto& m : messages_) {
        auto doc = json::parse(m);
        if (doc && doc->IsObject() && json::get_int(*doc, "id") == id && !doc->HasMember("method")) {
          found = std::move(*doc);
          return true;
        }
      }
      return closed_.has_value();
    });
    return found;
  }

  std::optional<std::string> closed(std::chrono::milliseconds limit = 10000ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, limit, [&] { return closed_.has_value(); });
    return closed_;
  }

  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

  int closed_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_count_;
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> messages_;
  std::optional<std::string> closed_;
  int closed_count_ = 0;
};

class temp_dir {
public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "troupe-mcp-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
  fs::path path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::istringstream in(read_text(path));
  for (long pid = 0; in >> pid;)
    pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// /proc/<pid>/stat: state and parent, when the process exists.
struct proc_stat {
  char state = '?';
  pid_t ppid = 0;
};

std::optional<proc_stat> stat_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text))
    return std::nullopt;
  auto paren = text.rfind(')'); // the command name may hold spaces and parentheses
  if (paren == std::string::npos)
    return std::nullopt;
  std::istringstream rest(text.substr(paren + 1));
  proc_stat st;
  long ppid = 0;
  rest >> st.state >> ppid;
  st.ppid = static_cast<pid_t>(ppid);
  return st;
}

// Gone: no such process, or a zombie that is not ours to reap (an orphan whose init does not reap).
bool gone(pid_t pid) {
  auto st = stat_of(pid);
  return !st || (st->state == 'Z' && st->ppid != ::getpid());
}

// Children of this test process (live or zombie), found by scanning /proc.
std::vector<pid_t> children_of_this_process() {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    auto pid = static_cast<pid_t>(std::stol(name));
    if (auto st = stat_of(pid); st && st->ppid == ::getpid())
      out.push_back(pid);
  }
  return out;
}

// The host pids of live processes whose command line holds `marker` and runs `program` (argv[0]);
// what a process in a PID namespace of its own cannot say about itself.
std::vector<pid_t> host_pids_naming(const std::string& marker, const std::string& program) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::string cmdline = read_text((entry.path() / "cmdline").string());
    auto pid = static_cast<pid_t>(std::stol(name));
    if (cmdline.rfind(program + '\0', 0) == 0 && cmdline.find(marker) != std::string::npos && !gone(pid))
      out.push_back(pid);
  }
  return out;
}

mcp_server_config stdio_config(std::vector<std::string> flags) {
  mcp_server_config cfg;
  cfg.name = "fake";
  cfg.command = "node";
  cfg.args = {fake_script};
  cfg.args.insert(cfg.args.end(), flags.begin(), flags.end());
  return cfg;
}

// A started stdio transport with its recorder; closed at the end of the test.
struct stdio_fixture {
  explicit stdio_fixture(mcp_server_config cfg, std::size_t max_line_bytes = troupe::io::mcp_stdio_default_max_line_bytes)
    : transport(troupe::io::make_mcp_stdio_transport(cfg, nullptr, max_line_bytes)) {
    std::string error = transport->start(events.handlers());
    if (!error.empty())
      throw std::runtime_error("start failed: " + error);
  }
  ~stdio_fixture() { transport->close(); }

  void initialize() {
    transport->send(initialize_line);
    auto answer = events.answer(1);
    REQUIRE(answer);
    REQUIRE(json::member(*answer, "result"));
    transport->send(initialized_line);
  }

  recorder events;
  std::unique_ptr<mcp_transport> transport;
};

// The fake server in --http mode on an ephemeral port, stopped with SIGTERM.
class fake_http_server {
public:
  explicit fake_http_server(std::vector<std::string> flags, const std::string& log_file = "") {
    int fds[2];
    if (::pipe(fds) != 0)
      throw std::runtime_error("pipe failed");
    std::vector<std::string> args = {"node", fake_script, "--http", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<std::string> env = {std::string("PATH=") + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin")};
    if (!log_file.empty())
      env.push_back("FAKE_MCP_LOG=" + log_file);
    std::vector<char*> argv, envp;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      int quiet = ::open("/dev/null", O_WRONLY);
      ::dup2(quiet, STDERR_FILENO);
      ::execvpe("node", argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
    std::string line = read_line(10s);
    std::smatch m;
    if (!std::regex_search(line, m, std::regex("listening on (https?://127\\.0\\.0\\.1:(\\d+)/mcp)")))
      throw std::runtime_error("fake mcp did not start: \"" + line + "\"");
    url_ = m[1];
    port_ = std::stoi(m[2]);
  }

  ~fake_http_server() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    ::close(out_);
  }

  const std::string& url() const { return url_; }

  std::string call(http::verb verb, const std::string& target, const std::string& body = "") const {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)});
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return res.body();
  }

  json::document requests() const {
    auto doc = json::parse(call(http::verb::get, "/__requests"));
    REQUIRE(doc);
    return std::move(*doc);
  }

private:
  std::string read_line(std::chrono::milliseconds limit) {
    std::string line;
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char c;
      if (::read(out_, &c, 1) != 1)
        break;
      if (c == '\n')
        return line;
      line += c;
    }
    return line;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
  std::string url_;
};

mcp_server_config http_config(const std::string& url) {
  mcp_server_config cfg;
  cfg.name = "fake_http";
  cfg.transport = "http";
  cfg.url = url;
  return cfg;
}

// A self-signed certificate for 127.0.0.1 (cert.pem, key.pem in `dir`); false without the openssl tool.
bool make_certificate(const temp_dir& dir) {
  std::string command =
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=127.0.0.1"
    " -addext subjectAltName=IP:127.0.0.1 -keyout " + dir.file("key.pem") + " -out " + dir.file("cert.pem") +
    " >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

int free_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port(); // closed on return: nobody listens there now
}

} // namespace

// ---- stdio ----------------------------------------------------------------------------------------

TEST_CASE("a stdio MCP server answers initialize and tools/list through raw JSON lines", "[mcp_transport]") {
  // AS-62: one JSON-RPC message per line on stdio.
  temp_dir dir;
  auto cfg = stdio_config({"--page-size", "3"});
  cfg.env["FAKE_MCP_LOG"] = dir.file("log");
  stdio_fixture f(cfg);

  f.transport->send(initialize_line);
  auto init = f.events.answer(1);
  REQUIRE(init);
  const auto* result = json::member(*init, "result");
  REQUIRE(result);
  CHECK(json::get_string(*result, "protocolVersion") == "2025-03-26");
  CHECK(json::get_string(*json::member(*result, "serverInfo"), "name") == "fake-mcp");

  f.transport->send(initialized_line);
  f.transport->send(tools_list_line(2));
  auto list = f.events.answer(2);
  REQUIRE(list);
  const auto* tools = json::member(*json::member(*list, "result"), "tools");
  REQUIRE(tools);
  CHECK(tools->Size() == 3);
  CHECK(json::get_string(*json::member(*list, "result"), "nextCursor") == "3");
  // The notification went out before tools/list, and the server reads its stdin in order.
  CHECK(read_text(dir.file("log")).find("notification notifications/initialized") != std::string::npos);

  f.transport->close();
  CHECK(f.events.closed_count() == 0); // close() is not a failure to report
}

TEST_CASE("garbage lines on a server's stdout are delivered as messages and the transport stays up",
          "[mcp_transport]") {
  // AS-62: the transport frames lines; judging them is the mcp_server actor's job.
  stdio_fixture f(stdio_config({"--garbage"}));
  f.initialize();
  f.transport->send(call_line(2, "echo", R"({"text":"still here"})"));
  auto echo = f.events.answer(2);
  REQUIRE(echo);
  CHECK(json::serialize(*echo).find("still here") != std::string::npos);
  auto messages = f.events.messages();
  CHECK(std::count(messages.begin(), messages.end(), "garbage: this line is not JSON") == 2);
  CHECK(f.events.closed_count() == 0);
}

TEST_CASE("a stdout line over the bound closes the transport and kills the server", "[mcp_transport]") {
  // Bounded lines from MCP servers (DESIGN.md, "Bounded everything").
  temp_dir dir;
  stdio_fixture f(stdio_config({"--pid-file", dir.file("pid")}), 512);
  f.initialize();
  auto pids = read_pids(dir.file("pid"));
  REQUIRE(pids.size() == 1);

  std::size_t before = f.events.messages().size();
  f.transport->send(call_line(2, "echo", R"({"text":")" + std::string(2000, 'x') + R"("})"));
  auto reason = f.events.closed();
  REQUIRE(reason);
  CHECK(*reason == "line over 512 bytes");
  CHECK(f.events.messages().size() == before);
  CHECK(gone(pids[0])); // killed and reaped before on_closed ran
}

TEST_CASE("a stdio server that crashes is reported with its exit code", "[mcp_transport]") {
  // AS-64: a dead stdio server is a transport failure the actor restarts.
  stdio_fixture f(stdio_config({}));
  f.initialize();
  f.transport->send(call_line(2, "crash"));
  auto reason = f.events.closed();
  REQUIRE(reason);
  CHECK(*reason == "exited with code 3");
  f.transport->send(call_line(3, "echo", R"({"text":"late"})")); // dropped, not a crash
  f.transport->close();
  CHECK(f.events.closed_count() == 1);
}

TEST_CASE("a stdio server killed by a signal is reported with the signal", "[mcp_transport]") {
  // AS-64
  temp_dir dir;
  stdio_fixture f(stdio_config({"--pid-file", dir.file("pid")}));
  f.initialize();
  auto pids = read_pids(dir.file("pid"));
  REQUIRE(pids.size() == 1);
  ::kill(pids[0], SIGKILL);
  auto reason = f.events.closed();
  REQUIRE(reason);
  CHECK(*reason == "killed by signal 9");
}

TEST_CASE("a stdio server's last answer before it exits is still delivered", "[mcp_transport]") {
  // AS-64: the answer came; only later calls find the server gone.
  stdio_fixture f(stdio_config({"--die-after", "1"}));
  f.initialize();
  f.transport->send(call_line(2, "echo", R"({"text":"last words"})"));
  auto echo = f.events.answer(2);
  REQUIRE(echo);
  CHECK(json::serialize(*echo).find("last words") != std::string::npos);
  auto reason = f.events.closed();
  REQUIRE(reason);
  CHECK(*reason == "exited with code 0");
}

TEST_CASE("close() leaves neither the stdio server nor what it started behind", "[mcp_transport]") {
  // AS-63, AS-64: stopped instances and restarts must not leak processes.
  temp_dir dir;
  stdio_fixture f(stdio_config({"--spawn-child", "--pid-file", dir.file("pid")}));
  f.initialize();
  auto pids = read_pids(dir.file("pid"));
  REQUIRE(pids.size() == 2);
  CHECK_FALSE(gone(pids[0]));
  CHECK_FALSE(gone(pids[1]));
  f.transport->send(call_line(2, "hang"));

  f.transport->close();
  CHECK(gone(pids[0])); // reaped by close() itself, no zombie
  CHECK(eventually([&] { return gone(pids[1]); }));
  CHECK(children_of_this_process().empty());
  CHECK(f.events.closed_count() == 0);
  f.transport->close(); // idempotent
  f.transport->send(tools_list_line(3)); // after close: ignored
}

TEST_CASE("a stdio server that ignores SIGTERM is killed after the grace period", "[mcp_transport]") {
  // mcp_transport contract: SIGTERM, then SIGKILL after ~2 s.
  temp_dir dir;
  stdio_fixture f(stdio_config({"--ignore-sigterm", "--pid-file", dir.file("pid")}));
  f.initialize();
  auto pids = read_pids(dir.file("pid"));
  REQUIRE(pids.size() == 1);
  auto began = std::chrono::steady_clock::now();
  f.transport->close();
  auto took = std::chrono::steady_clock::now() - began;
  CHECK(took >= 1500ms);
  CHECK(took < 5000ms);
  CHECK(gone(pids[0]));
}

TEST_CASE("a stdio server's environment is troupe's PATH, HOME and LANG plus its own env, nothing else",
          "[mcp_transport]") {
  // AS-61 env; troupe's secrets (e.g. model.api_key from the environment) never reach a server.
  ::setenv("TROUPE_TEST_CANARY", "do-not-leak", 1);
  temp_dir dir;
  auto cfg = stdio_config({"--dump-env", dir.file("env")});
  cfg.env["FAKE_EXTRA"] = "from config";
  stdio_fixture f(cfg);
  f.initialize();
  auto env = json::parse(read_text(dir.file("env")));
  ::unsetenv("TROUPE_TEST_CANARY");
  REQUIRE(env);
  REQUIRE(env->IsObject());
  CHECK_FALSE(env->HasMember("TROUPE_TEST_CANARY"));
  CHECK(json::get_string(*env, "FAKE_EXTRA") == "from config");
  CHECK(json::get_string(*env, "PATH") == std::getenv("PATH"));
  std::set<std::string> allowed = {"PATH", "HOME", "LANG", "FAKE_EXTRA"};
  for (auto it = env->MemberBegin(); it != env->MemberEnd(); ++it)
    CHECK(allowed.count(it->name.GetString()) == 1);
}

TEST_CASE("a stdio server command that cannot be started is an error from start()", "[mcp_transport]") {
  // AS-65: the error a server reports when its start failed.
  for (std::string command : {"/nonexistent/mcp-server", "troupe-no-such-mcp-server"}) {
    mcp_server_config cfg;
    cfg.name = "missing";
    cfg.command = command;
    auto t = troupe::io::make_mcp_stdio_transport(cfg);
    recorder events;
    CHECK(t->start(events.handlers()) == "cannot start " + command + ": No such file or directory");
    t->close();
    CHECK(events.closed_count() == 0);
  }
}

TEST_CASE("messages sent from many threads reach a stdio server whole", "[mcp_transport]") {
  // mcp_transport contract: send() is thread-safe.
  stdio_fixture f(stdio_config({}));
  f.initialize();
  constexpr int threads = 4, per_thread = 50;
  std::vector<std::thread> senders;
  for (int t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        int id = 100 + t * per_thread + i;
        f.transport->send(call_line(id, "echo", R"({"text":"m)" + std::to_string(id) + R"("})"));
      }
    });
  for (auto& s : senders)
    s.join();
  for (int id = 100; id < 100 + threads * per_thread; ++id) {
    auto answer = f.events.answer(id);
    REQUIRE(answer);
    CHECK(json::serialize(*answer).find("\"m" + std::to_string(id) + "\"") != std::string::npos);
  }
  CHECK(f.events.closed_count() == 0);
}

// ---- streamable HTTP ------------------------------------------------------------------------------

TEST_CASE("an http MCP server's session id from initialize goes with every later request", "[mcp_transport]") {
  // AS-62: one POST per message; the fake rejects requests without the session id.
  temp_dir dir;
  fake_http_server server({}, dir.file("log"));
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(server.url()));
  REQUIRE(t->start(events.handlers()).empty());

  t->send(initialize_line);
  t->send(initialized_line); // sent before the answer: held until the session id is known
  t->send(tools_list_line(2));
  auto init = events.answer(1);
  REQUIRE(init);
  CHECK(json::member(*init, "result"));
  auto list = events.answer(2);
  REQUIRE(list);
  CHECK(json::member(*json::member(*list, "result"), "tools")->Size() == 7);
  CHECK(events.messages().size() == 2); // the notification's 202 carries nothing
  CHECK(events.closed_count() == 0);

  REQUIRE(eventually([&] { return server.requests().Size() == 3; })); // separate connections
  auto requests = server.requests();
  CHECK(json::get_string(requests[0], "rpc_method") == "initialize");
  CHECK(requests[0]["session"].IsNull());
  std::string session = json::get_string(requests[1], "session");
  CHECK_FALSE(session.empty());
  for (rapidjson::SizeType i = 1; i < requests.Size(); ++i) {
    CHECK(json::get_string(requests[i], "session") == session);
    CHECK(json::get_string(requests[i], "protocol_version") == "2025-03-26");
  }

  t->close();
  CHECK(read_text(dir.file("log")).find("delete " + session) != std::string::npos);
  CHECK(events.closed_count() == 0);
}

TEST_CASE("SSE answers from an http MCP server are delivered one message per event", "[mcp_transport]") {
  // AS-62: streamable HTTP may answer a POST with an event stream.
  fake_http_server server({"--sse"});
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(server.url()));
  REQUIRE(t->start(events.handlers()).empty());
  t->send(initialize_line);
  REQUIRE(events.answer(1));
  t->send(call_line(2, "echo", R"({"text":"over sse"})"));
  auto echo = events.answer(2);
  REQUIRE(echo);
  CHECK(json::serialize(*echo).find("over sse") != std::string::npos);
  auto messages = events.messages();
  REQUIRE(messages.size() == 4);
  CHECK(messages[0].find("notifications/message") != std::string::npos);
  CHECK(messages[2].find("notifications/message") != std::string::npos);
  t->close();
  CHECK(events.closed_count() == 0);
}

TEST_CASE("an expired http MCP session closes the transport", "[mcp_transport]") {
  // AS-64: the actor re-initializes on a fresh transport.
  fake_http_server server({});
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(server.url()));
  REQUIRE(t->start(events.handlers()).empty());
  t->send(initialize_line);
  REQUIRE(events.answer(1));
  server.call(http::verb::post, "/__expire");
  t->send(tools_list_line(2));
  auto reason = events.closed();
  REQUIRE(reason);
  CHECK(*reason == "session expired");
  t->send(tools_list_line(3)); // dropped
  t->close();
  CHECK(events.closed_count() == 1);
}

TEST_CASE("an http MCP server answering 5xx closes the transport with the status", "[mcp_transport]") {
  // AS-64: 5xx is a transport failure, retried by the actor.
  fake_http_server server({});
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(server.url()));
  REQUIRE(t->start(events.handlers()).empty());
  t->send(initialize_line);
  REQUIRE(events.answer(1));
  server.call(http::verb::post, "/__status", R"({"status":503})");
  t->send(tools_list_line(2));
  auto reason = events.closed();
  REQUIRE(reason);
  CHECK(*reason == "POST " + server.url() + ": HTTP 503: fake failure 503");
}

TEST_CASE("an http MCP server that cannot be reached closes the transport with the reason",
          "[mcp_transport]") {
  // AS-64: a connection error is a transport failure; AS-65 shows it as the server's error.
  std::string url = "http://127.0.0.1:" + std::to_string(free_port()) + "/mcp";
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(url));
  REQUIRE(t->start(events.handlers()).empty());
  t->send(initialize_line);
  auto reason = events.closed();
  REQUIRE(reason);
  CHECK(*reason == "POST " + url + ": cannot connect: Connection refused");
  t->close();
  CHECK(events.closed_count() == 1);
}

TEST_CASE("an http MCP server dying mid-request closes the transport", "[mcp_transport]") {
  // AS-64: EOF is a transport failure.
  fake_http_server server({});
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(server.url()));
  REQUIRE(t->start(events.handlers()).empty());
  t->send(initialize_line);
  REQUIRE(events.answer(1));
  t->send(call_line(2, "crash"));
  auto reason = events.closed();
  REQUIRE(reason);
  CHECK(reason->rfind("POST " + server.url() + ": ", 0) == 0);
}

TEST_CASE("close() on an http transport aborts what is in flight and ends the session within 1 s",
          "[mcp_transport]") {
  // mcp_transport contract: close() blocks only briefly and reports nothing.
  temp_dir dir;
  fake_http_server server({}, dir.file("log"));
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(server.url()));
  REQUIRE(t->start(events.handlers()).empty());
  t->send(initialize_line);
  REQUIRE(events.answer(1));
  t->send(call_line(2, "hang"));
  REQUIRE(eventually([&] { return server.requests().Size() == 2; }));

  auto began = std::chrono::steady_clock::now();
  t->close();
  CHECK(std::chrono::steady_clock::now() - began < 1500ms);
  CHECK(read_text(dir.file("log")).find("delete ") != std::string::npos);
  CHECK(events.closed_count() == 0);
  t->close(); // idempotent
}

TEST_CASE("an http MCP url that is not http or https is an error from start()", "[mcp_transport]") {
  // AS-61
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config("ftp://example.com/mcp"));
  auto error = t->start(events.handlers());
  CHECK(error.find("url: expected http://") != std::string::npos);
  t->close();
}

TEST_CASE("an https MCP server whose certificate is not trusted is refused", "[mcp_transport]") {
  // Peers are verified: an MCP server's answers become tool results the model trusts.
  temp_dir dir;
  if (!make_certificate(dir)) {
    WARN("no openssl tool: https not tested");
    return;
  }
  fake_http_server server({"--tls-cert", dir.file("cert.pem"), "--tls-key", dir.file("key.pem")});
  REQUIRE(server.url().rfind("https://", 0) == 0);
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(server.url()));
  REQUIRE(t->start(events.handlers()).empty());
  t->send(initialize_line);
  auto reason = events.closed();
  REQUIRE(reason);
  CHECK(reason->find("TLS handshake failed") != std::string::npos);
  CHECK(reason->find("certificate verify failed") != std::string::npos);
}

TEST_CASE("an https MCP server with a trusted certificate answers over TLS", "[mcp_transport]") {
  temp_dir dir;
  if (!make_certificate(dir)) {
    WARN("no openssl tool: https not tested");
    return;
  }
  fake_http_server server({"--tls-cert", dir.file("cert.pem"), "--tls-key", dir.file("key.pem"), "--sse"});
  recorder events;
  auto t = troupe::io::make_mcp_http_transport(http_config(server.url()));
  // OpenSSL's default verify paths honour SSL_CERT_FILE: the test's certificate becomes the trust store.
  ::setenv("SSL_CERT_FILE", dir.file("cert.pem").c_str(), 1);
  auto error = t->start(events.handlers());
  ::unsetenv("SSL_CERT_FILE");
  REQUIRE(error.empty());
  t->send(initialize_line);
  REQUIRE(events.answer(1));
  t->send(tools_list_line(2));
  auto list = events.answer(2);
  REQUIRE(list);
  CHECK(json::member(*json::member(*list, "result"), "tools")->Size() == 7);
  t->close();
  CHECK(events.closed_count() == 0);
}

TEST_CASE("a stdio server is killed by the kernel when the thread that started it ends, as when troupe dies",
          "[mcp_transport]") {
  // Finding 6's orphan rule: a server dies with troupe, even one killed with -9 (no close() runs),
  // and even a server that outlives the end of its stdin.
  temp_dir dir;
  auto transport = troupe::io::make_mcp_stdio_transport(stdio_config({"--ignore-sigterm", "--pid-file", dir.file("pid")}));
  recorder events;
  std::string error;
  std::promise<void> may_end;
  std::thread starter([&, until = may_end.get_future()] {
    error = transport->start(events.handlers());
    until.wait();
  });
  bool started = eventually([&] { return read_pids(dir.file("pid")).size() == 1; }, 10000ms);
  may_end.set_value();
  starter.join();
  REQUIRE(error.empty());
  REQUIRE(started);
  auto pid = read_pids(dir.file("pid"))[0];
  CHECK(eventually([&] { return gone(pid); }, 2000ms));
  CHECK(events.closed(2000ms) == std::optional<std::string>("killed by signal 9"));
  if (!gone(pid))
    ::kill(pid, SIGKILL); // leave nothing behind
  transport->close();
}

// The orphan rule for what a server starts (finding 6): a contained server runs in a PID namespace
// of its own, so even a helper in a session of its own dies with it.
struct contained_server {
  contained_server() {
    REQUIRE(sandbox->probe(dir.file("")).empty());
    REQUIRE(sandbox->can_contain());
  }

  // The server's and its helper's host pids, once both run.
  std::pair<pid_t, pid_t> host_pids() {
    std::vector<pid_t> server, helper;
    bool found = eventually([&] {
      auto all = host_pids_naming(dir.file("pid"), node);
      server.clear();
      helper.clear();
      for (pid_t pid : all)
        (read_text("/proc/" + std::to_string(pid) + "/cmdline").find("fake_mcp_server.mjs") != std::string::npos
           ? server : helper).push_back(pid);
      return server.size() == 1 && helper.size() == 1;
    }, 10000ms);
    REQUIRE(found);
    return {server[0], helper[0]};
  }

  void leave_nothing_behind() {
    for (pid_t pid : host_pids_naming(dir.file("pid"), node))
      ::kill(pid, SIGKILL);
  }

  temp_dir dir;
  std::string node = troupe::io::find_in_path("node", std::getenv("PATH") ? std::getenv("PATH") : "");
  std::shared_ptr<troupe::io::exec_sandbox> sandbox = std::make_shared<troupe::io::exec_sandbox>();
  mcp_server_config config = stdio_config({"--spawn-detached", "--pid-file", dir.file("pid")});
};

TEST_CASE("a contained stdio server's helper in a session of its own dies with the server, whose death by a "
          "signal still reads as the signal", "[mcp_transport]") {
  contained_server c;
  auto transport = troupe::io::make_mcp_stdio_transport(c.config, c.sandbox);
  recorder events;
  REQUIRE(transport->start(events.handlers()).empty());
  auto [server, helper] = c.host_pids();
  CHECK(server != helper);
  ::kill(server, SIGKILL);
  CHECK(events.closed() == std::optional<std::string>("killed by signal 9"));
  CHECK(eventually([&, helper = helper] { return gone(helper); }, 2000ms));
  c.leave_nothing_behind();
  transport->close();
}

TEST_CASE("a contained stdio server and its helper in a session of its own die when the thread that started "
          "it ends, as when troupe dies", "[mcp_transport]") {
  contained_server c;
  auto transport = troupe::io::make_mcp_stdio_transport(c.config, c.sandbox);
  recorder events;
  std::string error;
  std::promise<void> may_end;
  std::thread starter([&, until = may_end.get_future()] {
    error = transport->start(events.handlers());
    until.wait();
  });
  auto [server, helper] = c.host_pids();
  may_end.set_value();
  starter.join();
  REQUIRE(error.empty());
  CHECK(eventually([&, server = server] { return gone(server); }, 2000ms));
  CHECK(eventually([&, helper = helper] { return gone(helper); }, 2000ms));
  CHECK(events.closed(2000ms) == std::optional<std::string>("killed by signal 9"));
  c.leave_nothing_behind();
  transport->close();
}

TEST_CASE("a contained stdio server whose command does not exist fails to start as an uncontained one does",
          "[mcp_transport]") {
  contained_server c;
  c.config.command = "troupe-no-such-mcp-server";
  auto transport = troupe::io::make_mcp_stdio_transport(c.config, c.sandbox);
  recorder events;
  CHECK(transport->start(events.handlers()) == "cannot start troupe-no-such-mcp-server: No such file or directory");
}

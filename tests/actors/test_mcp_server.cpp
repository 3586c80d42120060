// The mcp_server actor against a fake transport: start-up, calls, restarts, retries only where a
// repeat is harmless, timeouts, cancellation, garbage (AS-62..AS-65).
#include "actors/mcp_server.hpp"
#include "actors/tool_router.hpp"
#include "fake_ports.hpp"
#include "protocol/json.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>

using namespace troupe;
namespace json = troupe::protocol::json;

namespace {

// What every instance of the fake server does; shared across restarts so a test can count.
struct fake_server_script {
  std::mutex mu;
  std::vector<std::string> sent;   // every message troupe sent, across instances
  std::atomic<int> starts{0};
  std::atomic<int> touch_runs{0};  // side effects of the non-idempotent tool
  int crash_on_call_until_start = 0; // instances up to this number die on any tools/call
  std::atomic<bool> extra_tool{false}; // offers a fourth tool, "added", once set
  bool garbage = false;
  int page_size = 100;

  std::vector<std::string> sent_methods() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (auto& m : sent)
      if (auto doc = json::parse(m))
        out.push_back(json::get_string(*doc, "method"));
    return out;
  }
};

// Answers like a small MCP server with tools echo (read-only), touch (no hints) and hang.
class fake_transport : public mcp_transport {
public:
  explicit fake_transport(std::shared_ptr<fake_server_script> s) : script_(std::move(s)) {}

  std::string start(handlers h) override {
    h_ = std::move(h);
    instance_ = ++script_->starts;
    return {};
  }

  void send(std::string message) override {
    {
      std::lock_guard<std::mutex> lock(script_->mu);
      script_->sent.push_back(message);
    }
    auto doc = json::parse(message);
    auto method = json::get_string(*doc, "method");
    auto id = json::get_int(*doc, "id");
    if (!id)
      return; // a notification
    if (script_->garbage)
      h_.on_message("npm notice: this is not JSON");
    auto reply = [&](const std::string& result) {
      h_.on_message(R"({"jsonrpc":"2.0","id":)" + std::to_string(*id) + R"(,"result":)" + result + "}");
    };
    if (method == "initialize") {
      reply(R"({"protocolVersion":"2025-03-26","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}})");
    } else if (method == "tools/list") {
      auto cursor = json::get_string((*doc)["params"], "cursor");
      std::vector<std::string> tools = {
        R"({"name":"echo","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}})",
        R"({"name":"touch","inputSchema":{"type":"object"}})",
        R"({"name":"add","inputSchema":{"type":"object"},"annotations":{"idempotentHint":true}})",
        R"({"name":"hang","inputSchema":{"type":"object"}})"};
      if (script_->extra_tool)
        tools.push_back(R"({"name":"added","inputSchema":{"type":"object"}})");
      std::size_t start = cursor.empty() ? 0 : std::stoul(cursor);
      std::string page = "[";
      for (std::size_t i = start; i < std::min(tools.size(), start + script_->page_size); ++i)
        page += (i == start ? "" : ",") + tools[i];
      page += "]";
      auto next = start + script_->page_size;
      reply(R"({"tools":)" + page + (next < tools.size() ? R"(,"nextCursor":")" + std::to_string(next) + "\"" : "")
            + "}");
    } else if (method == "tools/call") {
      if (instance_ <= script_->crash_on_call_until_start) {
        if (json::get_string((*doc)["params"], "name") != "echo")
          ++script_->touch_runs; // the side effect happened before the crash
        h_.on_closed("exited with code 3");
        return;
      }
      auto name = json::get_string((*doc)["params"], "name");
      if (name == "hang")
        return;
      if (name == "touch" || name == "add")
        ++script_->touch_runs;
      auto text = json::get_string((*doc)["params"]["arguments"], "text", "done");
      reply(R"({"content":[{"type":"text","text":)" + json::quote(text) + "}]}");
    }
  }

  void close() override {}

private:
  std::shared_ptr<fake_server_script> script_;
  handlers h_;
  int instance_ = 0;
};

struct mcp_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<fake_server_script> script = std::make_shared<fake_server_script>();

  mcp_server_actor spawn(double call_timeout = 5, std::function<void(const mcp_server_status&)> on_status = {}) {
    mcp_server_options o;
    o.config.name = "fake";
    o.call_timeout_seconds = call_timeout;
    o.retry_delay_seconds = 0.01;
    o.restart_backoff_seconds = 0.01;
    o.on_status = std::move(on_status);
    auto s = script;
    return spawn_mcp_server(sys, o, [s](const protocol::mcp_server_config&) {
      return std::make_unique<fake_transport>(s);
    });
  }

  std::string call(const mcp_server_actor& server, std::string tool, std::string args = "{}",
                   std::string id = "c1") {
    std::string out;
    self->request(server, std::chrono::seconds(10), mcp_call_atom::value, tool, args, id)
      .receive([&](std::string& text) { out = text; }, [&](caf::error&) { out = "<caf error>"; });
    return out;
  }

  mcp_server_status status(const mcp_server_actor& server) {
    mcp_server_status st;
    self->request(server, std::chrono::seconds(5), status_atom::value)
      .receive([&](mcp_server_status& s) { st = s; }, [](caf::error&) {});
    return st;
  }

  ~mcp_fixture() {}
};

} // namespace

TEST_CASE_METHOD(mcp_fixture, "a server is initialized, lists its tools across pages and answers a call", "[mcp_server]") {
  script->page_size = 2;
  auto server = spawn();
  CHECK(call(server, "echo", R"({"text":"hello"})") == "hello");
  auto st = status(server);
  CHECK(st.alive);
  REQUIRE(st.tools.size() == 4);
  CHECK(st.tools[0].read_only);
  auto methods = script->sent_methods();
  REQUIRE(methods.size() >= 4);
  CHECK(methods[0] == "initialize");
  CHECK(methods[1] == "notifications/initialized");
  CHECK(methods[2] == "tools/list");
  CHECK(methods[3] == "tools/list"); // the second page
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "lines that are not JSON-RPC are skipped and the server keeps working", "[mcp_server]") {
  script->garbage = true;
  auto server = spawn();
  CHECK(call(server, "echo", R"({"text":"still here"})") == "still here");
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "a read-only call that met a crash is retried on the restarted server", "[mcp_server]") { // AS-64
  script->crash_on_call_until_start = 1;
  auto server = spawn();
  CHECK(call(server, "echo", R"({"text":"again"})") == "again");
  CHECK(script->starts == 2);
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "AS-64 a call without idempotence hints that met a crash fails and never runs twice", "[mcp_server]") {
  script->crash_on_call_until_start = 1;
  auto server = spawn();
  auto out = call(server, "touch");
  CHECK(out == "[MCP_ERROR] exited with code 3");
  CHECK(script->touch_runs == 1);
  // the server was restarted and serves the next call
  CHECK(call(server, "touch", "{}", "c2") == "done");
  CHECK(script->touch_runs == 2);
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "AS-64 an idempotentHint call that met a crash is retried on the restarted server", "[mcp_server]") {
  script->crash_on_call_until_start = 1;
  auto server = spawn();
  CHECK(call(server, "add", R"({"text":"sum"})") == "sum");
  CHECK(script->starts == 2);
  CHECK(script->touch_runs == 2); // the crashed attempt and its retry both reached a server
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "a server that dies on every call ends the call once the retries are spent", "[mcp_server]") { // AS-64
  script->crash_on_call_until_start = 1000;
  auto server = spawn();
  CHECK(call(server, "echo") == "[MCP_ERROR] exited with code 3 (after 4 attempts)");
  CHECK(script->starts >= 4);
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "a call the server never answers times out and is cancelled on the server", "[mcp_server]") {
  auto server = spawn(0.2);
  CHECK(call(server, "hang") == "[MCP_ERROR] Tool call timed out after 0.2 seconds");
  auto methods = script->sent_methods();
  CHECK(methods.back() == "notifications/cancelled");
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "cancelling a call in flight notifies the server", "[mcp_server]") {
  auto server = spawn();
  CHECK(call(server, "echo", R"({"text":"up"})") == "up");
  self->send(server, mcp_call_atom::value, std::string("hang"), std::string("{}"), std::string("c9"));
  self->send(server, cancel_atom::value, std::string("c9"));
  self->receive([](std::string& text) { CHECK(text == "[MCP_ERROR] cancelled"); },
                caf::after(std::chrono::seconds(5)) >> [] { FAIL("no answer"); });
  CHECK(script->sent_methods().back() == "notifications/cancelled");
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "an unknown tool answers an MCP error", "[mcp_server]") {
  auto server = spawn();
  CHECK(call(server, "nope") == "[MCP_ERROR] Unknown tool: nope");
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "the router names MCP tools server_tool and reports a clash", "[mcp_server]") { // AS-62
  auto builtins = std::make_shared<troupe::testing::fake_tools>(); // offers "echo"
  auto router = std::make_shared<tool_router>(sys, builtins);
  mcp_server_status a;
  a.name = "a";
  a.alive = true;
  a.tools = {{"b_c", "", "{}", true, false}, {"d", "", "{}", false, false}};
  mcp_server_status b = a;
  b.name = "a_b"; // its tool "c" registers as a_b_c, which server a already took
  b.tools = {{"c", "", "{}", false, false}, {"e", "", "{}", false, false}};
  router->update(a);
  router->update(b);
  CHECK(router->mcp_tool_names() == std::vector<std::string>{"a_b_c", "a_d", "a_b_e"});
  auto servers = router->servers();
  REQUIRE(servers.size() == 2);
  CHECK(servers[0].error.empty());
  CHECK(servers[1].error == "duplicate tool name: a_b_c");
  CHECK(router->mcp_ready());
  auto all = router->tools();
  CHECK(all.front().name == "echo"); // built-ins first (AS-60)
  CHECK(all.size() == 4);
}

TEST_CASE_METHOD(mcp_fixture, "a per-user server refuses a new user when max_instances are all busy", "[mcp_server]") { // AS-63
  auto router = std::make_shared<tool_router>(sys, std::make_shared<troupe::testing::fake_tools>());
  mcp_server_options o;
  o.config.name = "fake";
  o.config.isolation = "lazy_per_user";
  o.config.max_instances = 1;
  o.call_timeout_seconds = 30;
  auto s = script;
  router->add_server(o, [s](const protocol::mcp_server_config&) { return std::make_unique<fake_transport>(s); });
  for (int i = 0; i < 500 && router->mcp_tool_names().empty(); ++i)
    self->receive(caf::after(std::chrono::milliseconds(10)) >> [] {});
  REQUIRE(router->mcp_tool_names().size() == 4);

  auto run_call = [&](std::string user, std::string tool) {
    auto result = std::make_shared<std::promise<tool_outcome>>();
    auto handle = router->execute({"r", "c-" + user, tool, "{}", "/tmp", "t", user},
                                  [result](tool_outcome o) { result->set_value(std::move(o)); });
    return std::make_pair(handle, result->get_future());
  };
  auto alice = run_call("alice", "fake_hang"); // stays in flight
  auto bob = run_call("bob", "fake_echo");
  REQUIRE(bob.second.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(bob.second.get().output == "[MCP_ERROR] max_instances reached for server fake");
  CHECK(router->instance_count("fake") == 2); // the tool-learning instance and alice's
  alice.first->cancel();
  CHECK(alice.second.get().cancelled);
  auto bob_again = run_call("bob", "fake_echo"); // alice's instance is idle now and makes room
  REQUIRE(bob_again.second.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(bob_again.second.get().output == "done");
  router->stop();
}

TEST_CASE_METHOD(mcp_fixture, "a cancel that overtakes its call stops the call before it is sent", "[mcp_server]") {
  auto server = spawn();
  CHECK(call(server, "echo", R"({"text":"up"})") == "up");
  self->send(server, cancel_atom::value, std::string("early"));
  CHECK(call(server, "hang", "{}", "early") == "[MCP_ERROR] cancelled");
  auto methods = script->sent_methods();
  CHECK(std::count(methods.begin(), methods.end(), "tools/call") == 1); // only the echo call was sent
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(mcp_fixture, "a server that announces a changed tool list is listed again", "[mcp_server]") {
  std::mutex mu;
  std::vector<std::size_t> counts;
  auto server = spawn(5, [&](const mcp_server_status& st) {
    std::lock_guard<std::mutex> lock(mu);
    counts.push_back(st.tools.size());
  });
  CHECK(call(server, "echo", R"({"text":"a"})") == "a");
  // The server's first instance (generation 1) gains a tool and announces it, as a transport would.
  script->extra_tool = true;
  self->send(server, mcp_message_atom::value, uint64_t{1},
             std::string(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})"));
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!counts.empty() && counts.back() == 5)
        break;
    }
    self->receive(caf::after(std::chrono::milliseconds(10)) >> [] {});
  }
  CHECK(status(server).tools.size() == 5);
  CHECK(call(server, "added", "{}", "c2") == "done");
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

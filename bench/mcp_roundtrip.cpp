// MCP tool-call round trip: through troupe's mcp_server actor versus JSON-RPC written straight to
// the same kind of server over its pipes, in the same run; then concurrent calls across servers.
// Prints one JSON object on stdout.
#include "actors/mcp_server.hpp"
#include "io/mcp_stdio_transport.hpp"
#include "protocol/json.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

using namespace troupe;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

protocol::mcp_server_config server_config(const std::string& node, const std::string& script, int i) {
  protocol::mcp_server_config c;
  c.name = "bench" + std::to_string(i);
  c.command = node;
  c.args = {script};
  return c;
}

// Direct: one transport, requests written one at a time, each waiting for its answer.
std::vector<double> direct_round_trips(const protocol::mcp_server_config& cfg, int calls) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> inbox;
  auto transport = io::make_mcp_stdio_transport(cfg);
  auto err = transport->start({[&](std::string m) {
                                 std::lock_guard<std::mutex> lock(mu);
                                 inbox.push_back(std::move(m));
                                 cv.notify_one();
                               },
                               [&](std::string) {}});
  if (!err.empty()) {
    std::fprintf(stderr, "direct: %s\n", err.c_str());
    std::exit(1);
  }
  auto await_id = [&](int64_t id) {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      for (auto it = inbox.begin(); it != inbox.end(); ++it) {
        auto msg = protocol::parse_jsonrpc(*it);
        if (msg.id == id) {
          inbox.erase(it);
          return;
        }
      }
      inbox.clear();
      cv.wait_for(lock, std::chrono::seconds(10));
    }
  };
  transport->send(protocol::mcp_initialize_request(1));
  await_id(1);
  transport->send(protocol::mcp_initialized_notification());
  std::vector<double> out;
  for (int i = 0; i < calls; ++i) {
    auto id = 100 + i;
    auto t = clock_type::now();
    transport->send(protocol::mcp_tools_call_request(id, "echo", R"({"text":"ping"})"));
    await_id(id);
    out.push_back(ms_since(t));
  }
  transport->close();
  return out;
}

mcp_server_actor spawn_server(caf::actor_system& sys, const protocol::mcp_server_config& cfg) {
  mcp_server_options o;
  o.config = cfg;
  return spawn_mcp_server(sys, o, [](const protocol::mcp_server_config& c) { return io::make_mcp_stdio_transport(c); });
}

std::string call(caf::scoped_actor& self, const mcp_server_actor& s, const std::string& id) {
  std::string out;
  self->request(s, std::chrono::seconds(30), mcp_call_atom::value, std::string("echo"), std::string(R"({"text":"ping"})"), id)
    .receive([&](std::string& text) { out = text; }, [&](caf::error&) { out = "error"; });
  return out;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: troupe_bench_mcp NODE FAKE_MCP_SERVER_SCRIPT [CALLS] [CONCURRENT]\n");
    return 2;
  }
  std::string node = argv[1], script = argv[2];
  int calls = argc > 3 ? std::atoi(argv[3]) : 2000;
  int concurrent = argc > 4 ? std::atoi(argv[4]) : 200;

  auto direct = direct_round_trips(server_config(node, script, 0), calls);

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto server = spawn_server(sys, server_config(node, script, 1));
  if (call(self, server, "warmup") != "ping") {
    std::fprintf(stderr, "actor: the warm-up call failed\n");
    return 1;
  }
  std::vector<double> actor;
  for (int i = 0; i < calls; ++i) {
    auto t = clock_type::now();
    call(self, server, "c" + std::to_string(i));
    actor.push_back(ms_since(t));
  }

  // Concurrent: `concurrent` calls spread over 4 servers, all sent before any answer is awaited.
  std::vector<mcp_server_actor> servers;
  for (int i = 0; i < 4; ++i) {
    servers.push_back(spawn_server(sys, server_config(node, script, 10 + i)));
    call(self, servers.back(), "warm" + std::to_string(i));
  }
  auto t0 = clock_type::now();
  std::vector<clock_type::time_point> sent(concurrent);
  for (int i = 0; i < concurrent; ++i) {
    sent[i] = clock_type::now();
    self->send(servers[i % 4], mcp_call_atom::value, std::string("echo"), std::string(R"({"text":"ping"})"),
               "k" + std::to_string(i));
  }
  int ok = 0;
  std::vector<double> latencies;
  for (int i = 0; i < concurrent; ++i)
    self->receive([&](std::string& text) { ok += text == "ping" ? 1 : 0; latencies.push_back(ms_since(t0)); },
                  caf::after(std::chrono::seconds(30)) >> [&] { latencies.push_back(30000); });
  auto wall = ms_since(t0);
  for (auto& s : servers)
    self->send_exit(s, caf::exit_reason::user_shutdown);
  self->send_exit(server, caf::exit_reason::user_shutdown);

  std::printf("{\"calls\":%d,\"direct_p50_ms\":%.4f,\"direct_p99_ms\":%.4f,\"actor_p50_ms\":%.4f,"
              "\"actor_p99_ms\":%.4f,\"p50_ratio_actor_over_direct\":%.3f,"
              "\"concurrent\":{\"calls\":%d,\"servers\":4,\"ok\":%d,\"wall_ms\":%.2f,\"calls_per_s\":%.1f,"
              "\"p50_ms\":%.3f,\"p99_ms\":%.3f}}\n",
              calls, percentile(direct, 0.5), percentile(direct, 0.99), percentile(actor, 0.5),
              percentile(actor, 0.99), percentile(actor, 0.5) / percentile(direct, 0.5), concurrent, ok, wall,
              ok / (wall / 1000.0), percentile(latencies, 0.5), percentile(latencies, 0.99));
  return ok == concurrent ? 0 : 1;
}

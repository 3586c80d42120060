// The service policy's cost (AS-35..AS-37), two ways. Prints one JSON object on stdout.
//
// `decide`: decisions per second of protocol::decide (a pure function) over a fixed mix of calls:
//   exec commands that are safe, dangerous, forbidden or unknown, read/list/write/edit_file, and MCP
//   tool names, from users of several tenants, under a policy with user, tenant and tool rules (the
//   heuristics decide what no rule matches). In the same run and on the same inputs, as baselines:
//     loop        the loop alone: it touches every input and sinks a value, nothing else;
//     parse       protocol::json::parse of the same tool_args text, the step that precedes every
//                 decision on a live call (actors/run.cpp parses the arguments, then decides);
//     decide_off  decide with safety.enabled=false: what a troupe with the policy off runs;
//     decide      decide with the policy (the figure);
//     parse_decide parse then decide: the live call's whole policy step.
//   Each round runs every variant once, in a rotated order, for --calls calls; the figure is the
//   median over --rounds rounds of ns per call (calls/s = 1e9 / that), and the ratios are of those
//   medians. The mix's decision levels are counted and a few known answers are checked first. Then
//   decide alone per kind of call (exec by its command's class, file tools, MCP tools), calls/10
//   calls per kind per round, median over the rounds.
//
// `tool-call`: the latency a tool call gains from the policy, against two running troupes that run
//   the same scripted model (one list_dir call, then an answer): --port-on with the safety policy on
//   and rules configured, --port-off with `safety.enabled: false`. The client alternates between
//   them (on/off, then off/on, ...) over one keep-alive connection each, --runs completions each
//   (stream:false) after --warmup unrecorded ones, and reads per run: the client round trip, the
//   session_end's metadata.timing.time_to_final_ms (troupe's clock, run start to final answer), the
//   tool_result's duration_ms (the tool alone), and the gap from the step_end that precedes the
//   call to its tool_result (event timestamps, microseconds: decide + approval gate + the tool +
//   emitting the result). p50/p99/mean per server, on - off and on / off of each, and the median of
//   the differences of adjacent on/off pairs.
//
//   troupe_bench_policy print-policy   (the `policy` object for the "on" troupe's config)
//   troupe_bench_policy decide [--calls N] [--rounds R]
//   troupe_bench_policy tool-call --port-on P --port-off Q [--host H] [--runs N] [--warmup W]
//                                 [--user-key K]
#include "protocol/auth.hpp"
#include "protocol/json.hpp"
#include "protocol/policy.hpp"

#include "bench_stats.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace troupe;
using steady = std::chrono::steady_clock;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

using troupe::bench::json_list;
using troupe::bench::median;
using troupe::bench::percentile;

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// ---- decide -------------------------------------------------------------------------------------

// The policy both subcommands use (the tool-call troupe "on" is configured with the same object; see
// bench/run). list_dir for pska:u1 passes the user and tenant rules and matches tool:list_dir.
const char* bench_policy = R"({
  "tool_rules": {
    "list_dir": "allow",
    "write_file": "caution",
    "pska_pska_search": "allow",
    "mcp_github_create_issue": "require_approval",
    "mcp_shell_run": "deny"
  },
  "tenant_rules": {
    "pska": {"tools": {"exec": "require_approval", "edit_file": "caution"}},
    "blocked-co": "deny",
    "acme": {"tools": {"*": "caution"}}
  },
  "user_rules": {
    "pska:admin": "allow",
    "pska:intern": {"tools": {"write_file": "deny", "edit_file": "deny"}}
  }
})";

struct call_input {
  std::string kind; // exec_safe, exec_dangerous, exec_forbidden, exec_unknown, file, mcp
  std::string tool;
  std::string args_text;
  std::string user;
  std::string tenant;
  std::unique_ptr<protocol::json::document> args;
};

std::vector<call_input> make_mix() {
  const std::string note(200, 'x');
  // {kind, tool, args, user}: users of tenants with rules (pska, acme, blocked-co) and without (corp, "").
  const std::vector<std::array<std::string, 4>> raw = {
    // exec, safe patterns
    {"exec_safe", "exec", R"({"command":"ls -la notes","timeout":30})", "corp:dev"},
    {"exec_safe", "exec", R"({"command":"cat README.md"})", "corp:dev"},
    {"exec_safe", "exec", R"({"command":"git status --short"})", "anonymous"},
    {"exec_safe", "exec", R"({"command":"grep -rn TODO src | head -20"})", "corp:ops"},
    {"exec_safe", "exec", R"({"command":"find . -name '*.cpp' -newer CMakeLists.txt"})", "acme:bob"},
    // exec, dangerous patterns
    {"exec_dangerous", "exec", R"({"command":"rm notes/old.txt"})", "corp:dev"},
    {"exec_dangerous", "exec", R"({"command":"mv build/out.bin /tmp/out.bin"})", "corp:ops"},
    {"exec_dangerous", "exec", R"({"command":"chmod 755 scripts/run.sh"})", "anonymous"},
    {"exec_dangerous", "exec", R"({"command":"echo done > status.txt"})", "pska:u1"},
    // exec, forbidden patterns (no rule can unlock them, not even pska:admin's allow)
    {"exec_forbidden", "exec", R"({"command":"rm -rf / --no-preserve-root"})", "pska:admin"},
    {"exec_forbidden", "exec", R"({"command":"dd if=/dev/zero of=/dev/sda bs=1M"})", "corp:ops"},
    {"exec_forbidden", "exec", R"({"command":"sudo shutdown -h now"})", "acme:bob"},
    // exec, unknown
    {"exec_unknown", "exec", R"({"command":"make -j2 troupe","timeout":600})", "corp:dev"},
    {"exec_unknown", "exec", R"({"command":"python3 tools/report.py --month 2024-05"})", "blocked-co:x"},
    // file tools
    {"file", "read_file", R"({"path":"notes/welcome.txt"})", "pska:u1"},
    {"file", "read_file", R"({"path":"docs/architecture.md","offset":0,"limit":200})", "corp:dev"},
    {"file", "list_dir", R"({"path":"."})", "pska:u1"},
    {"file", "list_dir", R"({"path":"notes"})", "anonymous"},
    {"file", "write_file", R"({"path":"notes/a.txt","content":")" + note + R"("})", "pska:intern"},
    {"file", "write_file", R"({"path":"notes/b.txt","content":")" + note + R"("})", "corp:dev"},
    {"file", "edit_file", R"({"path":"notes/a.txt","old":"hello","new":"goodbye"})", "pska:u1"},
    {"file", "edit_file", R"({"path":"notes/a.txt","old":"a","new":"b"})", "acme:bob"},
    // MCP tools (registered names)
    {"mcp", "pska_pska_search", R"({"query":"quarterly revenue by region","knowledge_base_ids":["kb1","kb2"],"top_k":8})", "pska:u1"},
    {"mcp", "pska_pska_search", R"({"query":"onboarding checklist","scope":{"mode":"strict"}})", "acme:bob"},
    {"mcp", "mcp_github_create_issue", R"({"repo":"org/troupe","title":"Flaky test","body":"It fails on CI."})", "corp:dev"},
    {"mcp", "mcp_shell_run", R"({"cmd":"uptime"})", "corp:ops"},
    {"mcp", "mcp_fs_read", R"({"path":"/etc/hostname"})", "blocked-co:x"},
    {"mcp", "mcp_fs_read", R"({"path":"/srv/data/report.csv"})", ""},
  };
  std::vector<call_input> out;
  for (auto& [kind, tool, args, user] : raw) {
    call_input c{kind, tool, args, user, protocol::infer_tenant(user), nullptr};
    auto doc = protocol::json::parse(args);
    if (!doc || !doc->IsObject()) {
      std::fprintf(stderr, "bad bench input %s\n", args.c_str());
      std::exit(2);
    }
    c.args = std::make_unique<protocol::json::document>(std::move(*doc));
    out.push_back(std::move(c));
  }
  return out;
}

struct decide_options {
  int64_t calls = 100000;
  int rounds = 7;
};

int run_decide(const decide_options& o) {
  std::vector<std::string> errors;
  auto policy_doc = protocol::json::parse(bench_policy);
  auto policy = protocol::parse_policy(&*policy_doc, errors);
  if (!errors.empty()) {
    std::fprintf(stderr, "bench policy is invalid: %s\n", errors.front().c_str());
    return 2;
  }
  protocol::safety_config on;
  protocol::safety_config off;
  off.enabled = false;
  auto mix = make_mix();

  // Known answers, so that the loop measures the decisions it claims to.
  auto check = [&](std::size_t i, protocol::decision_level want, const char* reason) {
    auto& c = mix[i];
    auto d = protocol::decide(policy, on, c.tool, *c.args, c.user, c.tenant);
    if (d.level != want || d.reason != reason) {
      std::fprintf(stderr, "decide(%s %s, %s): %s '%s', expected %s '%s'\n", c.tool.c_str(), c.args_text.c_str(),
                   c.user.c_str(), protocol::to_string(d.level), d.reason.c_str(), protocol::to_string(want), reason);
      std::exit(1);
    }
  };
  using L = protocol::decision_level;
  check(0, L::safe, "Command matches safe pattern");
  check(5, L::danger, "Command matches dangerous pattern");
  check(8, L::danger, "Policy tenant:pska requires approval");
  check(9, L::forbidden, "Command matches forbidden pattern");
  check(12, L::caution, "Unknown command (logged but allowed)");
  check(13, L::forbidden, "Policy tenant:blocked-co denies tool");
  check(16, L::safe, "Policy tool:list_dir allows tool");
  check(18, L::forbidden, "Policy user:pska:intern denies tool");
  check(21, L::caution, "Policy tenant:acme allows with caution");
  check(24, L::danger, "Policy tool:mcp_github_create_issue requires approval");
  check(27, L::caution, "Unclassified tool (logged but allowed)");

  std::map<std::string, int> levels;
  for (auto& c : mix)
    ++levels[protocol::to_string(protocol::decide(policy, on, c.tool, *c.args, c.user, c.tenant).level)];

  const std::size_t n = mix.size();
  const int64_t calls = std::max<int64_t>(o.calls, static_cast<int64_t>(n));
  uint64_t sink = 0;
  auto timed = [&](auto&& one) {
    auto t0 = steady::now();
    std::size_t i = 0;
    for (int64_t k = 0; k < calls; ++k) {
      sink += one(mix[i]);
      if (++i == n)
        i = 0;
    }
    return std::chrono::duration<double, std::nano>(steady::now() - t0).count() / static_cast<double>(calls);
  };
  auto loop = [&](const call_input& c) -> uint64_t {
    return c.tool.size() + c.user.size() + c.tenant.size() + c.args->MemberCount();
  };
  auto parse = [&](const call_input& c) -> uint64_t {
    auto d = protocol::json::parse(c.args_text);
    return d ? d->MemberCount() : 0;
  };
  auto decide_with = [&](protocol::safety_config s) {
    return [&, s](const call_input& c) -> uint64_t {
      auto d = protocol::decide(policy, s, c.tool, *c.args, c.user, c.tenant);
      return static_cast<uint64_t>(d.level) + d.reason.size();
    };
  };
  auto decide_on = decide_with(on);
  auto decide_off = decide_with(off);
  auto parse_decide = [&](const call_input& c) -> uint64_t {
    auto a = protocol::json::parse(c.args_text);
    auto d = protocol::decide(policy, on, c.tool, *a, c.user, c.tenant);
    return static_cast<uint64_t>(d.level) + d.reason.size();
  };

  const std::vector<std::string> names = {"loop", "parse", "decide_off", "decide", "parse_decide"};
  std::map<std::string, std::vector<double>> ns;
  auto run_variant = [&](const std::string& v) {
    if (v == "loop")
      return timed(loop);
    if (v == "parse")
      return timed(parse);
    if (v == "decide_off")
      return timed(decide_off);
    if (v == "decide")
      return timed(decide_on);
    return timed(parse_decide);
  };
  // Warm-up: caches, the regexes' first use, the allocator.
  for (auto& v : names)
    run_variant(v);
  for (int r = 0; r < o.rounds; ++r)
    for (std::size_t k = 0; k < names.size(); ++k) {
      auto& v = names[(k + static_cast<std::size_t>(r)) % names.size()];
      ns[v].push_back(run_variant(v));
    }

  // decide alone per kind of call, calls/10 per kind per round: where the time goes.
  const std::vector<std::string> kinds = {"exec_safe", "exec_dangerous", "exec_forbidden", "exec_unknown", "file", "mcp"};
  std::map<std::string, std::vector<double>> kind_ns;
  const int64_t kind_calls = std::max<int64_t>(calls / 10, 1000);
  for (int r = 0; r < o.rounds; ++r)
    for (auto& kind : kinds) {
      std::vector<const call_input*> of_kind;
      for (auto& c : mix)
        if (c.kind == kind)
          of_kind.push_back(&c);
      auto t0 = steady::now();
      std::size_t i = 0;
      for (int64_t k = 0; k < kind_calls; ++k) {
        sink += decide_on(*of_kind[i]);
        if (++i == of_kind.size())
          i = 0;
      }
      kind_ns[kind].push_back(std::chrono::duration<double, std::nano>(steady::now() - t0).count()
                              / static_cast<double>(kind_calls));
    }

  std::map<std::string, double> med;
  for (auto& v : names)
    med[v] = median(ns[v]);
  auto per_s = [](double nanos) { return nanos > 0 ? 1e9 / nanos : 0; };
  std::printf("{\"calls_per_round\":%lld,\"rounds\":%d,\"mix_size\":%zu,\"mix_levels\":{", static_cast<long long>(calls),
              o.rounds, n);
  bool first = true;
  for (auto& [level, count] : levels) {
    std::printf("%s\"%s\":%d", first ? "" : ",", level.c_str(), count);
    first = false;
  }
  std::printf("},\"ns_per_call\":{");
  for (std::size_t k = 0; k < names.size(); ++k)
    std::printf("%s\"%s\":%s", k ? "," : "", names[k].c_str(), json_list(ns[names[k]], "%.1f").c_str());
  std::printf("},\"ns_per_call_median\":{");
  for (std::size_t k = 0; k < names.size(); ++k)
    std::printf("%s\"%s\":%.1f", k ? "," : "", names[k].c_str(), med[names[k]]);
  std::printf("},\"per_s_median\":{");
  for (std::size_t k = 0; k < names.size(); ++k)
    std::printf("%s\"%s\":%.0f", k ? "," : "", names[k].c_str(), per_s(med[names[k]]));
  std::printf("},\"decide_ns_by_kind_median\":{");
  for (std::size_t k = 0; k < kinds.size(); ++k)
    std::printf("%s\"%s\":%.1f", k ? "," : "", kinds[k].c_str(), median(kind_ns[kinds[k]]));
  std::printf("},\"decisions_per_s\":%.0f,\"ratio_decide_over_parse\":%.3f,\"ratio_parse_decide_over_parse\":%.3f,"
              "\"ratio_decide_over_decide_off\":%.1f,\"sink\":%llu}\n",
              per_s(med["decide"]), med["parse"] > 0 ? med["decide"] / med["parse"] : 0,
              med["parse"] > 0 ? med["parse_decide"] / med["parse"] : 0,
              med["decide_off"] > 0 ? med["decide"] / med["decide_off"] : 0, static_cast<unsigned long long>(sink % 1000));
  return 0;
}

// ---- tool-call ----------------------------------------------------------------------------------

struct call_options {
  std::string host = "127.0.0.1";
  int port_on = 0;
  int port_off = 0;
  int runs = 500;
  int warmup = 20;
  std::string user_key = "pska:u1";
};

// One keep-alive connection to a troupe, reopened when the server closes it.
class client {
public:
  client(net::io_context& ioc, const std::string& host, int port)
    : sock_(ioc), ep_(net::ip::make_address(host), static_cast<uint16_t>(port)),
      host_(host + ":" + std::to_string(port)) {}

  // POSTs `body` as JSON; the status and body, or status 0 and the error in `body`.
  std::pair<int, std::string> post(const std::string& target, const std::string& body) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      beast::error_code ec;
      if (!sock_.is_open()) {
        sock_.connect(ep_, ec);
        if (ec)
          return {0, "connect: " + ec.message()};
        sock_.set_option(tcp::no_delay(true));
      }
      http::request<http::string_body> req{http::verb::post, target, 11};
      req.set(http::field::host, host_);
      req.set(http::field::content_type, "application/json");
      req.keep_alive(true);
      req.body() = body;
      req.prepare_payload();
      http::write(sock_, req, ec);
      http::response_parser<http::string_body> parser;
      parser.body_limit(64 * 1024 * 1024);
      if (!ec)
        http::read(sock_, buf_, parser, ec);
      if (ec) {
        sock_.close(ec);
        buf_.consume(buf_.size());
        continue; // a keep-alive connection the server had closed: once more on a fresh one
      }
      auto res = parser.release();
      if (!res.keep_alive())
        sock_.close(ec);
      return {static_cast<int>(res.result_int()), std::move(res.body())};
    }
    return {0, "connection closed twice"};
  }

private:
  tcp::socket sock_;
  tcp::endpoint ep_;
  std::string host_;
  beast::flat_buffer buf_;
};

// Seconds since midnight of an AS-78 timestamp (YYYY-MM-DDTHH:MM:SS.ffffff+00:00); -1 if malformed.
double day_seconds(const std::string& ts) {
  int h = 0, m = 0;
  double s = 0;
  auto t = ts.find('T');
  if (t == std::string::npos || std::sscanf(ts.c_str() + t + 1, "%d:%d:%lf", &h, &m, &s) != 3)
    return -1;
  return h * 3600.0 + m * 60.0 + s;
}

struct sample {
  double rtt_ms = 0;
  double final_ms = -1; // session_end metadata.timing.time_to_final_ms
  double tool_ms = -1;  // tool_result duration_ms
  double gap_ms = -1;   // step_end -> tool_result
  std::string level;    // tool_result metadata.decision_level
};

// Reads one stream:false summary; an error text when it is not the expected completed run.
std::optional<std::string> read_summary(const std::string& text, sample& s) {
  auto doc = protocol::json::parse(text);
  if (!doc || !doc->IsObject())
    return "not JSON: " + text.substr(0, 200);
  if (protocol::json::get_string(*doc, "status") != "completed")
    return "status " + protocol::json::get_string(*doc, "status") + ": " + text.substr(0, 300);
  auto events = protocol::json::member(*doc, "events");
  if (!events || !events->IsArray())
    return std::string("no events");
  double step_end_ts = -1;
  int tool_results = 0;
  for (auto& e : events->GetArray()) {
    auto type = protocol::json::get_string(e, "type");
    if (type == "step_end" && step_end_ts < 0)
      step_end_ts = day_seconds(protocol::json::get_string(e, "timestamp"));
    if (type == "tool_result") {
      ++tool_results;
      s.tool_ms = protocol::json::get_number(e, "duration_ms").value_or(-1);
      auto md = protocol::json::member(e, "metadata");
      s.level = md ? protocol::json::get_string(*md, "decision_level") : "";
      double ts = day_seconds(protocol::json::get_string(e, "timestamp"));
      if (ts >= 0 && step_end_ts >= 0)
        s.gap_ms = (ts - step_end_ts + (ts < step_end_ts ? 86400 : 0)) * 1000;
    }
    if (type == "session_end") {
      auto md = protocol::json::member(e, "metadata");
      auto timing = md ? protocol::json::member(*md, "timing") : nullptr;
      s.final_ms = timing ? protocol::json::get_number(*timing, "time_to_final_ms").value_or(-1) : -1;
    }
  }
  if (tool_results != 1)
    return "expected one tool_result, got " + std::to_string(tool_results);
  if (s.final_ms < 0 || s.tool_ms < 0 || s.gap_ms < 0)
    return std::string("missing timing fields");
  return std::nullopt;
}

std::string stats_json(const std::vector<double>& v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"p50\":%.3f,\"p99\":%.3f,\"mean\":%.3f,\"min\":%.3f}", percentile(v, 50),
                percentile(v, 99), mean(v), v.empty() ? -1 : *std::min_element(v.begin(), v.end()));
  return buf;
}

int run_tool_call(const call_options& o) {
  net::io_context ioc;
  client on(ioc, o.host, o.port_on), off(ioc, o.host, o.port_off);
  const std::string body =
    R"({"stream":false,"user_key":")" + o.user_key + R"(","messages":[{"role":"user","content":"What is in my workspace?"}]})";
  std::map<std::string, std::vector<sample>> got;
  std::map<std::string, std::map<std::string, int>> levels;
  int errors = 0;
  std::string error_sample;
  auto one = [&](client& c, const char* name, bool record) {
    sample s;
    auto t0 = steady::now();
    auto [status, text] = c.post("/v1/chat/completions", body);
    s.rtt_ms = std::chrono::duration<double, std::milli>(steady::now() - t0).count();
    std::optional<std::string> err;
    if (status != 200)
      err = std::string(name) + ": HTTP " + std::to_string(status) + " " + text.substr(0, 200);
    else if (auto e = read_summary(text, s))
      err = std::string(name) + ": " + *e;
    if (err) {
      ++errors;
      if (error_sample.empty())
        error_sample = *err;
      return;
    }
    if (record) {
      ++levels[name][s.level];
      got[name].push_back(s);
    }
  };
  for (int i = 0; i < o.warmup; ++i) {
    one(on, "on", false);
    one(off, "off", false);
  }
  errors = 0;
  auto t0 = steady::now();
  for (int i = 0; i < o.runs; ++i) {
    if (i % 2 == 0) {
      one(on, "on", true);
      one(off, "off", true);
    } else {
      one(off, "off", true);
      one(on, "on", true);
    }
  }
  double wall_s = std::chrono::duration<double>(steady::now() - t0).count();

  auto field = [&](const char* name, double sample::*m) {
    std::vector<double> v;
    for (auto& s : got[name])
      v.push_back(s.*m);
    return v;
  };
  // Adjacent pairs: run i of each server, taken one right after the other.
  auto paired = [&](double sample::*m) {
    std::vector<double> d;
    auto& a = got["on"];
    auto& b = got["off"];
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      d.push_back(a[i].*m - b[i].*m);
    return median(d);
  };
  std::string out = "{\"runs\":" + std::to_string(o.runs) + ",\"warmup\":" + std::to_string(o.warmup) +
                    ",\"user_key\":\"" + o.user_key + "\",\"completed\":{\"on\":" +
                    std::to_string(got["on"].size()) + ",\"off\":" + std::to_string(got["off"].size()) +
                    "},\"errors\":" + std::to_string(errors);
  if (!error_sample.empty())
    out += ",\"error_sample\":" + protocol::json::quote(error_sample);
  out += ",\"decision_levels\":{";
  bool first_server = true;
  for (auto& [server, by_level] : levels) {
    out += std::string(first_server ? "" : ",") + "\"" + server + "\":{";
    bool first = true;
    for (auto& [level, count] : by_level) {
      out += std::string(first ? "" : ",") + protocol::json::quote(level) + ":" + std::to_string(count);
      first = false;
    }
    out += "}";
    first_server = false;
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "},\"wall_s\":%.2f", wall_s);
  out += buf;
  const std::vector<std::pair<const char*, double sample::*>> metrics = {
    {"round_trip_ms", &sample::rtt_ms},
    {"time_to_final_ms", &sample::final_ms},
    {"step_end_to_tool_result_ms", &sample::gap_ms},
    {"tool_duration_ms", &sample::tool_ms},
  };
  for (auto& [key, m] : metrics) {
    auto a = field("on", m);
    auto b = field("off", m);
    double p50a = percentile(a, 50), p50b = percentile(b, 50), p99a = percentile(a, 99), p99b = percentile(b, 99);
    char line[512];
    std::snprintf(line, sizeof line,
                  ",\"%s\":{\"on\":%s,\"off\":%s,\"p50_diff\":%.3f,\"p99_diff\":%.3f,\"p50_ratio\":%.3f,"
                  "\"p99_ratio\":%.3f,\"paired_median_diff\":%.3f}",
                  key, stats_json(a).c_str(), stats_json(b).c_str(), p50a - p50b, p99a - p99b,
                  p50b > 0 ? p50a / p50b : 0, p99b > 0 ? p99a / p99b : 0, paired(m));
    out += line;
  }
  out += "}";
  std::printf("%s\n", out.c_str());
  return got["on"].empty() || got["off"].empty() ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"the service policy's cost: decide() per second, and the tool-call latency it adds"};
  app.require_subcommand(1);
  decide_options d;
  auto decide = app.add_subcommand("decide", "decisions per second of protocol::decide, with baselines");
  decide->add_option("--calls", d.calls, "calls per variant per round")->check(CLI::PositiveNumber);
  decide->add_option("--rounds", d.rounds)->check(CLI::PositiveNumber);
  call_options c;
  auto call = app.add_subcommand("tool-call", "a list_dir tool call with the policy on vs off, two troupes");
  call->add_option("--host", c.host);
  call->add_option("--port-on", c.port_on, "troupe with the safety policy on")->required()->check(CLI::Range(1, 65535));
  call->add_option("--port-off", c.port_off, "troupe with safety.enabled false")->required()->check(CLI::Range(1, 65535));
  call->add_option("--runs", c.runs, "recorded completions per troupe")->check(CLI::PositiveNumber);
  call->add_option("--warmup", c.warmup, "unrecorded completions per troupe first")->check(CLI::NonNegativeNumber);
  call->add_option("--user-key", c.user_key);
  auto print_policy = app.add_subcommand("print-policy", "the policy object both measurements use (JSON)");
  CLI11_PARSE(app, argc, argv);
  if (print_policy->parsed()) {
    std::printf("%s\n", bench_policy);
    return 0;
  }
  if (decide->parsed())
    return run_decide(d);
  return run_tool_call(c);
}

// Unit tests of what `troupe run` prints and decides (issue 20 item 11): an agent event (AS-12, AS-13)
// as readable, terminal-safe, bounded lines; the exit code of a run's status; the reconnect backoff.
#include "protocol/run_view.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace rv = troupe::protocol::run_view;
namespace json = troupe::protocol::json;

namespace {

json::document parsed(const std::string& text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  return std::move(*doc);
}

std::vector<std::string> lines_of(const std::string& event_json, rv::view_limits limits = {}) {
  return rv::event_lines(parsed(event_json), limits);
}

bool printable(const std::string& line) {
  for (unsigned char c : line)
    if (c < 0x20 || c == 0x7f)
      return false;
  return true;
}

} // namespace

TEST_CASE("troupe run: a run's terminal status gives its exit code; a run not over gives none", "[run_view]") {
  CHECK(rv::exit_code_of("completed") == 0);
  CHECK(rv::exit_code_of("failed") == 1);
  CHECK(rv::exit_code_of("cancelled") == 3);
  CHECK_FALSE(rv::exit_code_of("queued"));
  CHECK_FALSE(rv::exit_code_of("running"));
  CHECK_FALSE(rv::exit_code_of("paused")); // unknown: not over (AS-16)
  CHECK(rv::exit_usage == 2);
  CHECK(rv::exit_unreachable == 4);
}

TEST_CASE("troupe run: a tool call shows the tool and its arguments; its result is labelled and bounded", "[run_view]") {
  auto call = lines_of(R"({"type":"tool_call","tool_name":"exec","tool_args":{"command":"ls -la"},"content":"Calling exec",
    "metadata":{"call_id":"c1"}})");
  REQUIRE(call.size() == 1);
  CHECK(call[0] == R"([tool] exec {"command":"ls -la"})");

  std::string output;
  for (int i = 0; i < 30; ++i)
    output += "line " + std::to_string(i) + "\\n";
  auto result = lines_of(R"({"type":"tool_result","tool_name":"exec","content":")" + output +
                           R"(","metadata":{"approved":true}})");
  REQUIRE(result.size() == 9); // 8 lines and the count of the rest (view_limits::result_lines)
  CHECK(result[0] == "[result] exec (approved): line 0");
  CHECK(result[7] == "            line 7");
  CHECK(result[8] == "            ... (22 more lines)");
}

TEST_CASE("troupe run: a denied tool call says why (AS-32)", "[run_view]") {
  auto call = lines_of(R"({"type":"tool_call","tool_name":"exec","tool_args":{},"metadata":{"tool_policy_denied":true,
    "denial_reason":"run tool_policy mode=none disables all tools"}})");
  REQUIRE(call.size() == 1);
  CHECK(call[0] == "[tool] exec {} (denied: run tool_policy mode=none disables all tools)");
}

TEST_CASE("troupe run: thinking, steps, an approval request, the answer and an error read as labelled lines", "[run_view]") {
  CHECK(lines_of(R"({"type":"think","content":"Let me look."})") == std::vector<std::string>{"[think] Let me look."});
  CHECK(lines_of(R"({"type":"step_end","content":"x","metadata":{"step":2}})") ==
        std::vector<std::string>{"[step 2 done]"});
  auto ask = lines_of(R"({"type":"ask_user","content":"Command matches dangerous pattern","tool_name":"exec",
    "tool_args":{"command":"rm a"},"approval_request_id":"approval-0123456789","metadata":{}})");
  REQUIRE(ask.size() == 1);
  CHECK(ask[0] == R"([approval] approval-0123456789 asks to run exec {"command":"rm a"}: Command matches dangerous pattern)");
  CHECK(lines_of(R"({"type":"session_end","content":"Done.\nAll good."})") ==
        std::vector<std::string>{"[answer] Done.", "         All good."});
  CHECK(lines_of(R"({"type":"error","content":"Run cancelled","metadata":{"error_type":"CancelledError"}})") ==
        std::vector<std::string>{"[error] Run cancelled (CancelledError)"});
  auto start = lines_of(R"({"type":"session_start","run_id":"r1","content":"hi","metadata":{"attempt":1,"model":"m"}})");
  CHECK(start == std::vector<std::string>{"[start] run r1, attempt 1, model m", "[query] hi"});
}

TEST_CASE("troupe run: an unknown event type is shown with its type and content (AS-16)", "[run_view]") {
  CHECK(lines_of(R"({"type":"heartbeat_note","content":"hello"})") ==
        std::vector<std::string>{"[heartbeat_note] hello"});
}

TEST_CASE("troupe run: escape sequences, carriage returns and bidi overrides from the model print as visible text", "[run_view]") {
  CHECK(rv::terminal_safe("a\x1b[2Jb\rc\x07\x7f") == "a\\x1b[2Jb\\x0dc\\x07\\x7f");
  CHECK(rv::terminal_safe("tab\there") == "tab here");
  CHECK(rv::terminal_safe("\xc2\x9b" "31m") == "\\u009b31m");    // C1 CSI
  CHECK(rv::terminal_safe("x\xe2\x80\xaey") == "x\\u202ey");      // right-to-left override
  CHECK(rv::terminal_safe("caf\xc3\xa9 \xff") == "caf\xc3\xa9 \xef\xbf\xbd"); // UTF-8 kept, garbage repaired
  CHECK(rv::terminal_safe("two\nlines") == "two\nlines");

  auto lines = lines_of(R"({"type":"session_end","content":"\u001b]0;pwned\u0007\r\nok","tool_name":"\u001b[31m"})");
  for (auto& l : lines)
    CHECK(printable(l));
  CHECK(lines[0] == "[answer] \\x1b]0;pwned\\x07\\x0d");
}

TEST_CASE("troupe run --json: DEL, C1 controls and bidi overrides inside strings become \\u escapes of the same value", "[run_view]") {
  auto doc = parsed("{\"content\":\"a\x7f\xc2\x9b" "31m\xe2\x80\xae" "b \xc3\xa9\",\"n\":1}");
  auto safe = rv::terminal_safe_json(json::serialize(doc));
  CHECK(safe == std::string(R"({"content":"a\u007f\u009b31m\u202eb )") + "\xc3\xa9" + R"(","n":1})");
  auto again = parsed(safe);
  CHECK(json::serialize(again) == json::serialize(doc)); // the same value
}

TEST_CASE("troupe run: no printed line exceeds the width; a long answer is folded, not cut", "[run_view]") {
  rv::view_limits limits;
  limits.width = 40;
  std::string long_text(130, 'a');
  auto think = lines_of(R"({"type":"think","content":")" + long_text + R"("})", limits);
  REQUIRE(think.size() == 1);
  CHECK(think[0].size() <= 40);
  CHECK(think[0].substr(think[0].size() - 3) == "\xe2\x80\xa6");

  auto answer = lines_of(R"({"type":"session_end","content":")" + long_text + R"("})", limits);
  std::string joined;
  for (auto& l : answer) {
    CHECK(l.size() <= 40);
    joined += l.substr(9); // "[answer] " and its indent are both 9 bytes
  }
  CHECK(joined == long_text);

  // A cut never splits a UTF-8 sequence.
  auto cut = rv::bounded_line("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 6);
  CHECK(cut == "\xc3\xa9\xe2\x80\xa6");
}

TEST_CASE("troupe run: an ask_user event names the approval to resolve; other events none", "[run_view]") {
  auto a = rv::approval_of(parsed(R"({"type":"ask_user","tool_name":"exec","approval_request_id":"approval-0a1b2c3d4e"})"));
  REQUIRE(a);
  CHECK(a->id == "approval-0a1b2c3d4e");
  CHECK(a->tool_name == "exec");
  auto compat = rv::approval_of(parsed(R"({"type":"ask_user","approval_request_id":null,"metadata":{"request_id":"approval-1"}})"));
  REQUIRE(compat);
  CHECK(compat->id == "approval-1");
  CHECK_FALSE(rv::approval_of(parsed(R"({"type":"tool_call","approval_request_id":"approval-1"})")));
}

TEST_CASE("troupe run: the progress line gives status, attempt, events and steps", "[run_view]") {
  auto line = rv::progress_line(parsed(R"({"run_id":"r9","status":"running","attempts":2,"event_count":7,
    "error":null,"last_error":"upstream 503"})"), 1);
  CHECK(line == "[run] r9: running, attempt 2, 7 events, 1 step: upstream 503");
}

TEST_CASE("troupe run: a dropped stream is retried after a doubling delay, bounded; only 408, 429 and 5xx are retried", "[run_view]") {
  CHECK(rv::reconnect_delay_ms(1) == 250);
  CHECK(rv::reconnect_delay_ms(2) == 500);
  CHECK(rv::reconnect_delay_ms(5) == 4000);
  CHECK(rv::reconnect_delay_ms(50) == 4000);
  CHECK(rv::max_reconnects > 0);
  CHECK(rv::retryable_status(503));
  CHECK(rv::retryable_status(429));
  CHECK(rv::retryable_status(408));
  CHECK_FALSE(rv::retryable_status(401));
  CHECK_FALSE(rv::retryable_status(404));
}

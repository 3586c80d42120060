// SSE framing of what troupe sends (AS-11, AS-73, AS-75).
#include "protocol/agent_event.hpp"
#include "protocol/sse.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

TEST_CASE("an event frame carries id, event and one data line", "[sse]") {
  CHECK(sse_frame(5, "think", R"({"a":1})") == "id: 5\nevent: think\ndata: {\"a\":1}\n\n");
}

TEST_CASE("a multi-line payload becomes one data line per line", "[sse]") {
  CHECK(sse_frame(std::nullopt, "x", "a\nb") == "event: x\ndata: a\ndata: b\n\n");
}

TEST_CASE("the done frame and heartbeats carry no id", "[sse]") { // AS-11, AS-73, AS-75
  CHECK(sse_done_frame() == "event: done\ndata: [DONE]\n\n");
  CHECK(sse_heartbeat() == ": keepalive\n\n");
}

TEST_CASE("an agent event frame's id is its sequence and its payload is a single line", "[sse]") { // AS-73
  agent_event e;
  e.type = "think";
  e.sequence = 7;
  e.run_id = "r1";
  e.content = "line one\nline two";
  auto frame = to_sse_frame(e);
  CHECK(frame.rfind("id: 7\nevent: think\ndata: {", 0) == 0);
  CHECK(std::count(frame.begin(), frame.end(), '\n') == 4);
}

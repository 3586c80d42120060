// The fastreact.agent_event.v1 payload (AS-12, AS-78).
#include "protocol/agent_event.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"

#include <catch2/catch.hpp>

#include <regex>

using namespace troupe::protocol;

TEST_CASE("every event payload has all the keys of AS-12, inapplicable ones null", "[event]") {
  agent_event e;
  e.type = "session_start";
  e.run_id = "r1";
  e.session_id = "s1";
  e.timestamp = "2026-01-01T00:00:00.000000+00:00";
  e.content = "q";
  auto doc = json::parse(to_json(e));
  REQUIRE(doc);
  for (auto key : {"schema", "type", "event_id", "sequence", "parent_event_id", "run_id", "session_id", "timestamp",
                   "content", "tool_name", "tool_args", "tool_call_id", "duration_ms", "cited_source_ids",
                   "approval_request_id", "metadata"})
    CHECK(json::member(*doc, key) != nullptr);
  CHECK(json::get_string(*doc, "schema") == "fastreact.agent_event.v1");
  CHECK(json::get_string(*doc, "event_id") == "r1:0");
  CHECK((*doc)["parent_event_id"].IsNull());
  CHECK((*doc)["tool_args"].IsNull());
  CHECK((*doc)["cited_source_ids"].IsArray());
  CHECK((*doc)["metadata"].IsObject());
}

TEST_CASE("an event's parent is the previous sequence of the same run", "[event]") {
  agent_event e;
  e.run_id = "r9";
  e.sequence = 3;
  e.tool_args = R"({"path":"."})";
  auto doc = json::parse(to_json(e));
  REQUIRE(doc);
  CHECK(json::get_string(*doc, "parent_event_id") == "r9:2");
  CHECK(json::get_string((*doc)["tool_args"], "path") == ".");
}

TEST_CASE("timestamps are UTC with microseconds and +00:00", "[event]") { // AS-78
  std::regex shape(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$)");
  CHECK(std::regex_match(iso_now(), shape));
  CHECK(iso_timestamp(std::chrono::system_clock::time_point{}) == "1970-01-01T00:00:00.000000+00:00");
}

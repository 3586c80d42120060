// Actors and participants of workspace envelopes (workspace-stream.md WS-21).
#include "protocol/json.hpp"
#include "protocol/workspace_actor.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

namespace {

workspace_actor read(const char* text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  auto out = parse_actor(*doc);
  INFO(text);
  REQUIRE(std::holds_alternative<workspace_actor>(out));
  return std::get<workspace_actor>(out);
}

std::string written(const workspace_actor& a) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  write_actor(w, a);
  return buf.GetString();
}

} // namespace

TEST_CASE("every actor kind has its participant", "[actor]") { // WS-21
  CHECK(participant(read(R"({"kind":"user","id":"local"})")) == "user:local");
  CHECK(participant(read(R"({"kind":"agent","rule":"ops:triage","run_id":"r1","name":"summarize"})")) == "agent:ops:triage");
  CHECK(participant(read(R"({"kind":"external_agent","client_id":"c9"})")) == "external_agent:c9");
  CHECK(participant(read(R"({"kind":"system"})")) == "system:reflexr");
  CHECK(participant(read(R"({"kind":"system","name":"scheduler"})")) == "system:scheduler");
  CHECK(participant(read(R"({"kind":"source","name":"pagerduty"})")) == "source:pagerduty");
  CHECK(participant(read(R"({"kind":"evaluator","name":"judge","version":"2"})")) == "evaluator:judge@2");
}

TEST_CASE("an actor is written with its kind's fields and a system actor with its default name", "[actor]") {
  CHECK(written(read(R"({"kind":"source","name":"pagerduty","extra":"x"})")) == R"({"kind":"source","name":"pagerduty"})");
  CHECK(written(read(R"({"kind":"system"})")) == R"({"kind":"system","name":"reflexr"})");
  CHECK(written(read(R"({"kind":"user","id":"local"})")) == R"({"kind":"user","id":"local"})");
}

TEST_CASE("an actor missing a required field or of an unknown kind is refused, naming the problem", "[actor]") {
  auto err = [](const char* text) {
    auto doc = json::parse(text);
    REQUIRE(doc);
    auto out = parse_actor(*doc);
    REQUIRE(std::holds_alternative<std::string>(out));
    return std::get<std::string>(out);
  };
  CHECK(err(R"({"kind":"user"})") == "an actor of kind 'user' needs a string 'id'");
  CHECK(err(R"({"kind":"evaluator","name":"judge"})") == "an actor of kind 'evaluator' needs a string 'version'");
  CHECK(err(R"({"kind":"robot"})").rfind("unknown actor kind 'robot'", 0) == 0);
  CHECK(err("[]") == "an actor must be an object with a 'kind'");
}

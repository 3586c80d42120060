// Redaction of secrets before anything is stored or emitted (AS-85).
#include "protocol/approvals.hpp"
#include "protocol/json.hpp"
#include "protocol/redaction.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

namespace {
const std::string openai_key = "sk-proj-Abc123Def456Ghi789Jkl";
const std::string bearer = "eyJhbGciOiJIUzI1NiJ9.payload.sig";
} // namespace

TEST_CASE("secrets inside free text are masked, ordinary words are not", "[redaction]") { // AS-85
  CHECK(redact_text("key " + openai_key + " works") == "key *** works");
  CHECK(redact_text("curl -H 'Authorization: Bearer " + bearer + "' x") == "curl -H 'Authorization: Bearer ***' x");
  CHECK(redact_text("authorization: bearer  " + bearer) == "authorization: bearer  ***");
  CHECK(redact_text(openai_key) == "***");
  CHECK(redact_text("a=" + openai_key + ";b=" + openai_key) == "a=***;b=***");
  for (std::string plain : {"pip install sk-learn", "a risk-free task-1234567890123456789", "the Bearer scheme",
                            "x_sk-abcdefghijklmnopqrstuvwxyz", ""})
    CHECK(redact_text(plain) == plain);
}

TEST_CASE("redacted JSON masks secrets inside string values too", "[redaction]") { // AS-85
  auto out = json::parse(redact_json(R"({"command":"curl -H \"Authorization: Bearer )" + bearer + R"(\" u"})"));
  REQUIRE(out);
  CHECK(json::get_string(*out, "command") == "curl -H \"Authorization: Bearer ***\" u");
}

TEST_CASE("a stored record is masked but never truncated, and verbatim members are kept", "[redaction]") { // AS-85
  auto long_text = std::string(1500, 'y');
  auto text = R"({"messages":[{"role":"user","content":"use )" + openai_key + R"("}],)"
              + R"("metadata":{"api_key":"k-123","caller":"c","note":")" + long_text + R"(","auth":"Bearer )"
              + bearer + R"("}})";
  auto record = json::parse(redact_record_json(text));
  REQUIRE(record);
  auto& meta = (*record)["metadata"];
  CHECK(json::get_string(meta, "api_key") == "***");
  CHECK(json::get_string(meta, "caller") == "c");
  CHECK(json::get_string(meta, "note") == long_text);
  CHECK(json::get_string(meta, "auth") == "***");
  CHECK(json::get_string((*record)["messages"][0], "content") == "use ***");

  auto kept = json::parse(redact_record_json(text, {"messages"}));
  REQUIRE(kept);
  CHECK(json::get_string((*kept)["messages"][0], "content") == "use " + openai_key);
  CHECK(json::get_string((*kept)["metadata"], "api_key") == "***");
  CHECK(redact_record_json("not json") == "not json");
}

TEST_CASE("an audit record masks secrets in its arguments and in its result summary", "[redaction]") { // AS-45, AS-85
  audit_record r;
  r.tool_args = R"({"command":"echo x","api_key":"k-1"})";
  r.result_summary = std::string(490, '.') + " " + openai_key + " and more"; // the key straddles the 500-char cut
  auto out = json::parse(audit_json(r));
  REQUIRE(out);
  CHECK(json::get_string((*out)["tool_args"], "api_key") == "***");
  auto summary = json::get_string(*out, "result_summary");
  CHECK(summary.find("sk-proj") == std::string::npos);
  CHECK(summary == std::string(490, '.') + " *** and m");
}

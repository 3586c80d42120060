// Pure pieces of the agent loop: history clean-up, output bounds, citations (AS-19, AS-22, AS-77).
#include "protocol/agent_loop.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

TEST_CASE("orphan tool messages and unanswered tool calls leave the history", "[loop]") { // AS-19
  auto call = [](std::string id) { return tool_call{std::move(id), "exec", "{}"}; };
  auto a1 = text_message("assistant", "");
  a1.content_null = true;
  a1.tool_calls = {call("c1"), call("c2")};
  auto t1 = text_message("tool", "r1");
  t1.tool_call_id = "c1";
  auto orphan = text_message("tool", "lost");
  orphan.tool_call_id = "zz";
  auto a2 = text_message("assistant", "");
  a2.content_null = true;
  a2.tool_calls = {call("c9")};
  auto out = clean_history({text_message("user", "u"), a1, t1, orphan, a2});
  REQUIRE(out.size() == 3);
  REQUIRE(out[1].tool_calls.size() == 1);
  CHECK(out[1].tool_calls[0].id == "c1");
  CHECK(out[2].tool_call_id == "c1");
}

TEST_CASE("tool output over the limit is cut and says how much was dropped", "[loop]") { // AS-22
  std::string whole = "abcdef";
  CHECK(cut_tool_output(whole, 10) == 0);
  CHECK(whole == "abcdef");
  std::string cut = "abcdef";
  CHECK(cut_tool_output(cut, 4) == 2);
  CHECK(cut + truncation_notice(2) == "abcd\n... [truncated 2 chars]");
  // never inside a UTF-8 sequence: "é" is two bytes
  std::string accented = "a\xc3\xa9z";
  CHECK(cut_tool_output(accented, 2) == 3);
  CHECK(accented == "a");
}

TEST_CASE("citations are harvested from JSON output in order without duplicates", "[loop]") { // AS-77
  CHECK(harvest_citations(R"({"hits":[{"source_id":"src_1"}]})") == std::vector<std::string>{"src_1"});
  CHECK(harvest_citations(R"({"a":{"source_ids":["s2","s3"]},"citation_id":"s2","cited_source_ids":["s4"]})")
        == std::vector<std::string>{"s2", "s3", "s4"});
  CHECK(harvest_citations(R"({"source_item_ids":["never"]})").empty());
  CHECK(harvest_citations("plain text source_id").empty());
}

TEST_CASE("citations deeper than eight levels are not harvested", "[loop]") { // AS-77
  std::string deep = R"({"source_id":"top")";
  std::string nested = R"({"source_id":"deep"})";
  for (int i = 0; i < 9; ++i)
    nested = "{\"x\":" + nested + "}";
  deep += ",\"n\":" + nested + "}";
  CHECK(harvest_citations(deep) == std::vector<std::string>{"top"});
}

TEST_CASE("merged citations stop at one hundred", "[loop]") { // AS-77
  std::vector<std::string> into, more;
  for (int i = 0; i < 150; ++i)
    more.push_back("s" + std::to_string(i));
  merge_citations(into, more);
  CHECK(into.size() == 100);
}

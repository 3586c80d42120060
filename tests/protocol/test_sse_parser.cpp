// Unit tests of the server-sent-events parser that reads streamed upstream replies (AS-17).
#include "protocol/sse_parser.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using troupe::protocol::sse_event;
using troupe::protocol::sse_parser;

namespace {

std::vector<sse_event> parse_all(sse_parser& parser, std::string_view text) {
  std::vector<sse_event> out;
  REQUIRE(parser.feed(text, out));
  return out;
}

} // namespace

TEST_CASE("an event ends at a blank line and carries its event type, data and id", "[sse]") {
  // AS-17: a streamed upstream reply arrives as SSE.
  sse_parser parser;
  auto events = parse_all(parser, "event: delta\nid: 7\ndata: {\"a\":1}\n\n");
  REQUIRE(events.size() == 1);
  CHECK(events[0].event == "delta");
  CHECK(events[0].id == "7");
  CHECK(events[0].data == "{\"a\":1}");
}

TEST_CASE("several data lines of one event are joined by newlines", "[sse]") {
  sse_parser parser;
  auto events = parse_all(parser, "data: one\ndata:two\ndata\n\n");
  REQUIRE(events.size() == 1);
  CHECK(events[0].data == "one\ntwo\n");
}

TEST_CASE("CRLF and lone CR end lines like LF, even when split across chunks", "[sse]") {
  sse_parser parser;
  std::vector<sse_event> out;
  REQUIRE(parser.feed("data: a\r", out));
  REQUIRE(parser.feed("\ndata: b\r\n\r", out));
  REQUIRE(parser.feed("\ndata: c\r\r", out));
  REQUIRE(out.size() == 2);
  CHECK(out[0].data == "a\nb");
  CHECK(out[1].data == "c");
}

TEST_CASE("an event fed one byte at a time comes out whole", "[sse]") {
  sse_parser parser;
  std::string stream = "data: {\"x\":\"hello\"}\n\ndata: [DONE]\n\n";
  std::vector<sse_event> out;
  for (char c : stream)
    REQUIRE(parser.feed(std::string_view(&c, 1), out));
  REQUIRE(out.size() == 2);
  CHECK(out[0].data == "{\"x\":\"hello\"}");
  CHECK(out[1].data == "[DONE]");
}

TEST_CASE("comments are ignored and an event without data is not dispatched", "[sse]") {
  sse_parser parser;
  auto events = parse_all(parser, ": keep-alive\n\nevent: ping\n\n: again\ndata: x\n\n");
  REQUIRE(events.size() == 1);
  CHECK(events[0].event.empty()); // the ping's type does not leak into the next event
  CHECK(events[0].data == "x");
}

TEST_CASE("the last id persists across events", "[sse]") {
  sse_parser parser;
  auto events = parse_all(parser, "id: 1\ndata: a\n\ndata: b\n\n");
  REQUIRE(events.size() == 2);
  CHECK(events[1].id == "1");
}

TEST_CASE("an unfinished event is held until its blank line arrives", "[sse]") {
  sse_parser parser;
  std::vector<sse_event> out;
  REQUIRE(parser.feed("data: part", out));
  CHECK(out.empty());
  REQUIRE(parser.feed("ial\n", out));
  CHECK(out.empty());
  REQUIRE(parser.feed("\n", out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].data == "partial");
}

TEST_CASE("a line longer than the bound fails the parser instead of growing", "[sse]") {
  // STYLE: everything that grows has a bound; the line bound is model-facing (max_line_bytes).
  sse_parser parser(16);
  std::vector<sse_event> out;
  REQUIRE(parser.feed("data: 0123456789\n\n", out)); // exactly 16 bytes is allowed
  CHECK_FALSE(parser.feed("data: 0123456789a", out)); // 17 bytes
  CHECK(parser.failed());
  CHECK(parser.error().find("16") != std::string::npos);
  CHECK_FALSE(parser.feed("\n\n", out)); // a failed parser stays failed
  CHECK(out.size() == 1);
}

TEST_CASE("a long line split over chunks also hits the bound", "[sse]") {
  sse_parser parser(16);
  std::vector<sse_event> out;
  REQUIRE(parser.feed("data: 01234", out));
  CHECK_FALSE(parser.feed("56789abcdef\n", out));
}

TEST_CASE("event data accumulated over many lines is bounded too", "[sse]") {
  sse_parser parser(64, 20);
  std::vector<sse_event> out;
  CHECK_FALSE(parser.feed("data: 0123456789\ndata: 0123456789\n", out));
  CHECK(parser.failed());
}

TEST_CASE("a leading byte order mark is skipped", "[sse]") {
  sse_parser parser;
  auto events = parse_all(parser, "\xEF\xBB\xBF" "data: x\n\n");
  REQUIRE(events.size() == 1);
  CHECK(events[0].data == "x");
}

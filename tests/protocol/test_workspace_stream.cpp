// The reflexr.v1 WebSocket's hello and resume decision (workspace-stream.md WS-46, WS-48, WS-49).
#include "protocol/workspace_stream.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

namespace {

std::string rejection(const char* text) {
  auto out = parse_hello(text);
  REQUIRE(std::holds_alternative<hello_rejection>(out));
  return std::get<hello_rejection>(out).reason;
}

hello_frame hello(int64_t after, bool from_head = false) {
  hello_frame h;
  h.protocol = "reflexr.v1";
  h.resume_after_seq = after;
  h.from_head = from_head;
  return h;
}

} // namespace

TEST_CASE("a hello frame is read with its defaults and its type filter", "[stream]") { // WS-46
  auto out = parse_hello(R"({"type":"hello","protocol":"reflexr.v1","resume_after_seq":41,"types":["reflexr:rule_fired"]})");
  REQUIRE(std::holds_alternative<hello_frame>(out));
  auto& h = std::get<hello_frame>(out);
  CHECK(h.resume_after_seq == 41);
  CHECK_FALSE(h.from_head);
  REQUIRE(h.types);
  CHECK(*h.types == std::vector<std::string>{"reflexr:rule_fired"});
  auto plain = std::get<hello_frame>(parse_hello(R"({"type":"hello","protocol":"reflexr.v1","types":null})"));
  CHECK(plain.resume_after_seq == 0);
  CHECK_FALSE(plain.types);
}

TEST_CASE("a first frame that is not a valid hello closes with the spec's reasons", "[stream]") { // WS-48
  for (auto bad : {"not json", R"({"type":"publish"})", R"({"type":"hello"})",
                   R"({"type":"hello","protocol":"reflexr.v1","extra":1})",
                   R"({"type":"hello","protocol":"reflexr.v1","types":["fired"]})",
                   R"({"type":"hello","protocol":"reflexr.v1","resume_after_seq":-1})",
                   R"({"type":"hello","protocol":"reflexr.v1","from_head":"yes"})"})
    CHECK(rejection(bad) == "the first frame must be hello");
  CHECK(rejection(R"({"type":"hello","protocol":"reflexr.v0"})")
        == "this server speaks reflexr.v1; the client asked for reflexr.v0");
  CHECK(rejection(R"({"type":"hello","protocol":"reflexr.v1","from_head":true,"resume_after_seq":3})")
        == "from_head replays nothing, so resume_after_seq must be 0");
}

TEST_CASE("resume replays after the client's seq, resets past the head, and from_head skips the log", "[stream]") { // WS-49
  auto at = [](const hello_frame& h, int64_t head) { return std::get<resume_decision>(resume(h, head)); };
  CHECK(at(hello(3), 5).replay_after == 3);
  CHECK_FALSE(at(hello(3), 5).reset);
  CHECK(at(hello(9), 5).replay_after == 0);
  CHECK(at(hello(9), 5).reset);
  CHECK(at(hello(0, true), 5).replay_after == 5);
  CHECK(at(hello(0, true), 0).replay_after == 0);
  auto wrong = hello(0);
  wrong.protocol = "x";
  CHECK(std::get<std::string>(resume(wrong, 5)) == "unsupported_protocol");
  CHECK(std::get<std::string>(resume(hello(2, true), 5)) == "validation_failed");
}

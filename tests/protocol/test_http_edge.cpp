// What the edge checks from a request's head: Host (DNS rebinding), Origin (CO-10), Content-Type and
// header values (issue 15 #5, #7).
#include "protocol/http_edge.hpp"

#include <catch2/catch.hpp>

using namespace troupe;
using namespace troupe::protocol;

namespace {

edge_verdict check(const edge_policy& p, std::string method, std::map<std::string, std::string> headers,
                   bool body = false, bool upgrade = false) {
  return check_request_head(p, method, headers, body, upgrade);
}

errc refusal(const edge_verdict& v) {
  return v.refusal ? v.refusal->code : errc::none;
}

const edge_policy loopback{"127.0.0.1", {}, {}};

} // namespace

TEST_CASE("a loopback listener answers loopback names only, and configured ones", "[edge][hostile]") {
  CHECK(refusal(check(loopback, "GET", {{"host", "127.0.0.1:18741"}})) == errc::none);
  CHECK(refusal(check(loopback, "GET", {{"host", "localhost:18741"}})) == errc::none);
  CHECK(refusal(check(loopback, "GET", {{"host", "[::1]:18741"}})) == errc::none);
  CHECK(refusal(check(loopback, "GET", {{"host", "evil.example:18741"}})) == errc::misdirected);
  CHECK(refusal(check(loopback, "GET", {{"host", "127.0.0.1.evil.example"}})) == errc::misdirected);
  CHECK(refusal(check(loopback, "GET", {})) == errc::bad_request);
  edge_policy named{"127.0.0.1", {"troupe.internal"}, {}};
  CHECK(refusal(check(named, "GET", {{"host", "Troupe.Internal:8080"}})) == errc::none);
  // A wildcard listener serves any name unless names are configured.
  CHECK(refusal(check({"0.0.0.0", {}, {}}, "GET", {{"host", "anything:1"}})) == errc::none);
  CHECK(refusal(check({"0.0.0.0", {"troupe.example"}, {}}, "GET", {{"host", "other.example"}})) == errc::misdirected);
}

TEST_CASE("an unsafe request from another origin is refused, one without Origin passes", "[edge][hostile]") { // CO-10
  std::map<std::string, std::string> h{{"host", "127.0.0.1:18741"}, {"content-type", "application/json"}};
  CHECK(refusal(check(loopback, "POST", h, true)) == errc::none);
  auto from = [&](std::string origin) {
    auto with = h;
    with["origin"] = origin;
    return with;
  };
  CHECK(refusal(check(loopback, "POST", from("http://127.0.0.1:18741"), true)) == errc::none);
  auto cross = check(loopback, "POST", from("http://evil.example"), true);
  CHECK(refusal(cross) == errc::forbidden);
  CHECK(cross.refusal->message == "Cross-origin request refused");
  CHECK(refusal(check(loopback, "POST", from("null"), true)) == errc::forbidden);
  CHECK(refusal(check(loopback, "POST", from("http://127.0.0.1:9999"), true)) == errc::forbidden);
  CHECK(refusal(check(loopback, "DELETE", from("http://evil.example"))) == errc::forbidden);
  CHECK(refusal(check(loopback, "GET", from("http://evil.example"))) == errc::none);
  edge_policy trusting{"127.0.0.1", {}, {"https://console.example"}};
  CHECK(refusal(check(trusting, "POST", from("https://console.example"), true)) == errc::none);
  // WS-44: the upgrade completes; the route closes it with 4403.
  auto ws = check(loopback, "GET", from("http://evil.example"), false, true);
  CHECK(refusal(ws) == errc::none);
  CHECK(ws.cross_origin);
}

TEST_CASE("a body must be JSON: a text/plain POST from a page is refused", "[edge][hostile]") {
  auto post = [](std::string type) {
    std::map<std::string, std::string> h{{"host", "127.0.0.1"}};
    if (!type.empty())
      h["content-type"] = type;
    return refusal(check(loopback, "POST", h, true));
  };
  CHECK(post("text/plain") == errc::unsupported_media_type);
  CHECK(post("application/x-www-form-urlencoded") == errc::unsupported_media_type);
  CHECK(post("") == errc::unsupported_media_type);
  CHECK(post("application/json") == errc::none);
  CHECK(post("Application/JSON; charset=utf-8") == errc::none);
  CHECK(post("application/merge-patch+json") == errc::none);
  CHECK(refusal(check(loopback, "POST", {{"host", "127.0.0.1"}}, false)) == errc::none); // no body, no type
}

TEST_CASE("a header value with CR, LF or NUL is never written", "[edge][hostile]") {
  using namespace std::string_view_literals;
  CHECK(is_header_value("0190-abc"));
  CHECK_FALSE(is_header_value("a\r\nSet-Cookie: x=1"));
  CHECK_FALSE(is_header_value("a\nb"));
  CHECK_FALSE(is_header_value("a\0b"sv));
}

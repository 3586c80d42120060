// A request-declared MCP server's headers (RS-30): what troupe will send to that server is checked as
// every header the edge writes is, so no declaration can split a request's head.
#include "protocol/responses_mcp.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <variant>

using namespace troupe;
using namespace troupe::protocol;

namespace {

mcp_config allowing() {
  mcp_config c;
  c.allow_request_servers = true;
  return c;
}

responses::mcp_declaration declaring(std::string headers, std::string authorization) {
  responses::mcp_declaration d;
  d.server_label = "docs";
  d.server_url = "https://mcp.example/mcp";
  d.headers = std::move(headers);
  d.authorization = std::move(authorization);
  return d;
}

// The param of the refusal, or "" when the server is accepted.
std::string refused_at(const responses::mcp_declaration& d) {
  auto r = responses::declared_server(allowing(), d, "tools[0]");
  if (auto* p = std::get_if<problem>(&r))
    return p->param;
  return "";
}

} // namespace

TEST_CASE("a declared MCP server's header or authorization with CR, LF or NUL is refused; a name must be a "
          "plain token",
          "[responses][mcp]") {
  struct row {
    std::string headers, authorization, refused_at;
  };
  const row table[] = {
    {R"({"X-Key":"abc"})", "token", ""},
    {R"({"X-Key":"a\r\nX-Evil: 1"})", "", "tools[0].headers.X-Key"},
    {R"({"X-Key":"a\nb"})", "", "tools[0].headers.X-Key"},
    {R"({"X-Key":"a\u0000b"})", "", "tools[0].headers.X-Key"},
    {R"({"X Key":"a"})", "", "tools[0].headers.X Key"},
    {R"({"X:Key":"a"})", "", "tools[0].headers.X:Key"},
    {R"({"":"a"})", "", "tools[0].headers."},
    {"", "abc\r\nX-Evil: 1", "tools[0].authorization"},
    {"", std::string("abc\0def", 7), "tools[0].authorization"},
  };
  for (const auto& r : table) {
    INFO(r.headers << " / " << r.authorization);
    CHECK(refused_at(declaring(r.headers, r.authorization)) == r.refused_at);
  }
}

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

namespace {

// The first MCP declaration of a request whose only tool is `mcp` with `extra` members.
responses::mcp_declaration parsed(const std::string& extra) {
  auto body = R"({"model":"m","input":"hi","tools":[{"type":"mcp","server_label":"docs")" + extra + "}]}";
  auto r = responses::parse_request(body);
  if (auto p = std::get_if<problem>(&r))
    FAIL("refused: " << p->message);
  auto& req = std::get<responses::request>(r);
  REQUIRE(req.mcp.size() == 1);
  return req.mcp[0];
}

mcp_tool tool(std::string name, bool read_only) {
  mcp_tool t;
  t.name = std::move(name);
  t.read_only = read_only;
  return t;
}

} // namespace

TEST_CASE("require_approval is read once: always by default, never, or filters where always wins (RS-33)",
          "[responses_mcp]") {
  auto search = tool("search", true);
  auto write = tool("write", false);
  CHECK(responses::needs_approval(parsed("").require_approval, search));
  CHECK(responses::needs_approval(parsed(R"(,"require_approval":"always")").require_approval, search));
  CHECK_FALSE(responses::needs_approval(parsed(R"(,"require_approval":"never")").require_approval, write));
  auto filters = parsed(R"(,"require_approval":{"never":{"read_only":true},"always":{"tool_names":["search"]}})")
                   .require_approval;
  CHECK(responses::needs_approval(filters, search)); // named by always, though never covers read-only tools
  CHECK(responses::needs_approval(filters, write));  // named by neither
  CHECK_FALSE(responses::needs_approval(filters, tool("list", true)));
  auto names_only = parsed(R"(,"require_approval":{"never":{"tool_names":["search",7]}})").require_approval;
  CHECK_FALSE(responses::needs_approval(names_only, search));
  CHECK(responses::needs_approval(names_only, write));
}

TEST_CASE("allowed_tools is read once: a list of names, or names and a read-only hint that must all hold (RS-30)",
          "[responses_mcp]") {
  auto search = tool("search", true);
  auto write = tool("write", false);
  CHECK(responses::tool_allowed(parsed("").allowed_tools, write));
  auto listed = parsed(R"(,"allowed_tools":["search"])").allowed_tools;
  CHECK(responses::tool_allowed(listed, search));
  CHECK_FALSE(responses::tool_allowed(listed, write));
  auto both = parsed(R"(,"allowed_tools":{"tool_names":["search","write"],"read_only":true})").allowed_tools;
  CHECK(responses::tool_allowed(both, search));
  CHECK_FALSE(responses::tool_allowed(both, write));
  auto read_only = parsed(R"(,"allowed_tools":{"read_only":false})").allowed_tools;
  CHECK(responses::tool_allowed(read_only, write));
  CHECK_FALSE(responses::tool_allowed(read_only, search));
}

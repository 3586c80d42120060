// CJ-10's troupe_ws payload (protocol/cluster.hpp).
#include "protocol/cluster.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace troupe::protocol;

TEST_CASE("a workspace wake-up is written as a JSON array and read back whole", "[cluster][wakeups]") { // CJ-10
  workspace_head h{"acme \"ops\"\n", "incident-7", 2000};
  auto text = workspace_wakeup(h);
  CHECK(text == R"(["acme \"ops\"\n","incident-7",2000])");
  auto back = parse_workspace_wakeup(text);
  REQUIRE(back);
  CHECK(back->tenant == h.tenant);
  CHECK(back->workspace == h.workspace);
  CHECK(back->head == 2000);
}

TEST_CASE("a wake-up that is not exactly [tenant, workspace, positive head] is ignored", "[cluster][wakeups]") {
  for (const std::string& bad : std::vector<std::string>{"", "run", "[]", R"(["t","w"])", R"(["t","w",1,2])", R"(["t","w",0])", R"(["t","w",-3])",
                          R"(["t","w",1.5])", R"(["t","w","7"])", R"(["","w",1])", R"(["t","",1])", R"({"t":1})",
                          R"(["t","w",99999999999999999999])", "[\"t\",\"w\",1", std::string(100'000, '[')})
    CHECK_FALSE(parse_workspace_wakeup(bad));
}

TEST_CASE("a wake-up longer than PostgreSQL's 8,000-byte payload is ignored unread", "[cluster][wakeups]") {
  auto long_name = std::string(8000, 'w');
  CHECK_FALSE(parse_workspace_wakeup(R"(["t",")" + long_name + R"(",1])"));
  CHECK(parse_workspace_wakeup(R"(["t",")" + std::string(7000, 'w') + R"(",1])"));
}

// reflexr.v1 names (workspace-stream.md §1: WS-6, WS-7, WS-8, WS-9).
#include "protocol/workspace_names.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

TEST_CASE("an event type is one lowercase namespace, a colon and a dotted local name", "[names]") { // WS-6
  for (auto ok : {"ops:deploy.finished", "oncall:alert.fired", "a:b", "ns_1:x_2.y3.z"})
    CHECK(is_event_type(ok));
  for (auto bad : {"deploy", "Ops:deploy", "ops:Deploy", "ops:deploy.", "ops:.deploy", "ops:a..b", "ops:*",
                   "ops:deploy:finished", "1ops:x", "ops:1x", "ops:", ":x", ""})
    CHECK_FALSE(is_event_type(bad));
}

TEST_CASE("a rule name is checked for shape, length and the reserved namespace", "[names]") { // WS-7, WS-8
  CHECK_FALSE(rule_name_rejection("oncall:page-on.error_1"));
  CHECK_FALSE(rule_name_rejection("chat:9lives"));
  CHECK(rule_name_rejection("reflexr:mine") == std::string("the reflexr namespace is reserved"));
  CHECK(rule_name_rejection("nocolon"));
  CHECK(rule_name_rejection("ops:-leading"));
  CHECK(rule_name_rejection("ops:Upper"));
  CHECK(rule_name_rejection("ops:" + std::string(97, 'x')) == std::string("a rule name must be at most 100 characters"));
  CHECK_FALSE(rule_name_rejection("ops:" + std::string(96, 'x')));
}

TEST_CASE("a type without a namespace is refused with the known types that share its local name", "[names]") { // WS-9
  std::vector<std::string> known{"ops:service.error", "zeta:deploy.finished", "ops:deploy.finished"};
  CHECK(type_name_rejection("service.error", known)
        == std::string("event type 'service.error' has no namespace; did you mean 'ops:service.error'?"));
  CHECK(type_name_rejection("deploy.finished", known)
        == std::string("event type 'deploy.finished' has no namespace; did you mean one of 'ops:deploy.finished', "
                       "'zeta:deploy.finished'?"));
  CHECK(type_name_rejection("alert", known)
        == std::string("event type 'alert' has no namespace; a name is a namespace, a ':' and a local name, such "
                       "as 'oncall:alert.fired'"));
  CHECK(type_name_rejection("Ops:Alert", known)
        == std::string("'Ops:Alert' is not an event type name: a namespace, a ':' and a local name, in lowercase, "
                       "such as 'oncall:alert.fired'"));
  CHECK_FALSE(type_name_rejection("ops:service.error", known));
}

// Request-target decoding shared by the HTTP edge and the workspace events query (WS-64).
#include "protocol/query_string.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

TEST_CASE("a query string keeps repeated keys in order and decodes them as a form", "[query]") {
  auto pairs = query_pairs("type=ops%3Aa&limit=3&&type=b+c&flag");
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[0] == std::pair<std::string, std::string>{"type", "ops:a"});
  CHECK(pairs[2] == std::pair<std::string, std::string>{"type", "b c"});
  CHECK(pairs[3] == std::pair<std::string, std::string>{"flag", ""});
  CHECK(query_pairs("").empty());
}

TEST_CASE("a path keeps its plus signs and leaves a broken escape as it is", "[query]") {
  CHECK(percent_decode("/v1/a+b%20c", false) == "/v1/a+b c");
  CHECK(percent_decode("%zz%4", true) == "%zz%4");
}

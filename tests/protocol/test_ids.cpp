// Identifiers and digests (protocol/ids.hpp).
#include "protocol/ids.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

TEST_CASE("sha256_hex writes the digest as 64 lowercase hex digits", "[ids]") { // WS-59's token_sha256
  CHECK(sha256_hex("secret-token") == "930bbdc51b6aed5c2a5678fd6e28dee7a05e8a4b643cfc0b4427c3efb86c0d94");
  CHECK(sha256_hex("").size() == 64);
}

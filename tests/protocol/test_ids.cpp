// Identifiers and digests (protocol/ids.hpp).
#include "protocol/ids.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace troupe::protocol;

TEST_CASE("sha256_hex writes the digest as 64 lowercase hex digits", "[ids]") { // WS-59's token_sha256
  CHECK(sha256_hex("secret-token") == "930bbdc51b6aed5c2a5678fd6e28dee7a05e8a4b643cfc0b4427c3efb86c0d94");
  CHECK(sha256_hex("").size() == 64);
}

TEST_CASE("ids drawn many times are well-formed and never repeat", "[ids]") { // issue 15, finding 9
  std::set<std::string> seen;
  for (int i = 0; i < 20000; ++i) {
    auto hex = random_hex(32);
    REQUIRE(hex.size() == 32);
    REQUIRE(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
    REQUIRE(seen.insert(hex).second);
  }
  auto u = uuid4();
  REQUIRE(u.size() == 36);
  CHECK(u[8] == '-');
  CHECK(u[14] == '4');
  CHECK(std::string("89ab").find(u[19]) != std::string::npos);
  auto id = uuid7_id("resp_");
  REQUIRE(id.size() == 5 + 32);
  CHECK(id.compare(0, 5, "resp_") == 0);
  CHECK(id[5 + 12] == '7');
}

TEST_CASE("hmac_sha256 gives RFC 4231's macs, for a short key and one longer than the block", "[ids]") {
  // The cluster handshake (CJ-23) and the JWT check (AS-6) rest on it.
  CHECK(lower_hex(hmac_sha256("Jefe", "what do ya want for nothing?"))
        == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(lower_hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"))
        == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("lower_hex writes two lowercase digits a byte and the constant-time compare needs equal length",
          "[ids]") {
  CHECK(lower_hex(std::string("\x00\x0f\xa0\xff", 4)) == "000fa0ff");
  CHECK(lower_hex("") == "");
  CHECK(equal_in_constant_time("abc", "abc"));
  CHECK_FALSE(equal_in_constant_time("abc", "abd"));
  CHECK_FALSE(equal_in_constant_time("abc", "abcd"));
  CHECK(equal_in_constant_time("", ""));
}

TEST_CASE("uuid7 ids one process makes sort in the order it made them, also within a millisecond", "[ids]") {
  std::vector<std::string> ids;
  for (int i = 0; i < 5000; ++i)
    ids.push_back(uuid7_id("job_"));
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  for (auto& id : ids)
    CHECK(id[4 + 12] == '7');
}

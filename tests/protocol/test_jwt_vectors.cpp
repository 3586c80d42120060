// Known-answer vectors for our HS256 JWT verification (AS-6): RFC 7515's own example and tokens that
// another implementation, libjwt, produced.
#include "protocol/identity.hpp"


#include "protocol/jwt_signing.hpp"

#include <catch2/catch.hpp>

using namespace troupe;
using namespace troupe::protocol;
using troupe::testing::base64url;
using troupe::testing::signed_with;

namespace {

// RFC 7515 Appendix A.1: the HS256 JWS example. Its key is the JWK's "k", base64url-encoded.
const std::string rfc7515_key_b64 =
    "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow";
// Header {"typ":"JWT",\r\n "alg":"HS256"}; payload {"iss":"joe",\r\n "exp":1300819380,\r\n
// "http://example.com/is_root":true}. It has no `sub`, so the best it can get from us is the refusal
// that comes after the signature and exp have been checked.
const std::string rfc7515_jws =
    "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
    ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
constexpr int64_t rfc7515_exp = 1300819380;

// Tokens libjwt 1.10.2 (Debian 12's libjwt-dev) encoded with jwt_encode_str under this key; each
// header is libjwt's own {"alg":…,"typ":"JWT"}, each payload is named beside it.
const std::string libjwt_key = "troupe-libjwt-vector-key";
// HS256 {"exp":2000000000,"sub":"acme:alice","tenant_id":"acme"}
const std::string libjwt_valid =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjIwMDAwMDAwMDAsInN1YiI6ImFjbWU6YWxpY2UiLCJ0ZW5hbnRfaWQiOiJhY21lIn0"
    ".IgFsVkdCoihXZfYgofmmIG79fIPQgh3gwdSbdyjcn6I";
// HS256 {"exp":1600000000,"sub":"acme:alice"}
const std::string libjwt_expired = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjE2MDAwMDAwMDAsInN1YiI6ImFjbWU6YWxpY2UifQ"
                                   ".dXBsDTevDK3wt1KQYU6OX7SoDnSzIYMcgjjPsLb7RJE";
// HS256 {"sub":"acme:alice"}
const std::string libjwt_no_exp =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhY21lOmFsaWNlIn0.R7i2WwDgsnHhUOsk5U1bORMvcD0i6uywM_aGyxhr60k";
// HS384 and HS512 {"exp":2000000000,"sub":"acme:alice"}, correctly signed under the same key.
const std::string libjwt_hs384 = "eyJhbGciOiJIUzM4NCIsInR5cCI6IkpXVCJ9.eyJleHAiOjIwMDAwMDAwMDAsInN1YiI6ImFjbWU6YWxpY2UifQ"
                                 ".FzRffw1Q-NXScIK_IlMag0Iu-oa2oT2uEmORkXD0GXZsTfdYwN2zhsl6liJtQG-f";
const std::string libjwt_hs512 =
    "eyJhbGciOiJIUzUxMiIsInR5cCI6IkpXVCJ9.eyJleHAiOjIwMDAwMDAwMDAsInN1YiI6ImFjbWU6YWxpY2UifQ"
    ".i1IrrnG9tgXwJpLYM2vt-V1qYo5CjfYA-FnYH5njA4JBKu8izqmjBIH-aRDuXEDweUa0vOb96BJ_E4-v7LLALw";
// alg none ({"alg":"none"}), {"exp":2000000000,"sub":"acme:alice"}, empty signature.
const std::string libjwt_none = "eyJhbGciOiJub25lIn0.eyJleHAiOjIwMDAwMDAwMDAsInN1YiI6ImFjbWU6YWxpY2UifQ.";

constexpr int64_t now = 1'700'000'000;

std::string base64url_decode(const std::string& s) {
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    acc = (acc << 6) | static_cast<uint32_t>(alphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

auth_config config(const std::string& key, bool require_exp = true) {
  auth_config c;
  c.mode = "jwt";
  c.jwt_secret = key;
  c.jwt_require_exp = require_exp;
  return c;
}

std::variant<identity, troupe::problem> verify(const auth_config& c, const std::string& token, int64_t at = now) {
  std::map<std::string, std::string> headers{{"authorization", "Bearer " + token}};
  return resolve_identity(c, {}, headers, "", "", at, [](const std::string&) { return std::nullopt; });
}

// The 401 detail a token is refused with, or "accepted".
std::string outcome(const auth_config& c, const std::string& token, int64_t at = now) {
  auto result = verify(c, token, at);
  if (std::holds_alternative<identity>(result))
    return "accepted";
  auto& e = std::get<troupe::problem>(result);
  CHECK(protocol::http_status(e.code) == 401);
  return e.message;
}

// `token` with the character at `i` replaced by another base64url character.
std::string with_char(std::string token, std::size_t i, char c) {
  REQUIRE(token[i] != c);
  token[i] = c;
  return token;
}

} // namespace

TEST_CASE("RFC 7515 A.1's HS256 example verifies under its key and is refused only for what it lacks",
          "[identity][jwt]") { // AS-6
  auto c = config(base64url_decode(rfc7515_key_b64));
  REQUIRE(c.jwt_secret.size() == 64);
  // Signature and exp pass; the example carries no sub, which AS-6 requires.
  CHECK(outcome(c, rfc7515_jws, rfc7515_exp - 1) == "JWT subject claim required");
  CHECK(outcome(c, rfc7515_jws, rfc7515_exp) == "JWT has expired");
  // Under any other key, or with either part changed, it carries no valid signature.
  CHECK(outcome(config(libjwt_key), rfc7515_jws, rfc7515_exp - 1) == "JWT signature is invalid");
  auto dot2 = rfc7515_jws.rfind('.');
  auto forged_payload = base64url("{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true,"
                                  "\"sub\":\"admin\"}");
  auto tampered_payload = rfc7515_jws.substr(0, rfc7515_jws.find('.') + 1) + forged_payload + rfc7515_jws.substr(dot2);
  CHECK(outcome(c, tampered_payload, rfc7515_exp - 1) == "JWT signature is invalid");
  CHECK(outcome(c, with_char(rfc7515_jws, dot2 + 10, 'A'), rfc7515_exp - 1) == "JWT signature is invalid");
}

TEST_CASE("an HS256 token libjwt signed verifies and maps its claims", "[identity][jwt]") { // AS-6, AS-7
  auto result = verify(config(libjwt_key), libjwt_valid);
  REQUIRE(std::holds_alternative<identity>(result));
  auto& id = std::get<identity>(result);
  CHECK(id.user_key == "acme:alice");
  CHECK(id.tenant_key == "acme");
  CHECK(id.auth_provider == "jwt");
  CHECK(outcome(config("another-key"), libjwt_valid) == "JWT signature is invalid");
}

TEST_CASE("a libjwt token with a tampered payload or signature is refused", "[identity][jwt]") { // AS-6
  auto c = config(libjwt_key);
  auto dot1 = libjwt_valid.find('.');
  auto dot2 = libjwt_valid.rfind('.');
  auto forged = libjwt_valid.substr(0, dot1 + 1) + base64url(R"({"exp":2000000000,"sub":"acme:root","tenant_id":"acme"})")
                + libjwt_valid.substr(dot2);
  CHECK(outcome(c, forged) == "JWT signature is invalid");
  CHECK(outcome(c, with_char(libjwt_valid, dot2 + 1, 'J')) == "JWT signature is invalid");
  // The last character's two low bits are unused: "I" and "J" decode to the same MAC, yet "J" is not
  // what was signed, and a lenient decoder would take it (RFC 4648 §3.5 lets a decoder refuse it).
  CHECK(outcome(c, with_char(libjwt_valid, libjwt_valid.size() - 1, 'J')) == "JWT signature is invalid");
  CHECK(outcome(c, libjwt_valid.substr(0, dot2 + 1)) == "JWT signature is invalid"); // signature removed
  CHECK(outcome(c, libjwt_valid.substr(0, libjwt_valid.size() - 1)) == "JWT signature is invalid"); // truncated
  // The other token's signature on this token's header and payload.
  CHECK(outcome(c, libjwt_valid.substr(0, dot2) + libjwt_expired.substr(libjwt_expired.rfind('.')))
        == "JWT signature is invalid");
}

TEST_CASE("a libjwt token with alg none or another algorithm is refused, however it is signed",
          "[identity][jwt]") { // AS-6
  auto c = config(libjwt_key);
  CHECK(outcome(c, libjwt_none) == "JWT signature is invalid");
  CHECK(outcome(c, libjwt_hs384) == "JWT signature is invalid");
  CHECK(outcome(c, libjwt_hs512) == "JWT signature is invalid");
  // alg none with a valid HS256 signature over its own header and payload: the alg decides, not the MAC.
  CHECK(outcome(c, signed_with(libjwt_none.substr(0, libjwt_none.size() - 1), libjwt_key)) == "JWT signature is invalid");
  // HS384's header and payload signed with HS256: still not HS256.
  CHECK(outcome(c, signed_with(libjwt_hs384.substr(0, libjwt_hs384.rfind('.')), libjwt_key)) == "JWT signature is invalid");
}

TEST_CASE("a token whose parts are not canonical unpadded base64url is refused even when signed",
          "[identity][jwt]") { // AS-6, RFC 7515 §2
  auto c = config(libjwt_key);
  auto header = libjwt_valid.substr(0, libjwt_valid.find('.'));
  auto sign = [&](const std::string& payload) { return signed_with(header + "." + payload, libjwt_key); };
  auto claims = std::string(R"({"exp":2000000000,"sub":"acme:alice","x":"~~~??"})");
  auto payload = base64url(claims);
  REQUIRE(outcome(c, sign(payload)) == "accepted");
  // Standard base64's alphabet instead of base64url's.
  auto standard = payload;
  for (auto& ch : standard)
    ch = ch == '-' ? '+' : ch == '_' ? '/' : ch;
  REQUIRE(standard != payload);
  CHECK(outcome(c, sign(standard)) == "JWT signature is invalid");
  // Padding, a space, a character outside any base64 alphabet, an impossible length.
  REQUIRE(payload.size() % 4 != 0);
  CHECK(outcome(c, sign(payload + std::string(4 - payload.size() % 4, '='))) == "JWT signature is invalid");
  CHECK(outcome(c, sign(payload.substr(0, 8) + " " + payload.substr(8))) == "JWT signature is invalid");
  CHECK(outcome(c, sign(payload.substr(0, 8) + "*" + payload.substr(8))) == "JWT signature is invalid");
  CHECK(outcome(c, sign(payload + (payload.size() % 4 == 0 ? "A" : std::string(5 - payload.size() % 4, 'A'))))
        == "JWT signature is invalid");
  // Unused low bits set in the last character: it decodes to the same claims, but is not the token
  // that was issued (RFC 4648 §3.5), so a tampered signature cannot hide there either.
  auto last = payload.back();
  auto alphabet = std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
  auto noncanonical = payload.substr(0, payload.size() - 1) + alphabet[alphabet.find(last) | 1];
  REQUIRE(noncanonical != payload);
  CHECK(outcome(c, sign(noncanonical)) == "JWT signature is invalid");
}

TEST_CASE("a libjwt token past its exp is refused, and one without exp unless auth.jwt_require_exp is off",
          "[identity][jwt]") { // AS-6
  CHECK(outcome(config(libjwt_key), libjwt_expired) == "JWT has expired");
  CHECK(outcome(config(libjwt_key), libjwt_expired, 1599999999) == "accepted");
  CHECK(outcome(config(libjwt_key, true), libjwt_no_exp) == "JWT exp claim required");
  CHECK(outcome(config(libjwt_key, false), libjwt_no_exp) == "accepted");
  CHECK(auth_config{}.jwt_require_exp); // on by default
}

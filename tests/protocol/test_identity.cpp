// Resolving a caller's identity per auth.mode, and the per-user limits (AS-3 to AS-8).
#include "protocol/identity.hpp"


#include "protocol/jwt_signing.hpp"

#include <catch2/catch.hpp>

using namespace troupe;
using namespace troupe::protocol;
using troupe::testing::base64url;
using troupe::testing::signed_with;

namespace {

constexpr int64_t now = 1'700'000'000;
const std::string secret = "test-secret";

// A compact JWS of `claims` signed with HMAC-SHA256 under `key`, with header `header`.
std::string make_jwt(const std::string& claims, const std::string& key = secret,
                     const std::string& header = R"({"alg":"HS256","typ":"JWT"})") {
  return signed_with(base64url(header) + "." + base64url(claims), key);
}

// Most tests here are about claims, not expiry: their tokens carry no exp.
auth_config jwt_config() {
  auth_config c;
  c.mode = "jwt";
  c.jwt_secret = secret;
  c.jwt_require_exp = false;
  return c;
}

std::optional<std::string> no_env(const std::string&) {
  return std::nullopt;
}

struct request {
  request(std::map<std::string, std::string> h = {}) : headers(std::move(h)) {}
  std::map<std::string, std::string> headers; // lower-case names
  std::string user_key;
  std::string tenant_key;
  std::vector<std::string> tokens;
  int64_t at = now;
  env_lookup_fn env = no_env;
};

std::variant<identity, problem> resolve(const auth_config& c, const request& r) {
  return resolve_identity(c, r.tokens, r.headers, r.user_key, r.tenant_key, r.at, r.env);
}

identity ok(const std::variant<identity, problem>& v) {
  if (auto e = std::get_if<problem>(&v))
    FAIL("refused: " << protocol::http_status(e->code) << " " << e->message);
  return std::get<identity>(v);
}

problem refused(const std::variant<identity, problem>& v) {
  if (std::holds_alternative<identity>(v))
    FAIL("accepted as " << std::get<identity>(v).user_key);
  return std::get<problem>(v);
}

std::string jwt_detail(const auth_config& c, const std::string& token) {
  auto e = refused(resolve(c, {{{"authorization", "Bearer " + token}}}));
  CHECK(protocol::http_status(e.code) == 401);
  return e.message;
}

identity jwt_ok(const auth_config& c, const std::string& token) {
  return ok(resolve(c, {{{"authorization", "Bearer " + token}}}));
}

} // namespace

TEST_CASE("auth config has FastReAct's defaults", "[identity]") { // AS-4, AS-5, AS-6
  auth_config c;
  std::vector<std::string> errors;
  auto doc = json::parse("{}");
  read_auth_config(*doc, c, errors);
  CHECK(errors.empty());
  CHECK(c.mode == "service_token");
  CHECK(c.jwt_tenant_claims == std::vector<std::string>{"tenant_key", "tenant_id", "tenant", "org_id"});
  CHECK(c.headers.user_key == "X-FastReAct-User-Key");
  CHECK(c.headers.auth_provider == "X-FastReAct-Auth-Provider");
  CHECK(c.rate_limit_per_hour == 0);
}

TEST_CASE("auth config reads every key and names the JSON path of each bad one", "[identity]") { // AS-2, AS-5, AS-8
  auth_config c;
  std::vector<std::string> errors;
  auto doc = json::parse(R"({"auth":{"mode":"jwt","jwt_secret":"s","jwt_secret_env":"E","jwt_issuer":"i",
    "jwt_audience":"a","jwt_tenant_claims":["org"],"trusted_headers":{"user_key":"X-User","groups":"X-Teams"}},
    "service":{"blocked_user_keys":["b"],"allowed_user_keys":["a"],"rate_limit_per_hour":5}})");
  read_auth_config(*doc, c, errors);
  CHECK(errors.empty());
  CHECK(c.mode == "jwt");
  CHECK(c.jwt_secret == "s");
  CHECK(c.jwt_secret_env == "E");
  CHECK(c.jwt_issuer == "i");
  CHECK(c.jwt_audience == "a");
  CHECK(c.jwt_tenant_claims == std::vector<std::string>{"org"});
  CHECK(c.headers.user_key == "X-User");
  CHECK(c.headers.groups == "X-Teams");
  CHECK(c.headers.roles == "X-FastReAct-Roles");
  CHECK(c.blocked_user_keys == std::vector<std::string>{"b"});
  CHECK(c.allowed_user_keys == std::vector<std::string>{"a"});
  CHECK(c.rate_limit_per_hour == 5);

  auth_config bad;
  errors.clear();
  doc = json::parse(R"({"auth":{"mode":"x","jwt_secret":1,"trusted_headers":{"email":"bad name"}},
    "service":{"rate_limit_per_hour":-1,"blocked_user_keys":"b"}})");
  read_auth_config(*doc, bad, errors);
  CHECK(errors == std::vector<std::string>{
                    R"(auth.mode: expected one of service_token, trusted_headers, jwt, got "x")",
                    "auth.jwt_secret: expected a string, got 1",
                    R"(auth.trusted_headers.email: expected an HTTP header name, got "bad name")",
                    R"(service.blocked_user_keys: expected an array of strings, got "b")",
                    "service.rate_limit_per_hour: expected an integer 0..1099511627776, got -1",
                  });
  CHECK(bad.mode == "service_token");
}

TEST_CASE("the identity object has AS-7's keys, with unknown names and emails null", "[identity]") { // AS-7
  identity id{"pska", "pska:u1", "pska:u1", "", "", {}, {"admin"}, "service_token", true};
  CHECK(identity_json(id)
        == R"({"tenant_key":"pska","user_key":"pska:u1","subject":"pska:u1","display_name":null,"email":null,)"
           R"("groups":[],"roles":["admin"],"auth_provider":"service_token"})");
}

TEST_CASE("a valid JWT maps its claims to the identity", "[identity]") { // AS-6, AS-7
  auto c = jwt_config();
  auto id = jwt_ok(c, make_jwt(R"({"sub":"acme:alice","exp":1700000060,"nbf":1699999990,"iss":"https://idp",)"
                               R"("name":"Alice","email":"a@acme.io","groups":["eng","ops"],"roles":["admin"],)"
                               R"("tenant_id":"acme-t"})"));
  CHECK(id.user_key == "acme:alice");
  CHECK(id.subject == "acme:alice");
  CHECK(id.tenant_key == "acme-t");
  CHECK(id.display_name == "Alice");
  CHECK(id.email == "a@acme.io");
  CHECK(id.groups == std::vector<std::string>{"eng", "ops"});
  CHECK(id.roles == std::vector<std::string>{"admin"});
  CHECK(id.auth_provider == "https://idp");
  CHECK_FALSE(id.service_token);
}

TEST_CASE("a JWT signed by another implementation (jwt.io's example) verifies", "[identity]") { // AS-6
  auto c = jwt_config();
  c.jwt_secret = "your-256-bit-secret";
  auto id = jwt_ok(c, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
                      "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c");
  CHECK(id.user_key == "sso:1234567890");
  CHECK(id.display_name == "John Doe");
}

TEST_CASE("a JWT subject without a colon becomes sso:<sub>, and a token without iss is provided by jwt", "[identity]") { // AS-6
  auto id = jwt_ok(jwt_config(), make_jwt(R"({"sub":"alice"})"));
  CHECK(id.user_key == "sso:alice");
  CHECK(id.subject == "alice");
  CHECK(id.tenant_key == "sso"); // no tenant claim: inferred from the user key (AS-7)
  CHECK(id.auth_provider == "jwt");
  CHECK(id.groups.empty());
}

TEST_CASE("the JWT tenant is the first non-empty configured claim", "[identity]") { // AS-6
  auto c = jwt_config();
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","tenant_key":"","tenant_id":"","tenant":"t3","org_id":"o4"})")).tenant_key == "t3");
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","tenant_key":"t1","org_id":"o4"})")).tenant_key == "t1");
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","org_id":"o4","tenant":"t3"})")).tenant_key == "t3");
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","org_id":42})")).tenant_key == "42");
  c.jwt_tenant_claims = {"org_id", "tenant"};
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","org_id":"o4","tenant":"t3"})")).tenant_key == "o4");
}

TEST_CASE("an expired JWT is refused", "[identity]") { // AS-6
  auto c = jwt_config();
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u","exp":1699999999})")) == "JWT has expired");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u","exp":1700000000})")) == "JWT has expired");
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","exp":1700000001})")).user_key == "sso:u");
}

TEST_CASE("a JWT before its nbf is not valid yet", "[identity]") { // AS-6
  auto c = jwt_config();
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u","nbf":1700000001})")) == "JWT is not valid yet");
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","nbf":1700000000})")).user_key == "sso:u");
}

TEST_CASE("a configured audience must be the aud string or in the aud array", "[identity]") { // AS-6
  auto c = jwt_config();
  c.jwt_audience = "troupe";
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","aud":"troupe"})")).user_key == "sso:u");
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","aud":["other","troupe"]})")).user_key == "sso:u");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u","aud":"other"})")) == "JWT audience is invalid");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u","aud":["other","x"]})")) == "JWT audience is invalid");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u"})")) == "JWT audience is invalid");
  c.jwt_audience.clear();
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","aud":"anything"})")).user_key == "sso:u");
}

TEST_CASE("a configured issuer must match iss", "[identity]") { // AS-6
  auto c = jwt_config();
  c.jwt_issuer = "https://idp";
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"u","iss":"https://idp"})")).auth_provider == "https://idp");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u","iss":"https://evil"})")) == "JWT issuer is invalid");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u"})")) == "JWT issuer is invalid");
}

TEST_CASE("a JWT without a subject is refused", "[identity]") { // AS-6
  auto c = jwt_config();
  CHECK(jwt_detail(c, make_jwt(R"({"name":"x"})")) == "JWT subject claim required");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":""})")) == "JWT subject claim required");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":7})")) == "JWT subject claim required");
}

TEST_CASE("a JWT signed with another key, tampered or malformed has an invalid signature", "[identity]") { // AS-6
  auto c = jwt_config();
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u"})", "other-key")) == "JWT signature is invalid");
  auto token = make_jwt(R"({"sub":"u"})");
  auto tampered = token.substr(0, token.find('.') + 1) + base64url(R"({"sub":"admin"})")
                  + token.substr(token.rfind('.'));
  CHECK(jwt_detail(c, tampered) == "JWT signature is invalid");
  CHECK(jwt_detail(c, "not-a-jwt") == "JWT signature is invalid");
  CHECK(jwt_detail(c, "a.b.c.d") == "JWT signature is invalid");
  CHECK(jwt_detail(c, token + "=") == "JWT signature is invalid");
  CHECK(jwt_detail(c, make_jwt("[1]")) == "JWT signature is invalid");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u","exp":"soon"})")) == "JWT signature is invalid");
}

TEST_CASE("only HS256 is accepted: alg none and other algorithms are refused", "[identity]") { // AS-6
  auto c = jwt_config();
  auto unsigned_token = base64url(R"({"alg":"none","typ":"JWT"})") + "." + base64url(R"({"sub":"u"})") + ".";
  CHECK(jwt_detail(c, unsigned_token) == "JWT signature is invalid");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u"})", secret, R"({"alg":"none"})")) == "JWT signature is invalid");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u"})", secret, R"({"alg":"HS512"})")) == "JWT signature is invalid");
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"u"})", secret, R"({"typ":"JWT"})")) == "JWT signature is invalid");
}

TEST_CASE("jwt mode without a bearer token asks for one", "[identity]") { // AS-6
  auto c = jwt_config();
  auto e = refused(resolve(c, {}));
  CHECK(protocol::http_status(e.code) == 401);
  CHECK(e.message == "Bearer JWT required");
  CHECK(refused(resolve(c, {{{"authorization", "Basic abc"}}})).message == "Bearer JWT required");
  CHECK(refused(resolve(c, {{{"x-fastreact-user-key", "pska:u"}}})).message == "Bearer JWT required");
}

TEST_CASE("the JWT key comes from jwt_secret, else the env var jwt_secret_env names, else it is a 500", "[identity]") { // AS-6
  auto c = jwt_config();
  c.jwt_secret.clear();
  c.jwt_secret_env = "TROUPE_JWT_KEY";
  request r{{{"authorization", "Bearer " + make_jwt(R"({"sub":"u"})")}}};
  r.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "TROUPE_JWT_KEY")
      return secret;
    return std::nullopt;
  };
  CHECK(ok(resolve(c, r)).user_key == "sso:u");

  r.env = no_env;
  auto e = refused(resolve(c, r));
  CHECK(protocol::http_status(e.code) == 500);
  CHECK(e.message == "JWT auth requires jwt_secret");
  c.jwt_secret_env.clear();
  CHECK(refused(resolve(c, {})).message == "JWT auth requires jwt_secret");
}

TEST_CASE("trusted headers give the proxy's identity and ignore the body user key", "[identity]") { // AS-5
  auth_config c;
  c.mode = "trusted_headers";
  request r{{{"x-fastreact-user-key", "acme:bob"}, {"x-fastreact-display-name", " Bob "},
             {"x-fastreact-email", "bob@acme.io"}, {"x-fastreact-groups", "eng, ops,,"},
             {"x-fastreact-roles", "viewer"}}};
  r.user_key = "pska:admin";
  r.tenant_key = "other";
  auto id = ok(resolve(c, r));
  CHECK(id.user_key == "acme:bob");
  CHECK(id.subject == "acme:bob");
  CHECK(id.tenant_key == "acme");
  CHECK(id.display_name == "Bob");
  CHECK(id.email == "bob@acme.io");
  CHECK(id.groups == std::vector<std::string>{"eng", "ops"});
  CHECK(id.roles == std::vector<std::string>{"viewer"});
  CHECK(id.auth_provider == "trusted_headers");
  CHECK_FALSE(id.service_token);

  r.headers["x-fastreact-tenant-key"] = "t9";
  r.headers["x-fastreact-subject"] = "bob@idp";
  r.headers["x-fastreact-auth-provider"] = "oauth2-proxy";
  id = ok(resolve(c, r));
  CHECK(id.tenant_key == "t9");
  CHECK(id.subject == "bob@idp");
  CHECK(id.auth_provider == "oauth2-proxy");
}

TEST_CASE("trusted headers mode refuses a request without the user key header", "[identity]") { // AS-5
  auth_config c;
  c.mode = "trusted_headers";
  request r{{{"x-fastreact-tenant-key", "t"}}};
  r.user_key = "pska:u";
  auto e = refused(resolve(c, r));
  CHECK(protocol::http_status(e.code) == 401);
  CHECK(e.message == "FastReAct trusted identity header required");
  r.headers["x-fastreact-user-key"] = "  ";
  CHECK(refused(resolve(c, r)).message == "FastReAct trusted identity header required");
}

TEST_CASE("trusted header names can be configured", "[identity]") { // AS-5
  auth_config c;
  c.mode = "trusted_headers";
  c.headers.user_key = "X-Auth-Request-User";
  c.headers.groups = "X-Auth-Request-Groups";
  request r{{{"x-auth-request-user", "dana"}, {"x-auth-request-groups", "a,b"}, {"x-fastreact-user-key", "eve"}}};
  auto id = ok(resolve(c, r));
  CHECK(id.user_key == "dana");
  CHECK(id.tenant_key == "");
  CHECK(id.groups == std::vector<std::string>{"a", "b"});
}

TEST_CASE("a valid service token wins in every mode", "[identity]") { // AS-4, AS-84
  for (auto mode : {"service_token", "trusted_headers", "jwt"}) {
    auto c = jwt_config();
    c.mode = mode;
    for (auto headers : std::vector<std::map<std::string, std::string>>{
           {{"authorization", "Bearer tok"}},
           {{"x-fastreact-service-token", "tok"}},
           {{"authorization", "Bearer " + make_jwt(R"({"sub":"x"})")}, {"x-fastreact-service-token", "tok"}}}) {
      CAPTURE(mode, headers.begin()->first);
      request r{headers};
      r.tokens = {"tok"};
      r.user_key = "pska:user_primary";
      auto id = ok(resolve(c, r));
      CHECK(id.auth_provider == "service_token");
      CHECK(id.service_token);
      CHECK(id.user_key == "pska:user_primary");
      CHECK(id.subject == "pska:user_primary");
      CHECK(id.tenant_key == "pska");
    }
  }
}

TEST_CASE("the service token identity takes body, then header, then anonymous; tenant explicit, header, inferred", "[identity]") { // AS-4, AS-7
  auth_config c;
  request r{{{"x-fastreact-service-token", "tok"}, {"x-fastreact-user-key", "hdr:u"}, {"x-fastreact-tenant-key", "ht"}}};
  r.tokens = {"tok"};
  r.user_key = "body:u";
  r.tenant_key = "meta-t";
  auto id = ok(resolve(c, r));
  CHECK(id.user_key == "body:u");
  CHECK(id.tenant_key == "meta-t");

  r.user_key.clear();
  r.tenant_key.clear();
  id = ok(resolve(c, r));
  CHECK(id.user_key == "hdr:u");
  CHECK(id.tenant_key == "ht");

  r.headers = {{"x-fastreact-service-token", "tok"}};
  id = ok(resolve(c, r));
  CHECK(id.user_key == "anonymous");
  CHECK(id.subject == "anonymous");
  CHECK(id.tenant_key == "");
  CHECK(id.display_name.empty());
}

TEST_CASE("the env token and the config token are both accepted, and any other is refused", "[identity]") { // AS-3, AS-89
  auth_config c;
  request r;
  r.tokens = {"config-A", "env-B"};
  r.headers = {{"authorization", "Bearer config-A"}};
  CHECK(ok(resolve(c, r)).service_token);
  r.headers = {{"authorization", "Bearer env-B"}};
  CHECK(ok(resolve(c, r)).service_token);
  r.headers = {{"authorization", "Bearer other"}};
  auto e = refused(resolve(c, r));
  CHECK(protocol::http_status(e.code) == 401);
  CHECK(e.message == "FastReAct service token required");
  r.headers.clear();
  CHECK(refused(resolve(c, r)).message == "FastReAct service token required");
}

TEST_CASE("service_token mode with no token configured is open", "[identity]") { // AS-3, AS-4
  auth_config c;
  request r{{{"x-fastreact-user-key", "pska:u"}}};
  auto id = ok(resolve(c, r));
  CHECK(id.user_key == "pska:u");
  CHECK(id.tenant_key == "pska");
  CHECK(id.auth_provider == "service_token");
  CHECK(id.service_token);
}

TEST_CASE("operator endpoints need the service token, except in open service_token mode", "[identity]") { // AS-3, AS-84
  std::map<std::string, std::string> none, good{{"x-fastreact-service-token", "tok"}}, bad{{"authorization", "Bearer x"}};
  auth_config c;
  CHECK_FALSE(check_operator_access(c, {}, headers_from_map(none)));
  CHECK_FALSE(check_operator_access(c, {"tok"}, headers_from_map(good)));
  CHECK(check_operator_access(c, {"tok"}, headers_from_map(bad))->message == "FastReAct service token required");
  for (auto mode : {"trusted_headers", "jwt"}) {
    c.mode = mode;
    auto e = check_operator_access(c, {}, headers_from_map(none));
    REQUIRE(e);
    CHECK(protocol::http_status(e->code) == 401);
    CHECK_FALSE(check_operator_access(c, {"tok"}, headers_from_map(good)));
  }
}

TEST_CASE("blocked users are refused, and an allow list admits only its keys", "[identity]") { // AS-8
  auth_config c;
  CHECK_FALSE(check_user_allowed(c, "anyone"));
  c.blocked_user_keys = {"pska:bad"};
  auto e = check_user_allowed(c, "pska:bad");
  REQUIRE(e);
  CHECK(protocol::http_status(e->code) == 403);
  CHECK(e->message == "User 'pska:bad' is blocked");
  CHECK_FALSE(check_user_allowed(c, "pska:good"));
  c.allowed_user_keys = {"pska:good", "pska:bad"};
  CHECK_FALSE(check_user_allowed(c, "pska:good"));
  CHECK(check_user_allowed(c, "pska:bad")->message == "User 'pska:bad' is blocked");
  e = check_user_allowed(c, "pska:other");
  REQUIRE(e);
  CHECK(protocol::http_status(e->code) == 403);
  CHECK(e->message == "User 'pska:other' is not allowed");
}

TEST_CASE("a rate limit admits N requests per fixed hour, refuses N+1 with Retry-After, then reopens", "[identity]") { // AS-8
  const int64_t limit = 3;
  std::optional<int64_t> start;
  int64_t count = 0;
  for (int i = 0; i < limit; ++i) {
    auto d = decide_rate_limit(limit, start, count, now + i * 10);
    CHECK(d.allowed);
    CHECK(d.counted);
    start = d.window_start;
    count = d.count;
  }
  CHECK(*start == now); // opened by the first counted request
  CHECK(count == limit);

  auto d = decide_rate_limit(limit, start, count, now + 100);
  CHECK_FALSE(d.allowed);
  CHECK_FALSE(d.counted);
  CHECK(d.retry_after_seconds == 3500);
  d = decide_rate_limit(limit, start, count, now + 3599);
  CHECK_FALSE(d.allowed);
  CHECK(d.retry_after_seconds == 1);
  auto e = rate_limit_error("pska:u", limit);
  CHECK(protocol::http_status(e.code) == 429);
  CHECK(e.message == "Rate limit exceeded for user 'pska:u': 3/hour");

  d = decide_rate_limit(limit, start, count, now + 3600);
  CHECK(d.allowed);
  CHECK(d.counted);
  CHECK(d.window_start == now + 3600);
  CHECK(d.count == 1);
}

TEST_CASE("no rate limit counts nothing, and a window from a clock that stepped back waits at most an hour", "[identity]") { // AS-8
  auto d = decide_rate_limit(0, std::nullopt, 0, now);
  CHECK(d.allowed);
  CHECK_FALSE(d.counted);
  d = decide_rate_limit(1, now + 500, 1, now);
  CHECK_FALSE(d.allowed);
  CHECK(d.retry_after_seconds == 3600);
}

TEST_CASE("a JWT without exp is refused unless auth.jwt_require_exp is off", "[identity][hostile]") { // issue 15 #9
  auto c = jwt_config();
  c.jwt_require_exp = true;
  CHECK(jwt_detail(c, make_jwt(R"({"sub":"acme:alice"})")) == "JWT exp claim required");
  CHECK(jwt_ok(c, make_jwt(R"({"sub":"acme:alice","exp":1700000060})")).user_key == "acme:alice");
  CHECK(auth_config{}.jwt_require_exp);
}

TEST_CASE("any configured credential closes every surface, and only none at all leaves troupe open", "[identity][hostile]") { // AS-3, RS-3, WS-59
  auth_config c;
  CHECK(is_open(c, {}));
  CHECK_FALSE(is_open(c, {"svc"}));
  auto keys = c;
  keys.api_keys = {"sk-client"};
  CHECK_FALSE(is_open(keys, {}));
  auto ws = c;
  ws.workspace_credentials = true;
  CHECK_FALSE(is_open(ws, {}));
  auto jwt = jwt_config();
  CHECK_FALSE(is_open(jwt, {}));
  auto trusted = c;
  trusted.mode = "trusted_headers";
  CHECK_FALSE(is_open(trusted, {}));
  // With only API keys, the agent service's caller endpoints are not open either (before: chat was).
  CHECK(protocol::http_status(refused(resolve(keys, {})).code) == 401);
}

TEST_CASE("trusted identity headers count only from a trusted proxy", "[identity][hostile]") { // AS-5, issue 15 #9
  auth_config c;
  c.mode = "trusted_headers";
  std::map<std::string, std::string> headers{{"x-fastreact-user-key", "acme:alice"}, {"x-fastreact-tenant-key", "acme"}};
  auto from = [&](const std::string& peer) {
    return resolve_identity(c, {}, caller_headers(c, {}, headers, peer), "", "", now, no_env);
  };
  CHECK(ok(from("127.0.0.1")).user_key == "acme:alice");
  CHECK(ok(from("::1")).tenant_key == "acme");
  CHECK(refused(from("10.1.2.3")).message == "FastReAct trusted identity header required");
  c.trusted_proxies = {"10.1.2.3"};
  CHECK(ok(from("10.1.2.3")).user_key == "acme:alice");
  CHECK(protocol::http_status(refused(from("127.0.0.1")).code) == 401);
}

TEST_CASE("the Responses gateway admits by the one rule: tokens in either carrier, API keys, and the auth mode", "[identity][hostile]") { // RS-3, AS-3
  auto admit = [](const auth_config& c, std::vector<std::string> tokens, std::map<std::string, std::string> headers) {
    return admit_responses_caller(c, tokens, headers_from_map(headers), now, no_env);
  };
  auto owner = [](const std::variant<responses_caller, problem>& v) {
    if (auto e = std::get_if<problem>(&v))
      FAIL("refused: " << e->message);
    return std::get<responses_caller>(v).owner;
  };
  auth_config c;
  c.api_keys = {"key-a", "key-b"};
  auto service = owner(admit(c, {"svc"}, {{"authorization", "bearer svc"}}));
  CHECK(owner(admit(c, {"svc"}, {{"x-fastreact-service-token", "svc"}})) == service);
  auto a = owner(admit(c, {}, {{"authorization", "Bearer key-a"}}));
  auto b = owner(admit(c, {}, {{"authorization", "BEARER key-b"}}));
  CHECK(a.rfind("sha256:", 0) == 0);
  CHECK(a != b);
  CHECK(service != a); // the service token is one more owner, not all of them
  CHECK(protocol::http_status(std::get<problem>(admit(c, {}, {{"authorization", "Bearer key-c"}})).code) == 401);
  CHECK(std::get<problem>(admit(c, {}, {})).message == "Incorrect API key provided.");
  // jwt mode with no token configured: before, the gateway stayed open.
  auto jwt = jwt_config();
  CHECK(protocol::http_status(std::get<problem>(admit(jwt, {}, {})).code) == 401);
  auto alice = owner(admit(jwt, {}, {{"authorization", "Bearer " + make_jwt(R"({"sub":"acme:alice"})")}}));
  auto bob = owner(admit(jwt, {}, {{"authorization", "Bearer " + make_jwt(R"({"sub":"acme:bob"})")}}));
  CHECK(alice.rfind("user:", 0) == 0);
  CHECK(alice != bob);
  auth_config trusted;
  trusted.mode = "trusted_headers";
  CHECK(protocol::http_status(std::get<problem>(admit(trusted, {}, {})).code) == 401);
  CHECK(owner(admit(trusted, {}, {{"x-fastreact-user-key", "acme:alice"}})).rfind("user:", 0) == 0);
  CHECK(owner(admit(auth_config{}, {}, {})).empty()); // open
}

#include "protocol/identity.hpp"

#include "protocol/auth.hpp"
#include "protocol/ids.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace troupe::protocol {

namespace {

constexpr const char* service_token_required = "FastReAct service token required";

std::string trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return std::string(s);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

problem unauthorized(std::string detail) {
  return {errc::unauthorized, std::move(detail)};
}

// `a, b,,c ` → {"a", "b", "c"}.
std::vector<std::string> comma_list(std::string_view s) {
  std::vector<std::string> out;
  while (true) {
    auto comma = s.find(',');
    auto item = trimmed(s.substr(0, comma));
    if (!item.empty())
      out.push_back(std::move(item));
    if (comma == std::string_view::npos)
      return out;
    s.remove_prefix(comma + 1);
  }
}

// RFC 7230 token characters: a header name must be one.
bool is_header_name(const std::string& s) {
  if (s.empty())
    return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos))
      return false;
  return true;
}

void header_name(config_reader& r, const char* key, std::string& into) {
  std::string v = into;
  if (r.string(key, v)) {
    if (is_header_name(v))
      into = v;
    else
      r.fail(key, "expected an HTTP header name", json::value(v.c_str(), static_cast<rapidjson::SizeType>(v.size())));
  }
}

// A valid token in either carrier wins, so a JWT in Authorization does not hide a service token sent
// as X-FastReAct-Service-Token (PSKA's way, AS-4).
bool holds_service_token(const std::vector<std::string>& tokens, const header_lookup& headers) {
  if (tokens.empty())
    return false;
  bool bearer = token_accepted(tokens, presented_token(headers("Authorization"), ""));
  bool header = token_accepted(tokens, presented_token("", headers("X-FastReAct-Service-Token")));
  return bearer || header;
}

identity service_identity(const auth_config& cfg, const header_lookup& headers,
                          const std::string& body_user_key, const std::string& body_tenant_key) {
  identity id;
  id.user_key = trimmed(body_user_key);
  if (id.user_key.empty())
    id.user_key = trimmed(headers(cfg.headers.user_key));
  if (id.user_key.empty())
    id.user_key = "anonymous";
  id.tenant_key = trimmed(body_tenant_key);
  if (id.tenant_key.empty())
    id.tenant_key = trimmed(headers(cfg.headers.tenant_key));
  if (id.tenant_key.empty())
    id.tenant_key = infer_tenant(id.user_key);
  id.subject = id.user_key;
  id.auth_provider = "service_token";
  id.service_token = true;
  return id;
}

std::variant<identity, problem> trusted_identity(const auth_config& cfg, const header_lookup& headers) {
  auto& h = cfg.headers;
  identity id;
  id.user_key = trimmed(headers(h.user_key));
  if (id.user_key.empty())
    return unauthorized("FastReAct trusted identity header required");
  // The tenant comes from the proxy too: a body tenant would let a caller pick its own tenant (AS-84).
  id.tenant_key = trimmed(headers(h.tenant_key));
  if (id.tenant_key.empty())
    id.tenant_key = infer_tenant(id.user_key);
  id.subject = trimmed(headers(h.subject));
  if (id.subject.empty())
    id.subject = id.user_key;
  id.display_name = trimmed(headers(h.display_name));
  id.email = trimmed(headers(h.email));
  id.groups = comma_list(headers(h.groups));
  id.roles = comma_list(headers(h.roles));
  id.auth_provider = trimmed(headers(h.auth_provider));
  if (id.auth_provider.empty())
    id.auth_provider = "trusted_headers";
  return id;
}

// ---- JWT (AS-6) ----

int base64url_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '-')
    return 62;
  if (c == '_')
    return 63;
  return -1;
}

// Unpadded base64url (RFC 7515 §2); nullopt on any other character, an impossible length, or unused
// low bits set in the last character. Those bits decode to nothing, so without the last check a token
// would have several spellings that all verify (RFC 4648 §3.5 lets a decoder refuse them).
std::optional<std::string> base64url_decode(std::string_view s) {
  if (s.size() % 4 == 1)
    return std::nullopt;
  std::string out;
  out.reserve(s.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : s) {
    int v = base64url_value(c);
    if (v < 0)
      return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
    return std::nullopt;
  return out;
}

std::optional<json::document> decode_object(std::string_view segment) {
  auto text = base64url_decode(segment);
  if (!text)
    return std::nullopt;
  auto doc = json::parse(*text);
  if (!doc || !doc->IsObject())
    return std::nullopt;
  return doc;
}

std::string claim_string(const json::value& claims, const char* key) {
  auto v = json::member(claims, key);
  return v && v->IsString() ? trimmed(std::string_view(v->GetString(), v->GetStringLength())) : std::string();
}

// A tenant claim may be a string or an integer id (e.g. a numeric org_id).
std::string claim_id(const json::value& claims, const std::string& key) {
  auto v = json::member(claims, key.c_str());
  if (v && v->IsInt64())
    return std::to_string(v->GetInt64());
  if (v && v->IsUint64())
    return std::to_string(v->GetUint64());
  return claim_string(claims, key.c_str());
}

// An array of strings, or a comma list like the trusted header.
std::vector<std::string> claim_list(const json::value& claims, const char* key) {
  std::vector<std::string> out;
  auto v = json::member(claims, key);
  if (!v)
    return out;
  if (v->IsString())
    return comma_list(std::string_view(v->GetString(), v->GetStringLength()));
  if (v->IsArray())
    for (auto& item : v->GetArray())
      if (item.IsString()) {
        auto s = trimmed(std::string_view(item.GetString(), item.GetStringLength()));
        if (!s.empty())
          out.push_back(std::move(s));
      }
  return out;
}

bool audience_matches(const json::value& aud, const std::string& expected) {
  auto is = [&](const json::value& v) {
    return v.IsString() && std::string_view(v.GetString(), v.GetStringLength()) == expected;
  };
  if (aud.IsArray())
    return std::any_of(aud.Begin(), aud.End(), is);
  return is(aud);
}

// Every way a token can be malformed is reported as `JWT signature is invalid`: it cannot be shown to
// carry a valid signature. `Bearer JWT required` is kept for a request that presents no token at all.
std::variant<identity, problem> jwt_identity(const auth_config& cfg, const header_lookup& headers,
                                                int64_t now, const env_lookup_fn& env) {
  std::string key = cfg.jwt_secret;
  if (key.empty() && !cfg.jwt_secret_env.empty() && env)
    key = env(cfg.jwt_secret_env).value_or("");
  if (key.empty())
    return problem{errc::internal, "JWT auth requires jwt_secret"};

  auto token = presented_token(headers("Authorization"), "");
  if (token.empty())
    return unauthorized("Bearer JWT required");
  const auto invalid = unauthorized("JWT signature is invalid");

  auto dot1 = token.find('.');
  auto dot2 = dot1 == std::string::npos ? std::string::npos : token.find('.', dot1 + 1);
  if (dot2 == std::string::npos || token.find('.', dot2 + 1) != std::string::npos)
    return invalid;
  std::string_view t(token);
  auto header = decode_object(t.substr(0, dot1));
  if (!header || json::get_string(*header, "alg") != "HS256")
    return invalid; // HS256 only: `none` and every other algorithm are refused

  auto signature = base64url_decode(t.substr(dot2 + 1));
  if (!signature || !equal_in_constant_time(*signature, hmac_sha256(key, t.substr(0, dot2))))
    return invalid;

  auto claims = decode_object(t.substr(dot1 + 1, dot2 - dot1 - 1));
  if (!claims)
    return invalid;
  auto& c = *claims;

  // Like PyJWT without leeway: expired once now >= exp, not yet valid while now < nbf.
  auto time_claim = [&](const char* name) -> std::optional<std::optional<double>> {
    auto v = json::member(c, name);
    if (!v || v->IsNull())
      return std::optional<double>();
    if (!v->IsNumber() || !std::isfinite(v->GetDouble()))
      return std::nullopt;
    return std::optional<double>(v->GetDouble());
  };
  auto exp = time_claim("exp");
  auto nbf = time_claim("nbf");
  if (!exp || !nbf)
    return invalid;
  if (!*exp && cfg.jwt_require_exp)
    return unauthorized("JWT exp claim required");
  if (*exp && **exp <= static_cast<double>(now))
    return unauthorized("JWT has expired");
  if (*nbf && **nbf > static_cast<double>(now))
    return unauthorized("JWT is not valid yet");

  auto iss = claim_string(c, "iss");
  if (!cfg.jwt_issuer.empty()) {
    auto v = json::member(c, "iss");
    if (!v || !v->IsString() || std::string_view(v->GetString(), v->GetStringLength()) != cfg.jwt_issuer)
      return unauthorized("JWT issuer is invalid");
  }
  if (!cfg.jwt_audience.empty()) {
    auto v = json::member(c, "aud");
    if (!v || !audience_matches(*v, cfg.jwt_audience))
      return unauthorized("JWT audience is invalid");
  }

  auto sub = claim_string(c, "sub");
  if (sub.empty())
    return unauthorized("JWT subject claim required");

  identity id;
  id.subject = sub;
  id.user_key = sub.find(':') != std::string::npos ? sub : "sso:" + sub;
  for (auto& name : cfg.jwt_tenant_claims) {
    id.tenant_key = claim_id(c, name);
    if (!id.tenant_key.empty())
      break;
  }
  if (id.tenant_key.empty())
    id.tenant_key = infer_tenant(id.user_key);
  id.display_name = claim_string(c, "name");
  id.email = claim_string(c, "email");
  id.groups = claim_list(c, "groups");
  id.roles = claim_list(c, "roles");
  id.auth_provider = iss.empty() ? "jwt" : iss;
  return id;
}

void write_strings(json::writer& w, const std::vector<std::string>& items) {
  w.StartArray();
  for (auto& s : items)
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  w.EndArray();
}

void write_optional(json::writer& w, const std::string& s) {
  if (s.empty())
    w.Null();
  else
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

} // namespace

void read_auth_config(config_reader& auth, config_reader& service, auth_config& into) {
  auth.one_of("mode", into.mode, {"service_token", "trusted_headers", "jwt"});
  auth.string("jwt_secret", into.jwt_secret);
  auth.string("jwt_secret_env", into.jwt_secret_env);
  auth.string("jwt_issuer", into.jwt_issuer);
  auth.string("jwt_audience", into.jwt_audience);
  auth.strings("jwt_tenant_claims", into.jwt_tenant_claims);
  auth.strings("api_keys", into.api_keys);
  auth.boolean("jwt_require_exp", into.jwt_require_exp);
  auth.strings("trusted_proxies", into.trusted_proxies);

  auto h = auth.child("trusted_headers");
  header_name(h, "user_key", into.headers.user_key);
  header_name(h, "tenant_key", into.headers.tenant_key);
  header_name(h, "subject", into.headers.subject);
  header_name(h, "display_name", into.headers.display_name);
  header_name(h, "email", into.headers.email);
  header_name(h, "groups", into.headers.groups);
  header_name(h, "roles", into.headers.roles);
  header_name(h, "auth_provider", into.headers.auth_provider);

  service.strings("blocked_user_keys", into.blocked_user_keys);
  service.strings("allowed_user_keys", into.allowed_user_keys);
  service.integer("rate_limit_per_hour", into.rate_limit_per_hour, 0, int64_t{1} << 40);
}

void read_auth_config(const json::value& root, auth_config& into, std::vector<std::string>& errors) {
  config_reader r(&root, "", errors);
  auto auth = r.child("auth");
  auto service = r.child("service");
  read_auth_config(auth, service, into);
}

void write_identity(json::writer& w, const identity& id) {
  auto str = [&](const char* key, const std::string& s) {
    w.Key(key);
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  str("tenant_key", id.tenant_key);
  str("user_key", id.user_key);
  str("subject", id.subject);
  w.Key("display_name");
  write_optional(w, id.display_name);
  w.Key("email");
  write_optional(w, id.email);
  w.Key("groups");
  write_strings(w, id.groups);
  w.Key("roles");
  write_strings(w, id.roles);
  str("auth_provider", id.auth_provider);
  w.EndObject();
}

std::string identity_json(const identity& id) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  write_identity(w, id);
  return std::string(buf.GetString(), buf.GetSize());
}

header_lookup headers_from_map(const std::map<std::string, std::string>& lower_case_headers) {
  return [&lower_case_headers](std::string_view name) {
    auto it = lower_case_headers.find(lower(name));
    return it == lower_case_headers.end() ? std::string() : trimmed(it->second);
  };
}

std::variant<identity, problem> resolve_identity(const auth_config& cfg,
                                                    const std::vector<std::string>& service_tokens,
                                                    const header_lookup& headers,
                                                    const std::string& body_user_key,
                                                    const std::string& body_tenant_key,
                                                    int64_t now_epoch_seconds, const env_lookup_fn& env) {
  if (holds_service_token(service_tokens, headers))
    return service_identity(cfg, headers, body_user_key, body_tenant_key);
  if (cfg.mode == "trusted_headers")
    return trusted_identity(cfg, headers);
  if (cfg.mode == "jwt")
    return jwt_identity(cfg, headers, now_epoch_seconds, env);
  if (!is_open(cfg, service_tokens))
    return unauthorized(service_token_required);
  return service_identity(cfg, headers, body_user_key, body_tenant_key); // open (AS-3)
}

std::variant<identity, problem> resolve_identity(const auth_config& cfg,
                                                    const std::vector<std::string>& service_tokens,
                                                    const std::map<std::string, std::string>& lower_case_headers,
                                                    const std::string& body_user_key,
                                                    const std::string& body_tenant_key,
                                                    int64_t now_epoch_seconds, const env_lookup_fn& env) {
  return resolve_identity(cfg, service_tokens, headers_from_map(lower_case_headers), body_user_key,
                          body_tenant_key, now_epoch_seconds, env);
}

std::optional<problem> check_operator_access(const auth_config& cfg,
                                                const std::vector<std::string>& service_tokens,
                                                const header_lookup& headers) {
  if (holds_service_token(service_tokens, headers))
    return std::nullopt;
  if (is_open(cfg, service_tokens))
    return std::nullopt;
  return unauthorized(service_token_required);
}

bool is_open(const auth_config& cfg, const std::vector<std::string>& service_tokens) {
  return cfg.mode == "service_token" && service_tokens.empty() && cfg.api_keys.empty() && !cfg.workspace_credentials;
}

header_lookup caller_headers(const auth_config& cfg, const std::vector<std::string>& service_tokens,
                             const std::map<std::string, std::string>& lower_case_headers, std::string peer) {
  auto all = headers_from_map(lower_case_headers);
  if (cfg.mode != "trusted_headers" || holds_service_token(service_tokens, all)
      || std::find(cfg.trusted_proxies.begin(), cfg.trusted_proxies.end(), peer) != cfg.trusted_proxies.end())
    return all;
  auto& h = cfg.headers;
  std::vector<std::string> hidden;
  for (auto* name : {&h.user_key, &h.tenant_key, &h.subject, &h.display_name, &h.email, &h.groups, &h.roles,
                     &h.auth_provider})
    hidden.push_back(lower(*name));
  return [all, hidden = std::move(hidden)](std::string_view name) {
    return std::find(hidden.begin(), hidden.end(), lower(name)) != hidden.end() ? std::string() : all(name);
  };
}

std::variant<responses_caller, problem> admit_responses_caller(const auth_config& cfg,
                                                                  const std::vector<std::string>& service_tokens,
                                                                  const header_lookup& headers,
                                                                  int64_t now_epoch_seconds, const env_lookup_fn& env) {
  if (is_open(cfg, service_tokens))
    return responses_caller{};
  // Each credential is its own owner; the service token is one more client here, not an administrator
  // of others' responses.
  auto credential = presented_token(headers("Authorization"), headers("X-FastReAct-Service-Token"));
  if (holds_service_token(service_tokens, headers) || token_accepted(cfg.api_keys, credential))
    return responses_caller{"sha256:" + sha256_hex(credential)};
  auto bearer = presented_token(headers("Authorization"), "");
  std::variant<identity, problem> who = unauthorized("Incorrect API key provided.");
  if (cfg.mode == "jwt" && !bearer.empty())
    who = jwt_identity(cfg, headers, now_epoch_seconds, env);
  else if (cfg.mode == "trusted_headers")
    who = trusted_identity(cfg, headers);
  if (auto id = std::get_if<identity>(&who)) // length-prefixed, so no two (tenant, user) pairs meet
    return responses_caller{"user:"
                            + sha256_hex(std::to_string(id->tenant_key.size()) + ":" + id->tenant_key + id->user_key)
                                .substr(0, 32)};
  return std::get<problem>(who);
}

problem responses_refusal(problem refused) {
  refused.kind = refused.code == errc::unauthorized ? "invalid_api_key" : "server_error";
  return refused;
}

std::optional<problem> check_user_allowed(const auth_config& cfg, const std::string& user_key) {
  auto listed = [&](const std::vector<std::string>& keys) {
    return std::find(keys.begin(), keys.end(), user_key) != keys.end();
  };
  if (listed(cfg.blocked_user_keys))
    return problem{errc::forbidden, "User '" + user_key + "' is blocked"};
  if (!cfg.allowed_user_keys.empty() && !listed(cfg.allowed_user_keys))
    return problem{errc::forbidden, "User '" + user_key + "' is not allowed"};
  return std::nullopt;
}

rate_limit_decision decide_rate_limit(int64_t limit, std::optional<int64_t> window_start, int64_t count,
                                      int64_t now) {
  rate_limit_decision d;
  if (limit <= 0) {
    d.window_start = window_start.value_or(now);
    d.count = count;
    return d;
  }
  if (!window_start || now >= *window_start + rate_limit_window_seconds) {
    d.counted = true;
    d.window_start = now;
    d.count = 1;
    return d;
  }
  d.window_start = *window_start;
  if (count < limit) {
    d.counted = true;
    d.count = count + 1;
    return d;
  }
  d.allowed = false;
  d.count = count;
  // A window stamped in the future (a clock that stepped back) never asks for more than one window.
  d.retry_after_seconds = std::clamp<int64_t>(*window_start + rate_limit_window_seconds - now, 1,
                                              rate_limit_window_seconds);
  return d;
}

problem rate_limit_error(const std::string& user_key, int64_t limit) {
  return {errc::rate_limited,
          "Rate limit exceeded for user '" + user_key + "': " + std::to_string(limit) + "/hour"};
}

std::string run_metadata_json(std::string_view metadata, const identity& id, std::string_view tool_policy_json) {
  auto doc = json::parse(metadata);
  return json::object([&](json::writer& w) {
    if (doc && doc->IsObject())
      for (auto& m : doc->GetObject()) {
        std::string_view key(m.name.GetString(), m.name.GetStringLength());
        if (key == "tenant_key" || key == "user_key" || key == "identity" || key == "tool_policy")
          continue;
        w.Key(m.name.GetString(), m.name.GetStringLength());
        m.value.Accept(w);
      }
    w.Key("tenant_key");
    w.String(id.tenant_key);
    w.Key("user_key");
    w.String(id.user_key);
    w.Key("identity");
    write_identity(w, id);
    w.Key("tool_policy");
    json::write_raw(w, tool_policy_json);
  });
}

} // namespace troupe::protocol

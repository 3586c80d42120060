// Who a caller is (AS-3 to AS-8): the auth config, resolving a request's identity per auth.mode
// (service token, trusted headers or an HS256 JWT), and the per-user block, allow and rate limits.
//
// Config keys read by read_auth_config (defaults in parentheses):
//   auth.mode                      service_token | trusted_headers | jwt   ("service_token")
//   auth.jwt_secret                HS256 key                                (unset)
//   auth.jwt_secret_env            name of an env var holding the key       (unset; read per request)
//   auth.jwt_issuer                required `iss` when set                  (unset: not checked)
//   auth.jwt_audience              required `aud` (string or array member)  (unset: not checked)
//   auth.jwt_tenant_claims         claims tried in order for the tenant     (tenant_key, tenant_id, tenant, org_id)
//   auth.trusted_headers.user_key       (X-FastReAct-User-Key)
//   auth.trusted_headers.tenant_key     (X-FastReAct-Tenant-Key)
//   auth.trusted_headers.subject        (X-FastReAct-Subject)
//   auth.trusted_headers.display_name   (X-FastReAct-Display-Name)
//   auth.trusted_headers.email          (X-FastReAct-Email)
//   auth.trusted_headers.groups         (X-FastReAct-Groups)
//   auth.trusted_headers.roles          (X-FastReAct-Roles)
//   auth.trusted_headers.auth_provider  (X-FastReAct-Auth-Provider)
//   service.blocked_user_keys      ([])
//   service.allowed_user_keys      ([]: everyone)
//   service.rate_limit_per_hour    (0: no limit)
// The user-key and tenant-key header names also serve the service-token identity (AS-4).
#pragma once

#include "protocol/config_reader.hpp"
#include "protocol/errors.hpp"
#include "protocol/json.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol {

struct trusted_header_names {
  std::string user_key = "X-FastReAct-User-Key";
  std::string tenant_key = "X-FastReAct-Tenant-Key";
  std::string subject = "X-FastReAct-Subject";
  std::string display_name = "X-FastReAct-Display-Name";
  std::string email = "X-FastReAct-Email";
  std::string groups = "X-FastReAct-Groups";
  std::string roles = "X-FastReAct-Roles";
  std::string auth_provider = "X-FastReAct-Auth-Provider";
};

struct auth_config {
  std::string mode = "service_token"; // service_token | trusted_headers | jwt
  std::string jwt_secret;
  std::string jwt_secret_env;
  std::string jwt_issuer;   // empty: not checked
  std::string jwt_audience; // empty: not checked
  std::vector<std::string> jwt_tenant_claims{"tenant_key", "tenant_id", "tenant", "org_id"};
  trusted_header_names headers;
  std::vector<std::string> api_keys; // the Responses gateway's client keys (RS-3)
  bool jwt_require_exp = true;        // a JWT without `exp` never expires: refused unless turned off
  // Peers whose trusted identity headers count (AS-5): the proxy in front of troupe. Exact addresses.
  std::vector<std::string> trusted_proxies{"127.0.0.1", "::1"};
  bool workspace_credentials = false; // workspaces.credentials is not empty (WS-59)
  // From `service` (AS-8).
  std::vector<std::string> blocked_user_keys;
  std::vector<std::string> allowed_user_keys; // empty: everyone
  int64_t rate_limit_per_hour = 0;            // 0: no limit
};

// Reads `auth.*` from `auth_section` and the AS-8 keys from `service_section`; each bad member adds
// an error naming its JSON path (`auth.mode: expected one of service_token, trusted_headers, jwt, got "x"`).
void read_auth_config(config_reader& auth_section, config_reader& service_section, auth_config& into);

// The same, from the whole config document (its `auth` and `service` members; either may be absent).
void read_auth_config(const json::value& root, auth_config& into, std::vector<std::string>& errors);

// The identity a run records (AS-7). `service_token` is true when the caller holds the operator
// credential: a valid service token, or service_token mode with no token configured (open, AS-3).
struct identity {
  std::string tenant_key;
  std::string user_key;
  std::string subject;
  std::string display_name; // "" when unknown; written as null
  std::string email;        // "" when unknown; written as null
  std::vector<std::string> groups;
  std::vector<std::string> roles;
  std::string auth_provider;
  bool service_token = false;
};

// Writes the AS-7 `identity` object {tenant_key, user_key, subject, display_name, email, groups,
// roles, auth_provider} (not `service_token`, which is not part of the contract).
void write_identity(json::writer& w, const identity& id);
std::string identity_json(const identity& id);

// A request header's trimmed value by name, matched case-insensitively; "" when absent. Called with
// names as configured (e.g. "X-FastReAct-User-Key") and with "Authorization" and
// "X-FastReAct-Service-Token".
using header_lookup = std::function<std::string(std::string_view name)>;

// A lookup over a map whose keys are lower-case header names. The map must outlive the lookup.
header_lookup headers_from_map(const std::map<std::string, std::string>& lower_case_headers);

// The headers a request from `peer` (its IP address) may assert: in trusted_headers mode the identity
// headers count only from a peer in auth.trusted_proxies or alongside a service token; from anyone
// else they read as absent, so the caller is refused as one that sent none (AS-5).
header_lookup caller_headers(const auth_config& cfg, const std::vector<std::string>& service_tokens,
                             const std::map<std::string, std::string>& lower_case_headers, std::string peer);

// AS-3, RS-3 and WS-59 read as one rule: troupe is open (every caller is the default one, and it warns)
// only in service_token mode with no credential of any kind configured (service token, API key,
// workspace credential). Any credential closes every surface.
bool is_open(const auth_config& cfg, const std::vector<std::string>& service_tokens);


using env_lookup_fn = std::function<std::optional<std::string>(const std::string&)>;

// Resolves the caller of a caller endpoint (AS-4 to AS-7). `body_user_key` is the body `user_key`
// and `body_tenant_key` is `metadata.tenant_key` ("" when absent); they count only for the
// service-token identity. `now_epoch_seconds` checks a JWT's exp and nbf; `env` supplies the
// variable named by auth.jwt_secret_env. Errors: 401 with AS-3/AS-5/AS-6's details, or 500
// `JWT auth requires jwt_secret`.
std::variant<identity, problem> resolve_identity(const auth_config& cfg,
                                                    const std::vector<std::string>& service_tokens,
                                                    const header_lookup& headers,
                                                    const std::string& body_user_key,
                                                    const std::string& body_tenant_key,
                                                    int64_t now_epoch_seconds, const env_lookup_fn& env);

std::variant<identity, problem> resolve_identity(const auth_config& cfg,
                                                    const std::vector<std::string>& service_tokens,
                                                    const std::map<std::string, std::string>& lower_case_headers,
                                                    const std::string& body_user_key,
                                                    const std::string& body_tenant_key,
                                                    int64_t now_epoch_seconds, const env_lookup_fn& env);

// Who may use the Responses gateway (RS-3): the service token (either carrier, AS-3), an API key as a
// bearer, a JWT in jwt mode, the trusted headers in trusted_headers mode, or anyone when open.
// `owner` names whose responses and conversations the caller sees: "" for an open troupe (one owner),
// `sha256:<digest>` of the credential for a service token or an API key (each its own owner),
// `user:<digest>` of (tenant, user) for an identity.
struct responses_caller {
  std::string owner;
};
std::variant<responses_caller, problem> admit_responses_caller(const auth_config& cfg,
                                                                  const std::vector<std::string>& service_tokens,
                                                                  const header_lookup& headers,
                                                                  int64_t now_epoch_seconds, const env_lookup_fn& env);
// A refused caller as the Responses gateway answers it (RS-3): an unauthorized one is
// `invalid_api_key`, as OpenAI names it.
problem responses_refusal(problem refused);

// Operator endpoints (AS-3, AS-84): a valid service token; with none configured, open in
// service_token mode only. Otherwise 401 `FastReAct service token required`.
std::optional<problem> check_operator_access(const auth_config& cfg,
                                                const std::vector<std::string>& service_tokens,
                                                const header_lookup& headers);

// AS-8: 403 `User '<key>' is blocked`, or `User '<key>' is not allowed` when an allow list is set
// and lacks the key; nullopt when the user may proceed.
std::optional<problem> check_user_allowed(const auth_config& cfg, const std::string& user_key);

// One counted request against a user's fixed window (AS-8). `allowed` requests return the window to
// store (`counted`); a refused one leaves it as it was and says how long until it closes.
struct rate_limit_decision {
  bool allowed = true;
  bool counted = false;            // false when the limit is off: nothing to store
  int64_t window_start = 0;        // epoch seconds
  int64_t count = 0;               // requests counted in the window, this one included when allowed
  int64_t retry_after_seconds = 0; // when refused: seconds until the window closes, 1..3600
};

constexpr int64_t rate_limit_window_seconds = 3600;

// `limit` is service.rate_limit_per_hour (<= 0: no limit); `window_start`/`count` are the user's
// stored window (nullopt when there is none). A window is opened by the first counted request and
// lasts 3600 s; request limit+1 inside it is refused.
rate_limit_decision decide_rate_limit(int64_t limit, std::optional<int64_t> window_start, int64_t count,
                                      int64_t now_epoch_seconds);

// 429 `Rate limit exceeded for user '<key>': <N>/hour`.
problem rate_limit_error(const std::string& user_key, int64_t limit);

// AS-7: the caller's metadata object with tenant_key, user_key, identity and the normalized
// top-level tool_policy added; every other caller key is kept verbatim.
std::string run_metadata_json(std::string_view metadata, const identity& id, std::string_view tool_policy_json);

} // namespace troupe::protocol

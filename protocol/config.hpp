// troupe's configuration: the JSON file's keys, their defaults, environment overrides, and
// errors that name the JSON path and what it expects.
#pragma once

#include <cstdint>
#include "protocol/identity.hpp"
#include "protocol/loop_settings.hpp"
#include "protocol/mcp.hpp"
#include "protocol/policy.hpp"
#include "protocol/workspace_config.hpp"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

struct service_config {
  std::string host = "127.0.0.1";
  int port = 18741;
  int64_t max_body_bytes = 10 * 1024 * 1024;
  double sse_heartbeat_seconds = 15;
  double read_timeout_seconds = 30;
  double shutdown_grace_seconds = 10;
  int64_t max_stream_buffer_bytes = 4 * 1024 * 1024; // per SSE client; beyond it the client is dropped
  int io_threads = 2;
  std::string chat_on_disconnect = "cancel";
  // Background runs (AS-53, AS-54, AS-83).
  int run_concurrency = 4; // 0: unlimited
  int run_max_attempts = 3;
  double run_retry_base_seconds = 5;
  double run_retry_max_seconds = 300;
  double run_lease_seconds = 300;
  double run_recovery_interval_seconds = 15;
  double approval_timeout_seconds = 300; // AS-42
  int64_t max_connections = 1024;        // open at once; beyond, 503 and close (capped by the descriptor limit)
  std::vector<std::string> allowed_hosts;   // Host names served besides the listener's own (DNS rebinding)
  std::vector<std::string> trusted_origins; // browser origins allowed to send unsafe requests (CO-10)
  std::vector<std::string> service_tokens; // trimmed, non-empty: file token, its alias, env (AS-3)
};

// The model names an upstream serves on /v1/responses: a list, or every name ("*").
struct model_names {
  bool any = true;
  std::vector<std::string> names;
};

// One model.upstreams[] entry (responses.md Appendix A). It serves the Responses gateway only; the
// agent service keeps the default upstream (model.*).
struct upstream_config {
  std::string name;
  std::string protocol; // responses | chat_completions
  std::string base_url;
  std::string api_key;  // else read from the variable api_key_env names
  std::string api_key_env;
  model_names models;
  bool discover_models = false; // also serve (and list) what GET {base_url}/models names (RS-13)
  bool stream = true;
  std::string developer_role = "system";       // system | developer (RS-47)
  bool replay_reasoning = false;               // RS-47
  std::string max_tokens_field = "max_tokens"; // max_tokens | max_completion_tokens (RS-47)
  double timeout_seconds = 600;
};

struct model_config {
  std::string provider = "scripted"; // scripted | openai
  std::string protocol = "chat_completions";
  std::string base_url;
  std::string name = "scripted";
  std::string api_key;
  std::string api_key_env;
  double timeout_seconds = 600;
  int max_retries = 2;
  bool stream = true;
  int64_t max_tokens = 4096;
  std::string script = R"([{"content":"You asked: {{query}}"}])"; // the scripted model's default script
  std::string scripts = "{}"; // named scripts, chosen with model "scripted:<name>"
  model_names models;          // what the default upstream serves on /v1/responses
  std::vector<upstream_config> upstreams; // tried in order before the default upstream
};

struct react_config {
  int max_iterations = 20;
  int64_t max_tool_output_chars = 20000;
  int64_t max_context_tokens = 128000;
  int sliding_window_size = 15;
};

// Where skills are found besides each workspace's `skills` folder (AS-25).
struct skills_config {
  std::vector<std::string> dirs;
};

struct exec_config {
  double timeout_seconds = 30;
  std::map<std::string, std::string> env;
  std::string sandbox = "bwrap"; // bwrap | none (the operator's explicit opt-out)
};

struct mcp_config {
  std::vector<mcp_server_config> servers;
  double call_timeout_seconds = 120; // per server: timeout_seconds (AS-64)
  // RS-30: request-declared servers (`server_url`) are refused unless an operator allows them; then
  // only to these hosts (empty: any). Their discovery must finish within connect_timeout.
  bool allow_request_servers = false;
  std::vector<std::string> allowed_hosts;
  double connect_timeout_seconds = 30;
};

// Where a Responses search tool (RS-27) is served: an MCP server of mcp.servers[] and the tool to
// call there, or an HTTP endpoint POSTed the search as JSON. Neither set: the tool is disabled.
struct search_provider_config {
  std::string mcp_server; // tools.<t>.provider.mcp_server: a mcp.servers[] name
  std::string tool;       // tools.<t>.provider.tool: the MCP tool to call
  std::string url;        // tools.<t>.provider.url: http:// or https://
  std::string bearer_token_env; // tools.<t>.provider.bearer_token_env: the token's variable
  std::string bearer_token;     // its value, read at start
  double timeout_seconds = 30;  // tools.<t>.provider.timeout_seconds (HTTP)
  bool configured() const { return !mcp_server.empty() || !url.empty(); }
};

// tools.*: the providers of the gateway's search tools (RS-27).
struct search_tools_config {
  search_provider_config web_search;
  search_provider_config file_search;
};

// The Responses gateway's executor limits (responses.md: executor.*, compaction.*, background.*,
// stream.*), defaults from the spec.
struct responses_config {
  int max_rounds = 10;                            // executor.max_rounds (RS-23)
  int max_concurrent_gateway_calls = 5;           // executor.max_concurrent_gateway_calls (RS-25)
  double gateway_tool_timeout = 60;               // executor.gateway_tool_timeout, seconds (RS-25)
  int64_t max_tool_output_bytes = int64_t{1} << 20; // executor.max_tool_output_bytes (RS-26)
  int64_t compact_default_threshold = 100000;     // compaction.default_threshold (RS-14)
  int64_t max_summary_tokens = 4096;              // compaction.max_summary_tokens (RS-51)
  int64_t background_max_active = 64;             // background.max_active (RS-55)
  double client_stall_timeout = 60;               // stream.client_stall_timeout, seconds (RS-39)
  int64_t outbound_queue_events = 64;             // stream.outbound_queue_events (RS-39)
};

// cluster.pg.*: the PostgreSQL pool and the bounds each connection sets (CJ-4).
struct postgres_config {
  int64_t pool_size = 8;
  int64_t active_transactions = 0; // 0: as many as the machine has cores, at least 2
  double acquire_timeout_seconds = 5;
  double statement_timeout_seconds = 5;
  double idle_in_transaction_seconds = 10;
  double lock_timeout_seconds = 2;
};

// cluster.tls.*: mutual TLS between nodes (CJ-24), in PEM files: this node's certificate chain and key,
// and the CA that must have signed every other node's. All three, or none (plain TCP).
struct cluster_tls_config {
  std::string certificate;
  std::string key;
  std::string ca_file;
  bool enabled() const { return !certificate.empty() || !key.empty() || !ca_file.empty(); }
};

// cluster.*: how a node joins, proves it lives and fences itself (CJ-12 to CJ-14). A node is a
// `troupe serve` on PostgreSQL.
struct cluster_config {
  std::string name;           // cluster.name: the node's name in GET /v1/cluster ("": the host name)
  std::string host = "127.0.0.1"; // cluster.host: where its node actor listens
  int64_t port = 18742;       // cluster.port
  std::string advertise_host; // cluster.advertise_host: what peers dial ("": cluster.host)
  double heartbeat_seconds = 2;
  double node_expiry_seconds = 10;
  double fence_margin_seconds = 2;
  double drain_grace_seconds = 30; // on SIGTERM, how long running work may finish before it is handed back
  int64_t max_handoffs = 10;       // handbacks a run gets without charging an attempt (CJ-16)
  // CAF remoting between nodes (CJ-22, CJ-23): off, every cross-node message takes its store fallback.
  bool remoting = true;
  std::string secret;          // cluster.secret, env TROUPE_CLUSTER_SECRET: the HMAC handshake's key
  std::string secret_previous; // cluster.secret_previous: also verifies, while a new secret rolls out
  cluster_tls_config tls;
  double request_timeout_seconds = 2; // a request to another node; past it, the store fallback
  double forward_timeout_seconds = 5; // a workspace command forwarded to its log's owner (CJ-29)
  double peer_timeout_seconds = 5;    // a silent connection to another node is closed
  double approval_poll_seconds = 2;   // a node reads the approvals its runs wait on again (CJ-26)
  double tail_poll_seconds = 0.2;     // a stream of a run held elsewhere reads the store this often (CJ-27)
  double notify_coalesce_seconds = 0.005; // equal wake-ups within it go out as one NOTIFY (CJ-10)
  double poll_interval_seconds = 2;       // a node claims this often without a wake-up (CJ-10)
  int64_t claim_batch = 8;            // at most this many runs per claim statement (CJ-18)
  int64_t tenant_max_running = 0;     // a tenant's running background runs, cluster-wide; 0: no cap (CJ-19)
};

// jobs.*: the jobs API (CJ-30 to CJ-41).
struct jobs_config {
  int64_t max_payload_bytes = 262144; // a larger payload is a 413 (CJ-31)
  int64_t max_waiters = 10000;        // long polls one node holds; past it, 429 (CJ-33)
  double retry_base_seconds = 5;      // a retryable failure's backoff (CJ-36)
  double retry_max_seconds = 3600;
  double sweep_interval_seconds = 1;  // expired leases are failed this often (CJ-37)
  double poll_seconds = 1;            // a long poll claims again this often without a wake-up (CJ-33)
  std::string fair_share = "tenants"; // "tenants": CJ-19's turns; "none": priority alone
  // jobs.types.<type>.max_leased_per_tenant: a tenant's leased jobs of the type, cluster-wide (CJ-32).
  std::map<std::string, int64_t> max_leased_per_tenant{{"pska.digest", 4}};
};

// One PSKA tenant the digest worker serves, as the user it acts for (CJ-43).
struct pska_tenant {
  std::string tenant_id;
  std::string represented_user_id;
};

// pska_digest_worker.*: the PSKA digest worker (AS-66, CJ-42 to CJ-46).
struct pska_worker_config {
  bool enabled = false;
  std::string pska_url = "http://127.0.0.1:8765";
  std::string troupe_url;           // "": this node's listener (AS-94)
  std::string pska_service_token;   // env PSKA_SERVICE_TOKEN
  std::string troupe_service_token; // "": the first service token
  std::string worker_id;            // "": troupe-<host>-<pid>
  int64_t lease_seconds = 300;
  int64_t batch_limit = 1;
  std::string tenant_id = "tenant_default";
  std::string represented_user_id = "user_primary";
  double run_timeout_seconds = 900;
  double run_poll_seconds = 2;
  int64_t max_concurrent = 8;
  std::string source = "pska"; // "pska": poll PSKA; "troupe": lease pska.digest jobs (CJ-43)
  std::vector<pska_tenant> tenants; // empty: {tenant_id, represented_user_id}
  double poll_seconds = 5;
  int64_t max_per_tenant = 2;
  int64_t breaker_failures = 5;
  double pska_timeout_seconds = 30;
  double drain_grace_seconds = 30;
};

struct config {
  service_config service;
  responses_config responses;
  model_config model;
  react_config react;
  skills_config skills;
  exec_config exec;
  mcp_config mcp;
  search_tools_config search; // tools.web_search, tools.file_search (RS-27)
  policy_config policy;
  safety_config safety;
  workspaces_config workspaces;
  auth_config auth; // auth.* and the per-user limits of service.* (AS-4..AS-8)
  std::string data_dir = "./var";
  std::string store_path;       // default <data_dir>/troupe.db
  std::string workspaces_root;  // default <data_dir>/workspaces
  std::string postgres_url;     // store.postgres_url: set, every store is on PostgreSQL (CJ-1)
  postgres_config postgres;     // cluster.pg.*
  cluster_config cluster;       // cluster.* but cluster.pg
  jobs_config jobs;
  pska_worker_config pska_worker; // pska_digest_worker.*
};

// Every problem found, each `<json path>: <what is expected>, got <what was there>`.
struct config_result {
  config value;
  std::vector<std::string> errors;
  bool ok() const { return errors.empty(); }
};

using env_lookup = std::function<std::optional<std::string>(const std::string&)>;

// Reads the file's JSON text (an empty text means all defaults), then applies `--set path=value`
// overrides, then the environment (TROUPE_MODEL_PROVIDER, TROUPE_MODEL_BASE_URL, TROUPE_MODEL,
// TROUPE_MODEL_API_KEY, TROUPE_DATA_DIR, TROUPE_POSTGRES_URL, FASTREACT_SERVICE_TOKEN, and the
// variables api_key_env names).
// Flags that name a setting (--host, --port, --data-dir) are applied by the caller afterwards, then
// `finalize` derives the paths that default from data_dir.
config_result parse_config(std::string_view json_text, const std::vector<std::string>& set_overrides,
                           const env_lookup& env);

void finalize(config& c);

// The agent loop's settings of each surface: react.* for the agent service; executor.*,
// compaction.* and stream.* for the Responses gateway.
loop_settings agent_service_loop(const config& c);
loop_settings responses_loop(const config& c);

} // namespace troupe::protocol

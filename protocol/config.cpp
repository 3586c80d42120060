#include "protocol/config.hpp"
#include "protocol/cluster_handshake.hpp"

#include "protocol/config_reader.hpp"
#include "protocol/ids.hpp"
#include "protocol/jobs.hpp"
#include "protocol/json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace troupe::protocol {

namespace {

// 2 -> "2", 0.25 -> "0.25": seconds as an error message quotes them.
std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  std::string out = buf;
  while (out.back() == '0')
    out.pop_back();
  if (out.back() == '.')
    out.pop_back();
  return out;
}

std::string trimmed(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos)
    return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// Applies one `path=value` override to the document; the value is JSON when it parses, else a string.
void apply_override(json::document& doc, const std::string& assignment, std::vector<std::string>& errors) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    errors.push_back("--set " + assignment + ": expected <json.path>=<value>");
    return;
  }
  auto path = assignment.substr(0, eq);
  auto text = assignment.substr(eq + 1);
  json::value* node = &doc;
  std::size_t start = 0;
  auto& alloc = doc.GetAllocator();
  while (true) {
    auto dot = path.find('.', start);
    auto key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->IsObject())
      node->SetObject();
    auto it = node->FindMember(key.c_str());
    if (it == node->MemberEnd()) {
      node->AddMember(json::value(key.c_str(), alloc), json::value(rapidjson::kObjectType), alloc);
      it = node->FindMember(key.c_str());
    }
    node = &it->value;
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  if (auto parsed = json::parse(text))
    node->CopyFrom(*parsed, alloc);
  else
    node->SetString(text.c_str(), alloc);
}

bool is_http_url(const std::string& url) {
  return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
}

// `"*"` or a list of model names (responses.md Appendix A). An upstreams[] entry with an empty list
// could never serve anything, so only model.models may be empty.
void read_model_names(config_reader& r, const char* key, model_names& into, bool empty_ok) {
  auto v = r.find(key);
  if (!v)
    return;
  if (v->IsString() && std::string_view(v->GetString(), v->GetStringLength()) == "*") {
    into = model_names{};
    return;
  }
  if (!v->IsArray()) {
    r.fail(key, R"(expected "*" (every model) or an array of model names such as ["qwen3"])", *v);
    return;
  }
  model_names out;
  out.any = false;
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    auto& item = (*v)[i];
    auto path = r.path_of(key) + "[" + std::to_string(i) + "]";
    std::string_view name = item.IsString() ? std::string_view(item.GetString(), item.GetStringLength()) : "";
    if (name.empty())
      r.errors().push_back(path + ": expected a non-empty model name, got " + json_preview(item));
    else if (name == "*")
      r.errors().push_back(path + R"(: "*" means every model only on its own; write "*" instead of the list)");
    else
      out.names.emplace_back(name);
  }
  if (out.names.empty() && v->Empty() && !empty_ok)
    r.error(key, R"(expected at least one model name, or "*" for every model)");
  into = std::move(out);
}

// model.upstreams[] (responses.md Appendix A).
void read_upstreams(config_reader& model, std::vector<upstream_config>& into) {
  auto v = model.find("upstreams");
  if (!v)
    return;
  if (!v->IsArray()) {
    model.fail("upstreams", "expected an array of upstream objects", *v);
    return;
  }
  std::set<std::string> names;
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    auto path = model.path_of("upstreams") + "[" + std::to_string(i) + "]";
    auto& entry = (*v)[i];
    if (!entry.IsObject()) {
      model.errors().push_back(path + ": expected an object, got " + json_preview(entry));
      continue;
    }
    auto r = model.element(entry, path);
    upstream_config u;
    if (!r.find("name"))
      r.error("name", "required: a name for this upstream, unique among model.upstreams");
    else if (r.string("name", u.name) && u.name.empty())
      r.fail("name", "expected a non-empty string", *r.find("name"));
    else if (!u.name.empty() && !names.insert(u.name).second)
      r.error("name", "duplicate upstream name " + json::quote(u.name));
    if (!r.find("protocol"))
      r.error("protocol", R"(required: "responses" or "chat_completions")");
    r.one_of("protocol", u.protocol, {"responses", "chat_completions"});
    if (!r.find("base_url"))
      r.error("base_url", "required: the upstream's URL, e.g. http://127.0.0.1:8000/v1");
    else if (r.string("base_url", u.base_url) && !is_http_url(u.base_url))
      r.fail("base_url", "expected a URL starting with http:// or https://", *r.find("base_url"));
    r.string("api_key", u.api_key);
    r.string("api_key_env", u.api_key_env);
    if (!r.find("models"))
      r.error("models", R"(required: "*" for every model or an array of the model names this upstream serves)");
    read_model_names(r, "models", u.models, false);
    r.boolean("discover_models", u.discover_models);
    r.boolean("stream", u.stream);
    r.one_of("developer_role", u.developer_role, {"system", "developer"});
    r.boolean("replay_reasoning", u.replay_reasoning);
    r.one_of("max_tokens_field", u.max_tokens_field, {"max_tokens", "max_completion_tokens"});
    r.seconds("timeout_seconds", u.timeout_seconds, 0.001);
    into.push_back(std::move(u));
  }
}

// tools.<t>.provider (RS-27): exactly one of an MCP server with its tool, or an HTTP endpoint.
void read_search_provider(config_reader tools, const char* name, const mcp_config& mcp, const env_lookup& env,
                          search_provider_config& into) {
  auto entry = tools.child(name);
  if (!entry.find("provider"))
    return;
  auto p = entry.child("provider");
  p.string("mcp_server", into.mcp_server);
  p.string("tool", into.tool);
  p.string("url", into.url);
  p.string("bearer_token_env", into.bearer_token_env);
  p.seconds("timeout_seconds", into.timeout_seconds, 0.001);
  if (into.mcp_server.empty() == into.url.empty()) {
    p.error("mcp_server", "set exactly one of mcp_server (a mcp.servers name, with tool) or url (an http(s) "
                          "endpoint)");
    into = {};
    return;
  }
  if (!into.mcp_server.empty()) {
    bool known = std::any_of(mcp.servers.begin(), mcp.servers.end(),
                             [&](const mcp_server_config& s) { return s.name == into.mcp_server; });
    if (!known)
      p.error("mcp_server", "no mcp.servers entry is named " + json::quote(into.mcp_server)
                              + "; add one or name an existing server");
    if (into.tool.empty())
      p.error("tool", "required with mcp_server: the name of the server's search tool");
    if (!into.bearer_token_env.empty())
      p.error("bearer_token_env", "only for a url provider; give an MCP server its credentials in mcp.servers");
    return;
  }
  if (!is_http_url(into.url))
    p.error("url", "expected a URL starting with http:// or https://");
  if (!into.tool.empty())
    p.error("tool", "only for an mcp_server provider; a url provider is POSTed the search itself");
  if (!into.bearer_token_env.empty()) {
    auto token = env(into.bearer_token_env);
    if (!token || token->empty())
      p.error("bearer_token_env", "the environment variable " + into.bearer_token_env
                                    + " is not set; export it or remove bearer_token_env");
    else if (std::any_of(token->begin(), token->end(), [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; }))
      p.error("bearer_token_env", "the environment variable " + into.bearer_token_env
                                    + " holds a control character, which no header may carry");
    else
      into.bearer_token = *token;
  }
}

void read_jobs_config(config_reader jobs, jobs_config& into) {
  jobs.integer("max_payload_bytes", into.max_payload_bytes, 1, int64_t{1} << 30);
  jobs.integer("max_waiters", into.max_waiters, 0, 1 << 24);
  jobs.seconds("retry_base_seconds", into.retry_base_seconds, 0);
  jobs.seconds("retry_max_seconds", into.retry_max_seconds, 0);
  jobs.seconds("sweep_interval_seconds", into.sweep_interval_seconds, 0.01);
  jobs.seconds("poll_seconds", into.poll_seconds, 0.01);
  jobs.one_of("fair_share", into.fair_share, {"tenants", "none"});
  auto types = jobs.find("types");
  if (!types)
    return;
  if (!types->IsObject())
    return jobs.fail("types", "expected an object of job types", *types);
  for (auto& m : types->GetObject()) {
    std::string type(m.name.GetString(), m.name.GetStringLength());
    auto path = jobs.path_of("types") + "." + type;
    if (!jobs::is_job_type(type)) {
      jobs.errors().push_back(path + ": expected a job type such as email.send (CJ-31)");
      continue;
    }
    if (!m.value.IsObject()) {
      jobs.errors().push_back(path + ": expected an object, got " + json_preview(m.value));
      continue;
    }
    auto t = jobs.element(m.value, path);
    t.integer("max_leased_per_tenant", into.max_leased_per_tenant[type], 0, 1 << 30);
  }
}

void read_pska_worker_config(config_reader w, pska_worker_config& into) {
  w.boolean("enabled", into.enabled);
  for (auto [key, url] : {std::pair{"pska_url", &into.pska_url}, std::pair{"troupe_url", &into.troupe_url}})
    if (w.string(key, *url) && !url->empty() && !is_http_url(*url))
      w.fail(key, "expected a URL starting with http:// or https://", *w.find(key));
  w.string("pska_service_token", into.pska_service_token);
  w.string("troupe_service_token", into.troupe_service_token);
  w.string("worker_id", into.worker_id);
  w.integer("lease_seconds", into.lease_seconds, 5, 86400);
  w.integer("batch_limit", into.batch_limit, 1, 1000);
  for (auto [key, name] : {std::pair{"tenant_id", &into.tenant_id},
                           std::pair{"represented_user_id", &into.represented_user_id}})
    if (w.string(key, *name) && !is_name_text(*name))
      w.error(key, name_text_rule);
  w.seconds("run_timeout_seconds", into.run_timeout_seconds, 0.001);
  w.seconds("run_poll_seconds", into.run_poll_seconds, 0.001);
  w.integer("max_concurrent", into.max_concurrent, 1, 1024);
  w.one_of("source", into.source, {"pska", "troupe"});
  w.seconds("poll_seconds", into.poll_seconds, 0.001);
  w.integer("max_per_tenant", into.max_per_tenant, 1, 1024);
  w.integer("breaker_failures", into.breaker_failures, 1, 1000);
  w.seconds("pska_timeout_seconds", into.pska_timeout_seconds, 0.001);
  w.seconds("drain_grace_seconds", into.drain_grace_seconds, 0);
  auto tenants = w.find("tenants");
  if (!tenants)
    return;
  if (!tenants->IsArray())
    return w.fail("tenants", "expected an array of {tenant_id, represented_user_id}", *tenants);
  for (rapidjson::SizeType i = 0; i < tenants->Size(); ++i) {
    auto path = w.path_of("tenants") + "[" + std::to_string(i) + "]";
    auto& entry = (*tenants)[i];
    if (!entry.IsObject()) {
      w.errors().push_back(path + ": expected an object, got " + json_preview(entry));
      continue;
    }
    auto r = w.element(entry, path);
    pska_tenant t;
    // They travel in request headers and key CJ-45's run ids: no control characters.
    if (!r.string("tenant_id", t.tenant_id) || !is_name_text(t.tenant_id))
      r.error("tenant_id", std::string("required: the PSKA tenant id, ") + name_text_rule);
    if (!r.string("represented_user_id", t.represented_user_id) || !is_name_text(t.represented_user_id))
      r.error("represented_user_id", std::string("required: the PSKA user the worker acts for, ") + name_text_rule);
    into.tenants.push_back(std::move(t));
  }
}

} // namespace

config_result parse_config(std::string_view json_text, const std::vector<std::string>& set_overrides,
                           const env_lookup& env) {
  config_result result;
  auto& c = result.value;
  auto& errors = result.errors;
  json::document doc;
  if (trimmed(json_text).empty())
    doc.SetObject();
  else {
    auto parsed = json::parse_body(json_text);
    if (auto failure = std::get_if<json::parse_failure>(&parsed)) {
      errors.push_back("<file>: " + failure->message());
      return result;
    }
    doc = std::move(std::get<json::document>(parsed));
    if (!doc.IsObject()) {
      errors.push_back("<file>: expected a JSON object at the top level");
      return result;
    }
  }
  // The environment beats the file and --set beats the environment (DESIGN.md, Shared configuration).
  for (auto [var, path] : {std::pair{"TROUPE_DATA_DIR", "data_dir"}, {"TROUPE_MODEL_PROVIDER", "model.provider"},
                           {"TROUPE_MODEL_BASE_URL", "model.base_url"}, {"TROUPE_MODEL", "model.name"},
                           {"TROUPE_MODEL_API_KEY", "model.api_key"}, {"TROUPE_POSTGRES_URL", "store.postgres_url"}}) {
    if (auto v = env(var); v && !v->empty())
      apply_override(doc, std::string(path) + "=" + json::quote(*v), errors);
  }
  for (auto& s : set_overrides)
    apply_override(doc, s, errors);

  // Every key is read below where it is used; what no reader asked for is refused at the end.
  config_keys keys;
  config_reader root(&doc, "", errors, &keys);
  root.string("data_dir", c.data_dir);

  auto service = root.child("service");
  service.string("host", c.service.host);
  service.integer("port", c.service.port, 0, 65535);
  service.integer("max_body_bytes", c.service.max_body_bytes, 1, int64_t{1} << 40);
  service.seconds("sse_heartbeat_seconds", c.service.sse_heartbeat_seconds, 0.01);
  service.seconds("read_timeout_seconds", c.service.read_timeout_seconds, 0.01);
  service.seconds("shutdown_grace_seconds", c.service.shutdown_grace_seconds, 0);
  service.integer("max_stream_buffer_bytes", c.service.max_stream_buffer_bytes, 1024, int64_t{1} << 34);
  service.integer("io_threads", c.service.io_threads, 1, 256);
  service.one_of("chat_on_disconnect", c.service.chat_on_disconnect, {"cancel", "continue"});
  service.integer("run_concurrency", c.service.run_concurrency, 0, 1 << 20);
  service.integer("run_max_attempts", c.service.run_max_attempts, 1, 100);
  service.seconds("run_retry_base_seconds", c.service.run_retry_base_seconds, 0);
  service.seconds("run_retry_max_seconds", c.service.run_retry_max_seconds, 0);
  service.seconds("run_lease_seconds", c.service.run_lease_seconds, 0.3);
  service.seconds("run_recovery_interval_seconds", c.service.run_recovery_interval_seconds, 0.05);
  service.seconds("approval_timeout_seconds", c.service.approval_timeout_seconds, 0.01);
  service.integer("max_connections", c.service.max_connections, 1, 1 << 20);
  service.strings("allowed_hosts", c.service.allowed_hosts);
  service.strings("trusted_origins", c.service.trusted_origins);
  std::string token, alias;
  service.string("service_token", token);
  service.string("token", alias);
  auto auth = root.child("auth");
  read_auth_config(auth, service, c.auth);

  auto executor = root.child("executor");
  executor.integer("max_rounds", c.responses.max_rounds, 1, 1000);
  executor.integer("max_concurrent_gateway_calls", c.responses.max_concurrent_gateway_calls, 1, 1024);
  executor.seconds("gateway_tool_timeout", c.responses.gateway_tool_timeout, 0.001);
  executor.integer("max_tool_output_bytes", c.responses.max_tool_output_bytes, 1, int64_t{1} << 34);
  auto compaction = root.child("compaction");
  compaction.integer("default_threshold", c.responses.compact_default_threshold, 1, int64_t{1} << 40);
  compaction.integer("max_summary_tokens", c.responses.max_summary_tokens, 16, int64_t{1} << 30);
  auto background = root.child("background");
  background.integer("max_active", c.responses.background_max_active, 1, 1 << 20);
  auto stream = root.child("stream");
  stream.seconds("client_stall_timeout", c.responses.client_stall_timeout, 0.001);
  stream.integer("outbound_queue_events", c.responses.outbound_queue_events, 1, 1 << 20);

  auto workspaces = root.child("workspaces");
  read_workspaces_config(workspaces, c.workspaces);
  c.auth.workspace_credentials = !c.workspaces.credentials.empty();

  auto store = root.child("store");
  store.string("path", c.store_path);
  store.string("postgres_url", c.postgres_url);
  auto cluster = root.child("cluster");
  cluster.string("name", c.cluster.name);
  cluster.string("host", c.cluster.host);
  cluster.integer("port", c.cluster.port, 0, 65535);
  cluster.string("advertise_host", c.cluster.advertise_host);
  cluster.seconds("heartbeat_seconds", c.cluster.heartbeat_seconds, 0.01);
  cluster.seconds("node_expiry_seconds", c.cluster.node_expiry_seconds, 0.03);
  cluster.seconds("fence_margin_seconds", c.cluster.fence_margin_seconds, 0.001);
  cluster.seconds("drain_grace_seconds", c.cluster.drain_grace_seconds, 0);
  cluster.integer("max_handoffs", c.cluster.max_handoffs, 0, 1000);
  cluster.boolean("remoting", c.cluster.remoting);
  cluster.string("secret", c.cluster.secret);
  cluster.string("secret_previous", c.cluster.secret_previous);
  auto tls = cluster.child("tls");
  tls.string("certificate", c.cluster.tls.certificate);
  tls.string("key", c.cluster.tls.key);
  tls.string("ca_file", c.cluster.tls.ca_file);
  cluster.seconds("request_timeout_seconds", c.cluster.request_timeout_seconds, 0.001);
  cluster.seconds("forward_timeout_seconds", c.cluster.forward_timeout_seconds, 0.001);
  cluster.seconds("peer_timeout_seconds", c.cluster.peer_timeout_seconds, 0.01);
  cluster.seconds("approval_poll_seconds", c.cluster.approval_poll_seconds, 0.01);
  cluster.seconds("tail_poll_seconds", c.cluster.tail_poll_seconds, 0.01);
  cluster.seconds("notify_coalesce_seconds", c.cluster.notify_coalesce_seconds, 0);
  cluster.seconds("poll_interval_seconds", c.cluster.poll_interval_seconds, 0.01);
  cluster.integer("claim_batch", c.cluster.claim_batch, 1, 1 << 20);
  cluster.integer("tenant_max_running", c.cluster.tenant_max_running, 0, 1 << 30);
  auto pg = cluster.child("pg");
  pg.integer("pool_size", c.postgres.pool_size, 1, 1024);
  pg.integer("active_transactions", c.postgres.active_transactions, 0, 1024);
  pg.seconds("acquire_timeout_seconds", c.postgres.acquire_timeout_seconds, 0.001);
  pg.seconds("statement_timeout_seconds", c.postgres.statement_timeout_seconds, 0.001);
  pg.seconds("idle_in_transaction_seconds", c.postgres.idle_in_transaction_seconds, 0.001);
  pg.seconds("lock_timeout_seconds", c.postgres.lock_timeout_seconds, 0.001);
  read_jobs_config(root.child("jobs"), c.jobs);
  read_pska_worker_config(root.child("pska_digest_worker"), c.pska_worker);
  auto paths = root.child("paths");
  paths.string("workspaces_root", c.workspaces_root);

  auto model = root.child("model");
  model.one_of("provider", c.model.provider, {"scripted", "openai"});
  model.one_of("protocol", c.model.protocol, {"chat_completions", "responses"});
  model.string("base_url", c.model.base_url);
  model.string("name", c.model.name);
  model.string("api_key", c.model.api_key);
  model.string("api_key_env", c.model.api_key_env);
  model.seconds("timeout_seconds", c.model.timeout_seconds, 0.001);
  model.integer("max_retries", c.model.max_retries, 0, 100);
  model.boolean("stream", c.model.stream);
  model.integer("max_tokens", c.model.max_tokens, 1, int64_t{1} << 31);
  model.raw("script", c.model.script, true);
  model.raw("scripts", c.model.scripts, false);
  read_model_names(model, "models", c.model.models, true);
  read_upstreams(model, c.model.upstreams);

  auto react = root.child("react");
  react.integer("max_iterations", c.react.max_iterations, 1, 100000);
  react.integer("max_tool_output_chars", c.react.max_tool_output_chars, 1, int64_t{1} << 32);
  react.integer("max_context_tokens", c.react.max_context_tokens, 1, int64_t{1} << 40);
  react.integer("sliding_window_size", c.react.sliding_window_size, 1, 100000);
  auto skills = root.child("skills");
  skills.strings("dirs", c.skills.dirs);
  for (std::size_t i = 0; i < c.skills.dirs.size(); ++i)
    if (c.skills.dirs[i].empty())
      errors.push_back("skills.dirs[" + std::to_string(i) + "]: expected a directory's path, got \"\"");

  auto exec = root.child("tools").child("exec");
  exec.seconds("timeout_seconds", c.exec.timeout_seconds, 0.001);
  exec.string_map("env", c.exec.env);
  exec.one_of("sandbox", c.exec.sandbox, {"bwrap", "none"});

  auto safety = root.child("safety");
  safety.boolean("enabled", c.safety.enabled);
  safety.boolean("allow_all", c.safety.allow_all);
  safety.boolean("strict_mode", c.safety.strict_mode);
  c.policy = parse_policy(root.find("policy"), errors);

  auto mcp = root.child("mcp");
  mcp.seconds("call_timeout_seconds", c.mcp.call_timeout_seconds, 0.001);
  mcp.boolean("allow_request_servers", c.mcp.allow_request_servers);
  mcp.strings("allowed_hosts", c.mcp.allowed_hosts);
  mcp.seconds("connect_timeout", c.mcp.connect_timeout_seconds, 0.001);
  std::string servers = "[]";
  mcp.raw("servers", servers, true);
  for (auto& e : parse_mcp_servers(servers, c.mcp.servers))
    errors.push_back(e);
  auto tools = root.child("tools");
  read_search_provider(tools, "web_search", c.mcp, env, c.search.web_search);
  read_search_provider(tools, "file_search", c.mcp, env, c.search.file_search);
  keys.refuse_unknown(errors);

  auto from_env = [&](const char* name, std::string& into) {
    if (auto v = env(name); v && !v->empty())
      into = *v;
  };
  if (c.model.api_key.empty() && !c.model.api_key_env.empty())
    from_env(c.model.api_key_env.c_str(), c.model.api_key);
  for (auto& u : c.model.upstreams)
    if (u.api_key.empty() && !u.api_key_env.empty())
      from_env(u.api_key_env.c_str(), u.api_key);
  std::string env_token;
  from_env("FASTREACT_SERVICE_TOKEN", env_token);
  from_env("TROUPE_CLUSTER_SECRET", c.cluster.secret);
  from_env("PSKA_SERVICE_TOKEN", c.pska_worker.pska_service_token);
  for (auto* t : {&token, &alias, &env_token}) {
    auto v = trimmed(*t);
    if (!v.empty())
      c.service.service_tokens.push_back(v);
  }

  // WS-59: the service token is tenant default's; a credential with its hash would give it another.
  for (auto& t : c.service.service_tokens)
    for (std::size_t i = 0; i < c.workspaces.credentials.size(); ++i)
      if (c.workspaces.credentials[i].token_sha256 == sha256_hex(t))
        errors.push_back("workspaces.credentials[" + std::to_string(i) + "].token_sha256: the SHA-256 of the service "
                         "token, which is tenant default's; a token belongs to one tenant");

  // CJ-12: a node must miss 3 heartbeats before it is dead, and fence itself while it still has one
  // heartbeat of time left before the others may take its work.
  auto& cl = c.cluster;
  if (cl.node_expiry_seconds < 3 * cl.heartbeat_seconds)
    errors.push_back("cluster.node_expiry_seconds: expected at least 3 heartbeats (cluster.heartbeat_seconds "
                     + format_seconds(cl.heartbeat_seconds) + " x 3), got " + format_seconds(cl.node_expiry_seconds));
  else if (cl.fence_margin_seconds >= cl.node_expiry_seconds - cl.heartbeat_seconds)
    errors.push_back("cluster.fence_margin_seconds: expected less than cluster.node_expiry_seconds - "
                     "cluster.heartbeat_seconds (" + format_seconds(cl.node_expiry_seconds - cl.heartbeat_seconds)
                     + "), got " + format_seconds(cl.fence_margin_seconds));

  // CJ-23: a node that talks to the others proves itself with the shared secret. The messages name
  // the key and the length, never the secret.
  if (!c.postgres_url.empty() && cl.remoting) {
    if (auto problem = secret_problem(cl.secret))
      errors.push_back(*problem);
    if (!cl.secret_previous.empty() && cl.secret_previous.size() < cluster_secret_min_bytes)
      errors.push_back("cluster.secret_previous: expected at least " + std::to_string(cluster_secret_min_bytes)
                       + " bytes, got " + std::to_string(cl.secret_previous.size())
                       + "; set the secret the cluster used before, or leave it empty");
  }
  // CJ-24: TLS between nodes is mutual or nothing: without a CA a node would accept any certificate.
  if (cl.tls.enabled())
    for (auto [key, value] : {std::pair<const char*, const std::string*>{"certificate", &cl.tls.certificate},
                              {"key", &cl.tls.key},
                              {"ca_file", &cl.tls.ca_file}})
      if (value->empty())
        errors.push_back(std::string("cluster.tls.") + key
                         + ": expected a PEM file's path, since cluster.tls is set; mutual TLS needs "
                           "certificate, key and ca_file together (or none of them for plain TCP)");

  if (c.model.provider == "openai" && c.model.base_url.empty())
    errors.push_back("model.base_url: expected the upstream's URL (e.g. http://127.0.0.1:11434/v1) when "
                     "model.provider is \"openai\"; set it or TROUPE_MODEL_BASE_URL");
  if (!c.model.base_url.empty() && !is_http_url(c.model.base_url))
    errors.push_back("model.base_url: expected a URL starting with http:// or https://, got \""
                     + c.model.base_url + "\"");
  return result;
}

loop_settings agent_service_loop(const config& c) {
  auto s = loop_settings::agent_service();
  s.max_rounds = c.react.max_iterations;
  s.max_tool_output_bytes = static_cast<std::size_t>(c.react.max_tool_output_chars);
  s.max_context_tokens = c.react.max_context_tokens;
  s.sliding_window_size = static_cast<std::size_t>(c.react.sliding_window_size);
  return s;
}

loop_settings responses_loop(const config& c) {
  auto s = loop_settings::responses();
  s.max_rounds = c.responses.max_rounds;
  s.parallel_calls = static_cast<std::size_t>(std::max(1, c.responses.max_concurrent_gateway_calls));
  s.call_timeout_seconds = c.responses.gateway_tool_timeout;
  s.max_tool_output_bytes = static_cast<std::size_t>(c.responses.max_tool_output_bytes);
  s.summary_tokens = c.responses.max_summary_tokens;
  s.client_stall_timeout_seconds = c.responses.client_stall_timeout;
  return s;
}

void finalize(config& c) {
  if (c.store_path.empty())
    c.store_path = c.data_dir + "/troupe.db";
  if (c.workspaces_root.empty())
    c.workspaces_root = c.data_dir + "/workspaces";
}

} // namespace troupe::protocol

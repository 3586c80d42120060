// troupe's entry point: parses the command line, loads the configuration and wires the node.
#include "actors/approval_registry.hpp"
#include "actors/cluster_membership.hpp"
#include "actors/errors.hpp"
#include "actors/node_actor.hpp"
#include "actors/response_recovery.hpp"
#include "actors/run_registry.hpp"
#include "actors/search_port.hpp"
#include "actors/tool_router.hpp"
#include "actors/workspace_log.hpp"
#include "io/admission.hpp"
#include "io/agent_routes.hpp"
#include "io/builtin_tools.hpp"
#include "io/cluster_peers.hpp"
#include "io/cluster_routes.hpp"
#include "io/data_dir.hpp"
#include "io/http_server.hpp"
#include "io/mcp_http_transport.hpp"
#include "io/mcp_stdio_transport.hpp"
#include "io/migration_files.hpp"
#include "io/model_catalog.hpp"
#include "io/openai_chat_client.hpp"
#include "io/policy_routes.hpp"
#include "io/prompt_files.hpp"
#include "io/responses_routes.hpp"
#include "io/routing_model_port.hpp"
#include "io/run_routes.hpp"
#include "io/scripted_model_port.hpp"
#include "io/web_client.hpp"
#include "io/stores.hpp"
#include "io/job_routes.hpp"
#include "pska_commands.hpp"
#include "run_command.hpp"
#include "io/workspace_routes.hpp"
#include "protocol/cluster.hpp"
#include "protocol/config.hpp"
#include "protocol/reflexr_schema.hpp"
#include "protocol/scripted_model.hpp"
#include "protocol/workspace_events.hpp"

#include "troupe_default_config.hpp"
#include "troupe_version.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <optional>
#include <set>
#include <thread>
#include <variant>

#include <sys/resource.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace {

using namespace troupe;

struct cli_options {
  std::string config_file;
  std::string host;
  int port = -1;
  std::string data_dir;
  std::vector<std::string> set;
  std::string schema_output = "schemas/reflexr.v1.json";
  bool dry_run = false;
  bool once = false;  // pska-digest --once
  std::string job_id; // pska-digest --job-id
};

using event_types = std::shared_ptr<const protocol::reflexr::event_registry>;

// Loads the file (or the embedded default), then --set, the environment and the flags (AS-2: an
// invalid config exits 2 naming the offending key).
// service.max_connections within what the process may open: the descriptor limit is raised to its
// hard maximum, and connections keep 256 descriptors clear of it for the store, tools, MCP servers and
// upstream requests, so running out of descriptors refuses connections instead of failing everything else.
int64_t connection_cap(int64_t configured) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return configured;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
      limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY)
    return configured;
  auto usable = static_cast<int64_t>(limit.rlim_cur) - 256;
  if (usable < configured)
    spdlog::warn("service.max_connections {} exceeds what {} descriptors allow; accepting at most {}", configured,
                 static_cast<int64_t>(limit.rlim_cur), std::max<int64_t>(usable, 1));
  return std::max<int64_t>(1, std::min(configured, usable));
}

protocol::config_result load_config(const cli_options& cli) {
  std::string text = troupe_default_config;
  if (!cli.config_file.empty()) {
    auto file = io::read_text_file(cli.config_file);
    if (file.index() == 1) {
      protocol::config_result r;
      r.errors.push_back(std::get<1>(file));
      return r;
    }
    text = std::get<0>(file);
  }
  auto result = protocol::parse_config(text, cli.set, [](const std::string& name) -> std::optional<std::string> {
    if (auto v = std::getenv(name.c_str()))
      return std::string(v);
    return std::nullopt;
  });
  auto& c = result.value;
  if (!cli.host.empty())
    c.service.host = cli.host;
  if (cli.port >= 0)
    c.service.port = cli.port;
  if (!cli.data_dir.empty())
    c.data_dir = cli.data_dir;
  protocol::finalize(c);
  // Sandboxed tools bind the workspace by path from another working directory, so paths are made absolute once.
  for (auto* path : {&c.data_dir, &c.workspaces_root})
    if (!path->empty())
      *path = std::filesystem::absolute(*path).lexically_normal().string();
  if (result.ok() && c.model.provider == "scripted") {
    auto book = protocol::script_book::parse(c.model.script, c.model.scripts);
    if (auto err = std::get_if<std::string>(&book))
      result.errors.push_back(*err);
  }
  if (result.ok()) {
    auto types = protocol::reflexr::event_registry::build(c.workspaces);
    if (auto errors = std::get_if<std::vector<std::string>>(&types))
      result.errors.insert(result.errors.end(), errors->begin(), errors->end());
  }
  return result;
}

// WS-125: the reflexr.v1 JSON Schema, written from the definitions the frame parser validates with.
int write_schema(const cli_options& cli) {
  std::ofstream out(cli.schema_output, std::ios::binary | std::ios::trunc);
  if (out << protocol::reflexr::schema_text() && out.flush()) {
    std::cout << "wrote " << cli.schema_output << "\n";
    return 0;
  }
  std::cerr << "troupe: cannot write " << cli.schema_output << "\n";
  return 2;
}

int report_errors(const protocol::config_result& r, const cli_options& cli) {
  auto source = cli.config_file.empty() ? std::string("the embedded config/troupe.json") : cli.config_file;
  std::cerr << "troupe: invalid configuration (" << source << "):\n";
  for (auto& e : r.errors)
    std::cerr << "  " << e << "\n";
  return 2;
}

// The default upstream's adapter serves the agent loop's rounds and the Responses executor's;
// model.upstreams[] entries and a model.models list put a router in front of the latter.
struct model_ports {
  std::shared_ptr<model_port> agent;     // the agent service's rounds: always the default upstream
  std::shared_ptr<model_port> responses; // the Responses executor's rounds, routed by model name
  std::shared_ptr<io::model_catalog> models; // the names the Responses gateway routes and lists
};

template <class Adapter>
model_ports ports_of(std::shared_ptr<Adapter> adapter) {
  return {adapter, adapter, nullptr};
}

model_ports default_model_ports(const protocol::config& c) {
  if (c.model.provider == "openai") {
    io::openai_chat_options o;
    o.base_url = c.model.base_url;
    o.api_key = c.model.api_key;
    o.timeout_seconds = static_cast<int>(std::max(1.0, c.model.timeout_seconds));
    o.max_retries = c.model.max_retries;
    o.stream = c.model.stream;
    o.protocol = c.model.protocol;
    return ports_of(std::make_shared<io::openai_chat_client>(o));
  }
  auto book = protocol::script_book::parse(c.model.script, c.model.scripts);
  return ports_of(std::make_shared<io::scripted_model_port>(std::get<protocol::script_book>(std::move(book))));
}

// An upstreams[] entry's adapter; retries follow model.max_retries, as Appendix A gives entries none.
std::shared_ptr<model_port> entry_port(const protocol::upstream_config& u, const protocol::config& c) {
  io::openai_chat_options o;
  o.base_url = u.base_url;
  o.api_key = u.api_key;
  o.timeout_seconds = static_cast<int>(std::max(1.0, u.timeout_seconds));
  o.max_retries = c.model.max_retries;
  o.stream = u.stream;
  o.protocol = u.protocol;
  o.chat.developer_role = u.developer_role;
  o.chat.replay_reasoning = u.replay_reasoning;
  o.chat.max_tokens_field = u.max_tokens_field;
  return std::make_shared<io::openai_chat_client>(o);
}

// The model catalog, with the entries that discover their models asked once before serving (each ask
// is bounded, so an unreachable upstream delays the start by seconds, and is asked again later).
std::shared_ptr<io::model_catalog> make_model_catalog(const protocol::config& c) {
  std::vector<io::model_source> sources;
  for (std::size_t i = 0; i < c.model.upstreams.size(); ++i)
    if (auto& u = c.model.upstreams[i]; u.discover_models)
      sources.push_back({i, u.base_url, u.api_key, u.timeout_seconds});
  auto catalog = std::make_shared<io::model_catalog>(c.model, std::move(sources));
  std::promise<void> asked;
  catalog->refresh([&asked] { asked.set_value(); });
  asked.get_future().wait();
  return catalog;
}

model_ports make_model_ports(const protocol::config& c) {
  auto ports = default_model_ports(c);
  ports.models = make_model_catalog(c);
  if (c.model.upstreams.empty() && c.model.models.any)
    return ports; // the default upstream serves every model name
  std::vector<std::shared_ptr<model_port>> routes;
  for (auto& u : c.model.upstreams) {
    routes.push_back(entry_port(u, c));
    std::string names = u.models.any ? "every model" : "";
    for (auto& n : u.models.names)
      names += (names.empty() ? "" : ", ") + n;
    if (u.discover_models)
      names += std::string(names.empty() ? "" : ", and ") + "what its /models lists";
    spdlog::info("serve: upstream '{}' ({} at {}) serves {}", u.name, u.protocol, u.base_url, names);
  }
  routes.push_back(ports.responses);
  ports.responses = std::make_shared<io::routing_model_port>(std::move(routes), ports.models);
  return ports;
}

// tools.exec.sandbox, checked once: when bwrap cannot start, every exec answers why and /ready says it.
std::shared_ptr<const io::exec_sandbox> make_exec_sandbox(const protocol::config& c) {
  io::exec_sandbox_options o;
  o.enabled = c.exec.sandbox == "bwrap";
  o.hidden = {c.data_dir, c.workspaces_root};
  auto sandbox = std::make_shared<io::exec_sandbox>(o);
  if (!o.enabled)
    spdlog::warn("exec: tools.exec.sandbox is \"none\": commands run unsandboxed, as troupe's user, and what "
                 "an MCP server starts may outlive it");
  else if (auto& why = sandbox->probe(c.workspaces_root); !why.empty())
    spdlog::error("exec: the sandbox cannot run commands, every exec call will fail: {}", why);
  return sandbox;
}

// `troupe migrate [--dry-run]` (CJ-2): applies, or lists, the configured store's pending migrations.
int migrate(const cli_options& cli) {
  auto r = load_config(cli);
  if (!r.ok())
    return report_errors(r, cli);
  auto& cfg = r.value;
  if (cfg.postgres_url.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(cfg.store_path).parent_path(), ignored);
  }
  auto done = io::migrate_store(cfg, cli.dry_run);
  if (auto err = std::get_if<std::string>(&done)) {
    std::cerr << "troupe: " << *err << "\n";
    return 2;
  }
  auto& names = std::get<std::vector<std::string>>(done);
  std::cout << io::describe_store(cfg) << ": " << names.size() << (cli.dry_run ? " pending" : " applied")
            << (names.empty() ? ", the schema is current" : "") << "\n";
  for (auto& name : names)
    std::cout << "  " << name << "\n";
  return 0;
}

int check_config(const cli_options& cli) {
  auto r = load_config(cli);
  if (!r.ok())
    return report_errors(r, cli);
  auto& c = r.value;
  std::cout << "config OK: listener " << c.service.host << ":" << c.service.port << ", data_dir " << c.data_dir
            << ", model " << c.model.provider << "/" << c.model.name << "\n";
  return 0;
}

// One scheduler worker per core: CAF's default of at least 4 has idle workers polling for work on
// small machines. Nothing blocks a worker (the stores and MCP servers are detached actors).
// An idle worker spins briefly, then sleeps on a condition variable until work comes. CAF's default
// polls (sleeping 50 us at a time) for 25 ms after every message, and a run streaming a model at its
// pace gets one every few milliseconds, so its workers never stopped polling.
void tune_scheduler(caf::actor_system_config& caf_cfg) {
  caf_cfg.set("scheduler.max-threads", static_cast<size_t>(std::max(2u, std::thread::hardware_concurrency())));
  caf_cfg.set("work-stealing.aggressive-poll-attempts", size_t{20});
  caf_cfg.set("work-stealing.moderate-poll-attempts", size_t{1});
  add_error_category(caf_cfg);
}

// The built-in tools and every configured MCP server, behind one tool port.
std::shared_ptr<tool_router> make_tools(caf::actor_system& sys, const protocol::config& cfg,
                                        std::shared_ptr<const io::exec_sandbox> sandbox) {
  io::builtin_tools_options tool_opts;
  tool_opts.exec_timeout_seconds = cfg.exec.timeout_seconds;
  tool_opts.exec_env = cfg.exec.env;
  tool_opts.sandbox = sandbox;
  auto tools = std::make_shared<tool_router>(sys, std::make_shared<io::builtin_tools>(tool_opts));
  for (auto& server : cfg.mcp.servers) {
    mcp_server_options o;
    o.config = server;
    o.call_timeout_seconds = server.timeout_seconds.value_or(cfg.mcp.call_timeout_seconds);
    tools->add_server(std::move(o), [sandbox](const protocol::mcp_server_config& c) {
      return c.transport == "http" ? io::make_mcp_http_transport(c) : io::make_mcp_stdio_transport(c, sandbox);
    });
  }
  return tools;
}

std::shared_ptr<run_environment> make_run_environment(const protocol::config& cfg, const model_ports& ports,
                                                      std::shared_ptr<tool_router> tools, store_actor store) {
  auto env = std::make_shared<run_environment>();
  env->model = ports.agent;
  env->tools = std::move(tools);
  env->store = std::move(store);
  env->loop = protocol::agent_service_loop(cfg);
  env->default_model = cfg.model.name;
  env->default_max_tokens = cfg.model.max_tokens;
  env->stream = cfg.model.stream;
  env->workspaces_root = cfg.workspaces_root;
  env->prompts = std::make_shared<io::prompt_files>(cfg.skills.dirs);
  env->policy = cfg.policy;
  env->safety = cfg.safety;
  env->approval_timeout_seconds = cfg.service.approval_timeout_seconds;
  env->retry_base_seconds = cfg.service.run_retry_base_seconds;
  env->retry_max_seconds = cfg.service.run_retry_max_seconds;
  return env;
}

// AS-83: this process owns the store (the data-dir lock), so every run the previous process left
// running is recovered before anything else happens.
void recover_previous_runs(caf::actor_system& sys, const store_actor& store) {
  caf::scoped_actor self{sys};
  self->request(store, caf::infinite, recover_atom::value, true, protocol::lapsed_lease_ends())
    .receive(
      [](recovery_report& r) {
        if (r.requeued + r.failed + r.completed > 0)
          spdlog::warn("serve: recovered runs of the previous process: {} re-queued, {} failed, {} completed",
                       r.requeued, r.failed, r.completed);
      },
      [&](caf::error& err) { spdlog::error("serve: recovering runs failed: {}", message_of(err)); });
}

// A `troupe serve` on PostgreSQL is a node of a cluster (CJ-12): it joins before it claims anything,
// and declares the silent nodes dead, so their runs are swept up by the first recovery sweep.
struct cluster_node {
  std::shared_ptr<node_status> status = std::make_shared<node_status>();
  membership_options membership;
  std::string cluster_id;
  bool others_alive = false; // another node works on the same database
  std::set<std::string> alive_nodes; // as it joined, itself included
  node_actor actor;          // published for the other nodes; invalid without remoting
  std::shared_ptr<io::pg_listener> wakeups; // what the other nodes' notifications wake (CJ-10)
};

// The node this process will be: a fresh id and the cluster's id, before anything is published.
std::variant<cluster_node, std::string> new_cluster_node(caf::actor_system& sys, const protocol::config& cfg,
                                                         const node_store_actor& nodes) {
  cluster_node node;
  auto& m = node.membership;
  m.node.node_id = new_node_id();
  m.node.name = cfg.cluster.name.empty() ? io::migration_node() : cfg.cluster.name;
  m.node.version = TROUPE_VERSION;
  m.heartbeat_seconds = cfg.cluster.heartbeat_seconds;
  m.node_expiry_seconds = cfg.cluster.node_expiry_seconds;
  m.fence_margin_seconds = cfg.cluster.fence_margin_seconds;
  node.status->set(m.node.node_id, node_status::state::alive);
  caf::scoped_actor self{sys};
  std::string failure;
  self->request(nodes, std::chrono::seconds(30), cluster_id_atom::value)
    .receive([&](std::string& id) { node.cluster_id = std::move(id); },
             [&](caf::error& err) { failure = "cannot read the cluster's id: " + message_of(err); });
  if (!failure.empty())
    return failure;
  return node;
}

std::optional<std::string> previous_secret(const protocol::config& cfg) {
  if (cfg.cluster.secret_previous.empty())
    return std::nullopt;
  return cfg.cluster.secret_previous;
}

// What the node actor hands the other nodes' requests to.
struct node_locals {
  run_registry_actor runs;
  approval_registry_actor approvals;
  response_registry_actor responses;
  const io::workspace_surface* workspaces;
};

// CJ-22: the node actor, published where the other nodes reach it; answers the port, or why not.
std::variant<uint16_t, std::string> publish_node(caf::actor_system& sys, const protocol::config& cfg,
                                                 cluster_node& node, const node_store_actor& nodes,
                                                 const node_locals& locals) {
  node_actor_options options;
  options.cluster_id = node.cluster_id;
  options.secret = cfg.cluster.secret;
  options.secret_previous = previous_secret(cfg);
  options.status = node.status;
  options.request_timeout_seconds = cfg.cluster.request_timeout_seconds;
  options.responses = locals.responses;
  options.workspaces = locals.workspaces->logs;
  options.workspace_types = locals.workspaces->types;
  options.workspace_max_depth = locals.workspaces->config.max_depth;
  node.actor = spawn_node_actor(sys, nodes, locals.runs, locals.approvals, std::move(options));
  if (!cfg.cluster.tls.enabled() && !io::is_private_host(cfg.cluster.host))
    spdlog::warn("cluster: cluster.host {} is not a loopback or private address; the nodes' handshake neither "
                 "encrypts nor signs what follows it, so bind a private interface or set cluster.tls",
                 cfg.cluster.host);
  return io::publish_node_actor(sys, node.actor, cfg.cluster.host, static_cast<uint16_t>(cfg.cluster.port));
}

cluster_peers_actor spawn_peers(caf::actor_system& sys, const protocol::config& cfg, const node_store_actor& nodes,
                                const cluster_node& node) {
  return io::spawn_cluster_peers(sys, nodes,
                                 {node.cluster_id, cfg.cluster.secret, previous_secret(cfg), node.status,
                                  cfg.cluster.request_timeout_seconds, cfg.cluster.forward_timeout_seconds});
}

// Joins under the endpoint the node actor listens on (`port`); answers why not, if it cannot.
std::optional<std::string> join_cluster(caf::actor_system& sys, const protocol::config& cfg, cluster_node& node,
                                        const node_store_actor& nodes, uint16_t port) {
  auto& m = node.membership;
  m.node.endpoint = (cfg.cluster.advertise_host.empty() ? cfg.cluster.host : cfg.cluster.advertise_host) + ":"
                    + std::to_string(port);
  caf::scoped_actor self{sys};
  std::string failure;
  auto failed = [&](caf::error& err) { failure = message_of(err); };
  auto timeout = std::chrono::seconds(30);
  // This process holds the data dir's lock, so the node that last ran on it is gone for certain:
  // its runs are taken over now rather than after its expiry.
  auto id_file = std::filesystem::path(cfg.data_dir) / "node_id";
  std::string previous;
  if (std::ifstream in{id_file}; in && std::getline(in, previous) && !previous.empty())
    self->request(nodes, timeout, declare_dead_atom::value, previous)
      .receive(
        [&](std::vector<std::string>& dead) {
          if (!dead.empty())
            spdlog::warn("cluster: node {}, this data dir's previous process, is dead; its runs are ready", previous);
        },
        failed);
  m.joined_at = std::chrono::steady_clock::now();
  self->request(nodes, timeout, join_atom::value, m.node).receive([](bool) {}, failed);
  if (!failure.empty())
    return "cannot join the cluster: " + failure;
  m.remember_id = [id_file](const std::string& id) { std::ofstream(id_file, std::ios::trunc) << id << "\n"; };
  m.remember_id(m.node.node_id);
  self->request(nodes, timeout, declare_dead_atom::value, m.node_expiry_seconds)
    .receive(
      [](std::vector<std::string>& dead) {
        for (auto& id : dead)
          spdlog::warn("cluster: node {} was silent: declared dead, its runs are ready for any node", id);
      },
      failed);
  self->request(nodes, timeout, list_nodes_atom::value)
    .receive(
      [&](node_list& list) {
        for (auto& n : list)
          if (n.state == "alive" || n.state == "draining") {
            node.alive_nodes.insert(n.node_id);
            node.others_alive = node.others_alive || n.node_id != m.node.node_id;
          }
      },
      failed);
  if (!failure.empty())
    return "cannot join the cluster: " + failure;
  spdlog::info("cluster: node {} ({}) joined at {}{}", m.node.node_id, m.node.name, m.node.endpoint,
               node.others_alive ? " beside live nodes" : "");
  return std::nullopt;
}

// A node publishes its actor, then joins under the endpoint it listens on (cluster.port 0: a free
// one); answers why it cannot.
std::optional<std::string> publish_and_join(caf::actor_system& sys, const protocol::config& cfg, cluster_node& node,
                                            const node_store_actor& nodes, const node_locals& locals, bool remoting) {
  auto port = static_cast<uint16_t>(cfg.cluster.port);
  if (remoting) {
    auto published = publish_node(sys, cfg, node, nodes, locals);
    if (auto* err = std::get_if<std::string>(&published))
      return *err;
    port = std::get<uint16_t>(published);
  }
  return join_cluster(sys, cfg, node, nodes, port);
}

// `node`: the cluster node this process is, or null on the embedded store.
run_registry_actor start_runs(caf::actor_system& sys, const protocol::config& cfg,
                              std::shared_ptr<run_environment> env, const cluster_node* node) {
  // The embedded store is this process's alone: what the previous one left running is recovered at
  // once. A node leaves that to the death declarations, which know whose work it was (CJ-13).
  if (!node)
    recover_previous_runs(sys, env->store);
  if (node) // tells the other nodes of claimable runs, workspace appends and resolutions (CJ-10)
    env->notifier = io::spawn_wakeup_notifier(sys, cfg);
  // Restores pending approvals (AS-81) after recovery, so those of runs it failed are denied at once.
  // A node also reads the approvals its runs wait on again, for those resolved on other nodes (CJ-26).
  approval_options approvals;
  approvals.peers = env->peers;
  approvals.notifier = env->notifier;
  approvals.poll_seconds = node ? cfg.cluster.approval_poll_seconds : 0;
  env->approvals = spawn_approval_registry(sys, env->store, std::move(approvals));
  scheduler_options sched;
  sched.run_concurrency = cfg.service.run_concurrency;
  sched.run_max_attempts = cfg.service.run_max_attempts;
  sched.run_lease_seconds = cfg.service.run_lease_seconds;
  sched.run_recovery_interval_seconds = cfg.service.run_recovery_interval_seconds;
  sched.claim_batch = static_cast<uint32_t>(cfg.cluster.claim_batch);
  sched.tenant_max_running = cfg.cluster.tenant_max_running;
  sched.max_handoffs = cfg.cluster.max_handoffs;
  if (node)
    sched.worker_id = worker_of(node->membership.node.node_id);
  return spawn_run_registry(sys, env, sched);
}

std::shared_ptr<response_environment> make_response_environment(const protocol::config& cfg, const model_ports& ports,
                                                                std::shared_ptr<tool_router> tools,
                                                                response_store_actor store) {
  auto responses = std::make_shared<response_environment>();
  responses->model = ports.responses;
  responses->store = std::move(store);
  responses->tools = std::move(tools);
  responses->loop = protocol::responses_loop(cfg);
  return responses;
}

// The search tools' providers (RS-27): an MCP provider is served by the configured servers' router,
// an HTTP one by a web client of their own, returned so that shutdown stops it.
web_port_actor add_search_providers(caf::actor_system& sys, const protocol::config& cfg,
                                    response_environment& responses) {
  auto& search = cfg.search;
  web_port_actor web;
  if (!search.web_search.url.empty() || !search.file_search.url.empty())
    web = io::spawn_web_client(sys);
  if (search.web_search.configured())
    responses.web_search = make_search_port(sys, search.web_search, responses.tools, web);
  if (search.file_search.configured())
    responses.file_search = make_search_port(sys, search.file_search, responses.tools, web);
  return web;
}

// On a node with remoting (`peers`), one node at a time owns each log (CJ-28, CJ-29).
std::shared_ptr<io::workspace_surface> make_workspace_surface(caf::actor_system& sys, const protocol::config& cfg,
                                                              workspace_store_actor store, notifier_actor notifier,
                                                              std::shared_ptr<node_status> node,
                                                              cluster_peers_actor peers) {
  auto surface = std::make_shared<io::workspace_surface>();
  surface->sys = &sys;
  surface->types = std::get<event_types>(protocol::reflexr::event_registry::build(cfg.workspaces));
  surface->config = cfg.workspaces;
  surface->service_tokens = cfg.service.service_tokens;
  surface->open = protocol::is_open(cfg.auth, cfg.service.service_tokens);
  workspaces_options ws_options;
  ws_options.log_idle_timeout = cfg.workspaces.log_idle_timeout;
  ws_options.command_result_retention = cfg.workspaces.command_result_retention;
  if (node && peers)
    ws_options.cluster = {std::move(node), std::move(peers), cfg.cluster.forward_timeout_seconds};
  surface->logs = spawn_workspaces(sys, std::move(store), ws_options, std::move(notifier));
  if (surface->open)
    spdlog::warn("workspaces: no credentials configured; every caller is tenant default, user local (WS-59)");
  return surface;
}

io::http_server_options http_options(const protocol::config& cfg, std::shared_ptr<io::workspace_surface> surface) {
  io::http_server_options http;
  http.host = cfg.service.host;
  http.port = static_cast<uint16_t>(cfg.service.port);
  http.threads = cfg.service.io_threads;
  http.max_body_bytes = cfg.service.max_body_bytes;
  http.read_timeout_seconds = cfg.service.read_timeout_seconds;
  http.sse_heartbeat_seconds = cfg.service.sse_heartbeat_seconds;
  http.max_stream_buffer_bytes = cfg.service.max_stream_buffer_bytes;
  http.max_connections = connection_cap(cfg.service.max_connections);
  http.edge = {cfg.service.host, cfg.service.allowed_hosts, cfg.service.trusted_origins};
  http.admit_head = io::head_admission(cfg, std::move(surface));
  return http;
}

// Drain: no new connections; open streams get the grace period to end, then their runs are
// cancelled so every client still receives its terminal frames.
void drain(io::http_server& server, const run_registry_actor& registry, double grace_seconds) {
  server.stop_accepting();
  using clock = std::chrono::steady_clock;
  auto wait_for_exchanges = [&](clock::duration budget) {
    auto deadline = clock::now() + budget;
    while (server.open_exchanges() > 0 && clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  wait_for_exchanges(std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000)));
  caf::anon_send(registry, cancel_all_atom::value);
  wait_for_exchanges(std::chrono::seconds(2));
  server.stop();
}

// CJ-15: a draining node claims nothing more and gives its running background work
// `drain_grace_seconds` to finish (a run waiting on an approval is not waited for: it is handed back
// with the rest); a second signal cuts that short. Its HTTP surface stays up meanwhile, for the streams.
void drain_node(caf::actor_system& sys, const run_registry_actor& registry, const cluster_membership_actor& membership,
                double grace_seconds, const sigset_t& signals) {
  caf::scoped_actor self{sys};
  auto failed = [](caf::error& err) { spdlog::error("cluster: draining: {}", message_of(err)); };
  self->request(membership, std::chrono::seconds(10), node_state_atom::value, std::string("draining"))
    .receive([](bool) {}, failed);
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(grace_seconds));
  while (clock::now() < deadline) {
    uint64_t live = 0;
    self->request(registry, std::chrono::seconds(10), drain_atom::value).receive([&](uint64_t n) { live = n; }, failed);
    if (live == 0)
      return;
    timespec pause{0, 100'000'000};
    if (sigtimedwait(&signals, nullptr, &pause) > 0) {
      spdlog::warn("cluster: a second signal: the {} running attempts are handed back now", live);
      return;
    }
  }
  spdlog::info("cluster: drain grace over; what still runs is handed back");
}

// RS-55 at start: responses left unfinished by a previous process fail. In a cluster only those of
// nodes no longer alive (CJ-16): the live nodes' are theirs.
void settle_abandoned_responses(caf::actor_system& sys, const response_store_actor& store, const cluster_node* node) {
  fail_unfinished_responses(
    sys, store, [node](const response_row& r) { return !node || node->alive_nodes.count(r.node_id) == 0; },
    "The server restarted before the response finished.");
}

// The Responses gateway's registry. It takes no response before settle_abandoned_responses ran, once
// the node joined, since no route leads to it before; other nodes' feeds may reach it earlier (CJ-27).
response_registry_actor start_responses(caf::actor_system& sys, const protocol::config& cfg,
                                        const std::shared_ptr<response_environment>& responses,
                                        const cluster_node* node, cluster_peers_actor peers) {
  auto options = io::registry_options(cfg);
  if (node) {
    options.node_id = [status = node->status] { return status->node_id(); };
    options.tail =
      std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(cfg.cluster.tail_poll_seconds));
    options.peers = std::move(peers);
  }
  return spawn_response_registry(sys, responses, std::move(options));
}

// The node's heartbeats (CJ-12 to CJ-14); the responses of the nodes it declares dead fail (CJ-16).
cluster_membership_actor start_membership(caf::actor_system& sys, cluster_node& node, const node_store_actor& nodes,
                                          const run_registry_actor& registry, std::shared_ptr<node_metrics> metrics,
                                          response_store_actor responses) {
  node.membership.metrics = std::move(metrics);
  node.membership.on_declared_dead = [&sys, responses](const std::vector<std::string>& dead) {
    // Detached: it waits on the store. Its state goes in as arguments, since CAF 0.17 spawning a
    // function without any trips UBSan.
    sys.spawn<caf::detached>(
      [&sys](const response_store_actor& store, const std::set<std::string>& gone) {
        fail_unfinished_responses(
          sys, store, [&](const response_row& r) { return gone.count(r.node_id) > 0; },
          "The node running the response stopped before it finished.");
      },
      responses, std::set<std::string>(dead.begin(), dead.end()));
  };
  return spawn_cluster_membership(sys, nodes, registry, node.status, node.membership);
}

// The long polls' and the sweep's settings (jobs.*).
job_waiter_settings job_waiter_settings_of(const protocol::config& cfg) {
  job_waiter_settings s;
  s.max_waiters = cfg.jobs.max_waiters;
  s.poll_seconds = cfg.jobs.poll_seconds;
  s.sweep_interval_seconds = cfg.jobs.sweep_interval_seconds;
  s.backoff = {cfg.jobs.retry_base_seconds, cfg.jobs.retry_max_seconds};
  s.fair_share = cfg.jobs.fair_share != "none";
  s.caps = cfg.jobs.max_leased_per_tenant;
  return s;
}

// CJ-10: the other nodes' notifications, and each poll, wake this node's claims and its live workspace
// logs (called from the listener's thread).
std::shared_ptr<io::pg_listener> listen_to_other_nodes(const protocol::config& cfg, run_registry_actor registry,
                                                       workspaces_actor logs, approval_registry_actor approvals,
                                                       job_waiters_actor job_waiters) {
  return io::listen_for_wakeups(cfg, [=](const std::string& channel, const std::string& payload) {
    if (channel == jobs_channel) {
      // A job type is at most 100 characters (CJ-31); the waiters of that type claim again.
      if (payload.size() <= protocol::jobs::max_type_length)
        caf::anon_send(job_waiters, wake_atom::value, payload);
      return;
    }
    if (channel == workspace_channel) {
      if (auto h = protocol::parse_workspace_wakeup(payload))
        caf::anon_send(logs, appended_atom::value, workspace_key{h->tenant, h->workspace}, h->head);
      return;
    }
    if (channel == approval_channel) {
      // An approval id is `approval-` and 20 hex digits; the registry reads only those runs wait on.
      if (payload.size() <= 64)
        caf::anon_send(approvals, wake_atom::value, payload);
      return;
    }
    caf::anon_send(registry, schedule_atom::value);
    if (channel.empty()) { // a poll, or a reconnect: what was notified meanwhile may be missed
      caf::anon_send(logs, appended_atom::value);
      caf::anon_send(job_waiters, wake_atom::value, std::string());
    }
  });
}

// After the drain: what the node still held goes back to the queue uncharged (CJ-16), what remains
// has its lease expired, and its row says `left`.
void leave_cluster(caf::actor_system& sys, const store_actor& store, const cluster_membership_actor& membership,
                   const std::string& node_id, int64_t max_handoffs, node_metrics& metrics,
                   const notifier_actor& notifier) {
  caf::scoped_actor self{sys};
  auto failed = [](caf::error& err) { spdlog::error("cluster: leaving: {}", message_of(err)); };
  self->request(store, std::chrono::seconds(30), handback_atom::value, worker_of(node_id),
                protocol::handed_back_end(node_id), max_handoffs)
    .receive(
      [&](int64_t n) {
        metrics.handed_back(n);
        if (n == 0)
          return;
        spdlog::info("cluster: {} runs handed back to the other nodes", n);
        announce_runs(notifier);
      },
      failed);
  self->request(membership, std::chrono::seconds(10), node_state_atom::value, std::string("left"))
    .receive([](bool) { spdlog::info("cluster: node left"); }, failed);
}

// SIGINT and SIGTERM are taken synchronously by the calling thread; every thread started after this
// inherits the mask. SIGPIPE is ignored: a peer that went is an error on its socket.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Starts listening and says where (the line tests and scripts wait for); nullopt once it said why not.
std::optional<uint16_t> listen(io::http_server& server, const protocol::config& cfg) {
  uint16_t port = 0;
  try {
    port = server.start();
  } catch (const std::exception& e) {
    std::cerr << "troupe: cannot listen on " << cfg.service.host << ":" << cfg.service.port << ": " << e.what()
              << "\n";
    return std::nullopt;
  }
  std::printf("troupe listening on http://%s:%u\n", cfg.service.host.c_str(), port);
  std::fflush(stdout);
  spdlog::info("serve: ready data_dir={} store={} model={}/{}", cfg.data_dir, io::describe_store(cfg),
               cfg.model.provider, cfg.model.name);
  return port;
}

// Whether this node speaks CAF remoting to the others (CJ-22); nullopt once it said why it cannot.
std::optional<bool> remoting_of(caf::actor_system_config& caf_cfg, const protocol::config& cfg) {
  bool remoting = !cfg.postgres_url.empty() && cfg.cluster.remoting;
  if (remoting)
    if (auto problem = io::configure_remoting(caf_cfg, cfg.cluster)) {
      std::cerr << "troupe: " << *problem << "\n";
      return std::nullopt;
    }
  return remoting;
}

int serve(const cli_options& cli) {
  auto r = load_config(cli);
  if (!r.ok())
    return report_errors(r, cli);
  auto cfg = r.value;
  auto lock = io::prepare_data_dir(cfg.data_dir, cfg.workspaces_root);
  if (auto err = std::get_if<std::string>(&lock)) {
    std::cerr << "troupe: " << *err << "\n";
    return 2;
  }
  if (protocol::is_open(cfg.auth, cfg.service.service_tokens))
    spdlog::warn("auth: no credential configured; every surface is open (set FASTREACT_SERVICE_TOKEN)");

  auto signals = block_signals();

  caf::actor_system_config caf_cfg;
  tune_scheduler(caf_cfg);
  auto speaks_caf = remoting_of(caf_cfg, cfg);
  if (!speaks_caf)
    return 2;
  caf::actor_system sys{caf_cfg};
  auto metrics = std::make_shared<node_metrics>();
  auto opened = io::open_stores(sys, cfg, metrics);
  if (auto err = std::get_if<std::string>(&opened)) {
    std::cerr << "troupe: " << *err << "\n";
    return 2;
  }
  auto stores = std::get<io::store_ports>(opened);
  spdlog::info("serve: store {}", io::describe_store(cfg));

  auto sandbox = make_exec_sandbox(cfg);
  auto tools = make_tools(sys, cfg, sandbox);
  auto ports = make_model_ports(cfg);
  std::optional<cluster_node> node;
  if (stores.nodes) {
    auto prepared = new_cluster_node(sys, cfg, stores.nodes);
    if (auto err = std::get_if<std::string>(&prepared)) {
      std::cerr << "troupe: " << *err << "\n";
      return 2;
    }
    node = std::move(std::get<cluster_node>(prepared));
  }
  auto env = make_run_environment(cfg, ports, tools, stores.runs);
  env->metrics = metrics;
  if (node && *speaks_caf)
    env->peers = spawn_peers(sys, cfg, stores.nodes, *node);
  auto registry = start_runs(sys, cfg, env, node ? &*node : nullptr);
  auto surface = make_workspace_surface(sys, cfg, stores.workspaces, env->notifier, node ? node->status : nullptr,
                                        env->peers);
  auto responses = make_response_environment(cfg, ports, tools, stores.responses);
  auto search_web = add_search_providers(sys, cfg, *responses);
  auto response_registry = start_responses(sys, cfg, responses, node ? &*node : nullptr, env->peers);
  if (node) {
    node_locals locals{registry, env->approvals, response_registry, surface.get()};
    if (auto failure = publish_and_join(sys, cfg, *node, stores.nodes, locals, *speaks_caf)) {
      std::cerr << "troupe: " << *failure << "\n";
      for (auto& actor : {caf::actor_cast<caf::actor>(registry), caf::actor_cast<caf::actor>(env->approvals),
                          caf::actor_cast<caf::actor>(env->peers), caf::actor_cast<caf::actor>(node->actor),
                          caf::actor_cast<caf::actor>(surface->logs), caf::actor_cast<caf::actor>(response_registry)})
        anon_send_exit(actor, caf::exit_reason::user_shutdown);
      return 2;
    }
  }
  settle_abandoned_responses(sys, responses->store, node ? &*node : nullptr);
  cluster_membership_actor membership;
  if (node)
    membership = start_membership(sys, *node, stores.nodes, registry, metrics, responses->store);
  caf::anon_send(registry, tick_atom::value); // the recovery sweep, then every interval; it starts ready runs
  auto job_waiters = spawn_job_waiters(sys, stores.jobs, job_waiter_settings_of(cfg));
  if (node)
    node->wakeups = listen_to_other_nodes(cfg, registry, surface->logs, env->approvals, job_waiters);

  auto routes = std::make_shared<io::router>();
  io::add_agent_routes(*routes, sys, registry,
                       {cfg, tools, env->store, TROUPE_VERSION, sandbox, node ? node->status : nullptr});
  io::add_run_routes(*routes, sys, registry, env->store, env->metrics, cfg, env->peers);
  io::add_policy_routes(*routes, sys, env->approvals, env->store, cfg);
  io::add_responses_routes(*routes, sys, response_registry, responses->store, ports.models, cfg);
  io::add_workspace_routes(*routes, surface);
  io::add_job_routes(*routes, sys, {stores.jobs, job_waiters, registry, env->notifier}, cfg);
  if (node)
    io::add_cluster_routes(*routes, sys, stores.nodes, node->status, cfg);
  io::http_server server(http_options(cfg, surface), routes);
  auto port = listen(server, cfg);
  if (!port) {
    anon_send_exit(registry, caf::exit_reason::user_shutdown);
    anon_send_exit(response_registry, caf::exit_reason::user_shutdown);
    return 2;
  }
  pska_worker_actor pska_worker; // CJ-42: the digest worker beside the service, through its own API
  if (cfg.pska_worker.enabled)
    pska_worker = app::start_pska_worker(sys, cfg, *port);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("serve: signal {} received; draining for up to {}s", sig, cfg.service.shutdown_grace_seconds);
  // The digest worker's runs go through this node's API: it drains while the API still serves.
  app::drain_pska_worker(sys, pska_worker, cfg.pska_worker.drain_grace_seconds);
  if (membership)
    drain_node(sys, registry, membership, cfg.cluster.drain_grace_seconds, signals);
  drain(server, registry, cfg.service.shutdown_grace_seconds);
  if (membership)
    leave_cluster(sys, env->store, membership, node->status->node_id(), cfg.cluster.max_handoffs, *metrics,
                  env->notifier);
  for (auto& actor : {caf::actor_cast<caf::actor>(pska_worker), caf::actor_cast<caf::actor>(membership),
                      caf::actor_cast<caf::actor>(stores.nodes),
                      caf::actor_cast<caf::actor>(node ? node->actor : node_actor{}),
                      caf::actor_cast<caf::actor>(env->peers), caf::actor_cast<caf::actor>(env->notifier),
                      caf::actor_cast<caf::actor>(registry),
                      caf::actor_cast<caf::actor>(response_registry),
                      caf::actor_cast<caf::actor>(env->approvals), caf::actor_cast<caf::actor>(env->store),
                      caf::actor_cast<caf::actor>(responses->store), caf::actor_cast<caf::actor>(surface->logs),
                      caf::actor_cast<caf::actor>(stores.workspaces), caf::actor_cast<caf::actor>(job_waiters),
                      caf::actor_cast<caf::actor>(stores.jobs), caf::actor_cast<caf::actor>(search_web)})
    anon_send_exit(actor, caf::exit_reason::user_shutdown);
  tools->stop(); // every MCP instance closes its child: no orphans
  spdlog::info("serve: stopped");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // Blocks of 256 KiB and more (request bodies, parsed documents) are mapped and unmapped on their own.
  // glibc's default raises this threshold after each large free, and then keeps every 10 MiB body a
  // client sent in its heap after the request is gone.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
  spdlog::set_default_logger(spdlog::stderr_color_mt("troupe"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%f%z %^%l%$ %v");

  CLI::App app{"troupe: an actor runtime for agent work"};
  app.set_version_flag("--version", std::string("troupe ") + TROUPE_VERSION);
  app.require_subcommand(1);
  cli_options cli;
  auto add_config = [&](CLI::App* sub) {
    sub->add_option("--config", cli.config_file, "configuration file (default: the embedded config/troupe.json)");
    sub->add_option("--set", cli.set, "override one key: --set service.port=9000 (repeatable)");
  };
  auto serve_cmd = app.add_subcommand("serve", "serve the agent service over HTTP");
  add_config(serve_cmd);
  serve_cmd->add_option("--host", cli.host, "listener host (service.host)");
  serve_cmd->add_option("--port", cli.port, "listener port (service.port); 0 picks a free one")
    ->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--data-dir", cli.data_dir, "data directory (data_dir, TROUPE_DATA_DIR)");
  auto check_cmd = app.add_subcommand("check-config", "validate the configuration and explain every error");
  add_config(check_cmd);
  auto migrate_cmd = app.add_subcommand("migrate", "apply the store's pending schema migrations");
  add_config(migrate_cmd);
  migrate_cmd->add_option("--data-dir", cli.data_dir, "data directory (data_dir, TROUPE_DATA_DIR)");
  migrate_cmd->add_flag("--dry-run", cli.dry_run, "list the pending migrations without applying them");
  auto schema_cmd = app.add_subcommand("schema", "write a protocol's JSON Schema");
  schema_cmd->require_subcommand(1);
  auto schema_protocol = schema_cmd->add_subcommand("protocol", "write the reflexr.v1 JSON Schema (WS-125)");
  schema_protocol->add_option("--output", cli.schema_output, "file to write (default: schemas/reflexr.v1.json)");
  auto worker_cmd = app.add_subcommand("worker", "run a worker");
  worker_cmd->require_subcommand(1);
  auto worker_pska = worker_cmd->add_subcommand("pska", "digest PSKA jobs continuously (pska_digest_worker.*)");
  add_config(worker_pska);
  auto digest_cmd = app.add_subcommand("pska-digest", "digest one PSKA job and exit (0 on ok)");
  add_config(digest_cmd);
  digest_cmd->add_flag("--once", cli.once, "one job, then exit")->required();
  digest_cmd->add_option("--job-id", cli.job_id, "the PSKA job to digest (default: the first ready one)");
  app::run_command_options run_options;
  auto run_cmd = app::add_run_command(app, run_options);
  add_config(run_cmd);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2; // --help and --version, else a usage error
  }

  if (check_cmd->parsed())
    return check_config(cli);
  if (migrate_cmd->parsed())
    return migrate(cli);
  if (schema_cmd->parsed())
    return write_schema(cli);
  if (run_cmd->parsed()) {
    auto r = load_config(cli);
    return r.ok() ? app::run_command(run_options, r.value) : report_errors(r, cli);
  }
  if (worker_pska->parsed() || digest_cmd->parsed()) {
    auto r = load_config(cli);
    if (!r.ok())
      return report_errors(r, cli);
    return digest_cmd->parsed() ? app::run_pska_digest_once(r.value, cli.job_id) : app::run_pska_worker(r.value);
  }
  return serve(cli);
}

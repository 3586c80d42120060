// The four stores troupe keeps (agent runs, Responses, workspace logs, jobs), on the engine the
// configuration names: SQLite in the data dir by default, PostgreSQL when store.postgres_url is set
// (CJ-1). Used by `troupe serve` and `troupe migrate`.
#pragma once

#include "actors/job_store.hpp"
#include "actors/response_store.hpp"
#include "actors/metrics.hpp"
#include "actors/node_store.hpp"
#include "actors/store.hpp"
#include "actors/wakeups.hpp"
#include "actors/workspace_store.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace troupe::io {

struct store_ports {
  store_actor runs;
  response_store_actor responses;
  workspace_store_actor workspaces;
  job_store_actor jobs;
  node_store_actor nodes; // PostgreSQL only: a cluster's membership
};

// Opens (creating and migrating) the configured stores; an error is the message troupe exits 2 with.
// `metrics` hears what the PostgreSQL pool measures.
std::variant<store_ports, std::string> open_stores(caf::actor_system& sys, const protocol::config& cfg,
                                                   std::shared_ptr<node_metrics> metrics);

class pg_listener;

// CJ-10 on PostgreSQL: the node's notifier, and its listener on troupe_work, troupe_ws, troupe_jobs
// and troupe_approval, which calls
// `wake(channel, payload)` (from its own thread) on a notification, and `wake("", "")` every
// cluster.poll_interval_seconds and after each reconnect.
notifier_actor spawn_wakeup_notifier(caf::actor_system& sys, const protocol::config& cfg);
std::shared_ptr<pg_listener> listen_for_wakeups(const protocol::config& cfg,
                                                std::function<void(const std::string&, const std::string&)> wake);

// Which store troupe uses, for its start line: "sqlite <path>" or "postgres <url without password>".
std::string describe_store(const protocol::config& cfg);

// `troupe migrate`: applies the configured store's pending migrations (with `dry_run` only lists them)
// and answers their file names; an error is the message troupe exits 2 with (CJ-2).
std::variant<std::vector<std::string>, std::string> migrate_store(const protocol::config& cfg, bool dry_run);

} // namespace troupe::io

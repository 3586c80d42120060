// The PSKA digest worker's commands (AS-66, CJ-42): `troupe worker pska`, `troupe pska-digest --once`,
// and the worker inside `troupe serve` when pska_digest_worker.enabled is set.
#pragma once

#include "actors/pska_worker.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

#include <cstdint>
#include <string>

namespace troupe::app {

// The worker's settings from the config; `listener_port` is troupe's own port, the default
// troupe_url's (AS-94).
pska_worker_settings pska_worker_settings_of(const protocol::config& cfg, uint16_t listener_port);

// Starts the continuous worker in `sys`.
pska_worker_actor start_pska_worker(caf::actor_system& sys, const protocol::config& cfg, uint16_t listener_port);

// CJ-46: stops admission, waits up to `grace_seconds` for the jobs in hand, fails the rest
// retryably, then stops the worker. Nothing for a worker that was never started.
void drain_pska_worker(caf::actor_system& sys, const pska_worker_actor& worker, double grace_seconds);

// `troupe worker pska`: the continuous worker until SIGINT or SIGTERM, then its drain. Exit code.
int run_pska_worker(const protocol::config& cfg);

// `troupe pska-digest --once [--job-id ID]`: one job of the first tenant, or the one named; prints
// the outcome as JSON and exits 0 on `ok` (AS-66).
int run_pska_digest_once(const protocol::config& cfg, const std::string& job_id);

} // namespace troupe::app

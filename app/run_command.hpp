// `troupe run`: a client of a running troupe server. It starts a background run (POST /v1/runs) and
// follows its stream (GET /v1/runs/{id}/stream), or follows an existing run, printing each event as
// readable lines (or as JSON with --json), asking for approvals on a terminal, resuming a dropped
// stream by Last-Event-ID, and exiting with the run's outcome (protocol/run_view.hpp).
#pragma once

#include "protocol/config.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace troupe::app {

struct run_command_options {
  std::string prompt;
  std::string url;   // default: the listener the configuration gives (service.host, service.port; AS-94)
  std::string token; // default: the configured service token (FASTREACT_SERVICE_TOKEN)
  std::string model;
  std::string follow; // a run id to attach to
  int64_t after = -1; // with --follow: show events after this sequence
  bool background = false;
  bool json = false;
};

// Declares the subcommand and its options on `app`.
CLI::App* add_run_command(CLI::App& app, run_command_options& options);

// Runs it; the exit code (protocol::run_view::exit_code).
int run_command(const run_command_options& options, const protocol::config& cfg);

} // namespace troupe::app

// A node's counters and latency histograms, exported in the Prometheus text format (GET /metrics).
// Thread-safe; the exposition library stays behind this header.
#pragma once

#include "protocol/metrics.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace troupe {

class node_metrics {
public:
  node_metrics();
  ~node_metrics();
  node_metrics(const node_metrics&) = delete;
  node_metrics& operator=(const node_metrics&) = delete;

  void event(const std::string& type);
  void tool_call(double duration_ms);
  void model_call(double duration_ms);
  // How an attempt ended: completed | failed | cancelled | requeued | fenced.
  void attempt_ended(const std::string& outcome, double duration_ms);
  // A background run started, `waited_ms` after it was accepted.
  void run_started(double waited_ms);
  void lease_renewed();
  void lease_lost();
  void runs_recovered(int64_t requeued, int64_t failed);

  // CJ-17: runs handed back while leaving, writes refused by lease epoch, rejoins under a new id.
  void handed_back(int64_t runs);
  void fenced_write();
  void rejoined();

  // The PostgreSQL store's pool (CJ-4): how long a message waited for a free connection (or gave up),
  // how long one statement took, and one transaction: its time, messages and tries.
  void store_waited(double seconds);
  void store_wait_timed_out();
  void store_statement(double seconds);
  void store_transaction(double seconds, std::size_t messages, int tries);

  // The exposition, with the store's durable counts as gauges.
  std::string prometheus_text(const protocol::store_stats& stats, uint64_t live_count) const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe

#include "actors/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>

namespace troupe {

namespace {

// Seconds, from a fast tool call to a long agent run.
const prometheus::Histogram::BucketBoundaries latency_buckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                                 1,     2.5,   5,    10,    30,   60,  120, 300};

// Seconds, from a statement on a warm connection to one that met the statement timeout.
const prometheus::Histogram::BucketBoundaries store_buckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                               0.025,  0.05,    0.1,    0.25,  0.5,    1,     5};

double seconds(double ms) {
  return ms / 1000.0;
}

} // namespace

struct node_metrics::impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();

  // A counter of its own name, without labels.
  prometheus::Counter& counter(const char* name, const char* help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(*registry).Add({});
  }

  prometheus::Family<prometheus::Counter>& events =
    prometheus::BuildCounter().Name("troupe_run_events_total").Help("Run events stored, by type").Register(*registry);
  prometheus::Family<prometheus::Counter>& attempts = prometheus::BuildCounter()
                                                        .Name("troupe_run_attempts_total")
                                                        .Help("Run attempts ended, by outcome")
                                                        .Register(*registry);
  prometheus::Family<prometheus::Counter>& leases =
    prometheus::BuildCounter().Name("troupe_leases_total").Help("Lease renewals and losses").Register(*registry);
  prometheus::Family<prometheus::Counter>& recovered = prometheus::BuildCounter()
                                                         .Name("troupe_runs_recovered_total")
                                                         .Help("Runs recovered from a lapsed lease, by outcome")
                                                         .Register(*registry);
  prometheus::Family<prometheus::Histogram>& latency = prometheus::BuildHistogram()
                                                         .Name("troupe_latency_seconds")
                                                         .Help("Latency of runs, attempts, model and tool calls")
                                                         .Register(*registry);
  prometheus::Family<prometheus::Gauge>& runs =
    prometheus::BuildGauge().Name("troupe_runs").Help("Stored runs, by status").Register(*registry);
  prometheus::Family<prometheus::Gauge>& live =
    prometheus::BuildGauge().Name("troupe_live_attempts").Help("Run attempts live on this node").Register(*registry);
  prometheus::Family<prometheus::Gauge>& stored = prometheus::BuildGauge()
                                                    .Name("troupe_store_records")
                                                    .Help("Records in the store, by stream")
                                                    .Register(*registry);
  prometheus::Family<prometheus::Gauge>& pg_dead_tuples = prometheus::BuildGauge()
                                                            .Name("troupe_store_pg_dead_tuples")
                                                            .Help("Dead tuples in the store's tables (PostgreSQL)")
                                                            .Register(*registry);
  prometheus::Family<prometheus::Gauge>& pg_oldest_xact =
    prometheus::BuildGauge()
      .Name("troupe_store_pg_oldest_xact_age_seconds")
      .Help("Age of the oldest open transaction on the store's database (PostgreSQL)")
      .Register(*registry);
  prometheus::Family<prometheus::Gauge>& approvals = prometheus::BuildGauge()
                                                       .Name("troupe_approvals")
                                                       .Help("Approval requests in the store, by status")
                                                       .Register(*registry);
  prometheus::Family<prometheus::Histogram>& store_latency =
    prometheus::BuildHistogram()
      .Name("troupe_store_pg_seconds")
      .Help("PostgreSQL store: waits for a free connection, statements and transactions")
      .Register(*registry);
  prometheus::Histogram& store_wait = store_latency.Add({{"of", "pool_wait"}}, store_buckets);
  prometheus::Histogram& store_statement = store_latency.Add({{"of", "statement"}}, store_buckets);
  prometheus::Histogram& store_transaction = store_latency.Add({{"of", "transaction"}}, store_buckets);
  prometheus::Counter& store_transactions = counter("troupe_store_pg_transactions_total",
                                                    "PostgreSQL store: transactions committed or given up");
  prometheus::Counter& store_messages = counter("troupe_store_pg_messages_total",
                                                "PostgreSQL store: messages carried out, a transaction's batch each");
  prometheus::Counter& store_retries =
    counter("troupe_store_pg_retries_total", "PostgreSQL store: transactions run again (CJ-5)");
  prometheus::Counter& store_wait_timeouts = counter(
    "troupe_store_pg_pool_wait_timeouts_total", "PostgreSQL store: messages that found no free connection in time");
  prometheus::Histogram& tool = latency.Add({{"of", "tool_call"}}, latency_buckets);
  prometheus::Histogram& model = latency.Add({{"of", "model_call"}}, latency_buckets);
  prometheus::Histogram& attempt = latency.Add({{"of", "attempt"}}, latency_buckets);
  prometheus::Histogram& start = latency.Add({{"of", "queued_to_running"}}, latency_buckets);
  // CJ-17: a node's part in the cluster.
  prometheus::Family<prometheus::Gauge>& leases_held = prometheus::BuildGauge()
                                                         .Name("troupe_cluster_leases_held")
                                                         .Help("Run leases this node holds: its live attempts")
                                                         .Register(*registry);
  prometheus::Counter& handbacks =
    counter("troupe_cluster_handbacks_total", "Runs this node handed back uncharged while leaving (CJ-16)");
  prometheus::Counter& fenced_writes =
    counter("troupe_cluster_fenced_writes_total", "Writes of this node's attempts the store refused by lease epoch");
  prometheus::Counter& rejoins =
    counter("troupe_cluster_rejoins_total", "Times this node was declared dead and rejoined under a new id (CJ-14)");
  prometheus::Counter& renewed = leases.Add({{"event", "renewed"}});
  prometheus::Counter& lost = leases.Add({{"event", "lost"}});
  prometheus::Counter& requeued = recovered.Add({{"outcome", "requeued"}});
  prometheus::Counter& failed = recovered.Add({{"outcome", "failed"}});
};

node_metrics::node_metrics() : impl_(std::make_unique<impl>()) {}
node_metrics::~node_metrics() = default;

void node_metrics::event(const std::string& type) {
  impl_->events.Add({{"type", type}}).Increment();
}

void node_metrics::tool_call(double duration_ms) {
  impl_->tool.Observe(seconds(duration_ms));
}

void node_metrics::model_call(double duration_ms) {
  impl_->model.Observe(seconds(duration_ms));
}

void node_metrics::attempt_ended(const std::string& outcome, double duration_ms) {
  impl_->attempts.Add({{"outcome", outcome}}).Increment();
  impl_->attempt.Observe(seconds(duration_ms));
}

void node_metrics::run_started(double waited_ms) {
  impl_->start.Observe(seconds(waited_ms));
}

void node_metrics::lease_renewed() {
  impl_->renewed.Increment();
}

void node_metrics::lease_lost() {
  impl_->lost.Increment();
}

void node_metrics::runs_recovered(int64_t requeued, int64_t failed) {
  impl_->requeued.Increment(static_cast<double>(requeued));
  impl_->failed.Increment(static_cast<double>(failed));
}

void node_metrics::handed_back(int64_t runs) {
  impl_->handbacks.Increment(static_cast<double>(runs));
}

void node_metrics::fenced_write() {
  impl_->fenced_writes.Increment();
}

void node_metrics::rejoined() {
  impl_->rejoins.Increment();
}

void node_metrics::store_waited(double seconds) {
  impl_->store_wait.Observe(seconds);
}

void node_metrics::store_wait_timed_out() {
  impl_->store_wait_timeouts.Increment();
}

void node_metrics::store_statement(double seconds) {
  impl_->store_statement.Observe(seconds);
}

void node_metrics::store_transaction(double seconds, std::size_t messages, int tries) {
  impl_->store_transaction.Observe(seconds);
  impl_->store_transactions.Increment();
  impl_->store_messages.Increment(static_cast<double>(messages));
  impl_->store_retries.Increment(static_cast<double>(std::max(tries - 1, 0)));
}

std::string node_metrics::prometheus_text(const protocol::store_stats& stats, uint64_t live_count) const {
  for (auto status : {"queued", "running", "completed", "failed", "cancelled"}) {
    auto it = stats.run_status_counts.find(status);
    impl_->runs.Add({{"status", status}}).Set(it == stats.run_status_counts.end() ? 0.0 : static_cast<double>(it->second));
  }
  impl_->live.Add({}).Set(static_cast<double>(live_count));
  impl_->leases_held.Add({}).Set(static_cast<double>(live_count));
  for (auto& s : stats.streams)
    impl_->stored.Add({{"stream", s.name}}).Set(static_cast<double>(s.records));
  if (stats.postgres) {
    impl_->pg_dead_tuples.Add({}).Set(static_cast<double>(stats.postgres->dead_tuples));
    impl_->pg_oldest_xact.Add({}).Set(stats.postgres->oldest_xact_age_seconds);
  }
  for (auto status : {"pending", "approved", "denied", "expired"}) {
    auto& counts = stats.approvals.status_counts;
    auto it = counts.find(status);
    impl_->approvals.Add({{"status", status}}).Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

} // namespace troupe

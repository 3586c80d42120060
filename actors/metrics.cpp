#include "actors/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace troupe {

namespace {

// Seconds, from a fast tool call to a long agent run.
const prometheus::Histogram::BucketBoundaries latency_buckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                                 1,     2.5,   5,    10,    30,   60,  120, 300};

double seconds(double ms) {
  return ms / 1000.0;
}

} // namespace

struct node_metrics::impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
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
  prometheus::Histogram& tool = latency.Add({{"of", "tool_call"}}, latency_buckets);
  prometheus::Histogram& model = latency.Add({{"of", "model_call"}}, latency_buckets);
  prometheus::Histogram& attempt = latency.Add({{"of", "attempt"}}, latency_buckets);
  prometheus::Histogram& start = latency.Add({{"of", "queued_to_running"}}, latency_buckets);
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

std::string node_metrics::prometheus_text(const protocol::store_stats& stats, uint64_t live_count) const {
  for (auto status : {"queued", "running", "completed", "failed", "cancelled"}) {
    auto it = stats.run_status_counts.find(status);
    impl_->runs.Add({{"status", status}}).Set(it == stats.run_status_counts.end() ? 0.0 : static_cast<double>(it->second));
  }
  impl_->live.Add({}).Set(static_cast<double>(live_count));
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

// Durable runs as the agent service shows them: paging rules (AS-51), snapshots (AS-50), traces
// (AS-55), retry backoff (AS-53) and the metrics document (AS-59).
#include "protocol/chat_request.hpp"
#include "protocol/json.hpp"
#include "protocol/metrics.hpp"
#include "protocol/runs.hpp"
#include "protocol/timestamp.hpp"

#include <catch2/catch.hpp>

using namespace troupe;
using namespace troupe::protocol;

namespace {

// The body the edge sends for `err`.
std::string body_of(const request_error& err) {
  return render_error(dialect::agent, err.what).body;
}

std::vector<stored_event> events(int64_t from, int64_t to) {
  std::vector<stored_event> out;
  for (auto i = from; i <= to; ++i)
    out.push_back({i, "think", "{\"sequence\":" + std::to_string(i) + "}"});
  return out;
}

run_record run_with(int64_t event_count) {
  run_record r;
  r.run_id = "r1";
  r.session_id = "s1";
  r.status = "completed";
  r.created_at = "2026-01-01T00:00:00.000000+00:00";
  r.event_count = event_count;
  return r;
}

} // namespace

TEST_CASE("an events query defaults to 200 after -1, clamps to 1000 and keeps 0 as all", "[runs]") { // AS-51
  auto q = std::get<page_query>(parse_page_query("", ""));
  CHECK(q.limit == 200);
  CHECK(q.after_sequence == -1);
  CHECK(std::get<page_query>(parse_page_query("5000", "")).limit == 1000);
  CHECK(std::get<page_query>(parse_page_query("0", "3")).limit == 0);
  CHECK(std::get<page_query>(parse_page_query("0", "3")).after_sequence == 3);
}

TEST_CASE("a negative limit is 400 and a non-integer query value is 422 naming the parameter", "[runs]") { // AS-2
  auto negative = std::get<request_error>(parse_page_query("-1", ""));
  CHECK(negative.what.code == errc::bad_request);
  CHECK(body_of(negative) == R"({"detail":"limit must be >= 0"})");
  auto word = std::get<request_error>(parse_page_query("", "abc"));
  CHECK(word.what.code == errc::validation_failed);
  auto doc = json::parse(body_of(word));
  REQUIRE(doc);
  CHECK(json::serialize((*doc)["detail"][0]["loc"]) == R"(["query","after_sequence"])");
  CHECK(std::holds_alternative<request_error>(parse_page_query("2.5", "")));
  CHECK(std::holds_alternative<request_error>(parse_list_limit("x")));
}

TEST_CASE("AS-50 AS-55 a list's limit reads as the events page's: 200 by default, at most 1000, 0 = all", "[runs]") {
  CHECK(std::get<int64_t>(parse_list_limit("")) == 200);
  CHECK(std::get<int64_t>(parse_list_limit("0")) == 0);
  CHECK(std::get<int64_t>(parse_list_limit("1")) == 1);
  CHECK(std::get<int64_t>(parse_list_limit("5000")) == 1000);
  auto negative = std::get<request_error>(parse_list_limit("-1"));
  CHECK(body_of(negative) == R"({"detail":"limit must be >= 0"})");
  CHECK(std::get<request_error>(parse_list_limit("1.5")).what.code == errc::validation_failed);
}

TEST_CASE("paging 4 events by 2 flags more after the first page and none after the second", "[runs]") { // AS-51
  auto run = run_with(4);
  auto first = json::parse(events_page_json(run, {-1, 2}, events(0, 1), true));
  REQUIRE(first);
  CHECK(json::get_int(*first, "next_after_sequence") == 1);
  CHECK(json::get_bool(*first, "has_more") == true);
  CHECK(json::get_int(*first, "total_event_count") == 4);
  CHECK(json::get_int(*first, "count") == 2);
  auto second = json::parse(events_page_json(run, {1, 2}, events(2, 3), true));
  REQUIRE(second);
  CHECK(json::get_int(*second, "next_after_sequence") == 3);
  CHECK(json::get_bool(*second, "has_more") == false);
  CHECK(json::get_string(*second, "status") == "completed");
}

TEST_CASE("an empty page keeps the cursor as next_after_sequence", "[runs]") { // AS-51
  auto page = json::parse(events_page_json(run_with(4), {3, 200}, {}, false));
  REQUIRE(page);
  CHECK(json::get_int(*page, "next_after_sequence") == 3);
  CHECK(json::get_bool(*page, "has_more") == false);
  CHECK(json::member(*page, "status") == nullptr); // the trace variant (AS-55)
}

TEST_CASE("a snapshot has every AS-50 key, with null for the times and errors not yet set", "[runs]") {
  auto doc = json::parse(run_snapshot_json(run_with(0)));
  REQUIRE(doc);
  CHECK(json::get_string(*doc, "type") == "run");
  for (auto key : {"run_id", "session_id", "status", "created_at", "started_at", "completed_at", "cancelled_at",
                   "duration_ms", "event_count", "error", "metadata", "generation_options", "attempts",
                   "lease_expires_at", "retry_after", "worker_id", "last_error", "lease_epoch", "run_kind"})
    CHECK(json::member(*doc, key) != nullptr);
  CHECK((*doc)["started_at"].IsNull());
  CHECK((*doc)["error"].IsNull());
  CHECK((*doc)["metadata"].IsObject());
}

TEST_CASE("a trace keeps the whole final content and previews its first 500 characters", "[runs]") { // AS-55
  trace_facts f;
  f.trace_type = "background_run";
  f.final_content = std::string(700, 'x');
  f.tool_name_counts = {{"list_dir", 2}};
  f.tool_call_count = 2;
  auto doc = json::parse(trace_json(run_with(9), f));
  REQUIRE(doc);
  CHECK(json::get_string(*doc, "final_content").size() == 700);
  CHECK(json::get_string(*doc, "final_content_preview").size() == 500);
  CHECK(json::get_bool(*doc, "final_content_truncated") == true);
  CHECK(json::get_int(*doc, "final_content_length") == 700);
  CHECK(json::get_int((*doc)["tool_name_counts"], "list_dir") == 2);
}

TEST_CASE("AS-55 AS-93 a trace reports the policy_snapshot_hash its run recorded, null when it has none", "[runs]") {
  trace_facts f;
  auto run = run_with(1);
  run.policy_snapshot_hash = "0123456789abcdef";
  auto doc = json::parse(trace_json(run, f));
  REQUIRE(doc);
  CHECK(json::get_string(*doc, "policy_snapshot_hash") == "0123456789abcdef");
  run.policy_snapshot_hash.clear(); // a run stored before troupe recorded the hash
  auto old = json::parse(trace_json(run, f));
  REQUIRE(old);
  CHECK((*old)["policy_snapshot_hash"].IsNull());
}

TEST_CASE("retries wait base times 2 to the attempts made minus one, capped", "[runs]") { // AS-53, AS-97
  CHECK(retry_delay_seconds(1, 5, 300) == 5);
  CHECK(retry_delay_seconds(2, 5, 300) == 10);
  CHECK(retry_delay_seconds(3, 5, 300) == 20);
  CHECK(retry_delay_seconds(10, 5, 300) == 300);
  CHECK(retry_delay_seconds(1000, 5, 300) == 300);
}

TEST_CASE("an iso timestamp reads back to the time it was written from", "[runs]") { // AS-78
  auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(1767225600123456));
  auto text = iso_timestamp(t);
  CHECK(text == "2026-01-01T00:00:00.123456+00:00");
  REQUIRE(parse_iso_timestamp(text));
  CHECK(*parse_iso_timestamp(text) == t);
  CHECK_FALSE(parse_iso_timestamp("2026-01-01T00:00:00Z"));
  CHECK_FALSE(parse_iso_timestamp(""));
}

TEST_CASE("the metrics document leaves the store and its paths out when asked", "[metrics]") { // AS-59, AS-84
  store_stats s;
  s.root = "/data/troupe.db";
  s.run_status_counts = {{"queued", 2}, {"completed", 1}};
  s.run_count = 3;
  s.streams = {{"runs", 3, 4096, ""}};
  auto with = json::parse(metrics_json(s, 1, true));
  REQUIRE(with);
  CHECK(json::get_string((*with)["store"], "root") == "/data/troupe.db");
  CHECK(json::get_int((*with)["runs"]["durable"], "queued_count") == 2);
  CHECK(json::get_int((*with)["runs"]["durable"], "running_count") == 0);
  CHECK((*with)["runs"]["avg_duration_ms"].IsNull()); // an average over nothing is null
  auto without = json::parse(metrics_json(s, 1, false));
  REQUIRE(without);
  CHECK(json::member(*without, "store") == nullptr);
}

TEST_CASE("an attempt ended from outside is open, unwritten, ended by its own error or finished by its session_end, "
          "by where its events began and the log's last event (AS-14, AS-83)",
          "[runs][recovery]") {
  CHECK(interrupted_attempt(0, 0, "") == attempt_log::unwritten);
  CHECK(interrupted_attempt(4, 4, "error") == attempt_log::unwritten); // the earlier attempt's closing error
  CHECK(interrupted_attempt(4, 4, "session_end") == attempt_log::unwritten); // a reopened chat run's earlier end
  CHECK(interrupted_attempt(4, 5, "session_start") == attempt_log::open);
  CHECK(interrupted_attempt(0, 7, "tool_result") == attempt_log::open);
  CHECK(interrupted_attempt(4, 9, "error") == attempt_log::ended);
  CHECK(interrupted_attempt(4, 9, "session_end") == attempt_log::finished);
}

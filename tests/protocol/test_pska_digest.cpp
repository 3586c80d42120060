// The PSKA digest worker's contract (protocol/pska_digest.hpp): ready jobs, headers, batch pages, run
// ids and bodies, and the judgement of a batch run's events (AS-67 to AS-72, CJ-45).
#include "protocol/pska_digest.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace troupe::protocol;
using namespace troupe::protocol::pska;

namespace {

json::document parsed(const std::string& text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  return std::move(*doc);
}

// A batch run's events, judged with the default budget; the verdict for a completed run.
std::optional<std::string> judged(const std::vector<std::string>& events, const std::string& status = "completed") {
  auto meta = parsed(R"({"caller":"pska_digest_worker","purpose":"digest"})");
  batch_judge judge(meta);
  for (auto& e : events)
    judge.add_event(parsed(e));
  return judge.verdict(status);
}

std::string call(const std::string& id, const std::string& tool, const std::string& args = "{}") {
  return R"({"type":"tool_call","tool_name":")" + tool + R"(","tool_call_id":")" + id + R"(","tool_args":)" + args + "}";
}

std::string result(const std::string& id, const std::string& flags = "{}") {
  return R"({"type":"tool_result","tool_call_id":")" + id + R"(","metadata":)" + flags + "}";
}

const std::string good_write = R"({"knowledge_claims":[{"claim":"x"}],"digest_notes":[{"note":"y"}]})";

} // namespace

TEST_CASE("Ready digest jobs are queued, due and of the digest type, by priority, run_after, created_at (AS-67)",
          "[pska]") {
  auto jobs = ready_jobs(R"({"jobs":[
    {"id":"late","job_type":"digest_via_fastreact","status":"queued","priority":5,"run_after":"2099-01-01T00:00:00Z"},
    {"id":"low","job_type":"digest_via_fastreact","status":"queued","priority":1,"created_at":"2025-01-01T00:00:00Z"},
    {"id":"high","job_type":"digest_via_fastreact","status":"queued","priority":9},
    {"id":"leased","job_type":"digest_via_fastreact","status":"leased","priority":9},
    {"id":"other","job_type":"reindex","status":"queued","priority":9},
    {"id":"low-older","job_type":"digest_via_fastreact","status":"queued","priority":1,"created_at":"2024-01-01T00:00:00Z"},
    {"id":"bad-time","job_type":"digest_via_fastreact","status":"queued","run_after":"soon"},
    "not a job"]})",
                         1.9e9);
  REQUIRE(jobs);
  std::vector<std::string> ids;
  for (auto& j : *jobs)
    ids.push_back(j.id);
  CHECK(ids == std::vector<std::string>{"high", "low-older", "low"});
  CHECK_FALSE(ready_jobs("[]", 0));
  CHECK_FALSE(ready_jobs(R"({"jobs":{}})", 0));
}

TEST_CASE("Requests carry AS-68's headers to PSKA and to troupe", "[pska]") {
  tenant t{"acme", "ann"};
  auto to_pska = pska_headers(t, "secret");
  CHECK(std::count(to_pska.begin(), to_pska.end(), std::pair<std::string, std::string>{"X-PSKA-Caller", "agent_service"}));
  CHECK(std::count(to_pska.begin(), to_pska.end(), std::pair<std::string, std::string>{"X-PSKA-Service-Token", "secret"}));
  CHECK(pska_headers(t, "").size() == to_pska.size() - 1);
  auto to_troupe = troupe_headers(t, "tok");
  CHECK(std::count(to_troupe.begin(), to_troupe.end(), std::pair<std::string, std::string>{"X-FastReAct-User-Key", "pska:ann"}));
  CHECK(std::count(to_troupe.begin(), to_troupe.end(), std::pair<std::string, std::string>{"X-FastReAct-Tenant-Key", "acme"}));
  CHECK(step_failure("POST", "http://p/jobs/1/lease", 409, std::string(5000, 'x')).size() < 2100);
  CHECK(step_failure("GET", "http://p/jobs", 500, "boom") == "GET http://p/jobs failed with HTTP 500: boom");
}

TEST_CASE("A batch page reads its cursors as text and leaves its copy of the job out of the prompt (AS-67)",
          "[pska]") {
  auto page = parse_batch_page(R"({"cursor":0,"next_cursor":"2","has_more":true,"job":{"id":"j1"},
                                   "source_items":[{"id":"s1"},{"id":"s2"}],"documents":[],"chunks":[]})");
  REQUIRE(page);
  CHECK(page->cursor == "0");
  CHECK(page->next_cursor == std::optional<std::string>("2"));
  CHECK(page->has_more);
  CHECK(page->source_items == 2);
  CHECK(page->json.find("\"job\"") == std::string::npos);
  auto last = parse_batch_page(R"({"cursor":"2","next_cursor":null,"has_more":false,"source_items":[]})");
  REQUIRE(last);
  CHECK_FALSE(last->next_cursor);
  CHECK_FALSE(parse_batch_page("[1]"));
}

TEST_CASE("Batch run ids are pskad_ and 24 hex, one per tenant, job, cursor and try (CJ-45)", "[pska]") {
  auto id = batch_run_id("acme", "j1", "0", 0);
  CHECK(id.size() == 6 + 24);
  CHECK(id.rfind("pskad_", 0) == 0);
  CHECK(id == batch_run_id("acme", "j1", "0", 0));
  CHECK(id != batch_run_id("acme", "j1", "0", 1));
  CHECK(id != batch_run_id("acme", "j1", "1", 0));
  // The key's parts are NUL-separated, so a job id with a control character is never taken.
  CHECK(ready_jobs(R"({"jobs":[{"id":"a\u0000b","job_type":"digest_via_fastreact","status":"queued"}]})", 1e10)
          ->empty());
}

TEST_CASE("A batch run's body is AS-69's: two PSKA tools, the guards' metadata, the batch as the user's message",
          "[pska]") {
  run_settings s{{"acme", "ann"}, "j1", batch_run_id("acme", "j1", "0", 0), "0"};
  batch_page page{"0", std::string("1"), true, 1, R"({"cursor":0,"source_items":[{"id":"s1"}]})"};
  auto body = parsed(batch_run_body(s, R"({"id":"j1"})", page));
  CHECK(json::get_string(body, "user_key") == "pska:ann");
  auto& meta = body["metadata"];
  CHECK(json::get_string(meta, "caller") == "pska_digest_worker");
  CHECK(json::get_string(meta, "run_id") == s.run_id);
  CHECK(json::get_string(meta["scope"], "cursor") == "0");
  CHECK(meta["tool_budget"]["pska_pska_write_candidates"].GetInt() == 1);
  CHECK(body["tool_policy"]["allowed_tools"].Size() == 2);
  auto user = parsed(json::get_string(body["messages"][1], "content"));
  CHECK(json::get_string(user["job"], "id") == "j1");
  CHECK(user["batch"]["source_items"].Size() == 1);
}

TEST_CASE("A batch passes with one good write and fails by the rule it broke (AS-72)", "[pska]") {
  CHECK_FALSE(judged({call("c1", "pska_pska_job_context"), result("c1"), call("c2", "pska_pska_write_candidates", good_write),
                      result("c2")}));
  CHECK(judged({}, "failed") == std::optional<std::string>("RunNotCompleted: the batch run ended failed"));
  CHECK(judged({R"({"type":"error","content":"x"})"})->rfind("RunError:", 0) == 0);
  CHECK(judged({call("c1", "exec"), result("c1", R"({"tool_policy_denied":true})")})->rfind("ForbiddenTool:", 0) == 0);
  CHECK(judged({call("c1", "pska_pska_write_candidates", good_write), result("c1"),
                call("c2", "pska_pska_write_candidates", good_write), result("c2")})
          ->rfind("BudgetExceeded:", 0) == 0);
  CHECK(judged({call("c1", "pska_pska_write_candidates", R"({"digest_notes":[1]})"), result("c1")})
          ->rfind("InvalidWrite:", 0) == 0);
  // A write troupe rejected (AS-71) uses no budget, but must be followed by an effective one.
  auto rejected = result("c1", R"({"digest_validation_error":true})");
  CHECK(judged({call("c1", "pska_pska_write_candidates", R"({})"), rejected})->rfind("RejectedWrite:", 0) == 0);
  CHECK_FALSE(judged({call("c1", "pska_pska_write_candidates", R"({})"), rejected,
                      call("c2", "pska_pska_write_candidates", good_write), result("c2")}));
}

TEST_CASE("A forbidden call late in a long run still fails its batch (AS-87)", "[pska]") {
  std::vector<std::string> events;
  for (int i = 0; i < 250; ++i)
    events.push_back(R"({"type":"think","content":"step"})");
  events.push_back(call("c1", "write_file"));
  events.push_back(result("c1"));
  CHECK(judged(events)->rfind("ForbiddenTool: the run called write_file", 0) == 0);
}

TEST_CASE("The complete body reports every batch run, and the fail body is retryable (AS-72)", "[pska]") {
  run_report r;
  r.run_id = "pskad_x";
  r.batch_cursor = "0";
  r.status = "completed";
  r.content = "wrote 3 claims";
  r.tool_calls = {"pska_pska_write_candidates"};
  r.write_call_count = 1;
  auto body = parsed(complete_body("w-1", R"({"id":"j1"})", {r, r}));
  auto& result = body["result"];
  CHECK(result["ok"].GetBool());
  CHECK(result["batch_count"].GetInt() == 2);
  CHECK(result["fastreact_runs"][0]["next_cursor"].IsNull());
  CHECK(json::get_string(result["leased_job"], "id") == "j1");
  CHECK(fail_body("WorkerShutdown: draining") == R"({"error":"WorkerShutdown: draining","retryable":true})");
}

TEST_CASE("--job-id finds its unfinished digest job whatever its run_after, and ids go into URLs encoded", "[pska]") {
  auto body = R"({"jobs":[{"id":"a/b","job_type":"digest_via_fastreact","status":"leased","run_after":"2099-01-01T00:00:00Z"},
                          {"id":"done","job_type":"digest_via_fastreact","status":"completed"}]})";
  CHECK(named_job(body, "a/b").has_value());
  CHECK_FALSE(named_job(body, "done"));
  CHECK_FALSE(named_job(body, "missing"));
  CHECK(url_component("a/b?c=d e%") == "a%2Fb%3Fc%3Dd%20e%25");
  CHECK(url_component("job_1-x.y~z") == "job_1-x.y~z");
}

TEST_CASE("PSKA's answers mean what AS-86 and CJ-44 say to the worker", "[pska]") {
  CHECK(heartbeat_reply(200) == reply::ok);
  CHECK(heartbeat_reply(404) == reply::renew_by_lease);
  CHECK(heartbeat_reply(405) == reply::renew_by_lease);
  CHECK(heartbeat_reply(409) == reply::lease_lost);
  CHECK(heartbeat_reply(429) == reply::retry);
  CHECK(heartbeat_reply(503) == reply::retry);
  CHECK(settle_reply(409) == reply::lease_lost);
  CHECK(settle_reply(500) == reply::failed);
  CHECK(run_start_reply(409) == reply::exists);
  CHECK(run_start_reply(201) == reply::ok);
}

TEST_CASE("Leased pska.digest jobs name their PSKA job and tenant, the worker's defaults filling in (CJ-41, CJ-43)",
          "[pska]") {
  tenant defaults{"tenant_default", "user_primary"};
  auto jobs = troupe_jobs(R"({"jobs":[
      {"id":"job_1","lease_token":"lt_1_a","payload":{"pska_job_id":"p1","tenant_id":"acme"}},
      {"id":"job_2","lease_token":"lt_1_b","payload":{"pska_job_id":"p\n2"}},
      {"id":"job_3","lease_token":"lt_1_c","payload":"not an object"}]})",
                          defaults);
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].pska_job_id == "p1");
  CHECK(jobs[0].who.tenant_id == "acme");
  CHECK(jobs[0].who.represented_user_id == "user_primary");
  CHECK(troupe_jobs("nonsense", defaults).empty());
  auto done = parsed(troupe_complete_body("lt_1_a", complete_body("w", "null", {})));
  CHECK(json::get_string(done, "lease_token") == "lt_1_a");
  CHECK(done["result"]["batch_count"].GetInt() == 0);
  auto lease = parsed(troupe_lease_body("w", 500, 1));
  CHECK(lease["max_jobs"].GetInt() == 100);
  CHECK(lease["lease_seconds"].GetInt() == 5);
}

TEST_CASE("A breaker opens after 5 failures, probes after 1 s doubling to 60 s, and closes on success (CJ-46)",
          "[pska]") {
  breaker b;
  for (int i = 0; i < 4; ++i)
    b.record(0, 503, 0);
  CHECK(b.admits(0));
  b.record(0, 0, 0); // the fifth: no answer at all
  CHECK(b.open());
  CHECK_FALSE(b.admits(0.5));
  CHECK(b.admits(1.0));       // the probe
  CHECK_FALSE(b.admits(1.1)); // one probe per wait
  b.record(1.2, 429, 0);      // the probe failed: 2 s now
  CHECK_FALSE(b.admits(2.5));
  CHECK(b.admits(3.2));
  for (int i = 0; i < 10; ++i)
    b.record(100.0 * i, 500, 0);
  CHECK_FALSE(b.admits(950));
  CHECK(b.admits(900 + 60)); // capped at 60 s
  b.record(961, 200, 0);
  CHECK_FALSE(b.open());
  CHECK(b.admits(961));
  // Retry-After pauses admission, open or not; a 4xx is no failure.
  b.record(1000, 429, 30);
  CHECK_FALSE(b.admits(1020));
  CHECK(b.admits(1031));
  b.record(1031, 404, 0);
  CHECK_FALSE(b.open());
}

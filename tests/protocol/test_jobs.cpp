// The jobs API's request checks (cluster-and-jobs.md CJ-30 to CJ-41): enqueue bodies, lease requests,
// lease tokens, the retry backoff and a completed job's follow-up run.
#include "protocol/jobs.hpp"
#include "protocol/timestamp.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace troupe;
using namespace troupe::protocol;
using namespace troupe::protocol::jobs;

namespace {

jobs::enqueue_request enqueued(const std::string& body, enqueue_limits limits = {}) {
  auto r = parse_enqueue(body, limits);
  if (auto err = std::get_if<request_error>(&r)) {
    std::string why = err->what.message;
    for (auto& i : err->what.issues)
      why += " | " + i.msg;
    FAIL(why);
  }
  return std::get<jobs::enqueue_request>(r);
}

// The refusal's status and its issues' locations, joined by '.'.
std::pair<int, std::vector<std::string>> refused(const std::string& body, enqueue_limits limits = {}) {
  auto r = parse_enqueue(body, limits);
  REQUIRE(std::holds_alternative<request_error>(r));
  auto& p = std::get<request_error>(r).what;
  std::vector<std::string> locs;
  for (auto& i : p.issues) {
    std::string l;
    for (auto& part : i.loc)
      l += (l.empty() ? "" : ".") + part;
    locs.push_back(l);
  }
  return {http_status(p.code), locs};
}

} // namespace

TEST_CASE("a job type is dotted lowercase names of at most 100 characters (CJ-31)", "[jobs]") {
  for (auto ok : {"email", "email.send", "pska.digest", "a1_b.c_2"})
    CHECK(is_job_type(ok));
  CHECK(is_job_type(std::string(100, 'a')));
  for (auto bad : {"", "Email", "1email", "email.", ".email", "email..send", "email.1send", "email send", "e-mail",
                   "email.Send", "ä"})
    CHECK_FALSE(is_job_type(bad));
  CHECK_FALSE(is_job_type(std::string(101, 'a')));
}

TEST_CASE("an enqueue body takes its defaults and keeps its payload as JSON text (CJ-31)", "[jobs]") {
  auto r = enqueued(R"({"type":"email.send","payload":{"to":"a@example.com","n":[1,2.5]}})");
  REQUIRE(r.jobs.size() == 1);
  CHECK_FALSE(r.batch);
  auto& j = r.jobs[0];
  CHECK(j.type == "email.send");
  CHECK(j.payload == R"({"to":"a@example.com","n":[1,2.5]})");
  CHECK(j.priority == 0);
  CHECK(j.max_attempts == 5);
  CHECK(j.timeout_seconds == 300);
  CHECK(j.run_after.empty());
  CHECK(j.idempotency_key.empty());
  CHECK_FALSE(j.tenant_key);
  CHECK(j.on_complete.empty());
  CHECK(enqueued(R"({"type":"t"})").jobs[0].payload == "null");
}

TEST_CASE("an enqueue body's fields are read within their ranges, run_after as any RFC 3339 time (CJ-31)", "[jobs]") {
  auto j = enqueued(R"({"type":"t","priority":-100,"max_attempts":100,"timeout_seconds":60,
    "run_after":"2025-03-01T10:00:00.5+01:00","idempotency_key":"signup-42","tenant_key":"acme"})")
             .jobs[0];
  CHECK(j.priority == -100);
  CHECK(j.max_attempts == 100);
  CHECK(j.timeout_seconds == 60);
  CHECK(j.run_after == "2025-03-01T09:00:00.500000+00:00");
  CHECK(j.idempotency_key == "signup-42");
  CHECK(j.tenant_key == std::optional<std::string>("acme"));
}

TEST_CASE("an enqueue body that breaks CJ-31 is a 422 naming every field at fault", "[jobs]") {
  CHECK(refused(R"({"payload":{}})") == std::make_pair(422, std::vector<std::string>{"body.type"}));
  CHECK(refused(R"({"type":"Bad Type"})").second == std::vector<std::string>{"body.type"});
  CHECK(refused(R"({"type":"t","priority":101,"max_attempts":0,"timeout_seconds":"60","extra":1})").second
        == std::vector<std::string>{"body.extra", "body.priority", "body.max_attempts", "body.timeout_seconds"});
  for (auto when : {"2025-02-29T00:00:00Z", "2025-03-01 09:00:00Z", "2025-03-01T24:00:00Z", "2025-03-01T09:00:00",
                    "2025-03-01T09:00:00+24:00", "2025-03-01T09:00:00.1234567890Z", "yesterday"})
    CHECK(refused(std::string(R"({"type":"t","run_after":")") + when + "\"}").second
          == std::vector<std::string>{"body.run_after"});
  CHECK(refused("{\"type\":\"t\",\"idempotency_key\":\"a\\r\\nb\"}").second
        == std::vector<std::string>{"body.idempotency_key"});
  CHECK(refused(R"({"type":"t","tenant_key":""})").second == std::vector<std::string>{"body.tenant_key"});
}

TEST_CASE("a payload past jobs.max_payload_bytes is a 413, and what is no JSON object is refused as AS-2 says",
          "[jobs]") {
  enqueue_limits small;
  small.max_payload_bytes = 16;
  CHECK(refused(R"({"type":"t","payload":"0123456789abcdef"})", small).first == 413);
  CHECK(enqueued(R"({"type":"t","payload":"0123456789abcd"})", small).jobs.size() == 1); // 16 bytes quoted
  CHECK(refused("{").first == 422);
  CHECK(refused(R"({"type":"t","type":"u"})").first == 422); // a repeated member
  CHECK(refused("[1]").first == 422);
  CHECK(refused(std::string(100000, '[') + std::string(100000, ']')).first == 400);
  CHECK(refused("{\"type\":\"t\",\"payload\":\"\xff\"}").first == 400);
}

TEST_CASE("a batch of 1 to 1000 jobs is read whole, and its issues carry each job's index (CJ-31)", "[jobs]") {
  auto r = enqueued(R"({"jobs":[{"type":"a"},{"type":"b","priority":3}]})");
  CHECK(r.batch);
  REQUIRE(r.jobs.size() == 2);
  CHECK(r.jobs[1].priority == 3);
  CHECK(refused(R"({"jobs":[{"type":"a"},{"type":"B"},{"priority":1000,"type":"c"}]})").second
        == std::vector<std::string>{"body.jobs.1.type", "body.jobs.2.priority"});
  CHECK(refused(R"({"jobs":[]})").second == std::vector<std::string>{"body.jobs"});
  std::string many = R"({"jobs":[)";
  for (int i = 0; i < 1001; ++i)
    many += std::string(i ? "," : "") + R"({"type":"a"})";
  CHECK(refused(many + "]}").second == std::vector<std::string>{"body.jobs"});
}

TEST_CASE("a pska.digest job names its PSKA job and takes that type's defaults (CJ-41)", "[jobs]") {
  auto j = enqueued(R"({"type":"pska.digest","payload":{"pska_job_id":"j-1","tenant_id":"t"}})").jobs[0];
  CHECK(j.max_attempts == 3);
  CHECK(j.timeout_seconds == 3600);
  CHECK(enqueued(R"({"type":"pska.digest","payload":{"pska_job_id":"j-1"},"max_attempts":7})").jobs[0].max_attempts == 7);
  CHECK(refused(R"({"type":"pska.digest"})").second == std::vector<std::string>{"body.payload"});
  CHECK(refused(R"({"type":"pska.digest","payload":{"tenant_id":"t","other":1}})").second
        == std::vector<std::string>{"body.payload.other", "body.payload.pska_job_id"});
  CHECK(refused(R"({"type":"pska.digest","payload":[1]})").second == std::vector<std::string>{"body.payload"});
}

TEST_CASE("on_complete holds a POST /v1/runs body, checked at enqueue as rendered with the job's payload (CJ-40)",
          "[jobs]") {
  auto j = enqueued(R"({"type":"t","payload":{"who":"ana"},"on_complete":{"start_run":{
    "messages":[{"role":"user","content":"Tell {{job.payload}} about {{job.id}}"}]}}})")
             .jobs[0];
  CHECK(j.on_complete == R"({"start_run":{"messages":[{"role":"user","content":"Tell {{job.payload}} about {{job.id}}"}]}})");
  CHECK(refused(R"({"type":"t","on_complete":{"start_run":{"messages":[]}}})").first == 422);
  CHECK(refused(R"({"type":"t","on_complete":{"start_run":{"messages":"{{job.payload}}"}}})").first == 422);
  CHECK(refused(R"({"type":"t","on_complete":{"run":{}}})").second == std::vector<std::string>{"body.on_complete"});
  CHECK(refused(R"({"type":"t","on_complete":{"start_run":[]}})").second == std::vector<std::string>{"body.on_complete"});
}

TEST_CASE("a follow-up run's body renders the job's values in one pass, a whole placeholder as its JSON value (CJ-40)",
          "[jobs]") {
  job_values job{"job_1", "email.send", R"({"to":"{{job.id}}"})", R"([1,2])"};
  auto out = render_start_run(
    R"({"messages":[{"role":"user","content":"{{job.type}} {{job.id}}: {{job.result}} from {{job.payload}} {{job.nope}}"}],
        "metadata":{"payload":"{{job.payload}}","result":"{{job.result}}","n":1.5,"t":true}})",
    job);
  REQUIRE(out);
  CHECK(*out == R"({"messages":[{"role":"user","content":"email.send job_1: [1,2] from {\"to\":\"{{job.id}}\"} {{job.nope}}"}],)"
                R"("metadata":{"payload":{"to":"{{job.id}}"},"result":[1,2],"n":1.5,"t":true}})");
  CHECK_FALSE(render_start_run("[1]", job));
  CHECK_FALSE(render_start_run("{", job));
}

TEST_CASE("placeholders may add at most max_rendered_growth bytes to a follow-up run's body", "[jobs]") {
  job_values job{"job_1", "t", "\"" + std::string(200000, 'x') + "\"", "null"};
  std::string few = R"({"a":"{{job.payload}}","b":"{{job.payload}}"})";
  CHECK(render_start_run(few, job));
  std::string many = R"({"a":")";
  for (int i = 0; i < 6; ++i)
    many += "{{job.payload}}";
  CHECK_FALSE(render_start_run(many + "\"}", job));
  std::string body = R"({"type":"t","payload":)" + job.payload + R"(,"on_complete":{"start_run":{"messages":[)";
  for (int i = 0; i < 6; ++i)
    body += std::string(i ? "," : "") + R"({"role":"user","content":"{{job.payload}}"})";
  CHECK(refused(body + "]}}}").second == std::vector<std::string>{"body.on_complete.start_run"});
}

TEST_CASE("a lease request is read within CJ-32's ranges", "[jobs]") {
  auto r = parse_lease(R"({"worker_id":"w-7","types":["email.send"],"max_jobs":10,"lease_seconds":60,"wait_seconds":20})");
  REQUIRE(std::holds_alternative<lease_request>(r));
  auto& l = std::get<lease_request>(r);
  CHECK(l.worker_id == "w-7");
  CHECK(l.types == std::vector<std::string>{"email.send"});
  CHECK(l.max_jobs == 10);
  CHECK(l.lease_seconds == 60);
  CHECK(l.wait_seconds == 20);
  auto d = std::get<lease_request>(parse_lease(R"({"worker_id":"w"})"));
  CHECK(d.max_jobs == 1);
  CHECK(d.lease_seconds == 60);
  CHECK(d.wait_seconds == 0);
  CHECK(d.types.empty());
  for (auto bad : {R"({})", R"({"worker_id":"w","max_jobs":101})", R"({"worker_id":"w","lease_seconds":4})",
                   R"({"worker_id":"w","wait_seconds":31})", R"({"worker_id":"w","types":["Bad"]})",
                   R"({"worker_id":"w","tenant_keys":[""]})", R"({"worker_id":"w","x":1})", "{\"worker_id\":\"\\u0000\"}"})
    CHECK(std::holds_alternative<request_error>(parse_lease(bad)));
}

TEST_CASE("a lease token names its epoch, and nothing else reads as one (CJ-32, CJ-38)", "[jobs]") {
  std::string hex(32, 'a');
  CHECK(lease_token(7, hex) == "lt_7_" + hex);
  CHECK(token_epoch(lease_token(7, hex)) == std::optional<int64_t>(7));
  CHECK(token_epoch(lease_token(123456789012, hex)) == std::optional<int64_t>(123456789012));
  for (auto bad : {std::string("lt__") + hex, "lt_7_" + std::string(31, 'a'), "lt_7_" + std::string(33, 'a'),
                   "lt_7_" + std::string(32, 'A'), "xx_7_" + hex, "lt_-7_" + hex, std::string("lt_7"),
                   "lt_" + std::string(19, '9') + "_" + hex})
    CHECK_FALSE(token_epoch(bad));
}

TEST_CASE("a retryable failure waits base·2^(attempt−1), at most the maximum, with up to 10% jitter (CJ-36)",
          "[jobs]") {
  CHECK(retry_delay_seconds(1, 5, 3600, 0) == 5);
  CHECK(retry_delay_seconds(3, 5, 3600, 0) == 20);
  CHECK(retry_delay_seconds(3, 5, 3600, 0.1) == Approx(22));
  CHECK(retry_delay_seconds(20, 5, 3600, 0) == 3600);
  CHECK(retry_delay_seconds(1000000, 5, 3600, 0.05) == Approx(3780));
  CHECK(retry_delay_seconds(1, 5, 3600, 7) == Approx(5.5)); // jitter is held to [0, 0.1]
  CHECK(retry_delay_seconds(0, 5, 3600, 0) == 5);
}

TEST_CASE("an RFC 3339 time is read strictly", "[jobs][timestamp]") {
  auto at = [](const char* text) {
    auto t = parse_rfc3339(text);
    return t ? iso_timestamp(*t) : std::string("none");
  };
  CHECK(at("2025-03-01T09:00:00Z") == "2025-03-01T09:00:00.000000+00:00");
  CHECK(at("2025-03-01t09:00:00.123456789z") == "2025-03-01T09:00:00.123456+00:00");
  CHECK(at("2024-02-29T23:30:00-01:30") == "2024-03-01T01:00:00.000000+00:00");
  CHECK(at("2025-03-01T09:00:00.Z") == "none");
  CHECK(at("2025-13-01T09:00:00Z") == "none");
  CHECK(at("2025-03-01T09:00:60Z") == "none");
  CHECK(at("2025-03-01T09:00:00Z ") == "none");
  CHECK(at("+2025-03-01T09:00:00Z") == "none");
}

TEST_CASE("a job is shown as CJ-30's object, its JSON members as stored and absent ones null", "[jobs]") {
  job_record j;
  j.id = "job_0190f3a2c4e87b1d9a2f6c5e4d3b2a10";
  j.type = "email.send";
  j.tenant_key = "acme";
  j.status = "leased";
  j.payload = R"({"to":"a@example.com","n":1.5})";
  j.idempotency_key = "signup-42";
  j.attempt = 1;
  j.run_after = j.created_at = j.updated_at = "2025-03-01T09:00:00.000000+00:00";
  j.started_at = "2025-03-01T09:00:01.000000+00:00";
  j.worker_id = "w-7";
  j.lease_epoch = 1;
  j.lease_expires_at = "2025-03-01T09:01:01.000000+00:00";
  CHECK(job_json(j)
        == R"({"object":"job","id":"job_0190f3a2c4e87b1d9a2f6c5e4d3b2a10","type":"email.send","tenant_key":"acme",)"
           R"("status":"leased","priority":0,"payload":{"to":"a@example.com","n":1.5},"result":null,)"
           R"("idempotency_key":"signup-42","attempt":1,"max_attempts":5,"timeout_seconds":300,)"
           R"("run_after":"2025-03-01T09:00:00.000000+00:00","created_at":"2025-03-01T09:00:00.000000+00:00",)"
           R"("updated_at":"2025-03-01T09:00:00.000000+00:00","started_at":"2025-03-01T09:00:01.000000+00:00",)"
           R"("completed_at":null,"cancelled_at":null,"dead_at":null,"worker_id":"w-7","lease_epoch":1,)"
           R"("lease_expires_at":"2025-03-01T09:01:01.000000+00:00","last_error":null,"errors":[],"progress":null,)"
           R"("on_complete":null,"on_complete_run_id":null,"on_complete_error":null})");
}

TEST_CASE("a job keeps its last 10 errors, each cut to 4 KiB at a character boundary (CJ-30, CJ-36)", "[jobs]") {
  std::string errors = "[]";
  for (int i = 1; i <= 12; ++i)
    errors = append_error(errors, i, "t" + std::to_string(i), "failure " + std::to_string(i));
  auto doc = json::parse(errors);
  REQUIRE(doc);
  REQUIRE(doc->Size() == 10);
  CHECK(json::get_int((*doc)[0], "attempt") == 3);
  CHECK(json::get_string((*doc)[9], "error") == "failure 12");
  CHECK(json::get_string((*doc)[9], "at") == "t12");
  std::string long_error(4095, 'x');
  long_error += "é"; // two bytes across the 4,096-byte line
  auto cut = json::parse(append_error("not json", 1, "t", long_error));
  REQUIRE(cut);
  REQUIRE(cut->Size() == 1);
  CHECK(json::get_string((*cut)[0], "error") == std::string(4095, 'x'));
}

namespace {

// The issues' locations of a refusal, joined by '.'; empty when the body passed.
template <class T>
std::vector<std::string> issue_locs(const std::variant<T, request_error>& r) {
  std::vector<std::string> locs;
  if (auto err = std::get_if<request_error>(&r))
    for (auto& i : err->what.issues) {
      std::string l;
      for (auto& part : i.loc)
        l += (l.empty() ? "" : ".") + part;
      locs.push_back(l);
    }
  return locs;
}

} // namespace

TEST_CASE("A heartbeat carries its token, a lease length in range and at most 4 KiB of progress (CJ-34)", "[jobs]") {
  auto ok = parse_heartbeat(R"({"lease_token":"lt_1_x","lease_seconds":30,"progress":{"done": 3}})");
  REQUIRE(std::holds_alternative<heartbeat_request>(ok));
  auto& h = std::get<heartbeat_request>(ok);
  CHECK(h.lease_token == "lt_1_x");
  CHECK(h.lease_seconds == 30);
  CHECK(h.progress == std::optional<std::string>(R"({"done":3})"));
  CHECK(std::get<heartbeat_request>(parse_heartbeat(R"({"lease_token":"t"})")).lease_seconds == 0);
  CHECK(issue_locs(parse_heartbeat(R"({"lease_seconds":2,"extra":1})")) ==
        std::vector<std::string>{"body.extra", "body.lease_token", "body.lease_seconds"});
  auto big = R"({"lease_token":"t","progress":")" + std::string(5000, 'x') + "\"}";
  CHECK(issue_locs(parse_heartbeat(big)) == std::vector<std::string>{"body.progress"});
  CHECK(issue_locs(parse_heartbeat(R"({"lease_token":")" + std::string(200, 't') + "\"}")) ==
        std::vector<std::string>{"body.lease_token"});
}

TEST_CASE("A completion's result is any JSON within the payload limit; a batch names each job (CJ-35)", "[jobs]") {
  enqueue_limits limits{64};
  auto one = parse_completion(R"({"lease_token":"t","result":[1, {"a":"b"}]})", limits);
  REQUIRE(std::holds_alternative<completion_request>(one));
  CHECK(std::get<completion_request>(one).result == R"([1,{"a":"b"}])");
  CHECK(std::get<completion_request>(parse_completion(R"({"lease_token":"t"})", limits)).result == "null");
  auto large = parse_completion(R"({"lease_token":"t","result":")" + std::string(100, 'r') + "\"}", limits);
  REQUIRE(std::holds_alternative<request_error>(large));
  CHECK(std::get<request_error>(large).what.code == errc::payload_too_large);
  auto batch = parse_completions(R"({"completions":[{"id":"job_a","lease_token":"t"},{"lease_token":"u","result":1}]})",
                                 limits);
  CHECK(issue_locs(batch) == std::vector<std::string>{"body.completions.1.id"});
  CHECK(issue_locs(parse_completions(R"({"completions":[]})", limits)) == std::vector<std::string>{"body.completions"});
  std::string many = R"({"completions":[)";
  for (int i = 0; i < 1001; ++i)
    many += std::string(i ? "," : "") + R"({"id":"j","lease_token":"t"})";
  CHECK(issue_locs(parse_completions(many + "]}", limits)) == std::vector<std::string>{"body.completions"});
}

TEST_CASE("A failure needs its token and an error, and bounds retry_after_seconds (CJ-36)", "[jobs]") {
  auto ok = parse_failure(R"({"lease_token":"t","error":"smtp down","retryable":false,"retry_after_seconds":2.5})");
  REQUIRE(std::holds_alternative<failure_request>(ok));
  auto& f = std::get<failure_request>(ok);
  CHECK(f.error == "smtp down");
  CHECK_FALSE(f.retryable);
  CHECK(f.retry_after_seconds == 2.5);
  CHECK(std::get<failure_request>(parse_failure(R"({"lease_token":"t","error":"e"})")).retry_after_seconds < 0);
  CHECK(issue_locs(parse_failure(R"({"lease_token":"t","error":"","retryable":"yes","retry_after_seconds":-1})")) ==
        std::vector<std::string>{"body.error", "body.retryable", "body.retry_after_seconds"});
  // An error is kept whole up to max_error_bytes, cut at a UTF-8 boundary past it.
  auto long_error = std::string(max_error_bytes - 1, 'e') + "\xc3\xa9";
  auto cut = parse_failure(R"({"lease_token":"t","error":")" + long_error + "\"}");
  CHECK(std::get<failure_request>(cut).error == std::string(max_error_bytes - 1, 'e'));
}

TEST_CASE("A listing's query names a type, a status, a page size and an order, each checked (CJ-39)", "[jobs]") {
  auto ok = parse_list({{"type", "email.send"}, {"status", "dead"}, {"limit", "20"}, {"order", "oldest"},
                        {"after", "job_01"}});
  REQUIRE(std::holds_alternative<list_request>(ok));
  auto& l = std::get<list_request>(ok);
  CHECK(l.limit == 20);
  CHECK(l.ascending);
  CHECK(l.status == "dead");
  CHECK(issue_locs(parse_list({{"status", "done"}, {"limit", "0"}, {"order", "up"}, {"type", "A"},
                               {"tenant_key", std::string("a\nb")}})) ==
        std::vector<std::string>{"query.type", "query.status", "query.tenant_key", "query.limit", "query.order"});
  CHECK(issue_locs(parse_list({{"limit", "20x"}})) == std::vector<std::string>{"query.limit"});
}

TEST_CASE("Stats sum each type's statuses, zero for the rest, with the oldest ready job's age (CJ-39)", "[jobs]") {
  auto text = job_stats_json({{"a.b", "queued", 3, 1500.5}, {"a.b", "dead", 1, std::nullopt},
                              {"c.d", "completed", 2, std::nullopt}});
  CHECK(text == R"({"object":"job_stats","types":{"a.b":{"queued":3,"leased":0,"completed":0,"cancelled":0,"dead":1,)"
                R"("oldest_ready_age_ms":1500.5},"c.d":{"queued":0,"leased":0,"completed":2,"cancelled":0,"dead":0,)"
                R"("oldest_ready_age_ms":null}},"total":{"queued":3,"leased":0,"completed":2,"cancelled":0,"dead":1,)"
                R"("oldest_ready_age_ms":1500.5}})");
}

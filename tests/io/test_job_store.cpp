// The job store's contract (CJ-30 to CJ-41) on the engine TROUPE_TEST_STORE names: each case on a
// fresh database, through the store's port as the jobs API and the job waiters use it.
#include "actors/job_store.hpp"
#include "io/sqlite_job_store.hpp"
#include "io/store_client.hpp"
#include "protocol/jobs.hpp"

#include <set>
#include <thread>

using namespace troupe;
using namespace troupe::test;
namespace jobs = troupe::protocol::jobs;
namespace json = troupe::protocol::json;

namespace {

struct job_client : port_client<job_store_actor> {
  explicit job_client(const std::string& path)
    : port_client([&](caf::actor_system& sys) {
        return on_postgres() ? spawn_pg_port<job_store_actor>(sys, path) : io::spawn_sqlite_job_store(sys, path);
      }) {}

  job_enqueued enqueue(std::vector<jobs::new_job> js, std::string user = "acme:u") {
    return store_client::ok(ask<job_enqueued>(job_enqueue_atom::value, job_enqueue{std::move(js), std::move(user)}));
  }
  job_record add(std::string type = "email.send", std::string tenant = "acme", std::string payload = R"({"n":1})") {
    return enqueue({job(std::move(type), std::move(tenant), std::move(payload))}).jobs.at(0);
  }
  std::vector<job_record> lease(job_claim_request want) {
    return store_client::ok(ask<job_claim>(job_lease_atom::value, std::move(want))).jobs;
  }
  std::vector<job_record> lease(int64_t n, int64_t lease_seconds = 60) {
    job_claim_request want;
    want.worker_id = "w-1";
    want.max_jobs = n;
    want.lease_seconds = lease_seconds;
    return lease(want);
  }
  job_answer complete(const job_record& j, std::string result = R"({"ok":true})", job_scope scope = {}) {
    job_completions c;
    c.items.push_back({j.id, j.lease_token, std::move(result)});
    c.scope = std::move(scope);
    return store_client::ok(ask<std::vector<job_answer>>(job_complete_atom::value, std::move(c))).at(0);
  }
  job_answer fail(const job_record& j, bool retryable, double retry_after = -1) {
    job_failure f{j.id, j.lease_token, "it broke", retryable, retry_after, {}};
    return store_client::ok(ask<job_answer>(job_fail_atom::value, std::move(f), job_backoff{5, 3600}));
  }
  job_answer beat(const job_record& j, int64_t lease_seconds = 0, std::optional<std::string> progress = {}) {
    job_heartbeat h{j.id, j.lease_token, lease_seconds, std::move(progress), {}};
    return store_client::ok(ask<job_answer>(job_beat_atom::value, std::move(h)));
  }
  job_answer get(const std::string& id, job_scope scope = {}) {
    return store_client::ok(ask<job_answer>(job_get_atom::value, id, std::move(scope)));
  }
  int64_t sweep() { return store_client::ok(ask<int64_t>(job_sweep_atom::value, job_backoff{5, 3600})); }

  static jobs::new_job job(std::string type, std::string tenant, std::string payload = R"({"n":1})") {
    jobs::new_job j;
    j.type = std::move(type);
    j.tenant_key = std::move(tenant);
    j.payload = std::move(payload);
    return j;
  }
};

std::string tmp_name(const char* what) {
  return std::string("jobs_") + what;
}

} // namespace

TEST_CASE("A leased job carries attempt 1, epoch 1 and a fresh lt_ token, and completes once (CJ-32, CJ-35)",
          "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("lease")));
  auto queued = c.add();
  CHECK(queued.status == "queued");
  CHECK(queued.id.rfind("job_", 0) == 0);
  CHECK(queued.id.size() == 36);
  auto leased = c.lease(1);
  REQUIRE(leased.size() == 1);
  auto& j = leased[0];
  CHECK(j.status == "leased");
  CHECK(j.attempt == 1);
  CHECK(j.lease_epoch == 1);
  CHECK(jobs::token_epoch(j.lease_token) == std::optional<int64_t>(1));
  CHECK(j.worker_id == std::optional<std::string>("w-1"));
  CHECK(c.lease(1).empty());
  auto done = c.complete(j, R"({"sent":"yes"})");
  CHECK(done.fence == job_fence::done);
  CHECK(done.job.status == "completed");
  CHECK(done.job.result == std::optional<std::string>(R"({"sent":"yes"})"));
  // A worker that lost the answer completes again with the same token: unchanged, result kept.
  auto again = c.complete(j, R"({"sent":"twice"})");
  CHECK(again.fence == job_fence::unchanged);
  CHECK(again.job.result == std::optional<std::string>(R"({"sent":"yes"})"));
}

TEST_CASE("An idempotency key names one job: the same job again is the stored one, another is a conflict (CJ-31)",
          "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("idempotency")));
  auto j = job_client::job("email.send", "acme", R"({"a":1,"b":[1,2]})");
  j.idempotency_key = "signup-42";
  auto first = c.enqueue({j});
  REQUIRE(first.created.at(0));
  auto same = j;
  same.payload = R"({"b":[1,2],"a":1})"; // canonically equal
  auto replay = c.enqueue({same});
  CHECK_FALSE(replay.created.at(0));
  CHECK(replay.jobs.at(0).id == first.jobs.at(0).id);
  auto other = j;
  other.payload = R"({"a":2})";
  auto err = store_client::refused(c.ask<job_enqueued>(job_enqueue_atom::value, job_enqueue{{other}, "acme:u"}));
  CHECK(code_of(err) == errc::conflict);
  CHECK(message_of(err) == "Idempotency key already used by a different job");
  // The same key in another tenant is another job.
  auto elsewhere = j;
  elsewhere.tenant_key = "globex";
  CHECK(c.enqueue({elsewhere}).created.at(0));
}

TEST_CASE("A batch that repeats a key with another payload creates none of its jobs (CJ-31)", "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("batch_conflict")));
  auto a = job_client::job("email.send", "acme", R"({"n":1})");
  a.idempotency_key = "k";
  auto b = a;
  b.payload = R"({"n":2})";
  auto fresh = job_client::job("email.send", "acme", R"({"n":3})");
  store_client::refused(c.ask<job_enqueued>(job_enqueue_atom::value, job_enqueue{{fresh, a, b}, "acme:u"}));
  CHECK(c.lease(10).empty());
}

TEST_CASE("Only the current lease token acts on a job, and each refusal names its reason (CJ-38)",
          "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("fencing")));
  c.add();
  auto first = c.lease(1, 0).at(0); // a lease that ended at once
  CHECK(c.sweep() == 1);
  auto swept = c.get(first.id).job;
  CHECK(swept.status == "queued");
  CHECK(swept.lease_epoch == 2);
  CHECK(swept.last_error == std::optional<std::string>("Job lease expired"));
  // The swept worker's token is stale, whatever it tries.
  CHECK(c.beat(first).fence == job_fence::stale_lease);
  CHECK(c.complete(first).fence == job_fence::stale_lease);
  CHECK(c.fail(first, true).fence == job_fence::stale_lease);
  CHECK(c.get(first.id).job.status == "queued"); // a late completion overwrote nothing
  // A worker's own failure leaves its token pointing at a job no longer leased.
  auto retried = store_client::ok(c.ask<job_answer>(job_retry_atom::value, first.id, job_scope{}));
  CHECK(retried.fence == job_fence::not_retryable);
  c.add(); // the swept job waits out its backoff; this one is ready
  job_claim_request want;
  want.worker_id = "w-2";
  want.max_jobs = 1;
  auto got = c.lease(want);
  REQUIRE(got.size() == 1);
  CHECK(c.fail(got[0], true, 3600).fence == job_fence::done);
  CHECK(c.beat(got[0]).fence == job_fence::not_leased);
  // Unknown ids and other tenants' jobs are not found.
  job_record ghost = got[0];
  ghost.id = "job_00000000000000000000000000000000";
  CHECK(c.beat(ghost).fence == job_fence::not_found);
  CHECK(c.get(got[0].id, job_scope{"globex"}).fence == job_fence::not_found);
  CHECK(c.get(got[0].id, job_scope{"acme"}).fence == job_fence::done);
  // AS-84: "" is a tenant of its own, not every tenant.
  CHECK(c.get(got[0].id, job_scope{""}).fence == job_fence::not_found);
}

TEST_CASE("A heartbeat renews the lease but never past the attempt's deadline, and delivers cancellation (CJ-34)",
          "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("heartbeat")));
  auto j = job_client::job("email.send", "acme");
  j.timeout_seconds = 120;
  c.enqueue({j});
  auto leased = c.lease(1, 30).at(0);
  auto started = protocol::parse_iso_timestamp(*leased.started_at).value();
  auto until = [](const job_record& r) { return protocol::parse_iso_timestamp(*r.lease_expires_at).value(); };
  CHECK(until(leased) - started <= std::chrono::seconds(31));
  auto beat = c.beat(leased, 3600, std::string(R"({"step":3})"));
  REQUIRE(beat.fence == job_fence::done);
  CHECK(until(beat.job) - started <= std::chrono::seconds(120));
  CHECK(until(beat.job) - started >= std::chrono::seconds(119));
  CHECK(beat.job.progress == std::optional<std::string>(R"({"step":3})"));
  // Without lease_seconds a heartbeat renews by the lease's own length, and keeps the progress.
  auto plain = c.beat(leased);
  CHECK(plain.job.progress == std::optional<std::string>(R"({"step":3})"));
  auto cancelled = store_client::ok(c.ask<job_answer>(job_cancel_atom::value, leased.id, job_scope{}));
  CHECK(cancelled.fence == job_fence::done);
  CHECK(cancelled.job.status == "cancelled");
  CHECK(c.beat(leased).fence == job_fence::cancelled);
  // Cancelling a finished job changes nothing.
  CHECK(store_client::ok(c.ask<job_answer>(job_cancel_atom::value, leased.id, job_scope{})).fence ==
        job_fence::unchanged);
}

TEST_CASE("A failure retries after the backoff while attempts remain, then the job is a dead letter (CJ-36)",
          "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("fail")));
  auto j = job_client::job("email.send", "acme");
  j.max_attempts = 2;
  c.enqueue({j});
  auto first = c.lease(1).at(0);
  auto failed = c.fail(first, true, 0);
  CHECK(failed.job.status == "queued");
  CHECK(failed.job.last_error == std::optional<std::string>("it broke"));
  auto second = c.lease(1).at(0);
  CHECK(second.attempt == 2);
  auto dead = c.fail(second, true);
  CHECK(dead.job.status == "dead");
  CHECK(dead.job.dead_at.has_value());
  auto errors = json::parse(dead.job.errors);
  REQUIRE(errors);
  CHECK(errors->Size() == 2);
  // A dead letter retried starts over at attempt 0.
  auto retried = store_client::ok(c.ask<job_answer>(job_retry_atom::value, dead.job.id, job_scope{}));
  CHECK(retried.fence == job_fence::done);
  CHECK(retried.job.status == "queued");
  CHECK(retried.job.attempt == 0);
  auto third = c.lease(1).at(0);
  // A retryable failure with the default backoff waits at least retry_base_seconds.
  CHECK(c.fail(third, true).job.status == "queued");
  CHECK(c.lease(1).empty());
  // A failure that is not retryable is dead at once.
  c.add();
  CHECK(c.fail(c.lease(1).at(0), false).job.status == "dead");
}

TEST_CASE("An attempt past its deadline is swept as timed out (CJ-37)", "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("timeout")));
  auto j = job_client::job("email.send", "acme");
  j.timeout_seconds = 0;
  c.enqueue({j});
  auto leased = c.lease(1, 60).at(0);
  CHECK(c.sweep() == 1);
  CHECK(c.get(leased.id).job.last_error == std::optional<std::string>("Job attempt timed out after 0 s"));
}

TEST_CASE("Tenants take turns in a claim, starting after the tenant served last (CJ-19)", "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("fair")));
  for (auto tenant : {"a", "a", "a", "b", "b", "c", ""})
    c.add("email.send", tenant);
  job_claim_request want;
  want.worker_id = "w";
  want.max_jobs = 4;
  std::multiset<std::string> tenants;
  for (auto& j : c.lease(want))
    tenants.insert(j.tenant_key);
  CHECK(tenants == std::multiset<std::string>{"", "a", "b", "c"}); // "" is a tenant too
  want.max_jobs = 1;
  want.after_tenant = "a";
  auto next = c.lease(want);
  REQUIRE(next.size() == 1);
  CHECK(next[0].tenant_key == "b");
  // Past the last tenant the turn wraps to the first.
  want.after_tenant = "b";
  auto wrapped = c.lease(want);
  REQUIRE(wrapped.size() == 1);
  CHECK(wrapped[0].tenant_key == "a");
}

TEST_CASE("A type's lease cap bounds each tenant's leased jobs of it (CJ-32)", "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("caps")));
  for (int i = 0; i < 3; ++i)
    c.add("pska.digest", "acme", R"({"pska_job_id":"p)" + std::to_string(i) + "\"}");
  c.add("email.send", "acme");
  job_claim_request want;
  want.worker_id = "w";
  want.max_jobs = 10;
  want.caps = {{"pska.digest", 2}};
  auto first = c.lease(want);
  std::multiset<std::string> types;
  for (auto& j : first)
    types.insert(j.type);
  CHECK(types == std::multiset<std::string>{"email.send", "pska.digest", "pska.digest"});
  CHECK(c.lease(want).empty());
  for (auto& j : first)
    if (j.type == "pska.digest") {
      c.complete(j);
      break;
    }
  CHECK(c.lease(want).size() == 1);
}

TEST_CASE("A completion's transaction creates the follow-up run job-<id>, once (CJ-40)", "[jobs][contract]") {
  auto path = fresh_db(tmp_name("follow_up"));
  job_client c(path);
  auto j = job_client::job("email.send", "acme", R"({"to":"a@example.com"})");
  j.on_complete = R"({"start_run":{"messages":[{"role":"user","content":"Sent {{job.id}}"}],"metadata":{"r":"{{job.result}}"}}})";
  auto bad = j;
  bad.on_complete = R"({"start_run":{"messages":"{{job.result}}"}})";
  auto queued = c.enqueue({j, bad}).jobs;
  auto leased = c.lease(2);
  REQUIRE(leased.size() == 2);
  for (auto& l : leased) {
    auto done = c.complete(l, R"({"id":7})");
    REQUIRE(done.fence == job_fence::done);
    if (l.id == queued[0].id) {
      CHECK(done.job.on_complete_run_id == std::optional<std::string>("job-" + l.id));
      CHECK_FALSE(done.job.on_complete_error.has_value());
    } else {
      CHECK_FALSE(done.job.on_complete_run_id.has_value());
      CHECK(done.job.on_complete_error.has_value());
    }
  }
  store_client runs(path);
  auto run = store_client::ok(runs.get("job-" + queued[0].id));
  CHECK(run.status == "queued");
  CHECK(run.tenant_key == "acme");
  CHECK(run.user_key == "acme:u");
  CHECK(run.request.find("Sent " + queued[0].id) != std::string::npos);
  CHECK(run.metadata.find(R"("r":{"id":7})") != std::string::npos);
  CHECK(std::holds_alternative<caf::error>(runs.get("job-" + queued[1].id)));
}

TEST_CASE("A batch of completions answers each item on its own (CJ-35)", "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("batch_complete")));
  c.add();
  c.add();
  auto leased = c.lease(2);
  REQUIRE(leased.size() == 2);
  job_completions batch;
  batch.items.push_back({leased[0].id, leased[0].lease_token, "1"});
  batch.items.push_back({leased[1].id, "lt_9_00000000000000000000000000000000", "2"});
  batch.items.push_back({"job_ffffffffffffffffffffffffffffffff", leased[0].lease_token, "3"});
  batch.items.push_back({leased[0].id, leased[0].lease_token, "4"});
  auto answers = store_client::ok(c.ask<std::vector<job_answer>>(job_complete_atom::value, batch));
  REQUIRE(answers.size() == 4);
  CHECK(answers[0].fence == job_fence::done);
  CHECK(answers[1].fence == job_fence::stale_lease);
  CHECK(answers[2].fence == job_fence::not_found);
  CHECK(answers[3].fence == job_fence::unchanged);
  CHECK(answers[3].job.result == std::optional<std::string>("1"));
  // Another tenant's scope completes nothing.
  batch.items = {{leased[1].id, leased[1].lease_token, "5"}};
  batch.scope = {"globex"};
  CHECK(store_client::ok(c.ask<std::vector<job_answer>>(job_complete_atom::value, batch)).at(0).fence ==
        job_fence::not_found);
}

TEST_CASE("A released lease goes back to the queue uncharged, its token fenced (CJ-33)", "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("release")));
  c.add();
  auto leased = c.lease(1).at(0);
  job_release r;
  r.leases.emplace_back(leased.id, leased.lease_token);
  CHECK(store_client::ok(c.ask<int64_t>(job_release_atom::value, r)) == 1);
  auto back = c.get(leased.id).job;
  CHECK(back.status == "queued");
  CHECK(back.attempt == 0);
  CHECK(c.complete(leased).fence == job_fence::stale_lease);
  CHECK(c.lease(1).at(0).attempt == 1);
}

TEST_CASE("Listings page by id in either order, and stats count each type's statuses (CJ-39)", "[jobs][contract]") {
  job_client c(fresh_db(tmp_name("list")));
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(c.add(i < 3 ? "email.send" : "report.build", i % 2 ? "a" : "b").id);
  job_query q;
  q.want.limit = 2;
  auto page = store_client::ok(c.ask<job_page>(job_list_atom::value, q));
  REQUIRE(page.jobs.size() == 2);
  CHECK(page.has_more);
  CHECK(page.jobs[0].id == ids[4]);
  q.want.after = page.jobs[1].id;
  auto next = store_client::ok(c.ask<job_page>(job_list_atom::value, q));
  CHECK(next.jobs.at(0).id == ids[2]);
  q = {};
  q.want.ascending = true;
  q.scope = {"a"};
  auto mine = store_client::ok(c.ask<job_page>(job_list_atom::value, q));
  REQUIRE(mine.jobs.size() == 2);
  CHECK(mine.jobs[0].id == ids[1]);
  CHECK_FALSE(mine.has_more);
  q.scope = {""}; // AS-84: the tenant "" sees its own jobs, not every tenant's
  CHECK(store_client::ok(c.ask<job_page>(job_list_atom::value, q)).jobs.empty());
  CHECK(store_client::ok(c.ask<job_counts>(job_stats_atom::value, job_scope{""})).empty());
  auto counts = store_client::ok(c.ask<job_counts>(job_stats_atom::value, job_scope{}));
  REQUIRE(counts.size() == 2);
  CHECK(counts[0].type == "email.send");
  CHECK(counts[0].count == 3);
  CHECK(counts[0].oldest_ready_age_ms.has_value());
}

TEST_CASE("Concurrent claims lease every job exactly once (CJ-18)", "[jobs][contract]") {
  auto path = fresh_db(tmp_name("concurrent"));
  {
    job_client c(path);
    std::vector<jobs::new_job> batch;
    for (int i = 0; i < 200; ++i)
      batch.push_back(job_client::job("email.send", "t" + std::to_string(i % 7)));
    c.enqueue(batch);
  }
  std::mutex mutex;
  std::multiset<std::string> seen;
  std::vector<std::thread> claimers;
  for (int w = 0; w < 4; ++w)
    claimers.emplace_back([&, w] {
      job_client c(path);
      job_claim_request want;
      want.worker_id = "w" + std::to_string(w);
      want.max_jobs = 7;
      for (;;) {
        auto got = c.lease(want);
        if (got.empty())
          return;
        std::lock_guard<std::mutex> hold(mutex);
        for (auto& j : got)
          seen.insert(j.id);
      }
    });
  for (auto& t : claimers)
    t.join();
  CHECK(seen.size() == 200);
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 200);
}

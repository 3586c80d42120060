// The SQLite store adapter: sessions are kept per (tenant, user, session) and survive a restart; the run
// contract of the store port (AS-49..AS-56, AS-82, AS-83) holds.
#include "io/store_client.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <thread>
#include <variant>

#include <unistd.h>

using namespace troupe;

namespace {

std::string temp_db() {
  auto dir = std::filesystem::temp_directory_path() / ("troupe-store-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / "troupe.db";
  std::filesystem::remove(path);
  return path.string();
}

session_record record(std::string tenant, std::string user, std::string session, std::string run) {
  session_record r;
  r.tenant_key = std::move(tenant);
  r.user_key = std::move(user);
  r.session_id = std::move(session);
  r.created_at = r.updated_at = "2026-01-01T00:00:00.000000+00:00";
  r.last_run_id = std::move(run);
  r.last_status = "completed";
  r.last_query = "q";
  r.last_answer = "a";
  return r;
}

} // namespace

TEST_CASE("sessions are kept per tenant, user and session id and survive a restart", "[store]") {
  auto path = temp_db();
  {
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    auto store = io::spawn_sqlite_store(sys, path);
    REQUIRE(std::holds_alternative<store_actor>(store));
    auto s = std::get<store_actor>(store);
    caf::scoped_actor self{sys};
    self->send(s, save_session_atom::value, record("t", "t:u", "s1", "r1"));
    self->send(s, save_session_atom::value, record("t", "t:u", "s1", "r2"));
    self->send(s, save_session_atom::value, record("other", "t:u", "s1", "r3"));
    // a request after the sends is answered after them: the writes are done
    self->request(s, std::chrono::seconds(5), get_session_atom::value, std::string("t"), std::string("t:u"),
                  std::string("s1"))
      .receive([](session_record&) {}, [](caf::error& err) { FAIL(message_of(err)); });
    self->send_exit(s, caf::exit_reason::user_shutdown);
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto store = io::spawn_sqlite_store(sys, path);
  REQUIRE(std::holds_alternative<store_actor>(store));
  auto s = std::get<store_actor>(store);
  caf::scoped_actor self{sys};
  self->request(s, std::chrono::seconds(5), get_session_atom::value, std::string("t"), std::string("t:u"),
                std::string("s1"))
    .receive(
      [](session_record& r) {
        CHECK(r.run_count == 2);
        CHECK(r.last_run_id == "r2");
      },
      [](caf::error& err) { FAIL(message_of(err)); });
  self->request(s, std::chrono::seconds(5), get_session_atom::value, std::string("other"), std::string("t:u"),
                std::string("s1"))
    .receive([](session_record& r) { CHECK(r.last_run_id == "r3"); },
             [](caf::error& err) { FAIL(message_of(err)); });
  self->request(s, std::chrono::seconds(5), get_session_atom::value, std::string("t"), std::string("t:u"),
                std::string("nope"))
    .receive([](session_record&) { FAIL("found a session that was never saved"); },
             [](caf::error& err) { CHECK(code_of(err) == errc::not_found); });
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

TEST_CASE("an unopenable store path is an error that names the file", "[store]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto store = io::spawn_sqlite_store(sys, "/proc/nonexistent/dir/troupe.db");
  REQUIRE(std::holds_alternative<std::string>(store));
  CHECK(std::get<std::string>(store).find("/proc/nonexistent/dir/troupe.db") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------------
// The store port's run contract (AS-49..AS-56, AS-82, AS-83), driven through store_actor messages only,
// so another adapter (PostgreSQL) can run the same cases by swapping `open_store`.

namespace {

using namespace troupe::test;
using namespace std::chrono_literals;

std::vector<int64_t> sequences(const run_events_page& page) {
  std::vector<int64_t> out;
  for (auto& e : page.events)
    out.push_back(e.sequence);
  return out;
}

std::vector<std::string> ids(const std::vector<run_record>& runs) {
  std::vector<std::string> out;
  for (auto& r : runs)
    out.push_back(r.run_id);
  return out;
}

std::string json_string(const std::string& text, const char* key) {
  auto doc = protocol::json::parse(text);
  if (!doc)
    FAIL("not JSON: " << text);
  return protocol::json::get_string(*doc, key, "<absent>");
}

// Asks again every 20 ms until `done` holds or the deadline passes; true when it held.
bool poll_until(std::function<bool()> done, std::chrono::milliseconds deadline = 5s) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

} // namespace

TEST_CASE("create_run stores a queued run and refuses a second run with the same id (AS-49)", "[store][contract][runs]") {
  store_client c(fresh_db("create"));
  auto r = store_client::ok(c.create(store_client::run("r1", 3)));
  CHECK(r.status == "queued");
  CHECK(r.attempts == 0);
  CHECK(r.lease_epoch == 0);
  CHECK(r.event_count == 0);
  CHECK_FALSE(r.created_at.empty());

  auto stored = store_client::ok(c.get("r1"));
  CHECK(stored.status == "queued");
  CHECK(stored.run_kind == "background");
  CHECK(stored.session_id == "s1");
  CHECK(stored.max_attempts == 3);
  CHECK(stored.metadata == R"({"k":"v"})");
  CHECK(stored.request == R"({"messages":[{"role":"user","content":"hi"}]})");
  CHECK(stored.worker_id.empty());
  CHECK(stored.lease_expires_at.empty());

  auto err = store_client::refused(c.create(store_client::run("r1", 3, "another-session")));
  CHECK(code_of(err) == errc::conflict);
  CHECK(message_of(err) == "Run already exists");
  CHECK(store_client::ok(c.get("r1")).session_id == "s1"); // the first run is untouched

  auto missing = store_client::refused(c.get("nope"));
  CHECK(code_of(missing) == errc::not_found);
  CHECK(message_of(missing) == "Run not found");
}

TEST_CASE("a claim takes ready queued runs oldest first and starts each attempt under the worker's lease (AS-53, "
          "AS-54)",
          "[store][contract][runs]") {
  store_client c(fresh_db("claim"));
  for (auto id : {"a", "b", "c"})
    store_client::ok(c.create(store_client::run(id)));
  auto before = sys_clock::now();
  auto first = store_client::ok(c.claim("worker-1", 30, 2));
  CHECK(ids(first.runs) == std::vector<std::string>{"a", "b"});
  CHECK(first.next_ready_seconds == -1);
  for (auto& r : first.runs) {
    CHECK(r.status == "running");
    CHECK(r.attempts == 1);
    CHECK(r.lease_epoch == 1);
    CHECK(r.worker_id == "worker-1");
    CHECK_FALSE(r.started_at.empty());
    auto lease = when(r.lease_expires_at);
    CHECK(lease >= before + 29s);
    CHECK(lease <= sys_clock::now() + 31s);
  }
  // the claim is durable: a read sees what the claim answered
  auto a = store_client::ok(c.get("a"));
  CHECK(a.status == "running");
  CHECK(a.lease_epoch == 1);
  CHECK(a.worker_id == "worker-1");
  CHECK(store_client::ok(c.get("c")).status == "queued");

  auto second = store_client::ok(c.claim("worker-2", 30, 5));
  REQUIRE(ids(second.runs) == std::vector<std::string>{"c"});
  CHECK(second.runs[0].worker_id == "worker-2");
  CHECK(second.runs[0].lease_epoch == 1);

  CHECK(store_client::ok(c.claim("worker-2", 30, 5)).runs.empty()); // running runs are not claimed again
  CHECK(store_client::ok(c.get("a")).worker_id == "worker-1");
}

TEST_CASE("a run re-queued with a retry delay is not claimed before its retry_after, and the claim says when it is "
          "ready (AS-53)",
          "[store][contract][runs]") {
  store_client c(fresh_db("retry"));
  auto r = c.create_and_claim("r1", "worker-1", 60, 3);
  auto t = transition_of(r, "queued");
  t.last_error = "upstream 503";
  t.retry_seconds = 0.8;
  auto requeued = store_client::ok(c.transition(t));
  CHECK(requeued.status == "queued");
  CHECK(requeued.last_error == "upstream 503");
  CHECK(requeued.lease_expires_at.empty());
  REQUIRE_FALSE(requeued.retry_after.empty());
  auto retry_after = when(requeued.retry_after);
  CHECK(seconds_until(requeued.retry_after) > 0.5);
  CHECK(seconds_until(requeued.retry_after) <= 0.8);

  store_client::ok(c.create(store_client::run("ready"))); // created later, but ready now
  auto early = store_client::ok(c.claim("worker-2", 60, 5));
  CHECK(ids(early.runs) == std::vector<std::string>{"ready"});
  CHECK(early.next_ready_seconds > 0);
  CHECK(early.next_ready_seconds <= 0.8);
  CHECK(store_client::ok(c.get("r1")).status == "queued");

  // polled, not slept: the run is claimed once its retry_after has passed, never before
  run_claim later;
  bool claimed = poll_until([&] {
    auto asked = sys_clock::now();
    later = store_client::ok(c.claim("worker-2", 60, 5));
    if (later.runs.empty()) {
      CHECK(later.next_ready_seconds >= 0);
      return false;
    }
    CHECK(asked + 200ms >= retry_after); // not claimed by a claim sent well before the retry time
    return true;
  });
  REQUIRE(claimed);
  REQUIRE(ids(later.runs) == std::vector<std::string>{"r1"});
  auto& again = later.runs[0];
  CHECK(sys_clock::now() >= retry_after);
  CHECK(again.status == "running");
  CHECK(again.attempts == 2);
  CHECK(again.lease_epoch == 2);
  CHECK(again.worker_id == "worker-2");
  CHECK(again.retry_after.empty());
  CHECK(later.next_ready_seconds == -1);
}

TEST_CASE("appends at the current epoch page back in order; after_sequence is exclusive and limit 0 means all "
          "(AS-51)",
          "[store][contract][runs]") {
  store_client c(fresh_db("append"));
  auto r = c.create_and_claim("r1");
  std::vector<std::string> types{"session_start", "think", "step_end", "session_end"};
  for (int64_t i = 0; i < 4; ++i)
    CHECK(store_client::ok(c.append("r1", r.lease_epoch, i, types[static_cast<std::size_t>(i)])));

  auto all = store_client::ok(c.events("r1", -1, 0));
  CHECK(sequences(all) == std::vector<int64_t>{0, 1, 2, 3});
  for (std::size_t i = 0; i < all.events.size(); ++i) {
    CHECK(all.events[i].type == types[i]);
    CHECK(json_string(all.events[i].json, "type") == types[i]);
  }
  CHECK(all.run.event_count == 4);
  CHECK(all.run.run_id == "r1");
  CHECK(sequences(store_client::ok(c.events("r1", 1, 0))) == std::vector<int64_t>{2, 3});
  CHECK(sequences(store_client::ok(c.events("r1", -1, 2))) == std::vector<int64_t>{0, 1});
  CHECK(sequences(store_client::ok(c.events("r1", 1, 1))) == std::vector<int64_t>{2});
  CHECK(store_client::ok(c.events("r1", 3, 0)).events.empty());
  CHECK(code_of(store_client::refused(c.events("nope", -1, 0))) == errc::not_found);
}

TEST_CASE("an append whose sequence is not the run's next one is refused and stores nothing (AS-51)",
          "[store][contract][runs]") {
  store_client c(fresh_db("append-sequence"));
  auto r = c.create_and_claim("r1");
  store_client::ok(c.append("r1", r.lease_epoch, 0, "session_start"));
  CHECK(code_of(store_client::refused(c.append("r1", r.lease_epoch, 0, "think"))) == errc::conflict); // repeated
  CHECK(code_of(store_client::refused(c.append("r1", r.lease_epoch, 5, "think"))) == errc::conflict); // a gap
  auto page = store_client::ok(c.events("r1", -1, 0));
  CHECK(sequences(page) == std::vector<int64_t>{0});
  CHECK(page.events[0].type == "session_start");
  CHECK(page.run.event_count == 1);
}

TEST_CASE("once recovery bumps the epoch, writes at the old epoch are refused and leave nothing in the log (AS-82)",
          "[store][contract][runs][fencing]") {
  store_client c(fresh_db("fence-recovery"));
  auto r = c.create_and_claim("r1", "worker-1", 60, 3);
  REQUIRE(r.lease_epoch == 1);
  store_client::ok(c.append("r1", 1, 0, "session_start"));

  auto report = store_client::ok(c.recover(true));
  CHECK(report.requeued == 1);
  CHECK(report.failed == 0);
  auto recovered = store_client::ok(c.get("r1"));
  REQUIRE(recovered.status == "queued");
  CHECK(recovered.lease_epoch == 2);
  CHECK(recovered.last_error == "Recovered stale running lease");
  CHECK(recovered.lease_expires_at.empty());

  auto append = store_client::refused(c.append("r1", 1, 2, "think"));
  CHECK(code_of(append) == errc::conflict);
  auto page = store_client::ok(c.events("r1", -1, 0));
  CHECK(sequences(page) == std::vector<int64_t>{0, 1}); // session_start, then the error ending the attempt
  CHECK(page.run.event_count == 2);

  auto done = transition_of(r, "completed");
  done.trace.final_content = "stale answer";
  CHECK(code_of(store_client::refused(c.transition(done))) == errc::conflict);
  auto requeue = transition_of(r, "queued");
  requeue.retry_seconds = 100;
  CHECK(code_of(store_client::refused(c.transition(requeue))) == errc::conflict);
  auto after = store_client::ok(c.get("r1"));
  CHECK(after.status == "queued");
  CHECK(after.lease_epoch == 2);
  CHECK(after.completed_at.empty());
  CHECK(after.retry_after.empty());
  CHECK(after.updated_at == recovered.updated_at);
  CHECK(code_of(store_client::refused(c.trace("r1"))) == errc::not_found); // no trace from the stale attempt

  CHECK(code_of(store_client::refused(c.renew("r1", 1, 60))) == errc::conflict);
  CHECK(store_client::ok(c.get("r1")).lease_expires_at.empty());
}

TEST_CASE("once another worker claims the run, the old attempt's writes are refused and the new holder's accepted "
          "(AS-82)",
          "[store][contract][runs][fencing]") {
  store_client c(fresh_db("fence-claim"));
  auto first = c.create_and_claim("r1", "worker-1", 60, 3);
  store_client::ok(c.append("r1", first.lease_epoch, 0, "session_start"));
  store_client::ok(c.recover(true));
  auto taken = store_client::ok(c.claim("worker-2", 60, 1));
  REQUIRE(taken.runs.size() == 1);
  auto second = taken.runs[0];
  CHECK(second.lease_epoch == 3);
  CHECK(second.attempts == 2);
  CHECK(second.event_count == 2); // session_start, then the error ending the first attempt

  // the first attempt, still running somewhere, tries to continue at epoch 1
  CHECK(code_of(store_client::refused(c.append("r1", first.lease_epoch, 2, "think"))) == errc::conflict);
  // the recovered epoch 2 never held the run: it is refused too
  CHECK(code_of(store_client::refused(c.append("r1", 2, 2, "think"))) == errc::conflict);
  CHECK(code_of(store_client::refused(c.transition(transition_of(first, "completed")))) == errc::conflict);
  CHECK(code_of(store_client::refused(c.renew("r1", first.lease_epoch, 600))) == errc::conflict);

  auto held = store_client::ok(c.get("r1"));
  CHECK(held.status == "running");
  CHECK(held.worker_id == "worker-2");
  CHECK(held.lease_epoch == 3);
  CHECK(held.event_count == 2);
  CHECK(held.lease_expires_at == second.lease_expires_at); // the refused renewal moved nothing
  CHECK(sequences(store_client::ok(c.events("r1", -1, 0))) == std::vector<int64_t>{0, 1});

  // the holder continues the shared sequence
  CHECK(store_client::ok(c.append("r1", 3, 2, "session_start")));
  CHECK(store_client::ok(c.renew("r1", 3, 600)));
  CHECK(seconds_until(store_client::ok(c.get("r1")).lease_expires_at) > 500);
  auto finished = store_client::ok(c.transition(transition_of(second, "completed")));
  CHECK(finished.status == "completed");
  CHECK(finished.event_count == 3);
}

TEST_CASE("a terminal run refuses appends and renewals even at its last epoch (AS-82)", "[store][contract][runs][fencing]") {
  store_client c(fresh_db("fence-terminal"));
  auto r = c.create_and_claim("r1");
  store_client::ok(c.append("r1", r.lease_epoch, 0, "session_start"));
  store_client::ok(c.transition(transition_of(r, "completed")));
  CHECK(code_of(store_client::refused(c.append("r1", r.lease_epoch, 1, "think"))) == errc::conflict);
  CHECK(code_of(store_client::refused(c.renew("r1", r.lease_epoch, 60))) == errc::conflict);
  CHECK(code_of(store_client::refused(c.transition(transition_of(r, "failed")))) == errc::conflict);
  auto after = store_client::ok(c.get("r1"));
  CHECK(after.status == "completed");
  CHECK(after.event_count == 1);
  CHECK(after.lease_expires_at.empty());
}

TEST_CASE("recovery leaves runs with unexpired leases alone and re-queues those whose lease expired (AS-83)",
          "[store][contract][runs][recovery]") {
  store_client c(fresh_db("recover-expired"));
  auto shortlived = c.create_and_claim("short", "worker-1", 0.5, 3);
  auto healthy = c.create_and_claim("healthy", "worker-1", 600, 3);
  auto queued = store_client::ok(c.create(store_client::run("queued")));

  auto early = store_client::ok(c.recover(false));
  CHECK(early.requeued + early.failed == 0);
  CHECK(store_client::ok(c.get("short")).status == "running");

  recovery_report report;
  bool recovered = poll_until([&] {
    report = store_client::ok(c.recover(false));
    if (report.requeued + report.failed == 0)
      return false;
    CHECK(sys_clock::now() >= when(shortlived.lease_expires_at)); // never recovered before its lease expired
    return true;
  });
  REQUIRE(recovered);
  CHECK(report.requeued == 1);
  CHECK(report.failed == 0);
  auto s = store_client::ok(c.get("short"));
  CHECK(s.status == "queued");
  CHECK(s.lease_epoch == shortlived.lease_epoch + 1);
  CHECK(s.last_error == "Recovered stale running lease");
  CHECK(s.lease_expires_at.empty());
  CHECK(s.retry_after.empty()); // ready again at once
  auto h = store_client::ok(c.get("healthy"));
  CHECK(h.status == "running");
  CHECK(h.lease_epoch == healthy.lease_epoch);
  CHECK(h.worker_id == "worker-1");
  CHECK(h.lease_expires_at == healthy.lease_expires_at);
  auto q = store_client::ok(c.get("queued"));
  CHECK(q.status == "queued");
  CHECK(q.lease_epoch == queued.lease_epoch);

  auto quiet = store_client::ok(c.recover(false));
  CHECK(quiet.requeued + quiet.failed == 0);
}

TEST_CASE("recovery fails a run whose lease expired with no attempts left, and writes its trace (AS-83, AS-55)",
          "[store][contract][runs][recovery]") {
  store_client c(fresh_db("recover-exhausted"));
  auto r = c.create_and_claim("r1", "worker-1", 0.3, 1);
  store_client::ok(c.append("r1", r.lease_epoch, 0, "session_start"));
  recovery_report report;
  REQUIRE(poll_until([&] {
    report = store_client::ok(c.recover(false));
    return report.requeued + report.failed > 0;
  }));
  CHECK(report.failed == 1);
  CHECK(report.requeued == 0);
  auto failed = store_client::ok(c.get("r1"));
  CHECK(failed.status == "failed");
  CHECK(failed.error == "Run lease expired and no attempts remain");
  CHECK(failed.lease_epoch == r.lease_epoch + 1);
  CHECK_FALSE(failed.completed_at.empty());
  CHECK(failed.lease_expires_at.empty());
  CHECK(failed.event_count == 2); // session_start, then the error ending the attempt

  auto trace = store_client::ok(c.trace("r1"));
  CHECK(json_string(trace, "run_id") == "r1");
  CHECK(json_string(trace, "status") == "failed");
  CHECK(json_string(trace, "trace_type") == "background_run");
  CHECK(json_string(trace, "error") == "Run lease expired and no attempts remain");
  CHECK(store_client::ok(c.traces("", 10)).total_count == 1);
  // the failed run is not retried
  CHECK(store_client::ok(c.claim("worker-2", 60, 5)).runs.empty());
  CHECK(code_of(store_client::refused(c.append("r1", r.lease_epoch, 1, "think"))) == errc::conflict);
}

TEST_CASE("recovery of every running run also fails those with no attempts left (AS-83)", "[store][contract][runs][recovery]") {
  store_client c(fresh_db("recover-all-exhausted"));
  auto r = c.create_and_claim("r1", "worker-1", 600, 1);
  auto report = store_client::ok(c.recover(true));
  CHECK(report.failed == 1);
  CHECK(report.requeued == 0);
  auto failed = store_client::ok(c.get("r1"));
  CHECK(failed.status == "failed");
  CHECK(failed.error == "Run lease expired and no attempts remain");
  CHECK(failed.lease_epoch == r.lease_epoch + 1);
}

TEST_CASE("cancelling a queued run ends it cancelled with cancelled_at and no events, and it never starts (AS-52)",
          "[store][contract][runs][cancel]") {
  store_client c(fresh_db("cancel-queued"));
  store_client::ok(c.create(store_client::run("r1")));
  auto r = store_client::ok(c.cancel("r1"));
  CHECK(r.status == "cancelled");
  CHECK_FALSE(r.cancelled_at.empty());
  CHECK(r.event_count == 0);
  auto stored = store_client::ok(c.get("r1"));
  CHECK(stored.status == "cancelled");
  CHECK_FALSE(stored.cancelled_at.empty());
  CHECK(stored.attempts == 0);
  CHECK(store_client::ok(c.events("r1", -1, 0)).events.empty());
  CHECK(store_client::ok(c.claim("worker-1", 60, 5)).runs.empty());
  auto missing = store_client::refused(c.cancel("nope"));
  CHECK(code_of(missing) == errc::not_found);
  CHECK(message_of(missing) == "Run not found");
}

TEST_CASE("cancelling a running run no live attempt holds fences it and ends it with the Run cancelled event at the "
          "next sequence (AS-52, AS-82)",
          "[store][contract][runs][cancel]") {
  store_client c(fresh_db("cancel-running"));
  auto r = c.create_and_claim("r1");
  store_client::ok(c.append("r1", r.lease_epoch, 0, "session_start"));
  store_client::ok(c.append("r1", r.lease_epoch, 1, "think"));
  auto cancelled = store_client::ok(c.cancel("r1"));
  CHECK(cancelled.status == "cancelled");
  CHECK(cancelled.lease_epoch == r.lease_epoch + 1);
  CHECK(cancelled.event_count == 3);
  CHECK_FALSE(cancelled.cancelled_at.empty());
  CHECK(cancelled.lease_expires_at.empty());

  auto page = store_client::ok(c.events("r1", -1, 0));
  REQUIRE(sequences(page) == std::vector<int64_t>{0, 1, 2});
  auto& last = page.events[2];
  CHECK(last.type == "error");
  CHECK(json_string(last.json, "type") == "error");
  CHECK(json_string(last.json, "content") == "Run cancelled");
  CHECK(json_string(last.json, "run_id") == "r1");
  CHECK(last.json.find(R"("error_type":"CancelledError")") != std::string::npos);
  CHECK(page.run.status == "cancelled");
  CHECK(page.run.event_count == 3);

  // the attempt that held epoch 1 is fenced
  CHECK(code_of(store_client::refused(c.append("r1", r.lease_epoch, 3, "think"))) == errc::conflict);
  CHECK(code_of(store_client::refused(c.transition(transition_of(r, "completed")))) == errc::conflict);
  CHECK(store_client::ok(c.get("r1")).status == "cancelled");
  CHECK(json_string(store_client::ok(c.trace("r1")), "status") == "cancelled");
}

TEST_CASE("cancelling a terminal run returns it unchanged (AS-52)", "[store][contract][runs][cancel]") {
  store_client c(fresh_db("cancel-terminal"));
  auto r = c.create_and_claim("r1");
  store_client::ok(c.append("r1", r.lease_epoch, 0, "session_start"));
  auto done = store_client::ok(c.transition(transition_of(r, "completed")));
  auto again = store_client::ok(c.cancel("r1"));
  CHECK(again.status == "completed");
  CHECK(again.cancelled_at.empty());
  CHECK(again.event_count == 1);
  CHECK(again.lease_epoch == done.lease_epoch);
  auto stored = store_client::ok(c.get("r1"));
  CHECK(stored.status == "completed");
  CHECK(stored.cancelled_at.empty());
  CHECK(stored.completed_at == done.completed_at);
  CHECK(stored.updated_at == done.updated_at);
  CHECK(stored.event_count == 1);
  CHECK(sequences(store_client::ok(c.events("r1", -1, 0))) == std::vector<int64_t>{0});
}

TEST_CASE("a new chat run begins running at epoch 1 on its first attempt (AS-10, AS-54)", "[store][contract][runs][chat]") {
  store_client c(fresh_db("chat-new"));
  auto before = sys_clock::now();
  auto r = store_client::ok(c.begin_chat(store_client::run("chat1", 1, "s1", "chat"), "worker-1", 30));
  CHECK(r.run_kind == "chat");
  CHECK(r.status == "running");
  CHECK(r.attempts == 1);
  CHECK(r.lease_epoch == 1);
  CHECK(r.event_count == 0);
  CHECK(r.worker_id == "worker-1");
  CHECK_FALSE(r.started_at.empty());
  CHECK(when(r.lease_expires_at) >= before + 29s);
  auto stored = store_client::ok(c.get("chat1"));
  CHECK(stored.status == "running");
  CHECK(stored.lease_epoch == 1);
  CHECK(store_client::ok(c.append("chat1", 1, 0, "session_start")));
  // a running chat run is not a queued run: no claim takes it
  CHECK(store_client::ok(c.claim("worker-2", 30, 5)).runs.empty());
}

TEST_CASE("a terminal chat run reopens as its next attempt and continues its event sequence (AS-10, AS-51)",
          "[store][contract][runs][chat]") {
  store_client c(fresh_db("chat-reopen"));
  auto first = store_client::ok(c.begin_chat(store_client::run("chat1", 1, "s1", "chat"), "worker-1", 30));
  for (int64_t i = 0; i < 3; ++i)
    store_client::ok(c.append("chat1", first.lease_epoch, i, i == 0 ? "session_start" : "think"));
  auto t = transition_of(first, "failed");
  t.error = "LLM call failed: boom";
  store_client::ok(c.transition(t));

  auto second = store_client::ok(c.begin_chat(store_client::run("chat1", 1, "s1", "chat"), "worker-2", 30));
  CHECK(second.status == "running");
  CHECK(second.attempts == 2);
  CHECK(second.lease_epoch == 2);
  CHECK(second.event_count == 3); // the attempt's first sequence
  CHECK(second.worker_id == "worker-2");
  CHECK(second.error.empty());
  CHECK(second.completed_at.empty());
  CHECK_FALSE(second.lease_expires_at.empty());

  CHECK(code_of(store_client::refused(c.append("chat1", first.lease_epoch, 3, "session_start"))) == errc::conflict);
  CHECK(store_client::ok(c.append("chat1", second.lease_epoch, 3, "session_start")));
  CHECK(sequences(store_client::ok(c.events("chat1", -1, 0))) == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("begin_chat refuses a run id that a live chat run or any background run holds (AS-10)",
          "[store][contract][runs][chat]") {
  store_client c(fresh_db("chat-conflict"));
  auto live = store_client::ok(c.begin_chat(store_client::run("chat1", 1, "s1", "chat"), "worker-1", 30));
  auto err = store_client::refused(c.begin_chat(store_client::run("chat1", 1, "s1", "chat"), "worker-2", 30));
  CHECK(code_of(err) == errc::conflict);
  CHECK(message_of(err) == "Run already exists");
  auto still = store_client::ok(c.get("chat1"));
  CHECK(still.attempts == live.attempts);
  CHECK(still.lease_epoch == live.lease_epoch);
  CHECK(still.worker_id == "worker-1");

  store_client::ok(c.create(store_client::run("bg1")));
  CHECK(code_of(store_client::refused(c.begin_chat(store_client::run("bg1", 1, "s1", "chat"), "worker-1", 30)))
        == errc::conflict);
  auto bg = store_client::ok(c.get("bg1"));
  CHECK(bg.status == "queued");
  CHECK(bg.run_kind == "background");
  CHECK(bg.attempts == 0);

  store_client::ok(c.cancel("bg1")); // a terminal background run is not reopened as a chat either
  CHECK(code_of(store_client::refused(c.begin_chat(store_client::run("bg1", 1, "s1", "chat"), "worker-1", 30)))
        == errc::conflict);
  CHECK(store_client::ok(c.get("bg1")).status == "cancelled");
}

TEST_CASE("begin_chat refuses another caller's finished chat run and leaves its attempts, events and trace alone "
          "(AS-10, AS-84)",
          "[store][contract][runs][chat]") {
  store_client c(fresh_db("chat-foreign"));
  auto first = store_client::ok(c.begin_chat(store_client::run("chat1", 1, "s1", "chat"), "worker-1", 30));
  store_client::ok(c.append("chat1", first.lease_epoch, 0, "session_start"));
  auto t = transition_of(first, "completed");
  t.trace.final_content = "the owner's answer";
  store_client::ok(c.transition(t));
  auto trace_before = store_client::ok(c.trace("chat1"));

  auto other_tenant = store_client::run("chat1", 1, "s1", "chat");
  other_tenant.tenant_key = "mallory";
  other_tenant.user_key = "mallory:m";
  auto other_user = store_client::run("chat1", 1, "s1", "chat");
  other_user.user_key = "t:someone-else";
  for (auto& intruder : {other_tenant, other_user}) {
    auto err = store_client::refused(c.begin_chat(intruder, "worker-2", 30));
    CHECK(code_of(err) == errc::conflict);
    CHECK(message_of(err) == "Run already exists");
  }
  auto stored = store_client::ok(c.get("chat1"));
  CHECK(stored.status == "completed");
  CHECK(stored.attempts == 1);
  CHECK(stored.lease_epoch == first.lease_epoch);
  CHECK(store_client::ok(c.trace("chat1")) == trace_before);
  // the owner still reopens it
  CHECK(store_client::ok(c.begin_chat(store_client::run("chat1", 1, "s1", "chat"), "worker-3", 30)).attempts == 2);
}

TEST_CASE("recovery ends every recovered attempt with an error event at its next sequence, re-queued or failed "
          "(AS-14, AS-83, AS-90)",
          "[store][contract][runs][recovery]") {
  store_client c(fresh_db("recover-error-event"));
  auto retried = c.create_and_claim("bg", "worker-1", 600, 3);
  store_client::ok(c.append("bg", retried.lease_epoch, 0, "session_start"));
  auto chat = store_client::ok(c.begin_chat(store_client::run("chat1", 1, "s2", "chat"), "worker-1", 600));
  store_client::ok(c.append("chat1", chat.lease_epoch, 0, "session_start"));
  store_client::ok(c.append("chat1", chat.lease_epoch, 1, "ask_user"));

  auto report = store_client::ok(c.recover(true));
  CHECK(report.requeued == 1);
  CHECK(report.failed == 1);
  CHECK(report.ended_run_ids == std::vector<std::string>{"chat1"});

  auto bg = store_client::ok(c.events("bg", -1, 0));
  REQUIRE(sequences(bg) == std::vector<int64_t>{0, 1});
  CHECK(bg.events[1].type == "error");
  CHECK(json_string(bg.events[1].json, "content") == "Recovered stale running lease");
  CHECK(json_string(bg.events[1].json, "session_id") == "s1");
  CHECK(json_string(bg.events[1].json, "event_id") == "bg:1");
  CHECK(bg.events[1].json.find(R"("error_type":"lease_expired")") != std::string::npos);
  CHECK(bg.run.status == "queued");
  CHECK(bg.run.event_count == 2);

  auto failed = store_client::ok(c.events("chat1", -1, 0));
  REQUIRE(sequences(failed) == std::vector<int64_t>{0, 1, 2});
  CHECK(failed.events[2].type == "error");
  CHECK(json_string(failed.events[2].json, "content") == "Run lease expired and no attempts remain");
  CHECK(failed.run.status == "failed");
  CHECK(failed.run.event_count == 3);
  CHECK(json_string(store_client::ok(c.trace("chat1")), "status") == "failed");

  // the next attempt of the re-queued run continues after the error event
  auto next = store_client::ok(c.claim("worker-2", 60, 1));
  REQUIRE(next.runs.size() == 1);
  CHECK(next.runs[0].event_count == 2);
  CHECK(store_client::ok(c.append("bg", next.runs[0].lease_epoch, 2, "session_start")));
}

TEST_CASE("recovery re-queues an attempt that wrote nothing without an event, so every attempt in the log "
          "starts with session_start, and adds none to one that ended with its own error (AS-14, AS-83)",
          "[store][contract][runs][recovery]") {
  store_client c(fresh_db("recover-unwritten"));
  auto first = c.create_and_claim("bg", "worker-1", 600, 3);
  store_client::ok(c.append("bg", first.lease_epoch, 0, "session_start"));
  CHECK(store_client::ok(c.recover(true)).requeued == 1); // closes the first attempt at sequence 1

  auto second = store_client::ok(c.claim("worker-2", 600, 1)); // dies before its session_start
  REQUIRE(second.runs.size() == 1);
  auto report = store_client::ok(c.recover(true));
  CHECK(report.requeued == 1);
  auto log = store_client::ok(c.events("bg", -1, 0));
  CHECK(sequences(log) == std::vector<int64_t>{0, 1});
  CHECK(log.run.status == "queued");
  CHECK(log.run.attempts == 2);

  // the third attempt writes its own error, then dies before its transition
  auto third = store_client::ok(c.claim("worker-3", 600, 1));
  REQUIRE(third.runs.size() == 1);
  store_client::ok(c.append("bg", third.runs[0].lease_epoch, 2, "session_start"));
  store_client::ok(c.append("bg", third.runs[0].lease_epoch, 3, "error"));
  report = store_client::ok(c.recover(true));
  CHECK(report.failed == 1);
  CHECK(report.ended_run_ids == std::vector<std::string>{"bg"});
  log = store_client::ok(c.events("bg", -1, 0));
  CHECK(sequences(log) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(log.run.status == "failed");

  // a run ended by recovery gets its error even when its last attempt wrote nothing: followers
  // replay a terminal event (AS-90)
  c.create_and_claim("silent", "worker-1", 600, 1);
  report = store_client::ok(c.recover(true));
  CHECK(report.failed == 1);
  log = store_client::ok(c.events("silent", -1, 0));
  REQUIRE(log.events.size() == 1);
  CHECK(log.events[0].type == "error");
  CHECK(log.run.status == "failed");
}

TEST_CASE("an attempt that stored its session_end completed its run: recovery, a handback and a cancel complete it "
          "rather than run it again or append after its end (AS-14, AS-83, CJ-16)",
          "[store][contract][runs][recovery]") {
  store_client c(fresh_db("recover-finished"));
  for (auto id : {"handed", "cancelled", "recovered"}) {
    auto r = c.create_and_claim(id, id == std::string("recovered") ? "worker-2" : "worker-1", 600, 3);
    store_client::ok(c.append(id, r.lease_epoch, 0, "session_start"));
    store_client::ok(c.append(id, r.lease_epoch, 1, "session_end"));
  }
  CHECK(store_client::ok(c.cancel("cancelled")).status == "completed");
  CHECK(store_client::ok(c.hand_back("worker-1")) == 1);
  auto report = store_client::ok(c.recover(true));
  CHECK(report.completed == 1);
  CHECK(report.requeued == 0);
  CHECK(report.ended_run_ids == std::vector<std::string>{"recovered"});
  for (auto id : {"handed", "cancelled", "recovered"}) {
    auto log = store_client::ok(c.events(id, -1, 0));
    CHECK(sequences(log) == std::vector<int64_t>{0, 1});
    CHECK(log.run.status == "completed");
    CHECK(log.run.handoffs == 0);
    CHECK(json_string(store_client::ok(c.trace(id)), "status") == "completed");
  }
}

TEST_CASE("a handback adds no event to an attempt that wrote nothing and counts a handoff, not an attempt (CJ-16)",
          "[store][contract][runs][recovery]") {
  store_client c(fresh_db("handback-unwritten"));
  auto opened = c.create_and_claim("opened", "worker-1", 600, 3);
  store_client::ok(c.append("opened", opened.lease_epoch, 0, "session_start"));
  c.create_and_claim("unwritten", "worker-1", 600, 3);
  CHECK(store_client::ok(c.hand_back("worker-1")) == 2);

  auto log = store_client::ok(c.events("opened", -1, 0));
  REQUIRE(sequences(log) == std::vector<int64_t>{0, 1});
  CHECK(log.events[1].type == "error");
  CHECK(log.events[1].json.find(R"("error_type":"handed_back")") != std::string::npos);
  log = store_client::ok(c.events("unwritten", -1, 0));
  CHECK(log.events.empty());
  CHECK(log.run.status == "queued");
  CHECK(log.run.handoffs == 1);
  CHECK(log.run.attempts == 1);
}

TEST_CASE("one run is handed back only while its attempt holds it at that epoch; the worker's others stay (CJ-15)",
          "[store][contract][runs][recovery]") {
  store_client c(fresh_db("handback-one"));
  auto waiting = c.create_and_claim("waiting", "worker-1", 600, 3);
  store_client::ok(c.append("waiting", waiting.lease_epoch, 0, "session_start"));
  c.create_and_claim("working", "worker-1", 600, 3);
  CHECK_FALSE(store_client::ok(c.hand_back_run("waiting", waiting.lease_epoch + 1))); // not its epoch
  CHECK(store_client::ok(c.get("waiting")).status == "running");
  CHECK(store_client::ok(c.hand_back_run("waiting", waiting.lease_epoch)));
  auto log = store_client::ok(c.events("waiting", -1, 0));
  REQUIRE(sequences(log) == std::vector<int64_t>{0, 1});
  CHECK(log.events[1].json.find(R"("error_type":"handed_back")") != std::string::npos);
  CHECK(log.run.status == "queued");
  CHECK(log.run.handoffs == 1);
  CHECK(log.run.lease_epoch == waiting.lease_epoch + 1);
  CHECK_FALSE(store_client::ok(c.hand_back_run("waiting", waiting.lease_epoch))); // already moved
  CHECK(store_client::ok(c.get("working")).status == "running");
}

TEST_CASE("a run handed back more than cluster.max_handoffs times is charged an attempt for each handback past "
          "that (CJ-16)",
          "[store][contract][runs][recovery]") {
  store_client c(fresh_db("handback-limit"));
  c.create_and_claim("bounced", "worker-1", 600, 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(store_client::ok(c.hand_back("worker-1", 2)) == 1);
    auto next = store_client::ok(c.claim("worker-1", 600, 1));
    REQUIRE(next.runs.size() == 1);
  }
  auto run = store_client::ok(c.get("bounced"));
  CHECK(run.attempts == 4);
  CHECK(run.handoffs == 2); // the third handback was charged: attempts - handoffs = 2
}

TEST_CASE("a terminal transition writes a trace readable by id and in the newest-first trace list (AS-55)",
          "[store][contract][runs][traces]") {
  store_client c(fresh_db("traces"));
  store_client::ok(c.create(store_client::run("r1", 3, "s1")));
  store_client::ok(c.create(store_client::run("r2", 3, "s2")));
  auto claimed = store_client::ok(c.claim("worker-1", 60, 2));
  REQUIRE(claimed.runs.size() == 2);
  store_client::ok(c.append("r1", claimed.runs[0].lease_epoch, 0, "session_start"));
  CHECK(code_of(store_client::refused(c.trace("r1"))) == errc::not_found); // not terminal yet

  auto t1 = transition_of(claimed.runs[0], "completed");
  t1.trace.final_content = "the answer";
  t1.trace.tool_call_count = 2;
  t1.trace.tool_name_counts = {{"echo", 2}};
  auto r1 = store_client::ok(c.transition(t1));
  CHECK(r1.status == "completed");
  CHECK_FALSE(r1.completed_at.empty());
  CHECK(r1.duration_ms.has_value());
  CHECK(r1.lease_expires_at.empty());
  auto t2 = transition_of(claimed.runs[1], "failed");
  t2.error = "LLM call failed: boom";
  store_client::ok(c.transition(t2));

  auto trace = store_client::ok(c.trace("r1"));
  CHECK(json_string(trace, "run_id") == "r1");
  CHECK(json_string(trace, "session_id") == "s1");
  CHECK(json_string(trace, "status") == "completed");
  CHECK(json_string(trace, "trace_type") == "background_run");
  CHECK(json_string(trace, "final_content") == "the answer");
  CHECK(trace.find(R"("tool_name_counts":{"echo":2})") != std::string::npos);
  CHECK(trace.find(R"("event_count":1)") != std::string::npos);
  CHECK(json_string(store_client::ok(c.trace("r2")), "error") == "LLM call failed: boom");

  auto all = store_client::ok(c.traces("", 10));
  CHECK(all.total_count == 2);
  REQUIRE(all.traces.size() == 2);
  CHECK(json_string(all.traces[0], "run_id") == "r2");
  CHECK(json_string(all.traces[1], "run_id") == "r1");
  auto one = store_client::ok(c.traces("", 1));
  CHECK(one.traces.size() == 1);
  CHECK(one.total_count == 2);
  auto s1 = store_client::ok(c.traces("s1", 10));
  REQUIRE(s1.traces.size() == 1);
  CHECK(json_string(s1.traces[0], "run_id") == "r1");
  CHECK(s1.total_count == 1);
  auto missing = store_client::refused(c.trace("nope"));
  CHECK(code_of(missing) == errc::not_found);
  CHECK(message_of(missing) == "Trace not found");
}

TEST_CASE("runs are listed newest first, filtered by status, with the total count (AS-50)", "[store][contract][runs]") {
  store_client c(fresh_db("list"));
  for (auto id : {"r1", "r2", "r3"})
    store_client::ok(c.create(store_client::run(id)));
  store_client::ok(c.claim("worker-1", 60, 1)); // r1, the oldest
  auto all = store_client::ok(c.list("", 10));
  CHECK(ids(all.runs) == std::vector<std::string>{"r3", "r2", "r1"});
  CHECK(all.total_count == 3);
  auto queued = store_client::ok(c.list("queued", 1));
  CHECK(ids(queued.runs) == std::vector<std::string>{"r3"});
  CHECK(queued.total_count == 2);
  auto running = store_client::ok(c.list("running", 10));
  CHECK(ids(running.runs) == std::vector<std::string>{"r1"});
  CHECK(running.total_count == 1);
  auto completed = store_client::ok(c.list("completed", 10));
  CHECK(completed.runs.empty());
  CHECK(completed.total_count == 0);
}

TEST_CASE("runs, events, leases and traces survive closing and reopening the store (AS-56)", "[store][contract][runs]") {
  auto path = fresh_db("restart");
  run_record held;
  std::string done_at;
  {
    store_client c(path);
    store_client::ok(c.create(store_client::run("queued")));
    auto claimed = store_client::ok(c.claim("worker-1", 600, 1));
    REQUIRE(ids(claimed.runs) == std::vector<std::string>{"queued"});
    held = claimed.runs[0]; // "queued" is now running; create a queued one after it
    store_client::ok(c.create(store_client::run("waiting")));
    for (int64_t i = 0; i < 3; ++i)
      store_client::ok(c.append("queued", held.lease_epoch, i, "think"));
    auto d = store_client::ok(c.begin_chat(store_client::run("chat1", 1, "s2", "chat"), "worker-1", 600));
    store_client::ok(c.append("chat1", d.lease_epoch, 0, "session_start"));
    auto t = transition_of(d, "completed");
    t.trace.final_content = "kept";
    done_at = store_client::ok(c.transition(t)).completed_at;
  }
  store_client c(path);
  auto running = store_client::ok(c.get("queued"));
  CHECK(running.status == "running");
  CHECK(running.lease_epoch == held.lease_epoch);
  CHECK(running.worker_id == "worker-1");
  CHECK(running.lease_expires_at == held.lease_expires_at);
  CHECK(running.event_count == 3);
  CHECK(sequences(store_client::ok(c.events("queued", -1, 0))) == std::vector<int64_t>{0, 1, 2});
  CHECK(store_client::ok(c.get("waiting")).status == "queued");
  auto chat = store_client::ok(c.get("chat1"));
  CHECK(chat.status == "completed");
  CHECK(chat.completed_at == done_at);
  CHECK(chat.event_count == 1);
  CHECK(json_string(store_client::ok(c.trace("chat1")), "final_content") == "kept");
  auto list = store_client::ok(c.list("", 10));
  CHECK(ids(list.runs) == std::vector<std::string>{"chat1", "waiting", "queued"});

  // the embedded store's startup sweep (AS-83) takes the previous process's running runs and fences them
  auto report = store_client::ok(c.recover(true));
  CHECK(report.requeued == 1);
  CHECK(code_of(store_client::refused(c.append("queued", held.lease_epoch, 3, "think"))) == errc::conflict);
  auto next = store_client::ok(c.claim("worker-2", 60, 5));
  CHECK(ids(next.runs) == std::vector<std::string>{"queued", "waiting"});
}

TEST_CASE("the store, not the caller's record, decides a new run's status, attempt, epoch and lease (AS-49, AS-54)",
          "[store][contract][runs]") {
  store_client c(fresh_db("authority"));
  auto forged = [](std::string id, std::string kind) {
    auto r = store_client::run(std::move(id), 1, "s1", std::move(kind));
    r.status = "running";
    r.attempts = 4;
    r.lease_epoch = 9;
    r.event_count = 7;
    r.worker_id = "worker-forged";
    r.lease_expires_at = "2099-01-01T00:00:00.000000+00:00";
    r.started_at = "2020-01-01T00:00:00.000000+00:00";
    return r;
  };
  auto queued = store_client::ok(c.create(forged("bg1", "background")));
  CHECK(queued.status == "queued");
  CHECK(queued.attempts == 0);
  CHECK(queued.lease_epoch == 0);
  auto bg = store_client::ok(c.get("bg1"));
  CHECK(bg.status == "queued");
  CHECK(bg.attempts == 0);
  CHECK(bg.lease_epoch == 0);
  CHECK(bg.event_count == 0);
  CHECK(bg.worker_id.empty());
  CHECK(bg.lease_expires_at.empty());
  CHECK(bg.started_at.empty());

  auto chat = store_client::ok(c.begin_chat(forged("chat1", "chat"), "worker-1", 30));
  CHECK(chat.status == "running");
  CHECK(chat.attempts == 1);
  CHECK(chat.lease_epoch == 1);
  CHECK(chat.event_count == 0);
  CHECK(chat.worker_id == "worker-1");
  CHECK(seconds_until(chat.lease_expires_at) < 31);
  CHECK(when(chat.started_at) > sys_clock::now() - 60s);
}

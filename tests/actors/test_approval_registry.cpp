// The approval registry against a fake store (AS-42, AS-43, AS-48, AS-81): opening, resolving, expiry,
// exactly one resolution, a run's end, a retried attempt's reuse, restart, and a failing store.
// tests/io/test_approval_registry.cpp covers the restart over the real SQLite store.
#include "actors/approval_registry.hpp"
#include "actors/errors.hpp"
#include "fake_approval_store.hpp"
#include "protocol/timestamp.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <mutex>

using namespace troupe;
using namespace std::chrono_literals;
using protocol::approval_record;
using troupe::testing::fake_approval_store;
using troupe::testing::store_contents;

namespace {

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<store_contents> db = std::make_shared<store_contents>();
  caf::actor store = sys.spawn(fake_approval_store, db);
  approval_registry_actor registry;

  ~fixture() {
    if (registry)
      self->send_exit(registry, caf::exit_reason::user_shutdown);
    self->send_exit(store, caf::exit_reason::user_shutdown);
  }

  approval_registry_actor start(approval_options options = {}) {
    registry = spawn_approval_registry(sys, caf::actor_cast<store_actor>(store), std::move(options));
    return registry;
  }

  // What another node does to the shared store: resolves the approval there.
  void resolved_elsewhere(const std::string& id, const std::string& status) {
    auto r = db->get(id);
    r.status = status;
    r.approved = status == "approved";
    r.resolved_at = protocol::iso_now();
    r.resolution_reason = "on another node";
    db->put(r);
  }

  static approval_record call(std::string run_id = "r1", std::string args = R"({"command":"rm x"})",
                              double timeout_seconds = 300) {
    approval_record r;
    r.run_id = std::move(run_id);
    r.session_id = "s1";
    r.tenant_key = "t";
    r.user_key = "t:u";
    r.tool_call_id = "c1";
    r.tool_name = "exec";
    r.tool_args = std::move(args);
    r.timeout_seconds = timeout_seconds;
    return r;
  }

  // A pending approval the previous process stored, expiring `in` from now (negative: already past).
  approval_record stored_pending(const std::string& id, const std::string& run_id, std::chrono::seconds in) {
    auto r = call(run_id);
    r.request_id = id;
    r.status = "pending";
    auto now = std::chrono::system_clock::now();
    r.created_at = protocol::iso_timestamp(now - 10s);
    r.expires_at = protocol::iso_timestamp(now + in);
    db->put(r);
    return r;
  }

  template <class... Ts>
  caf::expected<approval_record> ask(Ts&&... xs) {
    caf::expected<approval_record> out = make_error(errc::internal, "no answer");
    self->request(registry, 10s, std::forward<Ts>(xs)...)
      .receive([&](approval_record& r) { out = std::move(r); }, [&](caf::error& err) { out = err; });
    return out;
  }

  approval_record open(approval_record wanted) {
    auto r = ask(open_approval_atom::value, std::move(wanted));
    REQUIRE(r);
    return *r;
  }

  caf::expected<approval_record> resolve(const std::string& id, bool approve, std::string reason = "") {
    return ask(resolve_atom::value, id, approve, std::move(reason));
  }

  // Waits on the approval from another actor, as the run does, and hands on what it is woken with.
  // Returns once the await is in the registry's mailbox, so anything this test sends later is
  // handled after it.
  void waiter(const std::string& id) {
    // The state goes in as arguments: CAF 0.17 spawning a function without any trips UBSan.
    sys.spawn(
      [](caf::event_based_actor* a, approval_registry_actor reg, std::string approval, caf::actor me) {
        a->request(reg, caf::infinite, await_atom::value, approval)
          .then([=](approval_record& r) { a->send(me, r); }, [=](caf::error& err) { a->send(me, err); });
        a->send(me, await_atom::value);
      },
      registry, id, caf::actor_cast<caf::actor>(self));
    self->receive([](await_atom) {}, caf::after(10s) >> [] { FAIL("the waiter did not start within 10 s"); });
  }

  caf::expected<approval_record> woken() {
    caf::expected<approval_record> out = make_error(errc::internal, "not woken");
    self->receive([&](approval_record& r) { out = std::move(r); }, [&](caf::error& err) { out = err; },
                  caf::after(10s) >> [] { FAIL("the waiting run was not woken within 10 s"); });
    return out;
  }

};

} // namespace

TEST_CASE_METHOD(fixture, "an approval is stored pending before it is answered, with its id and expiry",
                 "[approvals]") { // AS-42, AS-46, AS-81
  start();
  auto r = open(call());
  CHECK(r.request_id.rfind("approval-", 0) == 0);
  CHECK(r.request_id.size() == std::string("approval-").size() + 10);
  CHECK(r.status == "pending");
  CHECK_FALSE(r.approved.has_value());
  CHECK(r.expires_at > r.created_at);
  CHECK(db->get(r.request_id).status == "pending");
}

TEST_CASE_METHOD(fixture, "approving wakes the waiting run, approved with the default reason, and stores it first",
                 "[approvals]") { // AS-43
  start();
  auto r = open(call());
  waiter(r.request_id);
  auto resolved = resolve(r.request_id, true);
  REQUIRE(resolved);
  CHECK(resolved->status == "approved");
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "approved");
  CHECK(w->approved == std::optional<bool>(true));
  CHECK(w->resolution_reason == "approved");
  CHECK_FALSE(w->resolved_at.empty());
  CHECK(db->get(r.request_id).status == "approved");
}

TEST_CASE_METHOD(fixture, "denying with a reason wakes the waiting run, denied with that reason", "[approvals]") { // AS-43
  start();
  auto r = open(call());
  waiter(r.request_id);
  REQUIRE(resolve(r.request_id, false, "not on a Friday"));
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "denied");
  CHECK(w->approved == std::optional<bool>(false));
  CHECK(w->resolution_reason == "not on a Friday");
  CHECK(db->get(r.request_id).resolution_reason == "not on a Friday");
}

TEST_CASE_METHOD(fixture, "an approval nobody resolves expires at its deadline and wakes the run",
                 "[approvals]") { // AS-43
  start();
  auto r = open(call("r1", "{}", 0.1));
  waiter(r.request_id);
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "expired");
  CHECK(w->approved == std::optional<bool>(false));
  CHECK(w->resolution_reason == "approval_timeout");
  CHECK(w->resolved_at >= r.expires_at);
  CHECK(db->get(r.request_id).status == "expired");
  auto late = resolve(r.request_id, true);
  REQUIRE_FALSE(late);
  CHECK(code_of(late.error()) == errc::not_found);
}

TEST_CASE_METHOD(fixture, "a second resolution is refused as not found or already resolved", "[approvals]") { // AS-48
  start();
  auto r = open(call());
  REQUIRE(resolve(r.request_id, true));
  auto again = resolve(r.request_id, false);
  REQUIRE_FALSE(again);
  CHECK(code_of(again.error()) == errc::not_found);
  CHECK(message_of(again.error()) == "Approval request not found or already resolved");
  CHECK(db->get(r.request_id).status == "approved");
  auto unknown = resolve("approval-0000000000", true);
  REQUIRE_FALSE(unknown);
  CHECK(code_of(unknown.error()) == errc::not_found);
}

TEST_CASE_METHOD(fixture, "of two resolutions sent at once exactly one wins", "[approvals]") { // AS-42
  start();
  auto r = open(call());
  int wins = 0, refusals = 0;
  // Both are sent before either answer is read.
  auto approve = self->request(registry, 10s, resolve_atom::value, r.request_id, true, std::string());
  auto deny = self->request(registry, 10s, resolve_atom::value, r.request_id, false, std::string());
  for (auto* handle : {&approve, &deny})
    handle->receive([&](approval_record&) { ++wins; },
                    [&](caf::error& err) {
                      CHECK(code_of(err) == errc::not_found);
                      ++refusals;
                    });
  CHECK(wins == 1);
  CHECK(refusals == 1);
  CHECK(db->get(r.request_id).status == "approved"); // the first to arrive
}

TEST_CASE_METHOD(fixture, "waiting on an approval that is already resolved answers its stored record",
                 "[approvals]") {
  start();
  auto r = open(call());
  REQUIRE(resolve(r.request_id, false));
  waiter(r.request_id);
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "denied");
}

TEST_CASE_METHOD(fixture, "a run that ends has its pending approvals denied with its end's reason and its waiter "
                          "woken, other runs' approvals stay pending",
                 "[approvals]") { // AS-52, AS-81
  auto reason = GENERATE(as<std::string>{}, "run_terminated", "run_cancelled");
  start();
  auto first = open(call("r1", R"({"command":"a"})"));
  auto second = open(call("r1", R"({"command":"b"})"));
  auto other = open(call("r2"));
  waiter(first.request_id);
  self->send(registry, run_ended_atom::value, std::string("r1"), reason);
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "denied");
  CHECK(w->approved == std::optional<bool>(false));
  CHECK(w->resolution_reason == reason);
  CHECK_FALSE(resolve(second.request_id, true)); // denied too, so no longer resolvable
  CHECK(db->get(second.request_id).resolution_reason == reason);
  auto approved = resolve(other.request_id, true);
  REQUIRE(approved);
  CHECK(approved->status == "approved");
}

TEST_CASE_METHOD(fixture, "a retried attempt asking for the same call with canonically equal arguments gets the "
                          "pending approval",
                 "[approvals]") { // AS-81
  start();
  auto first = open(call("r1", R"({"a":1,"b":[2,3]})"));
  auto again = open(call("r1", R"({ "b": [2, 3], "a": 1 })"));
  CHECK(again.request_id == first.request_id);
  CHECK(db->save_count() == 1);
  auto different = open(call("r1", R"({"a":2,"b":[2,3]})"));
  CHECK(different.request_id != first.request_id);
  auto other_run = open(call("r2", R"({"a":1,"b":[2,3]})"));
  CHECK(other_run.request_id != first.request_id);
}

TEST_CASE_METHOD(fixture, "a retried attempt asking for a call an earlier attempt had resolved gets that resolution",
                 "[approvals]") { // AS-81
  auto earlier = stored_pending("approval-aaaaaaaaaa", "r1", 300s);
  earlier.status = "denied";
  earlier.approved = false;
  earlier.resolution_reason = "denied";
  db->put(earlier);
  start();
  auto r = open(call("r1"));
  CHECK(r.request_id == "approval-aaaaaaaaaa");
  CHECK(r.status == "denied");
  CHECK(db->save_count() == 0);
}

TEST_CASE_METHOD(fixture, "at start, pending approvals are restored: lapsed ones expire, the others stay "
                          "resolvable, those of runs that are over are denied",
                 "[approvals]") { // AS-81
  db->run_status = {{"live", "running"}, {"cancelled", "cancelled"}, {"failed", "failed"}};
  stored_pending("approval-lapsed0000", "live", -5s);
  stored_pending("approval-live000000", "live", 300s);
  stored_pending("approval-cancelled0", "cancelled", 300s);
  stored_pending("approval-failed0000", "failed", 300s);
  stored_pending("approval-gone000000", "gone", 300s);
  start();
  // The registry answers nothing before the pending approvals are loaded; each run's status is asked
  // after that, so an await on each pending approval shows how it ended.
  for (auto id : {"approval-lapsed0000", "approval-cancelled0", "approval-failed0000", "approval-gone000000"})
    waiter(id);
  std::map<std::string, approval_record> ended;
  for (int i = 0; i < 4; ++i) {
    auto w = woken();
    REQUIRE(w);
    ended[w->request_id] = *w;
  }
  CHECK(ended["approval-lapsed0000"].status == "expired");
  CHECK(ended["approval-lapsed0000"].resolution_reason == "approval_timeout");
  CHECK(ended["approval-cancelled0"].status == "denied");
  CHECK(ended["approval-cancelled0"].resolution_reason == "run_cancelled");
  CHECK(ended["approval-failed0000"].resolution_reason == "run_terminated");
  CHECK(ended["approval-gone000000"].resolution_reason == "run_terminated");
  auto live = resolve("approval-live000000", true);
  REQUIRE(live);
  CHECK(live->status == "approved");
}

TEST_CASE_METHOD(fixture, "a store that cannot save an approval fails the open, and nothing is left pending",
                 "[approvals]") { // AS-81
  start();
  db->failing(true);
  auto r = ask(open_approval_atom::value, call());
  REQUIRE_FALSE(r);
  CHECK(message_of(r.error()) == "disk I/O error");
  db->failing(false);
  auto fresh = open(call());
  CHECK(fresh.status == "pending");
  CHECK(db->save_count() == 1);
}

TEST_CASE_METHOD(fixture, "a resolution the store cannot save did not happen: the resolver hears the error, the "
                          "approval stays pending and resolvable, and the run keeps waiting",
                 "[approvals]") { // AS-42, AS-81: a transition is durable before anyone acts on it
  start();
  auto r = open(call());
  waiter(r.request_id);
  db->failing(true);
  auto failed = resolve(r.request_id, true);
  REQUIRE_FALSE(failed);
  CHECK(message_of(failed.error()) == "disk I/O error");
  CHECK(db->get(r.request_id).status == "pending");
  db->failing(false);
  // A retried attempt of the run still finds the same approval (AS-81) ...
  CHECK(open(call()).request_id == r.request_id);
  // ... and the resolver's retry goes through and wakes the run, which had not been told anything.
  auto resolved = resolve(r.request_id, false, "second try");
  REQUIRE(resolved);
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "denied");
  CHECK(w->resolution_reason == "second try");
}

TEST_CASE_METHOD(fixture, "an expiry the store cannot save is tried again until it is stored",
                 "[approvals]") { // AS-43, AS-81
  start();
  auto opened = open(call("r1", "{}", 0.05));
  db->failing(true);
  waiter(opened.request_id);
  REQUIRE(db->wait_failed_saves(2)); // the expiry, and its second try
  self->receive([](approval_record&) { FAIL("woken by an expiry that was not stored"); },
                [](caf::error&) { FAIL("woken by the store's error"); }, caf::after(std::chrono::milliseconds(0)) >> [] {});
  CHECK(db->get(opened.request_id).status == "pending");
  db->failing(false);
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "expired");
  CHECK(db->get(opened.request_id).status == "expired");
}

TEST_CASE_METHOD(fixture, "an approval another node resolved first refuses this node's resolution with AS-48's not "
                          "found and wakes the waiting run with the winner's outcome (CJ-26)",
                 "[approvals][cluster]") {
  start();
  auto r = open(call());
  waiter(r.request_id);
  resolved_elsewhere(r.request_id, "denied");
  auto late = resolve(r.request_id, true);
  REQUIRE_FALSE(late);
  CHECK(code_of(late.error()) == errc::not_found);
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "denied");
  CHECK(w->resolution_reason == "on another node");
  CHECK(db->get(r.request_id).status == "denied");
}

TEST_CASE_METHOD(fixture, "in a cluster, the run waiting on an approval resolved on another node is woken by the "
                          "message of that node, or else by its poll of the store (CJ-26)",
                 "[approvals][cluster]") {
  approval_options options;
  options.poll_seconds = 0.05;
  start(options);
  auto by_poll = open(call("r1"));
  waiter(by_poll.request_id);
  resolved_elsewhere(by_poll.request_id, "approved");
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "approved");

  auto by_message = open(call("r2"));
  waiter(by_message.request_id);
  resolved_elsewhere(by_message.request_id, "denied");
  self->send(registry, wake_atom::value, by_message.request_id);
  w = woken();
  REQUIRE(w);
  CHECK(w->status == "denied");
}

TEST_CASE_METHOD(fixture, "a wake-up for an approval no run here waits on reads nothing, whatever id anyone on the "
                          "database NOTIFYs (CJ-26, CJ-10)",
                 "[approvals][cluster]") {
  approval_options options;
  options.poll_seconds = 60;
  start(options);
  auto r = open(call());
  waiter(r.request_id);
  auto reads_before = [&] {
    std::lock_guard<std::mutex> lock(db->mu);
    return db->reads;
  }();
  for (auto id : {std::string("approval-unknown000"), std::string(), std::string("approval-\r\nx"),
                  std::string("a\0b", 3), std::string("\xff\xfe"), std::string(64, 'x')})
    self->send(registry, wake_atom::value, id);
  resolved_elsewhere(r.request_id, "approved");
  self->send(registry, wake_atom::value, r.request_id); // the one a run here waits on
  auto w = woken();
  REQUIRE(w);
  CHECK(w->status == "approved");
  std::lock_guard<std::mutex> lock(db->mu);
  CHECK(db->reads == reads_before + 1);
}

TEST_CASE_METHOD(fixture, "in a cluster, a node resolves an approval it never held, and only while it is pending (CJ-26)",
                 "[approvals][cluster]") {
  approval_options options;
  options.poll_seconds = 60;
  start(options);
  // Answered after the pending approvals are loaded at start: an unknown one is not found.
  CHECK(code_of(resolve("approval-unknown000", true).error()) == errc::not_found);
  {
    std::lock_guard<std::mutex> lock(db->mu);
    db->run_status["r9"] = "running";
  }
  auto theirs = stored_pending("approval-opened0000", "r9", 300s); // opened by another node after this one started
  auto ok = resolve(theirs.request_id, true, "looks fine");
  REQUIRE(ok);
  CHECK(ok->status == "approved");
  CHECK(ok->resolution_reason == "looks fine");
  CHECK(db->get(theirs.request_id).status == "approved");
  auto again = resolve(theirs.request_id, false);
  REQUIRE_FALSE(again);
  CHECK(code_of(again.error()) == errc::not_found);
  CHECK(db->get(theirs.request_id).status == "approved");
}

// The approval registry over the real SQLite store at start (AS-81): pending approvals are restored and
// stay resolvable while their run may still ask for them; those of a run that is already over are denied.
#include "actors/approval_registry.hpp"
#include "actors/errors.hpp"
#include "io/sqlite_store.hpp"
#include "protocol/timestamp.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>

#include <unistd.h>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

std::string fresh_db(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("troupe-approvals-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / (name + ".db");
  for (auto suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path.string() + suffix);
  return path.string();
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  store_actor store;

  fixture() {
    auto s = io::spawn_sqlite_store(sys, fresh_db("restore"));
    if (auto err = std::get_if<std::string>(&s))
      FAIL("cannot open the store: " << *err);
    store = std::get<store_actor>(s);
  }

  ~fixture() { self->send_exit(store, caf::exit_reason::user_shutdown); }

  template <class T, class Handle, class... Ts>
  T ok(const Handle& to, Ts&&... xs) {
    T out{};
    self->request(to, 10s, std::forward<Ts>(xs)...)
      .receive([&](T& v) { out = std::move(v); }, [&](caf::error& err) { FAIL(message_of(err)); });
    return out;
  }

  // A chat run of the previous process, begun (running) and, when `status` is terminal, ended.
  void run(const std::string& run_id, const std::string& status) {
    run_record r;
    r.run_id = run_id;
    r.run_kind = "chat";
    r.session_id = "s1";
    r.tenant_key = "t";
    r.user_key = "t:u";
    r.max_attempts = 1;
    auto begun = ok<run_record>(store, begin_chat_atom::value, r, std::string("worker-old"), 300.0);
    if (status == "running")
      return;
    run_transition t;
    t.run_id = run_id;
    t.lease_epoch = begun.lease_epoch;
    t.status = status;
    t.trace.trace_type = "chat";
    ok<run_record>(store, transition_atom::value, t);
  }

  // A pending approval the previous process stored for `run_id`.
  void pending(const std::string& id, const std::string& run_id) {
    protocol::approval_record a;
    a.request_id = id;
    a.run_id = run_id;
    a.session_id = "s1";
    a.tenant_key = "t";
    a.user_key = "t:u";
    a.tool_name = "exec";
    a.tool_args = R"({"command":"rm x"})";
    a.status = "pending";
    a.timeout_seconds = 300;
    auto now = std::chrono::system_clock::now();
    a.created_at = protocol::iso_timestamp(now);
    a.expires_at = protocol::iso_timestamp(now + 300s);
    ok<protocol::approval_record>(store, save_approval_atom::value, a);
  }

  caf::expected<protocol::approval_record> approve(const approval_registry_actor& registry, const std::string& id) {
    caf::expected<protocol::approval_record> out = make_error(errc::internal, "no answer");
    self->request(registry, 10s, resolve_atom::value, id, true, std::string())
      .receive([&](protocol::approval_record& r) { out = std::move(r); }, [&](caf::error& err) { out = err; });
    return out;
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "at start the pending approvals of a run that is already over are denied, those of a "
                          "live run stay approvable (AS-48, AS-81)",
                 "[approvals][store]") {
  run("failed-run", "failed");
  run("cancelled-run", "cancelled");
  run("live-run", "running");
  pending("approval-failed000", "failed-run");
  pending("approval-cancel000", "cancelled-run");
  pending("approval-gone00000", "no-such-run");
  pending("approval-live00000", "live-run");

  auto registry = spawn_approval_registry(sys, store);
  for (auto id : {"approval-failed000", "approval-cancel000", "approval-gone00000"}) {
    auto refused = approve(registry, id);
    REQUIRE_FALSE(refused);
    CHECK(code_of(refused.error()) == errc::not_found);
    CHECK(message_of(refused.error()) == "Approval request not found or already resolved");
  }
  auto denied = ok<protocol::approval_record>(store, get_approval_atom::value, std::string("approval-failed000"));
  CHECK(denied.status == "denied");
  CHECK(denied.resolution_reason == "run_terminated");
  CHECK(denied.approved == std::optional<bool>(false));
  CHECK(ok<protocol::approval_record>(store, get_approval_atom::value, std::string("approval-cancel000"))
          .resolution_reason
        == "run_cancelled");
  CHECK(ok<protocol::approval_record>(store, get_approval_atom::value, std::string("approval-gone00000")).status
        == "denied");

  auto approved = approve(registry, "approval-live00000");
  REQUIRE(approved);
  CHECK(approved->status == "approved");
  self->send_exit(registry, caf::exit_reason::user_shutdown);
}

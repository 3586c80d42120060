// The store port's contract under concurrency, for the bytes it keeps and for what its counts read
// back (CJ-1, CJ-3, CJ-8, AS-59): cases that every adapter must pass unchanged, driven through
// store_actor messages only.
#include "io/store_client.hpp"
#include "protocol/digest_guard.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <tuple>

using namespace troupe;
using namespace troupe::test;

namespace {

// A queued run of `tenant`.
run_record run_of(std::string run_id, const std::string& tenant, int priority = 0) {
  auto r = store_client::run(std::move(run_id));
  r.tenant_key = tenant;
  r.user_key = tenant + ":u";
  r.priority = priority;
  return r;
}

// Stores `n` queued runs of `tenant` named prefix-0..n-1, sent at once so the store may batch them.
void create_runs(store_client& c, const std::string& prefix, int n, const std::string& tenant = "t",
                 int priority = 0) {
  for (int i = 0; i < n; ++i)
    c.self->send(c.store, create_run_atom::value, run_of(prefix + std::to_string(i), tenant, priority));
  int answered = 0;
  int refused = 0;
  c.self->receive_for(answered, n)([](run_record&) {}, [&](caf::error&) { ++refused; },
                                   caf::after(std::chrono::seconds(60)) >> [] { FAIL("the store stopped answering"); });
  REQUIRE(answered == n);
  REQUIRE(refused == 0);
}

std::vector<std::string> ids(const std::vector<run_record>& runs) {
  std::vector<std::string> out;
  for (auto& r : runs)
    out.push_back(r.run_id);
  return out;
}

// The tenants of claimed runs in claim order, one letter each: "abca".
std::string tenants(const std::vector<run_record>& runs) {
  std::string out;
  for (auto& r : runs)
    out += r.tenant_key;
  return out;
}

// Claims as a node's run registry does: each claim's tenants take turns from the one after the tenant
// its previous claim served last.
struct node_claims {
  store_client& c;
  std::string worker;
  uint32_t n;
  int64_t tenant_max_running = 0;
  std::string last_tenant{};

  answer<run_claim> ask(caf::scoped_actor& self) {
    answer<run_claim> out = make_error(errc::internal, "no answer");
    self
      ->request(c.store, std::chrono::seconds(30), claim_atom::value,
                claim_request{worker, 60, n, last_tenant, tenant_max_running})
      .receive([&](run_claim& got) { out = std::move(got); }, [&](caf::error& err) { out = std::move(err); });
    if (auto got = std::get_if<run_claim>(&out); got && !got->runs.empty())
      last_tenant = got->runs.back().tenant_key;
    return out;
  }
  std::vector<run_record> next() { return store_client::ok(ask(c.self)).runs; }
};

} // namespace

TEST_CASE("within a tenant a claim takes the highest priority first, then the run that became ready first, then "
          "the one stored first (CJ-18)",
          "[store][contract][claims]") {
  store_client c(fresh_db("contract-priority"));
  // "early" is stored first, but a retry makes it ready only after "late" was stored.
  auto early = c.create_and_claim("early");
  auto retry = transition_of(early, "queued");
  retry.retry_seconds = 0.3;
  auto requeued = store_client::ok(c.transition(retry));
  for (auto [id, priority] : {std::pair{"late", 0}, {"low", -100}, {"high", 100}, {"mid-1", 5}, {"mid-2", 5}})
    store_client::ok(c.create(run_of(id, "t", priority)));
  CHECK(store_client::ok(c.get("high")).priority == 100);
  CHECK(store_client::ok(c.get("low")).priority == -100);
  std::this_thread::sleep_until(when(requeued.retry_after) + std::chrono::milliseconds(50));

  auto first = store_client::ok(c.claim("w", 60, 3));
  CHECK(ids(first.runs) == std::vector<std::string>{"high", "mid-1", "mid-2"});
  CHECK(first.runs[0].priority == 100);
  auto second = store_client::ok(c.claim("w", 60, 3));
  CHECK(ids(second.runs) == std::vector<std::string>{"late", "early", "low"});
}

TEST_CASE("a claim of n serves up to n tenants in turn after the one served last, wrapping, and deals each at most "
          "ceil(n/k) runs unless another has fewer; priority never crosses tenants (CJ-19)",
          "[store][contract][claims]") {
  store_client c(fresh_db("contract-turns"));
  create_runs(c, "a-", 5, "a");
  create_runs(c, "b-", 5, "b");
  create_runs(c, "c-", 5, "c", 100); // first within c, never before a or b
  auto claim = [&](uint32_t n, std::string after) {
    return tenants(store_client::ok(c.claim(claim_request{"w", 60, n, std::move(after)})).runs);
  };
  CHECK(claim(4, "") == "abca");  // 3 tenants: at most ceil(4/3) = 2 each, a run each in turn
  CHECK(claim(2, "a") == "bc");   // 2 tenants of 3, from the one after a
  CHECK(claim(2, "c") == "ab");   // wrapping
  CHECK(claim(1, "b") == "c");
  CHECK(claim(1, "zz") == "a");   // no tenant after zz: the first
  CHECK(claim(8, "") == "abcbc"); // a had 1 left, b and c 2: all of it

  create_runs(c, "x-", 10, "x");
  create_runs(c, "y-", 1, "y");
  CHECK(claim(8, "") == "xyxxxxxx"); // y has 1 of its ceil(8/2) = 4: x takes the rest
}

TEST_CASE("tenant A enqueues 10,000 runs, then B 10: B's first run is in the very next claim, and while both have "
          "work each gets at least 45% of the runs claimed (CJ-19)",
          "[store][contract][claims]") {
  store_client c(fresh_db("contract-fair-share"));
  create_runs(c, "a-", 10000, "a");
  create_runs(c, "b-", 10, "b");
  node_claims node{c, "worker-1", 8};
  auto first = node.next();
  CHECK(tenants(first).find('b') != std::string::npos);

  // Runs come in the order they were dealt: those up to B's last were dealt while both had work.
  std::map<std::string, int> while_both;
  int b_left = 10;
  for (auto runs = first; b_left > 0; runs = node.next()) {
    REQUIRE_FALSE(runs.empty());
    for (auto it = runs.begin(); it != runs.end() && b_left > 0; ++it) {
      ++while_both[it->tenant_key];
      b_left -= it->tenant_key == "b" ? 1 : 0;
    }
  }
  double total = while_both["a"] + while_both["b"];
  CHECK(while_both["a"] >= 0.45 * total);
  CHECK(while_both["b"] >= 0.45 * total);
  CHECK(tenants(node.next()) == "aaaaaaaa");
}

TEST_CASE("a tenant at cluster.tenant_max_running is passed over and the others are served; it is served again once "
          "a run of its ends (CJ-19)",
          "[store][contract][claims]") {
  store_client c(fresh_db("contract-tenant-cap"));
  create_runs(c, "a-", 5, "a");
  create_runs(c, "b-", 5, "b");
  auto chat = run_of("chat", "a");
  chat.run_kind = "chat";
  store_client::ok(c.begin_chat(chat, "w", 60)); // a chat run is never claimed, and not counted
  node_claims node{c, "w", 8, 2};
  auto first = node.next();
  CHECK(tenants(first) == "abab");
  CHECK(tenants(node.next()).empty());
  store_client::ok(c.transition(transition_of(first[0], "completed")));
  CHECK(tenants(node.next()) == "a");
}

TEST_CASE("8 concurrent claimers never start more of a tenant's runs than cluster.tenant_max_running, and leave "
          "none of its room unfilled once they are done (CJ-19)",
          "[store][contract][claims]") {
  store_client c(fresh_db("contract-tenant-cap-concurrent"));
  constexpr int64_t cap = 3;
  const std::vector<std::string> all_tenants{"a", "b", "c"};
  for (auto& t : all_tenants)
    create_runs(c, t + "-", 150, t);
  auto running = [&] {
    std::map<std::string, std::vector<run_record>> out;
    for (auto& r : store_client::ok(c.list("running", 1000)).runs)
      out[r.tenant_key].push_back(r);
    return out;
  };
  std::mt19937 rng(19);
  int concurrent_claims = 0;
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> ready{0};
    std::atomic<int> claimed{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> claimers;
    for (int w = 0; w < 8; ++w) {
      claimers.emplace_back([&, w] {
        caf::scoped_actor self{c.sys};
        node_claims node{c, "worker-" + std::to_string(w), 4, cap};
        for (++ready; ready < 8;)
          std::this_thread::yield(); // all start at once
        while (!failed) {
          auto got = node.ask(self);
          auto claim = std::get_if<run_claim>(&got);
          if (!claim)
            failed = true;
          else if (claim->runs.empty())
            break;
          else
            claimed += static_cast<int>(claim->runs.size());
        }
      });
    }
    for (auto& t : claimers)
      t.join();
    REQUIRE_FALSE(failed);
    concurrent_claims += claimed;
    auto now_running = running();
    for (auto& t : all_tenants) {
      INFO("round " << round << ", tenant " << t);
      CHECK(static_cast<int64_t>(now_running[t].size()) <= cap);
    }
    // What the concurrent claims left (each stops at its first empty claim, maybe while another held
    // the tenant's lock) one more claim fills: the count never stays short either.
    node_claims filler{c, "filler", 8, cap};
    while (!filler.next().empty()) {
    }
    now_running = running();
    for (auto& t : all_tenants) {
      INFO("round " << round << ", tenant " << t);
      REQUIRE(static_cast<int64_t>(now_running[t].size()) == cap);
      // Some of its runs end, making room for the next round.
      std::shuffle(now_running[t].begin(), now_running[t].end(), rng);
      auto ending = std::uniform_int_distribution<int64_t>(0, cap)(rng);
      for (int64_t i = 0; i < ending; ++i)
        store_client::ok(c.transition(transition_of(now_running[t][static_cast<std::size_t>(i)], "completed")));
    }
  }
  CHECK(concurrent_claims > 20); // the concurrent claimers did take runs, not just the filler
}

TEST_CASE("8 concurrent claimers over 10,000 runs claim each run exactly once, at epoch 1 (CJ-1, AS-54)",
          "[store][contract][claims]") {
  store_client c(fresh_db("contract-claims"));
  constexpr int runs = 10000;
  create_runs(c, "run-", runs);

  std::vector<std::vector<run_record>> claimed(8);
  std::vector<std::thread> claimers;
  std::atomic<bool> failed{false};
  for (int w = 0; w < 8; ++w) {
    claimers.emplace_back([&, w] {
      caf::scoped_actor self{c.sys};
      for (bool more = true; more && !failed;) {
        self->request(c.store, std::chrono::seconds(30), claim_atom::value,
                      claim_request{"worker-" + std::to_string(w), 60.0, 25})
          .receive(
            [&](run_claim& got) {
              more = !got.runs.empty();
              for (auto& r : got.runs)
                claimed[static_cast<std::size_t>(w)].push_back(std::move(r));
            },
            [&](caf::error&) { failed = true; });
      }
    });
  }
  for (auto& t : claimers)
    t.join();
  REQUIRE_FALSE(failed);

  std::set<std::string> seen;
  std::size_t total = 0;
  int claimers_with_work = 0;
  for (std::size_t w = 0; w < claimed.size(); ++w) {
    claimers_with_work += claimed[w].empty() ? 0 : 1;
    for (auto& r : claimed[w]) {
      ++total;
      CHECK(seen.insert(r.run_id).second);
      CHECK(r.status == "running");
      CHECK(r.lease_epoch == 1);
      CHECK(r.attempts == 1);
      CHECK(r.worker_id == "worker-" + std::to_string(w));
    }
  }
  CHECK(total == static_cast<std::size_t>(runs));
  CHECK(seen.size() == static_cast<std::size_t>(runs));
  CHECK(claimers_with_work >= 2); // the claims really interleaved
  CHECK(store_client::ok(c.claim("late", 60, 10)).runs.empty());
}

TEST_CASE("8 holders appending to their runs at once each get sequences 0..n-1 without gap or repeat (CJ-8, AS-51)",
          "[store][contract][events]") {
  store_client c(fresh_db("contract-appends"));
  std::vector<run_record> held;
  for (int i = 0; i < 8; ++i)
    held.push_back(c.create_and_claim("held-" + std::to_string(i), "worker-" + std::to_string(i)));
  constexpr int per_run = 200;
  std::atomic<int> refused{0};
  std::vector<std::thread> writers;
  for (auto& r : held) {
    writers.emplace_back([&, r] {
      caf::scoped_actor self{c.sys};
      for (int seq = 0; seq < per_run; ++seq) {
        stored_event e{seq, "think", R"({"type":"think","sequence":)" + std::to_string(seq) + "}"};
        self->request(c.store, std::chrono::seconds(30), append_atom::value, r.run_id, r.lease_epoch, std::move(e))
          .receive([&](bool ok) { refused += ok ? 0 : 1; }, [&](caf::error&) { ++refused; });
      }
    });
  }
  for (auto& t : writers)
    t.join();
  CHECK(refused == 0);
  for (auto& r : held) {
    auto page = store_client::ok(c.events(r.run_id, -1, 0));
    REQUIRE(page.events.size() == static_cast<std::size_t>(per_run));
    for (int seq = 0; seq < per_run; ++seq)
      CHECK(page.events[static_cast<std::size_t>(seq)].sequence == seq);
    CHECK(page.run.event_count == per_run);
  }
}

TEST_CASE("appends under a wrong epoch in a group commit are refused leaving nothing, and the rest of the batch "
          "lands (CJ-7, CJ-8)",
          "[store][contract][events]") {
  // One connection: every batch after the first gathers several writers' appends.
  store_client c(fresh_db("contract-mixed-batch"), 1);
  std::vector<std::pair<run_record, bool>> writers_of; // a run, and whether its writer holds the epoch
  for (int i = 0; i < 8; ++i)
    writers_of.emplace_back(c.create_and_claim("mixed-" + std::to_string(i), "worker-" + std::to_string(i)), i % 2 == 0);
  constexpr int per_run = 50;
  std::atomic<int> wrong_answers{0};
  std::vector<std::thread> writers;
  for (auto& [r, holder] : writers_of) {
    writers.emplace_back([&, r = r, holder = holder] {
      caf::scoped_actor self{c.sys};
      auto epoch = holder ? r.lease_epoch : r.lease_epoch + 1;
      for (int seq = 0; seq < per_run; ++seq) {
        stored_event e{seq, "think", R"({"type":"think","sequence":)" + std::to_string(seq) + "}"};
        self->request(c.store, std::chrono::seconds(30), append_atom::value, r.run_id, epoch, std::move(e))
          .receive([&](bool ok) { wrong_answers += ok == holder ? 0 : 1; },
                   [&](caf::error&) { wrong_answers += holder ? 1 : 0; });
      }
    });
  }
  for (auto& t : writers)
    t.join();
  CHECK(wrong_answers == 0);
  for (auto& [r, holder] : writers_of) {
    auto page = store_client::ok(c.events(r.run_id, -1, 0));
    CHECK(page.events.size() == static_cast<std::size_t>(holder ? per_run : 0));
    CHECK(page.run.event_count == (holder ? per_run : 0));
  }
}

TEST_CASE("events, requests and metadata come back byte for byte: key order, number spelling, escapes (CJ-3)",
          "[store][contract][bytes]") {
  store_client c(fresh_db("contract-bytes"));
  // What a JSON database type would rewrite: key order, duplicate spacing, 1.0 and 1e+10, -0, a number
  // beyond 64 bits, escaped and raw non-ASCII, an escaped surrogate pair and solidus.
  const std::string tricky =
    R"({"z":1, "a":[1.0,1e+10,-0,12345678901234567890123,0.1000],"s":"caf\u00e9 café \ud83d\ude00 \/ \"q\"","n":null})";
  auto r = store_client::run("bytes");
  r.metadata = tricky;
  r.request = tricky;
  store_client::ok(c.create(r));
  auto claimed = store_client::ok(c.claim("w", 60, 1));
  REQUIRE(claimed.runs.size() == 1);
  auto held = claimed.runs[0];
  CHECK(held.metadata == tricky);
  CHECK(held.request == tricky);
  REQUIRE(store_client::ok(
    c.ask<bool>(append_atom::value, std::string("bytes"), held.lease_epoch, stored_event{0, "think", tricky})));
  auto page = store_client::ok(c.events("bytes", -1, 0));
  REQUIRE(page.events.size() == 1);
  CHECK(page.events[0].json == tricky);
  auto again = store_client::ok(c.get("bytes"));
  CHECK(again.metadata == tricky);
  CHECK(again.request == tricky);
}

TEST_CASE("the digest runs' traces add up in the metrics, with the newest five that went over budget first "
          "(AS-59, AS-70)",
          "[store][contract][digest]") {
  store_client c(fresh_db("contract-digest"));
  // Ends a claimed run, its trace carrying `report` when it is a digest run.
  auto finish = [&](const std::string& run_id, std::optional<protocol::digest_budget_report> report) {
    auto t = transition_of(c.create_and_claim(run_id), "completed");
    t.trace.pska_digest = std::move(report);
    store_client::ok(c.transition(std::move(t)));
  };
  auto report = [](int64_t writes, bool exceeded) {
    protocol::digest_budget_report r;
    r.tool_budget = {{"pska_pska_write_candidates", 1}, {"pska_pska_job_context", 2}};
    r.write_call_count = writes;
    r.job_context_call_count = 2;
    r.tool_budget_exceeded = exceeded;
    return r;
  };
  auto empty = store_client::ok(c.stats()).pska_digest;
  CHECK(empty.run_count == 0);
  CHECK(empty.write_call_count == 0);
  CHECK(empty.recent_budget_exceeded.empty());

  finish("plain", std::nullopt);
  finish("kept", report(1, false));
  for (int i = 0; i < 6; ++i)
    finish("over-" + std::to_string(i), report(1, true));
  auto d = store_client::ok(c.stats()).pska_digest;
  CHECK(d.run_count == 7); // the plain run has no pska_digest_tool_budget
  CHECK(d.write_call_count == 7);
  CHECK(d.job_context_call_count == 14);
  CHECK(d.tool_budget_exceeded_count == 6);
  std::vector<std::string> recent;
  for (auto& r : d.recent_budget_exceeded)
    recent.push_back(r.run_id);
  CHECK(recent == std::vector<std::string>{"over-5", "over-4", "over-3", "over-2", "over-1"});
  REQUIRE_FALSE(d.recent_budget_exceeded.empty());
  auto& newest = d.recent_budget_exceeded.front();
  CHECK(newest.session_id == "s1");
  CHECK_FALSE(newest.completed_at.empty());
  CHECK(newest.budget.tool_budget == report(1, true).tool_budget);
  CHECK(newest.budget.job_context_call_count == 2);
  CHECK(newest.budget.tool_budget_exceeded);
}

TEST_CASE("AS-84 a tenant's run and trace lists, their counts and its metrics cover its own records only, "
          "the empty tenant included",
          "[store][contract][tenant]") {
  store_client c(fresh_db("contract-tenant"));
  // One run at a time, so each claim takes the run just created: ended with its trace when `ends`.
  auto add = [&](const std::string& run_id, const std::string& tenant, bool ends) {
    store_client::ok(c.create(run_of(run_id, tenant)));
    if (!ends)
      return;
    auto claimed = store_client::ok(c.claim("worker-a", 60, 1));
    REQUIRE(claimed.runs.size() == 1);
    store_client::ok(c.transition(transition_of(claimed.runs[0], "completed")));
  };
  add("a1", "acme", true);
  add("b1", "beta", true);
  add("e1", "", true);
  add("a2", "acme", true);
  add("a3", "acme", false); // queued
  const protocol::tenant_scope acme{std::string("acme")}, empty{std::string()}, everyone{};

  auto runs = store_client::ok(c.list("", 0, acme));
  CHECK(ids(runs.runs) == std::vector<std::string>{"a3", "a2", "a1"});
  CHECK(runs.total_count == 3);
  auto page = store_client::ok(c.list("completed", 1, acme));
  CHECK(ids(page.runs) == std::vector<std::string>{"a2"});
  CHECK(page.total_count == 2); // the count is the tenant's, not the page's nor the store's
  CHECK(ids(store_client::ok(c.list("", 0, empty)).runs) == std::vector<std::string>{"e1"});
  CHECK(store_client::ok(c.list("", 0, everyone)).total_count == 5);
  CHECK(store_client::ok(c.list("", 2, everyone)).runs.size() == 2);

  auto traces = store_client::ok(c.traces("", 0, acme));
  CHECK(traces.traces.size() == 2);
  CHECK(traces.total_count == 2);
  for (auto& t : traces.traces)
    CHECK(t.find("\"tenant_key\":\"acme\"") != std::string::npos);
  CHECK(store_client::ok(c.traces("", 0, empty)).total_count == 1);
  CHECK(store_client::ok(c.traces("", 0, everyone)).total_count == 4);

  for (auto [id, run, tenant] : {std::tuple{"approval-1", "a1", "acme"}, {"approval-2", "b1", "beta"}}) {
    protocol::approval_record r;
    r.request_id = id;
    r.run_id = run;
    r.tenant_key = tenant;
    store_client::ok(c.ask<protocol::approval_record>(save_approval_atom::value, r));
  }
  protocol::approval_query q;
  q.tenant_key = "acme";
  auto approvals = store_client::ok(c.ask<approval_list>(list_approvals_atom::value, q));
  REQUIRE(approvals.page.size() == 1);
  CHECK(approvals.page[0].request_id == "approval-1");
  CHECK(approvals.summary.count == 1);

  auto stats = store_client::ok(c.stats(acme));
  CHECK(stats.run_count == 3);
  CHECK(stats.run_status_counts == std::map<std::string, int64_t>{{"completed", 2}, {"queued", 1}});
  CHECK(stats.trace_count == 2);
  CHECK(stats.approvals.count == 1);
  CHECK(stats.streams.empty()); // the store's own report is the operator's
  CHECK(stats.root.empty());
  CHECK_FALSE(stats.postgres);
  auto none = store_client::ok(c.stats(protocol::tenant_scope{std::string("nobody")}));
  CHECK(none.run_count == 0);
  CHECK(none.trace_count == 0);
  CHECK_FALSE(none.avg_duration_ms);
  auto all = store_client::ok(c.stats(everyone));
  CHECK(all.run_count == 5);
  CHECK(all.trace_count == 4);
  CHECK(all.approvals.count == 2);
}

TEST_CASE("AS-56 AS-59 the store reports each stream of AS-56 with its records and when it last grew",
          "[store][contract][streams]") {
  store_client c(fresh_db("contract-streams"));
  auto bg = c.create_and_claim("bg-1");
  store_client::ok(c.ask<bool>(append_atom::value, std::string("bg-1"), bg.lease_epoch,
                               stored_event{0, "session_start", R"({"type":"session_start"})"}));
  auto s = store_client::ok(c.stats());
  std::map<std::string, protocol::stream_stats> streams;
  for (auto& st : s.streams)
    streams[st.name] = st;
  for (auto name : {"runs", "run_events", "events", "traces", "sessions", "approvals", "audit", "runtime_spans",
                    "rate_limits"})
    CHECK(streams.count(name) == 1);
  CHECK(streams["runs"].records == 1);
  CHECK_FALSE(streams["runs"].last_created_at.empty());
  // A background run's events are run_events (AS-51); a chat run's are events (AS-91).
  CHECK(streams["run_events"].records == 1);
  CHECK_FALSE(streams["run_events"].last_created_at.empty());
  CHECK(streams["events"].records == 0);
  CHECK(streams["events"].last_created_at.empty());
  CHECK(streams["runtime_spans"].records == 0); // troupe records no spans
  CHECK(streams["rate_limits"].last_created_at.empty());
  auto window = store_client::ok(c.ask<protocol::rate_limit_decision>(rate_atom::value, std::string("u"), int64_t{5},
                                                                     int64_t{1767225600}));
  CHECK(window.allowed);
  s = store_client::ok(c.stats());
  for (auto& st : s.streams)
    if (st.name == "rate_limits") {
      CHECK(st.records == 1);
      CHECK(st.last_created_at.rfind("2026-01-01T00:00:00", 0) == 0);
    }
  CHECK_FALSE(s.root.empty());
}

TEST_CASE("AS-93 a run keeps the policy_snapshot_hash it was accepted under", "[store][contract]") {
  store_client c(fresh_db("contract-policy-hash"));
  auto r = run_of("hashed", "t");
  r.policy_snapshot_hash = "0123456789abcdef";
  CHECK(store_client::ok(c.create(r)).policy_snapshot_hash == "0123456789abcdef");
  CHECK(store_client::ok(c.get("hashed")).policy_snapshot_hash == "0123456789abcdef");
  auto claimed = store_client::ok(c.claim("worker-a", 60, 1));
  REQUIRE(claimed.runs.size() == 1);
  CHECK(claimed.runs[0].policy_snapshot_hash == "0123456789abcdef");
}

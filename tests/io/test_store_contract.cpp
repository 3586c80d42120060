// The store port's contract under concurrency and for the bytes it keeps (CJ-1, CJ-3, CJ-8): cases
// that every adapter must pass unchanged, driven through store_actor messages only.
#include "io/store_client.hpp"

#include <atomic>
#include <map>
#include <set>
#include <thread>

using namespace troupe;
using namespace troupe::test;

namespace {

// Stores `n` queued runs named prefix-0..n-1, sent at once so the store may batch them.
void create_runs(store_client& c, const std::string& prefix, int n) {
  for (int i = 0; i < n; ++i)
    c.self->send(c.store, create_run_atom::value, store_client::run(prefix + std::to_string(i)));
  int answered = 0;
  int refused = 0;
  c.self->receive_for(answered, n)([](run_record&) {}, [&](caf::error&) { ++refused; },
                                   caf::after(std::chrono::seconds(60)) >> [] { FAIL("the store stopped answering"); });
  REQUIRE(answered == n);
  REQUIRE(refused == 0);
}

} // namespace

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
        self->request(c.store, std::chrono::seconds(30), claim_atom::value, "worker-" + std::to_string(w), 60.0,
                      uint32_t{25})
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

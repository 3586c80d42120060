// The lease keeper against a fake store and fake runs (AS-82): renewals every lease/3 for runs that
// answer, none for a wedged run, fencing when the store refuses, and the end of a run or of the keeper.
#include "actors/errors.hpp"
#include "actors/lease_keeper.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <set>

using namespace troupe;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

using renewed_atom = caf::atom_constant<caf::atom("t_renewed")>;
using was_fenced_atom = caf::atom_constant<caf::atom("t_fenced")>;

constexpr double lease_seconds = 0.6; // a renewal every 200 ms
constexpr auto period = 200ms;

// Which renewals the fake store refuses, and with which error.
struct refusals {
  std::mutex mu;
  std::map<std::string, caf::error> by_run;

  void refuse(const std::string& run_id, caf::error err) {
    std::lock_guard<std::mutex> lock(mu);
    by_run[run_id] = std::move(err);
  }
  std::optional<caf::error> of(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = by_run.find(run_id);
    return it == by_run.end() ? std::nullopt : std::optional<caf::error>(it->second);
  }
};

// Tells `observer` of every renewal it is asked for, then grants or refuses it.
caf::behavior fake_store(caf::event_based_actor*, caf::actor observer, std::shared_ptr<refusals> refused) {
  return {
    [=](renew_atom, const std::string& run_id, int64_t epoch, double seconds) -> caf::result<bool> {
      caf::anon_send(observer, renewed_atom::value, run_id, epoch, seconds);
      if (auto err = refused->of(run_id))
        return *err;
      return true;
    },
  };
}

// A run that answers pings (or, wedged, never does) and tells `observer` when it is fenced.
caf::behavior fake_run(caf::event_based_actor*, caf::actor observer, std::string run_id, bool wedged) {
  return {
    [=](ping_atom) -> caf::result<bool> {
      if (wedged)
        return caf::delegated<bool>(); // nobody ever answers
      return true;
    },
    [=](fenced_atom) { caf::anon_send(observer, was_fenced_atom::value, run_id); },
  };
}

struct renewal {
  std::string run_id;
  int64_t epoch;
  double seconds;
  steady::time_point at;
};

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<refusals> refused = std::make_shared<refusals>();
  std::shared_ptr<node_metrics> metrics = std::make_shared<node_metrics>();
  caf::actor store_impl = sys.spawn(fake_store, caf::actor_cast<caf::actor>(self), refused);
  lease_keeper_actor keeper = spawn_lease_keeper(sys, caf::actor_cast<store_actor>(store_impl), lease_seconds, metrics);
  std::vector<caf::actor> runs;

  ~fixture() {
    self->send_exit(keeper, caf::exit_reason::user_shutdown);
    self->send_exit(store_impl, caf::exit_reason::user_shutdown);
    for (auto& r : runs)
      self->send_exit(r, caf::exit_reason::user_shutdown);
  }

  caf::actor track(const std::string& run_id, int64_t epoch, bool wedged = false) {
    auto run = sys.spawn(fake_run, caf::actor_cast<caf::actor>(self), run_id, wedged);
    runs.push_back(run);
    self->send(keeper, track_atom::value, run_id, epoch, caf::actor_cast<run_actor>(run));
    return run;
  }

  // Renewals as the store sees them, until `enough` says so (10 s at most); fencings go to `fenced`.
  std::vector<renewal> renewals_until(std::function<bool(const std::vector<renewal>&)> enough,
                                      std::vector<std::string>* fenced = nullptr) {
    std::vector<renewal> seen;
    bool done = false;
    auto deadline = steady::now() + 10s;
    self->receive_while([&] { return !done; })(
      [&](renewed_atom, const std::string& run_id, int64_t epoch, double seconds) {
        seen.push_back({run_id, epoch, seconds, steady::now()});
        done = enough(seen) || steady::now() > deadline;
      },
      [&](was_fenced_atom, const std::string& run_id) {
        if (fenced)
          fenced->push_back(run_id);
        done = enough(seen) || steady::now() > deadline;
      },
      caf::after(10s) >> [&] { done = true; });
    REQUIRE(enough(seen));
    return seen;
  }

  static std::function<bool(const std::vector<renewal>&)> at_least(const std::string& run_id, std::size_t n) {
    return [=](const std::vector<renewal>& seen) {
      return static_cast<std::size_t>(
               std::count_if(seen.begin(), seen.end(), [&](const renewal& r) { return r.run_id == run_id; }))
             >= n;
    };
  }

  int64_t leases_lost() const {
    auto text = metrics->prometheus_text({}, 0);
    auto key = std::string("troupe_leases_total{event=\"lost\"} ");
    auto at = text.find(key);
    return at == std::string::npos ? 0 : std::stoll(text.substr(at + key.size()));
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "every tracked lease is renewed at its epoch for the lease's length, all of them in "
                          "each tick of lease/3",
                 "[lease_keeper]") { // AS-82
  track("r1", 3);
  track("r2", 5);
  auto seen = renewals_until([](const std::vector<renewal>& s) { return at_least("r1", 2)(s) && at_least("r2", 2)(s); });
  for (auto& r : seen) {
    CHECK(r.epoch == (r.run_id == "r1" ? 3 : 5));
    CHECK(r.seconds == lease_seconds);
  }
  // One tick renews both, close together; the next tick comes a period later.
  REQUIRE(seen.size() >= 3);
  CHECK(seen[0].run_id != seen[1].run_id);
  CHECK(seen[1].at - seen[0].at < period / 2);
  CHECK(seen[2].at - seen[0].at >= period / 2);
}

TEST_CASE_METHOD(fixture, "a run that does not answer its ping is not renewed, so its lease lapses",
                 "[lease_keeper]") { // AS-82
  track("wedged", 1, true);
  track("alive", 1);
  auto seen = renewals_until(at_least("alive", 3));
  for (auto& r : seen)
    CHECK(r.run_id == "alive");
}

TEST_CASE_METHOD(fixture, "a lease taken over (the store refuses the renewal at a stale epoch) fences its run, "
                          "and the others go on",
                 "[lease_keeper]") { // AS-82
  refused->refuse("taken", make_error(errc::conflict, "the run's lease was taken over"));
  track("taken", 2);
  track("kept", 7);
  std::vector<std::string> fenced;
  renewals_until(
    [&](const std::vector<renewal>& s) {
      return std::find(fenced.begin(), fenced.end(), "taken") != fenced.end() && at_least("kept", 2)(s);
    },
    &fenced);
  CHECK(std::find(fenced.begin(), fenced.end(), "kept") == fenced.end());
  CHECK(leases_lost() >= 1);
}

TEST_CASE_METHOD(fixture, "a renewal the store fails for another reason fences the run too: the keeper cannot "
                          "know the lease is still held",
                 "[lease_keeper]") { // AS-82
  refused->refuse("r1", make_error(errc::internal, "disk I/O error"));
  track("r1", 4);
  std::vector<std::string> fenced;
  renewals_until([&](const std::vector<renewal>&) { return !fenced.empty(); }, &fenced);
  CHECK(fenced.front() == "r1");
  CHECK(leases_lost() >= 1);
}

TEST_CASE_METHOD(fixture, "a run that ends is no longer renewed", "[lease_keeper]") { // AS-82
  auto ending = track("ending", 1);
  track("staying", 1);
  renewals_until(at_least("ending", 1));
  self->monitor(ending);
  self->send_exit(ending, caf::exit_reason::user_shutdown);
  self->receive([](caf::down_msg&) {}, caf::after(10s) >> [] { FAIL("the run did not end"); });
  // Renewals of the tick last seen and of a tick under way at the end may still arrive (their pings
  // were answered in time); from the third tick seen after the end on, there is none.
  auto seen = renewals_until(at_least("staying", 4));
  std::size_t third_tick = 0;
  for (std::size_t i = 0, staying = 0; i < seen.size(); ++i)
    if (seen[i].run_id == "staying" && ++staying == 3)
      third_tick = i;
  for (std::size_t i = third_tick; i < seen.size(); ++i)
    CHECK(seen[i].run_id == "staying");
}

TEST_CASE_METHOD(fixture, "shutting the keeper down leaves its runs running", "[lease_keeper]") {
  auto run = track("r1", 1);
  renewals_until(at_least("r1", 1));
  self->monitor(keeper);
  self->send_exit(keeper, caf::exit_reason::user_shutdown);
  self->receive([](caf::down_msg&) {}, caf::after(10s) >> [] { FAIL("the keeper did not stop"); });
  bool answered = false;
  self->request(caf::actor_cast<run_actor>(run), 5s, ping_atom::value)
    .receive([&](bool) { answered = true; }, [&](caf::error& err) { FAIL(message_of(err)); });
  CHECK(answered);
}

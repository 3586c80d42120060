// One PSKA digest job against a fake web port that plays PSKA and troupe (AS-67, AS-72, AS-86,
// CJ-44, CJ-45): the requests the job makes, in order, and how it ends.
#include "actors/pska_digest_job.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace troupe;

namespace {

// What the fake answers a request, by its method and URL; 0 as the status: a transport error.
using script = std::function<web_response(const web_request&)>;

struct seen_requests {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::string> lines; // "METHOD url"
  void add(const web_request& r) {
    {
      std::lock_guard<std::mutex> hold(mutex);
      lines.push_back(r.method + " " + r.url);
    }
    arrived.notify_all();
  }
  bool any(const std::string& needle) {
    std::lock_guard<std::mutex> hold(mutex);
    return found(needle);
  }
  // A request the job sent as it ended may reach the fake after the outcome reached the test.
  bool arrives(const std::string& needle) {
    std::unique_lock<std::mutex> hold(mutex);
    return arrived.wait_for(hold, std::chrono::seconds(10), [&] { return found(needle); });
  }

private:
  bool found(const std::string& needle) const {
    for (auto& l : lines)
      if (l.find(needle) != std::string::npos)
        return true;
    return false;
  }
};

web_port_actor::behavior_type fake_web(std::shared_ptr<seen_requests> seen, script answer) {
  return {
    [=](web_atom, web_request& r) -> caf::result<web_response> {
      seen->add(r);
      auto a = answer(r);
      if (a.status == 0)
        return caf::make_error(caf::sec::request_timeout);
      return a;
    },
  };
}

bool has(const web_request& r, const std::string& method, const std::string& part) {
  return r.method == method && r.url.find(part) != std::string::npos;
}

const std::string good_events = R"({"events":[
  {"type":"tool_call","tool_name":"pska_pska_write_candidates","tool_call_id":"c1",
   "tool_args":{"knowledge_claims":[{"claim":"x"}]}},
  {"type":"tool_result","tool_call_id":"c1","metadata":{}},
  {"type":"session_end","content":"wrote one claim"}],"has_more":false,"next_after_sequence":2})";

digest_job_settings settings(int64_t lease_seconds = 300) {
  digest_job_settings s;
  s.pska_url = "http://pska";
  s.troupe_url = "http://troupe";
  s.worker_id = "w-1";
  s.lease_seconds = lease_seconds;
  s.run_poll_seconds = 0.01;
  s.request_timeout_seconds = 1;
  return s;
}

digest_job_outcome carry(caf::actor_system& sys, digest_job_settings s, web_port_actor web) {
  protocol::pska::job job;
  job.id = "j1";
  job.json = R"({"id":"j1"})";
  auto actor = spawn_digest_job(sys, std::move(s), {"acme", "ann"}, job, web);
  caf::scoped_actor self{sys};
  digest_job_outcome out;
  self->request(actor, std::chrono::seconds(60), start_atom::value)
    .receive([&](digest_job_outcome& o) { out = std::move(o); },
             [&](caf::error& err) { FAIL("the job ended without an outcome: " << caf::to_string(err)); });
  return out;
}

} // namespace

TEST_CASE("A one-batch job is leased, run, judged from its events and completed (AS-67, AS-72)", "[pska]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<seen_requests>();
  int polls = 0;
  auto web = sys.spawn(fake_web, seen, script([&](const web_request& r) -> web_response {
    if (has(r, "POST", "/jobs/j1/lease"))
      return {200, R"({"job":{"id":"j1","attempt":1}})"};
    if (has(r, "GET", "/digest/batches/j1"))
      return {200, R"({"cursor":"0","next_cursor":null,"has_more":false,"source_items":[{"id":"s1"}]})"};
    if (has(r, "POST", "/v1/runs"))
      return {200, R"({"status":"queued"})"};
    if (has(r, "GET", "/events"))
      return {200, good_events};
    if (has(r, "GET", "/v1/runs/pskad_"))
      return {200, ++polls < 3 ? R"({"status":"running"})"
                               : R"({"status":"completed","metadata":{"caller":"pska_digest_worker"}})"};
    if (has(r, "POST", "/jobs/j1/complete"))
      return {200, "{}"};
    return {404, "{}"};
  }));
  auto out = carry(sys, settings(), web);
  CHECK(out.what == digest_job_outcome::kind::completed);
  CHECK(out.batch_count == 1);
  CHECK(out.message.find(R"("content":"wrote one claim")") != std::string::npos);
  CHECK(out.message.find(R"("leased_job":{"id":"j1","attempt":1})") != std::string::npos);
  CHECK_FALSE(seen->any("/fail"));
  CHECK(polls == 3);
}

TEST_CASE("A batch run whose id is taken by a passed run is reused, not run again (CJ-45)", "[pska]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<seen_requests>();
  auto web = sys.spawn(fake_web, seen, script([&](const web_request& r) -> web_response {
    if (has(r, "POST", "/lease"))
      return {200, R"({"job":{"id":"j1"}})"};
    if (has(r, "GET", "/digest/batches/"))
      return {200, R"({"cursor":"0","has_more":false,"source_items":[{"id":"s1"}]})"};
    if (has(r, "POST", "/v1/runs"))
      return {409, R"({"detail":"Run already exists"})"};
    if (has(r, "GET", "/events"))
      return {200, good_events};
    if (has(r, "GET", "/v1/runs/"))
      return {200, R"({"status":"completed","metadata":{"purpose":"digest"}})"};
    return {200, "{}"};
  }));
  auto out = carry(sys, settings(), web);
  CHECK(out.what == digest_job_outcome::kind::completed);
  CHECK(out.batch_count == 1);
}

TEST_CASE("A lease whose heartbeats fail for its length is lost: the run is cancelled, PSKA told nothing (CJ-44)",
          "[pska]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<seen_requests>();
  auto web = sys.spawn(fake_web, seen, script([&](const web_request& r) -> web_response {
    if (has(r, "POST", "/lease"))
      return {200, R"({"job":{"id":"j1"}})"};
    if (has(r, "POST", "/heartbeat"))
      return {0, ""}; // PSKA cannot be reached
    if (has(r, "GET", "/digest/batches/"))
      return {200, R"({"cursor":"0","has_more":false,"source_items":[{"id":"s1"}]})"};
    if (has(r, "POST", "/v1/runs"))
      return {200, "{}"};
    if (has(r, "GET", "/v1/runs/"))
      return {200, R"({"status":"running"})"}; // the run goes on and on
    return {200, "{}"};
  }));
  // A 5 s lease: heartbeats every 1.7 s, retried each second, lost after 4.5 s without a success.
  auto out = carry(sys, settings(5), web);
  CHECK(out.what == digest_job_outcome::kind::lease_lost);
  CHECK(seen->arrives("/cancel")); // the batch's run, POST http://troupe/v1/runs/pskad_…/cancel
  CHECK(seen->any("POST http://troupe/v1/runs/pskad_"));
  CHECK_FALSE(seen->any("/complete"));
  CHECK_FALSE(seen->any("/fail"));
}

TEST_CASE("A heartbeat answered 409 loses the lease at once; a 404 falls back to leasing again (AS-86)", "[pska]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto seen = std::make_shared<seen_requests>();
  int leases = 0;
  auto web = sys.spawn(fake_web, seen, script([&](const web_request& r) -> web_response {
    if (has(r, "POST", "/lease"))
      return ++leases == 1 ? web_response{200, R"({"job":{"id":"j1"}})"} : web_response{409, "taken"};
    if (has(r, "POST", "/heartbeat"))
      return {404, "no such route"};
    if (has(r, "GET", "/digest/batches/"))
      return {200, R"({"cursor":"0","has_more":false,"source_items":[{"id":"s1"}]})"};
    if (has(r, "GET", "/v1/runs/"))
      return {200, R"({"status":"running"})"};
    return {200, "{}"};
  }));
  auto out = carry(sys, settings(5), web);
  CHECK(out.what == digest_job_outcome::kind::lease_lost);
  CHECK(leases == 2); // the first lease, then the renewal PSKA refused
  CHECK_FALSE(seen->any("/fail"));
}

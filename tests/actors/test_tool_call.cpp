// The tool_call actor against fake tool ports: one answer per call, the timeout, cancellation by the
// loop or by its run's end, and ports that answer late or throw (AS-18, AS-44, AS-52).
#include "actors/tool_call.hpp"
#include "fake_ports.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::fake_tools;

namespace {

// A port that holds every completion for the test to run whenever it likes, whatever cancel() said:
// a port whose answer was already on its way when the call was cancelled.
class held_tools : public tool_port {
public:
  std::vector<protocol::tool_schema> tools() const override { return {}; }

  std::shared_ptr<cancel_handle> execute(tool_invocation, completion done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = std::move(done);
    }
    started_.notify_all();
    return std::make_shared<counting_handle>(cancels_);
  }

  // The call actor starts its port call on its own thread, after the spawn returns.
  bool wait_started() {
    std::unique_lock<std::mutex> lock(mu_);
    return started_.wait_for(lock, std::chrono::seconds(10), [this] { return static_cast<bool>(done_); });
  }

  void answer(tool_outcome outcome) {
    completion done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done = std::move(done_);
    }
    REQUIRE(done);
    done(std::move(outcome));
  }

  int cancels() const { return cancels_->load(); }

private:
  struct counting_handle : cancel_handle {
    explicit counting_handle(std::shared_ptr<std::atomic<int>> n) : count(std::move(n)) {}
    void cancel() override { ++*count; }
    std::shared_ptr<std::atomic<int>> count;
  };
  std::mutex mu_;
  std::condition_variable started_;
  completion done_;
  std::shared_ptr<std::atomic<int>> cancels_ = std::make_shared<std::atomic<int>>(0);
};

class throwing_tools : public tool_port {
public:
  std::vector<protocol::tool_schema> tools() const override { return {}; }
  std::shared_ptr<cancel_handle> execute(tool_invocation, completion) override {
    throw std::runtime_error("the tool port broke");
  }
};

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<fake_tools> tools = std::make_shared<fake_tools>();

  static tool_invocation echo() {
    tool_invocation call;
    call.run_id = "r1";
    call.call_id = "c1";
    call.name = "echo";
    return call;
  }

  // Spawns the call answering this test's actor, which watches it end.
  tool_call_actor spawn(std::shared_ptr<tool_port> port, double timeout_seconds, uint64_t key = 7) {
    auto call = spawn_tool_call(sys, caf::actor_cast<caf::actor>(self), key, std::move(port), echo(), timeout_seconds);
    self->monitor(call);
    return call;
  }

  // The call's one answer, or nothing within 10 s.
  std::optional<call_result> answer(uint64_t key = 7) {
    std::optional<call_result> out;
    self->receive([&](tool_result_atom, uint64_t k, const call_result& r) {
                    CHECK(k == key);
                    out = r;
                  },
                  caf::after(10s) >> [] { FAIL("the call did not answer within 10 s"); });
    return out;
  }

  // Waits for the call actor's end and returns its exit reason; an answer that comes first is a failure.
  caf::error ended() {
    caf::error reason;
    bool down = false;
    self->receive_while([&] { return !down; })(
      [&](caf::down_msg& d) {
        reason = d.reason;
        down = true;
      },
      [&](tool_result_atom, uint64_t, const call_result&) { FAIL("the call answered when it should not have"); },
      caf::after(10s) >> [&] {
        FAIL("the call actor did not end within 10 s");
        down = true;
      });
    return reason;
  }

  // Nothing more from the call: everything it sent before it ended is already in the mailbox.
  void nothing_more() {
    self->receive([&](tool_result_atom, uint64_t, const call_result&) { FAIL("a second answer arrived"); },
                  caf::after(0ms) >> [] {});
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "a call that completes answers once with the port's output, then ends", "[tool_call]") {
  tools->push({"hello", false});
  spawn(tools, 5);
  auto r = answer();
  REQUIRE(r);
  CHECK(r->outcome.output == "hello");
  CHECK_FALSE(r->outcome.cancelled);
  CHECK_FALSE(r->timed_out);
  CHECK_FALSE(r->refused);
  CHECK(r->duration_ms >= 0);
  CHECK_FALSE(ended());
  nothing_more();
  REQUIRE(tools->requests().size() == 1);
  CHECK(tools->requests()[0].call_id == "c1");
  CHECK(tools->cancels() == 0);
}

TEST_CASE_METHOD(fixture, "an error the tool port reports reaches the run as the call's output, verbatim",
                 "[tool_call]") { // AS-44
  tools->push({"[ERROR] no such file", false});
  spawn(tools, 5);
  auto r = answer();
  REQUIRE(r);
  CHECK(r->outcome.output == "[ERROR] no such file");
  CHECK_FALSE(r->timed_out);
  CHECK_FALSE(ended());
}

TEST_CASE_METHOD(fixture, "a call past its timeout is cancelled at the port and answers once, timed out",
                 "[tool_call]") {
  spawn(tools, 0.05); // nothing is scripted: the tool hangs
  auto r = answer();
  REQUIRE(r);
  CHECK(r->timed_out);
  CHECK(r->outcome.output.empty());
  CHECK(r->duration_ms >= 50);
  CHECK_FALSE(ended());
  nothing_more(); // the port's cancelled completion is not a second answer
  CHECK(tools->cancels() == 1);
}

TEST_CASE_METHOD(fixture, "the port's answer after the timeout is dropped, never a second result",
                 "[tool_call]") {
  auto port = std::make_shared<held_tools>();
  spawn(port, 0.05);
  auto r = answer();
  REQUIRE(r);
  CHECK(r->timed_out);
  port->answer({"too late", false});
  CHECK_FALSE(ended());
  nothing_more();
  CHECK(port->cancels() == 1);
}

TEST_CASE_METHOD(fixture, "cancelling a call cancels its port call and sends no result", "[tool_call]") { // AS-52
  auto call = spawn(tools, 5);
  self->send(call, cancel_atom::value);
  CHECK_FALSE(ended());
  nothing_more();
  CHECK(tools->cancels() == 1);
}

TEST_CASE_METHOD(fixture, "a port that answers after the cancel gets no result delivered", "[tool_call]") { // AS-52
  auto port = std::make_shared<held_tools>();
  auto call = spawn(port, 5);
  REQUIRE(port->wait_started());
  self->send(call, cancel_atom::value);
  port->answer({"after the cancel", false}); // queued behind the cancel
  CHECK_FALSE(ended());
  nothing_more();
  CHECK(port->cancels() == 1);
}

TEST_CASE_METHOD(fixture, "a port that gives a call up on its own still answers the run, with the port's words",
                 "[tool_call]") { // AS-44
  // A port that stops (the built-in tools' executor shutting down) completes its calls cancelled
  // although the call asked for nothing: the run must still hear of it, or it waits forever.
  auto port = std::make_shared<held_tools>();
  spawn(port, 0); // no timeout to fall back on
  REQUIRE(port->wait_started());
  port->answer({"[ERROR] Tool call cancelled", true});
  auto r = answer();
  REQUIRE(r);
  CHECK(r->outcome.output == "[ERROR] Tool call cancelled");
  CHECK_FALSE(r->timed_out);
  CHECK_FALSE(ended());
  CHECK(port->cancels() == 0);
}

TEST_CASE_METHOD(fixture, "a call whose run goes down is cancelled at the port without an answer",
                 "[tool_call]") { // AS-52
  // A run that hands on whatever answer it gets; once it is dead, nothing reaches it.
  auto run = sys.spawn(
    [](caf::event_based_actor*, caf::actor observer) -> caf::behavior {
      return {[=](tool_result_atom, uint64_t key, const call_result& r) {
        caf::anon_send(observer, tool_result_atom::value, key, r);
      }};
    },
    caf::actor_cast<caf::actor>(self));
  auto call = spawn_tool_call(sys, run, 1, tools, echo(), 5);
  self->monitor(call);
  self->send_exit(run, caf::exit_reason::kill);
  CHECK_FALSE(ended());
  nothing_more();
  CHECK(tools->cancels() == 1);
}

TEST_CASE_METHOD(fixture, "a tool port that throws ends the call actor with an error and no answer, which its "
                          "monitor sees",
                 "[tool_call]") {
  auto reason = [&] {
    spawn(std::make_shared<throwing_tools>(), 5);
    return ended();
  }();
  CHECK(reason); // not a normal exit: the loop's monitor turns it into an [ERROR] result
  nothing_more();
}

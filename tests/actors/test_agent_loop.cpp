// The one agent loop against fake model and tool ports: its rounds, its call dispatch (AS-18 one
// at a time, RS-25 up to five at once with a timeout each), the gate before each call, the round cap
// (AS-20, RS-22) and stopping (AS-52, RS-42).
#include "actors/agent_loop.hpp"
#include "fake_ports.hpp"
#include "protocol/round_reply.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>

using namespace troupe;
using troupe::testing::fake_model;

namespace {

using admit_atom = caf::atom_constant<caf::atom("t_admit")>;
using refuse_atom = caf::atom_constant<caf::atom("t_refuse")>;
using note_atom = caf::atom_constant<caf::atom("t_note")>;

// A tool port whose calls end when the test says so; it tells the observer of each start and cancel.
// A call named "crash" throws, which takes its tool_call actor down.
class held_tools : public tool_port {
public:
  explicit held_tools(caf::actor observer) : observer_(std::move(observer)) {}

  std::vector<protocol::tool_schema> tools() const override { return {}; }

  std::shared_ptr<cancel_handle> execute(tool_invocation call, completion done) override {
    if (call.name == "crash")
      throw std::runtime_error("the port broke");
    auto h = std::make_shared<held>();
    h->done = std::move(done);
    h->observer = observer_;
    h->name = call.name;
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_[call.name] = h;
    }
    caf::anon_send(observer_, note_atom::value, "start " + call.name);
    return h;
  }

  void finish(const std::string& name, std::string output) {
    std::shared_ptr<held> h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      h = calls_.at(name);
    }
    h->end({std::move(output), false});
  }

private:
  struct held : cancel_handle {
    completion done;
    caf::actor observer;
    std::string name;
    std::atomic<bool> fired{false};
    void end(tool_outcome o) {
      if (!fired.exchange(true))
        done(std::move(o));
    }
    void cancel() override {
      if (!fired.load())
        caf::anon_send(observer, note_atom::value, "cancel " + name);
      end({"", true});
    }
  };

  caf::actor observer_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<held>> calls_;
};

// A dialect that notes what the loop asks of it. Calls named deny_* are refused, ask_* wait for the
// test's admit_atom or refuse_atom; a reply without calls ends the run.
struct noting_dialect : loop_dialect {
  caf::actor observer;
  std::shared_ptr<tool_port> tools;
  after_calls then_after = after_calls::next_round;
  protocol::reply_assembler assembler;

  void note(std::string what) { caf::anon_send(observer, note_atom::value, std::move(what)); }

  bool prepare_round(int round, protocol::responses::round_request&) override {
    note("round " + std::to_string(round));
    assembler = {};
    return true;
  }

  batch on_batch(std::vector<protocol::responses::upstream_event>& events) override {
    for (auto& e : events)
      assembler.feed(e);
    return assembler.ended() ? batch::round_end : batch::more;
  }

  bool on_round_end(std::vector<loop_call>& calls, after_calls& then) override {
    auto outcome = assembler.outcome();
    if (outcome.reply.tool_calls.empty()) {
      note("answer " + outcome.reply.content);
      return false;
    }
    for (std::size_t i = 0; i < outcome.reply.tool_calls.size(); ++i) {
      loop_call c;
      c.ref = i;
      c.port = tools;
      c.invocation.name = outcome.reply.tool_calls[i].name;
      calls.push_back(std::move(c));
    }
    then = then_after;
    return true;
  }

  admission admit_call(const loop_call& call, std::string& refusal) override {
    auto& name = call.invocation.name;
    if (name.rfind("deny", 0) == 0) {
      refusal = "refused " + name;
      return admission::refuse;
    }
    if (name.rfind("ask", 0) == 0) {
      note("wait " + name + " " + std::to_string(call.key));
      return admission::wait;
    }
    return admission::run;
  }

  void on_call_end(const loop_call& call, call_result result) override {
    note("end " + call.invocation.name + ": " + result.outcome.output
         + (result.refused ? " (refused)" : ""));
  }

  void on_done() override { note("done"); }
  void on_rounds_exhausted() override { note("exhausted"); }
  std::string timeout_output(double) const override { return "timed out"; }
  std::string truncation_notice(std::size_t dropped) const override { return "+" + std::to_string(dropped); }
};

struct host_state {
  noting_dialect dialect;
  std::unique_ptr<agent_loop> loop;
};

caf::behavior host(caf::stateful_actor<host_state>* self, std::shared_ptr<model_port> model,
                   loop_settings settings, caf::actor observer, std::shared_ptr<tool_port> tools,
                   after_calls then) {
  auto& st = self->state;
  st.dialect.observer = observer;
  st.dialect.tools = std::move(tools);
  st.dialect.then_after = then;
  st.loop = std::make_unique<agent_loop>(self, std::move(model), settings, st.dialect);
  self->set_down_handler([self](caf::down_msg& down) { self->state.loop->on_down(down); });
  return {
    [=](start_atom) { self->state.loop->start(); },
    [=](cancel_atom) { self->state.loop->stop(); },
    [=](admit_atom, uint64_t key) { self->state.loop->admit(key); },
    [=](refuse_atom, uint64_t key, std::string& why) { self->state.loop->refuse(key, std::move(why)); },
    [=](upstream_atom, uint64_t tag, std::vector<protocol::responses::upstream_event>& events) {
      self->state.loop->on_upstream(tag, events);
    },
    [=](tool_result_atom, uint64_t key, call_result& result) { self->state.loop->on_tool_result(key, result); },
  };
}

protocol::model_outcome calls(std::vector<std::string> names) {
  auto o = fake_model::text("");
  for (auto& n : names)
    o.reply.tool_calls.push_back({"id_" + n, n, "{}"});
  return o;
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<fake_model> model = std::make_shared<fake_model>();
  std::shared_ptr<held_tools> tools = std::make_shared<held_tools>(caf::actor_cast<caf::actor>(self));
  loop_settings settings;
  after_calls then = after_calls::next_round;
  caf::actor loop_host;

  void start() {
    loop_host = sys.spawn(host, model, settings, caf::actor_cast<caf::actor>(self), tools, then);
    self->send(loop_host, start_atom::value);
  }

  ~fixture() {
    if (loop_host) // the held calls keep the host referenced: end it before the system waits for it
      caf::anon_send_exit(loop_host, caf::exit_reason::user_shutdown);
  }

  // The next `n` notes, in order.
  std::vector<std::string> notes(std::size_t n) {
    std::vector<std::string> out;
    while (out.size() < n)
      self->receive([&](note_atom, std::string& s) { out.push_back(std::move(s)); },
                    caf::after(std::chrono::seconds(10)) >> [&] {
                      FAIL("no note within 10 s after " << out.size() << " of " << n);
                    });
    return out;
  }
  std::string note() { return notes(1).at(0); }
  // The next `n` notes of calls running side by side, whose actors may note them in any order.
  std::vector<std::string> started(std::size_t n) {
    auto out = notes(n);
    std::sort(out.begin(), out.end());
    return out;
  }

  // Nothing more is noted for a while.
  bool quiet() {
    bool heard = false;
    self->receive([&](note_atom, std::string&) { heard = true; },
                  caf::after(std::chrono::milliseconds(100)) >> [] {});
    return !heard;
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "calls beyond the parallel limit wait for a free slot and run in order", "[loop]") { // RS-25
  settings.parallel_calls = 2;
  model->push(calls({"a", "b", "c"}));
  model->push(fake_model::text("fin"));
  start();
  CHECK(note() == "round 1");
  CHECK(started(2) == std::vector<std::string>{"start a", "start b"});
  CHECK(quiet()); // c waits
  tools->finish("b", "B");
  CHECK(notes(2) == std::vector<std::string>{"end b: B", "start c"});
  tools->finish("a", "A");
  CHECK(note() == "end a: A");
  CHECK(quiet()); // c still runs: no round yet
  tools->finish("c", "C");
  CHECK(notes(3) == std::vector<std::string>{"end c: C", "round 2", "answer fin"});
}

TEST_CASE_METHOD(fixture, "with one call at a time each call starts after the one before ends", "[loop]") { // AS-18
  model->push(calls({"a", "b"}));
  model->push(fake_model::text("fin"));
  start();
  CHECK(notes(2) == std::vector<std::string>{"round 1", "start a"});
  CHECK(quiet());
  tools->finish("a", "A");
  CHECK(notes(2) == std::vector<std::string>{"end a: A", "start b"});
  tools->finish("b", "B");
  CHECK(notes(3) == std::vector<std::string>{"end b: B", "round 2", "answer fin"});
}

TEST_CASE_METHOD(fixture, "a call that outlives its timeout is cancelled and ends timed out", "[loop]") {
  settings.call_timeout_seconds = 0.05;
  model->push(calls({"slow"}));
  model->push(fake_model::text("fin"));
  start();
  CHECK(notes(6)
        == std::vector<std::string>{"round 1", "start slow", "cancel slow", "end slow: timed out", "round 2",
                                    "answer fin"});
}

TEST_CASE_METHOD(fixture, "what a call answers is cut to the output bound and followed by the dialect's notice; a "
                          "refusal is not cut", "[loop]") { // AS-22, RS-26
  settings.max_tool_output_bytes = 4;
  model->push(calls({"long", "deny_long_enough"}));
  model->push(fake_model::text("fin"));
  start();
  CHECK(notes(2) == std::vector<std::string>{"round 1", "start long"});
  tools->finish("long", "0123456789");
  CHECK(notes(4)
        == std::vector<std::string>{"end long: 0123+6", "end deny_long_enough: refused deny_long_enough (refused)",
                                    "round 2", "answer fin"});
}

TEST_CASE_METHOD(fixture, "a call whose actor dies without answering ends with an error and the loop goes on",
                 "[loop]") {
  model->push(calls({"crash"}));
  model->push(fake_model::text("fin"));
  start();
  CHECK(note() == "round 1");
  auto end = note();
  CHECK(end.rfind("end crash: [ERROR] Tool call failed: ", 0) == 0);
  CHECK(notes(2) == std::vector<std::string>{"round 2", "answer fin"});
}

TEST_CASE_METHOD(fixture, "a refused call does not run and its refusal is its result", "[loop]") { // AS-32
  model->push(calls({"deny_x", "a"}));
  model->push(fake_model::text("fin"));
  start();
  CHECK(notes(3) == std::vector<std::string>{"round 1", "end deny_x: refused deny_x (refused)", "start a"});
  tools->finish("a", "A");
  CHECK(notes(3) == std::vector<std::string>{"end a: A", "round 2", "answer fin"});
}

TEST_CASE_METHOD(fixture, "a waiting call runs once admitted, or ends refused without running", "[loop]") { // AS-44
  model->push(calls({"ask_1", "ask_2"}));
  model->push(fake_model::text("fin"));
  start();
  CHECK(note() == "round 1");
  auto wait1 = note();
  REQUIRE(wait1.rfind("wait ask_1 ", 0) == 0);
  CHECK(quiet()); // the second call waits its turn behind the first
  self->send(loop_host, admit_atom::value, static_cast<uint64_t>(std::stoull(wait1.substr(11))));
  CHECK(note() == "start ask_1");
  tools->finish("ask_1", "one");
  CHECK(note() == "end ask_1: one");
  auto wait2 = note();
  REQUIRE(wait2.rfind("wait ask_2 ", 0) == 0);
  self->send(loop_host, refuse_atom::value, static_cast<uint64_t>(std::stoull(wait2.substr(11))), std::string("no"));
  CHECK(notes(3) == std::vector<std::string>{"end ask_2: no (refused)", "round 2", "answer fin"});
}

TEST_CASE_METHOD(fixture, "at the round cap the dialect hears the rounds are exhausted instead of another round",
                 "[loop]") { // AS-20, RS-22
  settings.max_rounds = 2;
  model->push(calls({"a"}));
  model->push(calls({"b"}));
  start();
  CHECK(notes(2) == std::vector<std::string>{"round 1", "start a"});
  tools->finish("a", "A");
  CHECK(notes(3) == std::vector<std::string>{"end a: A", "round 2", "start b"});
  tools->finish("b", "B");
  CHECK(notes(2) == std::vector<std::string>{"end b: B", "exhausted"});
  CHECK(model->requests().size() == 2);
}

TEST_CASE_METHOD(fixture, "calls of a round that ends the run run before the dialect hears it is done",
                 "[loop]") { // RS-22.2
  then = after_calls::end;
  model->push(calls({"a"}));
  start();
  CHECK(notes(2) == std::vector<std::string>{"round 1", "start a"});
  tools->finish("a", "A");
  CHECK(notes(2) == std::vector<std::string>{"end a: A", "done"});
  CHECK(model->requests().size() == 1);
}

TEST_CASE_METHOD(fixture, "stopping the loop cancels its calls and nothing more reaches the dialect",
                 "[loop]") { // AS-52, RS-42
  settings.parallel_calls = 2;
  model->push(calls({"a", "b"}));
  start();
  CHECK(note() == "round 1");
  CHECK(started(2) == std::vector<std::string>{"start a", "start b"});
  self->send(loop_host, cancel_atom::value);
  CHECK(started(2) == std::vector<std::string>{"cancel a", "cancel b"});
  tools->finish("a", "late");
  CHECK(quiet());
}

TEST_CASE_METHOD(fixture, "stopping the loop cancels the round in flight", "[loop]") { // AS-52
  start(); // nothing is scripted: the round hangs
  CHECK(note() == "round 1");
  self->send(loop_host, cancel_atom::value);
  for (int i = 0; i < 200 && model->cancels() == 0; ++i)
    self->receive(caf::after(std::chrono::milliseconds(10)) >> [] {});
  CHECK(model->cancels() == 1);
  CHECK(quiet());
}

// The node actor against fake ports (CJ-22 to CJ-26, CJ-29): its gate before and after the
// handshake, what a welcomed peer's cancel, resolution and forwarded workspace command reach, and a
// rejoin that makes it a new node. Every sender
// here is of this process, so the whole test is one peer; tests/integration/cluster.test.mjs drives
// it over real sockets from other processes.
#include "actors/errors.hpp"
#include "actors/node_actor.hpp"
#include "protocol/config.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

const std::string secret(40, 'k');

// What the fakes were asked, for the test to read.
struct heard {
  std::mutex mu;
  std::vector<std::string> cancels; // run ids
  std::vector<std::string> wakes;   // approval ids
  std::vector<std::string> commands; // forwarded: "<participant> <command_id> <body JSON>"
  void add(std::vector<std::string>& to, std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    to.push_back(std::move(what));
  }
  std::vector<std::string> read(std::vector<std::string>& from) {
    std::lock_guard<std::mutex> lock(mu);
    return from;
  }
};

// `nodes` as the node store answers them.
caf::behavior fake_nodes(caf::event_based_actor*, node_list rows) {
  return {[=](list_nodes_atom) { return rows; }};
}

// The registry holds run r1 at lease epoch 7.
caf::behavior fake_registry(caf::event_based_actor*, std::shared_ptr<heard> h) {
  return {
    [=](cancel_atom, const std::string& run_id, int64_t epoch) -> caf::result<run_record> {
      h->add(h->cancels, run_id);
      if (run_id != "r1" || epoch != 7)
        return make_error(errc::not_found, "no such attempt here");
      run_record r;
      r.run_id = run_id;
      r.status = "cancelled";
      return r;
    },
  };
}

// Hands every wake on to `observer`, the test.
caf::behavior fake_approvals(caf::event_based_actor* self, std::shared_ptr<heard> h, caf::actor observer) {
  return {[=](wake_atom, const std::string& id) {
    h->add(h->wakes, id);
    self->send(observer, wake_atom::value, id);
  }};
}

// The logs: a forwarded command answers a command_result naming its id.
caf::behavior fake_workspaces(caf::event_based_actor*, std::shared_ptr<heard> h) {
  return {[=](forward_atom, const workspace_command& c) {
    h->add(h->commands, c.participant + " " + c.request.command_id + " " + protocol::json::serialize(*c.request.body));
    workspace_outcome o;
    o.body = R"({"type":"command_result","command_id":")" + c.request.command_id + "\"}";
    o.max_seq = 4;
    return o;
  }};
}

std::shared_ptr<const protocol::reflexr::event_registry> event_types() {
  auto parsed = protocol::parse_config(
    R"({"workspaces":{"event_types":[{"name":"ops:deploy.finished","schema":{"type":"object","additionalProperties":true}}]}})",
    {}, [](const std::string&) { return std::nullopt; });
  REQUIRE(parsed.errors == std::vector<std::string>{});
  return std::get<0>(protocol::reflexr::event_registry::build(parsed.value.workspaces));
}

// A forward of a publish by user ana, with `frame` as the command's JSON.
workspace_forward forward_of_frame(std::string frame) {
  workspace_forward f;
  f.tenant_id = "acme";
  f.workspace_id = "prod";
  f.actor.kind = "user";
  f.actor.id = "ana";
  f.participant = "user:ana";
  f.command_id = "c-1";
  f.frame = std::move(frame);
  f.now = "2026-01-01T00:00:00.000000+00:00";
  return f;
}

node_row row(std::string id, std::string state) {
  node_row r;
  r.node_id = std::move(id);
  r.state = std::move(state);
  return r;
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<heard> h = std::make_shared<heard>();
  std::shared_ptr<node_status> status = std::make_shared<node_status>();
  std::vector<caf::actor> fakes;
  node_actor node;

  fixture() {
    status->set("node-00000000000000aa", node_status::state::alive);
    auto nodes = sys.spawn(fake_nodes, node_list{row("node-00000000000000cc", "alive"), row("node-00000000000000dd", "dead")});
    auto registry = sys.spawn(fake_registry, h);
    auto approvals = sys.spawn(fake_approvals, h, caf::actor_cast<caf::actor>(self));
    auto workspaces = sys.spawn(fake_workspaces, h);
    fakes = {nodes, registry, approvals, workspaces};
    node_actor_options options;
    options.cluster_id = "cluster-1";
    options.secret = secret;
    options.status = status;
    options.nodes_fresh = 0ms; // every hello reads `nodes`
    options.workspaces = caf::actor_cast<workspaces_actor>(workspaces);
    options.workspace_types = event_types();
    node = spawn_node_actor(sys, caf::actor_cast<node_store_actor>(nodes), caf::actor_cast<run_registry_actor>(registry),
                            caf::actor_cast<approval_registry_actor>(approvals), options);
  }

  ~fixture() {
    self->send_exit(node, caf::exit_reason::user_shutdown);
    for (auto& f : fakes)
      self->send_exit(f, caf::exit_reason::user_shutdown);
  }

  // What the node answers: the answer's first word, or the refusal's kind.
  template <class Answer, class... Ts>
  std::string ask(Ts&&... xs) {
    std::string out = "no answer";
    self->request(node, 5s, std::forward<Ts>(xs)...)
      .receive([&](Answer&) { out = "answered"; }, [&](caf::error& err) { out = problem_of(err).kind; });
    return out;
  }

  // A forward's answer body, or `refused: <message>`.
  std::string forward(workspace_forward f) {
    std::string out = "no answer";
    self->request(node, 5s, forward_atom::value, std::move(f))
      .receive([&](workspace_answer& a) { out = a.body; },
               [&](caf::error& err) { out = "refused: " + problem_of(err).kind + " " + message_of(err); });
    return out;
  }

  cancel_ack cancel(std::string run_id, int64_t epoch) {
    cancel_ack ack{"no answer"};
    self->request(node, 5s, cancel_atom::value, cancel_request{"run", std::move(run_id), epoch})
      .receive([&](cancel_ack& a) { ack = a; }, [&](caf::error& err) { ack.outcome = problem_of(err).kind; });
    return ack;
  }

  // The connecting side of CJ-23 as node `me`, with `key`; answers how the node answered the proof.
  std::string handshake(const std::string& me, const std::string& key) {
    auto hello = protocol::make_hello("cluster-1", me);
    std::string out = "no answer";
    self->request(node, 5s, hello_atom::value, hello)
      .receive(
        [&](protocol::cluster_challenge& c) {
          REQUIRE(c.node_id == status->node_id());
          REQUIRE(protocol::verify_server(c, secret, std::nullopt, "cluster-1", me, hello.nonce));
          out = ask<protocol::cluster_welcome>(auth_atom::value, protocol::client_proof(c, key, "cluster-1", me, hello.nonce));
        },
        [&](caf::error& err) { out = "hello " + problem_of(err).kind; });
    return out;
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "a peer that has not proven the secret reaches nothing: its cancel, resolution and ping are "
                          "refused and the registry hears none of them (CJ-24)",
                 "[cluster][node_actor]") {
  CHECK(cancel("r1", 7).outcome == "cluster_unauthenticated");
  CHECK(ask<resolve_ack>(resolve_atom::value, approval_resolution{"approval-1"}) == "cluster_unauthenticated");
  CHECK(ask<pong>(ping_atom::value) == "cluster_unauthenticated");
  CHECK(handshake("node-00000000000000cc", std::string(40, 'x')) == "bad_proof");
  CHECK(cancel("r1", 7).outcome == "cluster_unauthenticated");
  CHECK(h->read(h->cancels).empty());
  CHECK(h->read(h->wakes).empty());
}

TEST_CASE_METHOD(fixture, "a welcomed peer's cancel stops the attempt this node holds at that epoch, and is told "
                          "not_here otherwise (CJ-23, CJ-25)",
                 "[cluster][node_actor]") {
  REQUIRE(handshake("node-00000000000000cc", secret) == "answered");
  CHECK(cancel("r1", 7).outcome == "stopped");
  CHECK(cancel("r1", 6).outcome == "not_here");
  CHECK(cancel("r2", 7).outcome == "not_here");
  CHECK(h->read(h->cancels) == std::vector<std::string>{"r1", "r1", "r2"});
  pong p;
  self->request(node, 5s, ping_atom::value).receive([&](pong& x) { p = x; }, [](caf::error&) { FAIL("ping refused"); });
  CHECK(p.node_id == "node-00000000000000aa");
}

TEST_CASE_METHOD(fixture, "a welcomed peer's resolution wakes the approval registry, which reads the approval again "
                          "(CJ-26)",
                 "[cluster][node_actor]") {
  REQUIRE(handshake("node-00000000000000cc", secret) == "answered");
  CHECK(ask<resolve_ack>(resolve_atom::value, approval_resolution{"approval-1"}) == "answered");
  std::string woken;
  self->receive([&](wake_atom, const std::string& id) { woken = id; },
                caf::after(5s) >> [] { FAIL("the approval registry was not woken within 5 s"); });
  CHECK(woken == "approval-1");
}

TEST_CASE_METHOD(fixture, "a hello from a node that is not alive in nodes gets no challenge (CJ-23)",
                 "[cluster][node_actor]") {
  CHECK(handshake("node-00000000000000dd", secret) == "hello unknown_node"); // dead
  CHECK(handshake("node-00000000000000ee", secret) == "hello unknown_node"); // never joined
}

TEST_CASE_METHOD(fixture, "a node that rejoined under a new id is a new node: its peers prove the secret again "
                          "(CJ-14, CJ-23)",
                 "[cluster][node_actor]") {
  REQUIRE(handshake("node-00000000000000cc", secret) == "answered");
  CHECK(cancel("r1", 7).outcome == "stopped");
  status->set("node-00000000000000bb", node_status::state::alive);
  CHECK(cancel("r1", 7).outcome == "cluster_unauthenticated");
  REQUIRE(handshake("node-00000000000000cc", secret) == "answered");
  CHECK(cancel("r1", 7).outcome == "stopped");
}

TEST_CASE_METHOD(fixture, "a welcomed peer's workspace command reaches the logs as a client's would, read again from "
                          "its JSON; an unwelcomed peer's reaches nothing (CJ-24, CJ-29)",
                 "[cluster][node_actor]") {
  auto publish = R"({"type":"publish","event":{"type":"ops:deploy.finished","service":"api"}})";
  CHECK(forward(forward_of_frame(publish)).rfind("refused: cluster_unauthenticated", 0) == 0);
  CHECK(h->read(h->commands).empty());
  REQUIRE(handshake("node-00000000000000cc", secret) == "answered");
  CHECK(forward(forward_of_frame(publish)) == R"({"type":"command_result","command_id":"c-1"})");
  CHECK(h->read(h->commands)
        == std::vector<std::string>{std::string("user:ana c-1 ") + publish});
}

TEST_CASE_METHOD(fixture, "a forwarded command is hostile input: a frame that is no command, nests too deep, repeats a "
                          "member or breaks UTF-8, a participant that is not its actor's and a bad workspace id are "
                          "refused before any log hears of them (CJ-29)",
                 "[cluster][node_actor]") {
  REQUIRE(handshake("node-00000000000000cc", secret) == "answered");
  auto refused = [&](workspace_forward f) { return forward(std::move(f)).rfind("refused: ", 0) == 0; };
  CHECK(refused(forward_of_frame("{")));
  CHECK(refused(forward_of_frame(std::string(100000, '[') + std::string(100000, ']'))));
  CHECK(refused(forward_of_frame(R"({"type":"publish","type":"publish","event":{"type":"ops:deploy.finished"}})")));
  CHECK(refused(forward_of_frame("{\"type\":\"publish\",\"event\":{\"type\":\"ops:deploy.finished\",\"s\":\"\xff\"}}")));
  // A frame that would close the command early and add a member of its own to the frame around it.
  CHECK(refused(forward_of_frame(R"({"type":"publish","event":{"type":"ops:deploy.finished"}},"x":1)")));
  auto other = forward_of_frame(R"({"type":"publish","event":{"type":"ops:deploy.finished"}})");
  other.participant = "user:bob";
  CHECK(refused(other));
  auto bad_id = forward_of_frame(R"({"type":"publish","event":{"type":"ops:deploy.finished"}})");
  bad_id.workspace_id = "../prod";
  CHECK(refused(bad_id));
  auto body = forward_of_frame(R"({"event":{"type":"ops:deploy.finished"},"oops":1})");
  body.publish_body = true;
  CHECK(refused(body));
  CHECK(h->read(h->commands).empty());
}

TEST_CASE_METHOD(fixture, "a feed request reaches nothing before the handshake, and one without an id, a subscriber or "
                          "a known kind is refused; a response feed with no responses here is no feed (CJ-24, CJ-27)",
                 "[cluster][node_actor]") {
  auto me = caf::actor_cast<caf::actor>(self);
  auto feed = [&](feed_request req) {
    std::string out = "no answer";
    self->request(node, 5s, subscribe_atom::value, std::move(req))
      .receive([&](feed_ack& ack) { out = ack.relay ? "relay" : "none"; },
               [&](caf::error& err) { out = "refused: " + problem_of(err).kind + " " + message_of(err); });
    return out;
  };
  CHECK(feed({"r1", 256, me}).rfind("refused: cluster_unauthenticated", 0) == 0);
  REQUIRE(handshake("node-00000000000000cc", secret) == "answered");
  CHECK(feed({"", 256, me}).rfind("refused: ", 0) == 0);
  CHECK(feed({"r1", 256, caf::actor{}}).rfind("refused: ", 0) == 0);
  CHECK(feed({"r1", 256, me, "approval"}).rfind("refused: ", 0) == 0);
  CHECK(feed({"resp_1", 256, me, "response"}) == "none");
}

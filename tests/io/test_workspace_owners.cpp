// Workspace ownership and forwarding between two nodes in one process (CJ-28, CJ-29, CJ-9): two
// `workspaces` actors over one PostgreSQL database, each with its own node id, joined to `nodes`,
// and a cluster_peers stand-in that hands a forward to the other node's actors the way the node
// actor does (read again from its wire form), or fails it while the test says that node is down.
#include "actors/cluster_membership.hpp"
#include "actors/errors.hpp"
#include "actors/workspace_log.hpp"
#include "io/store_client.hpp"
#include "protocol/config.hpp"

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <thread>

using namespace troupe;
using namespace troupe::test;
using namespace std::chrono_literals;
namespace rx = troupe::protocol::reflexr;

namespace {

using types_ptr = std::shared_ptr<const rx::event_registry>;

struct network {
  std::mutex mutex;
  std::map<std::string, workspaces_actor> nodes;
  std::set<std::string> down;
  std::atomic<int> forwards{0};

  std::optional<workspaces_actor> reach(const std::string& node_id) {
    std::lock_guard<std::mutex> hold(mutex);
    if (down.count(node_id) || !nodes.count(node_id))
      return std::nullopt;
    return nodes[node_id];
  }
  void set_down(const std::string& node_id, bool is_down) {
    std::lock_guard<std::mutex> hold(mutex);
    if (is_down)
      down.insert(node_id);
    else
      down.erase(node_id);
  }
};

struct peers_state {
  static inline const char* name = "test_peers";
};

cluster_peers_actor::behavior_type peers(cluster_peers_actor::stateful_pointer<peers_state> self,
                                         std::shared_ptr<network> net, types_ptr types) {
  return {
    [](cancel_atom, std::string&, cancel_request&) -> caf::result<cancel_ack> {
      return make_error(errc::unavailable, "not in this test");
    },
    [](resolve_atom, std::string&, approval_resolution&) -> caf::result<resolve_ack> {
      return make_error(errc::unavailable, "not in this test");
    },
    [](subscribe_atom, std::string&, feed_request&) -> caf::result<feed_ack> {
      return make_error(errc::unavailable, "not in this test");
    },
    [=](forward_atom, std::string& node_id, workspace_forward& f) -> caf::result<workspace_answer> {
      auto to = net->reach(node_id);
      if (!to)
        return make_error(errc::unavailable, "node " + node_id + " cannot be reached");
      ++net->forwards;
      auto command = command_of(f, types, 8);
      if (auto why = std::get_if<std::string>(&command))
        return make_error(errc::bad_request, *why);
      auto rp = self->make_response_promise<workspace_answer>();
      self->request(*to, 10s, forward_atom::value, std::get<workspace_command>(std::move(command)))
        .then([=](workspace_outcome& o) mutable { rp.deliver(answer_of(o)); },
              [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
  };
}

struct two_nodes {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::string url;
  io::store_ports ports;
  types_ptr types;
  std::shared_ptr<network> net = std::make_shared<network>();
  std::shared_ptr<node_status> a_status = std::make_shared<node_status>();
  std::shared_ptr<node_status> b_status = std::make_shared<node_status>();
  workspaces_actor a, b;
  std::vector<caf::actor> actors;

  explicit two_nodes(const std::string& name, double log_idle_timeout = 300) : url(fresh_pg_database(name)) {
    auto parsed = protocol::parse_config(
      R"({"workspaces":{"event_types":[{"name":"ops:deploy.finished","schema":{"type":"object","additionalProperties":true}}]}})", {},
      [](const std::string&) { return std::nullopt; });
    REQUIRE(parsed.errors == std::vector<std::string>{});
    types = std::get<0>(rx::event_registry::build(parsed.value.workspaces));
    io::pg_store_settings settings;
    settings.url = url;
    auto opened = io::spawn_pg_stores(sys, settings);
    if (auto err = std::get_if<std::string>(&opened))
      FAIL("cannot open the stores: " << *err);
    ports = std::get<io::store_ports>(opened);
    auto peer_actor = sys.spawn(peers, net, types);
    a = start("node-00000000000000aa", a_status, peer_actor, log_idle_timeout);
    b = start("node-00000000000000bb", b_status, peer_actor, log_idle_timeout);
    actors = {caf::actor_cast<caf::actor>(peer_actor), caf::actor_cast<caf::actor>(a), caf::actor_cast<caf::actor>(b),
              caf::actor_cast<caf::actor>(ports.runs), caf::actor_cast<caf::actor>(ports.responses),
              caf::actor_cast<caf::actor>(ports.workspaces), caf::actor_cast<caf::actor>(ports.nodes)};
  }

  ~two_nodes() {
    for (auto& x : actors)
      caf::anon_send_exit(x, caf::exit_reason::user_shutdown);
  }

  workspaces_actor start(const std::string& id, const std::shared_ptr<node_status>& status,
                         const cluster_peers_actor& peer_actor, double log_idle_timeout) {
    status->set(id, node_status::state::alive);
    caf::scoped_actor self{sys};
    node_row row;
    row.node_id = id;
    row.name = id;
    row.endpoint = "127.0.0.1:1";
    row.version = "test";
    self->request(ports.nodes, 10s, join_atom::value, row)
      .receive([](bool) {}, [&](caf::error& err) { FAIL("join: " << message_of(err)); });
    workspaces_options options;
    options.log_idle_timeout = log_idle_timeout;
    options.cluster = {status, peer_actor, 2};
    auto logs = spawn_workspaces(sys, ports.workspaces, options);
    std::lock_guard<std::mutex> hold(net->mutex);
    net->nodes[id] = logs;
    return logs;
  }

  // A publish under `command_id` through `node`: its outcome, or the error's problem.
  std::variant<workspace_outcome, problem> publish(const workspaces_actor& node, const std::string& command_id) {
    auto parsed = rx::parse_command_frame(R"({"type":"command","command_id":")" + command_id
                                            + R"(","command":{"type":"publish","event":{"type":"ops:deploy.finished","service":")"
                                            + command_id + R"("}}})",
                                          *types);
    if (auto bad = std::get_if<rx::problems>(&parsed))
      FAIL(rx::first_problem(*bad));
    workspace_command c;
    c.key = {"acme", "prod"};
    c.context.actor.kind = "user";
    c.context.actor.id = "ana";
    c.participant = protocol::participant(c.context.actor);
    c.request = std::get<rx::command_request>(std::move(parsed));
    c.context.workspace_id = "prod";
    c.context.now = "2026-01-01T00:00:00.000000+00:00";
    c.context.types = types;
    std::variant<workspace_outcome, problem> out = problem{};
    caf::scoped_actor self{sys};
    self->request(node, 30s, command_atom::value, std::move(c))
      .receive([&](workspace_outcome& o) { out = std::move(o); }, [&](caf::error& err) { out = problem_of(err); });
    return out;
  }

  workspace_outcome published(const workspaces_actor& node, const std::string& command_id) {
    auto r = publish(node, command_id);
    if (auto p = std::get_if<problem>(&r))
      FAIL(command_id << ": " << p->message << " (" << p->kind << ")");
    return std::get<workspace_outcome>(r);
  }

  // The owner as the database holds it: node id and epoch.
  std::pair<std::string, int64_t> owner() {
    pqxx::connection c(url);
    pqxx::nontransaction tx(c);
    auto row = tx.exec1("SELECT owner_node, owner_epoch FROM workspaces WHERE tenant = 'acme' AND workspace = 'prod'");
    return {row[0].as<std::string>(), row[1].as<int64_t>()};
  }

  std::vector<int64_t> seqs() {
    pqxx::connection c(url);
    pqxx::nontransaction tx(c);
    std::vector<int64_t> out;
    for (auto row : tx.exec("SELECT seq FROM workspace_events WHERE tenant = 'acme' AND workspace = 'prod' ORDER BY seq"))
      out.push_back(row[0].as<int64_t>());
    return out;
  }

  void declare_dead(const std::string& id) {
    caf::scoped_actor self{sys};
    self->request(ports.nodes, 10s, declare_dead_atom::value, id)
      .receive([](std::vector<std::string>&) {}, [&](caf::error& err) { FAIL("declare dead: " << message_of(err)); });
  }
};

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 1; i <= n; ++i)
    out.push_back(i);
  return out;
}

int64_t seq_of(const workspace_outcome& o) {
  auto doc = protocol::json::parse(o.body);
  REQUIRE(doc);
  return protocol::json::get_int((*doc)["outcome"], "seq").value_or(-1);
}

} // namespace

TEST_CASE("the first node a command reaches owns the workspace log; the other node's commands are forwarded to it and "
          "answered byte for byte, a resent one with its first answer",
          "[.][postgres][workspace][cluster]") { // CJ-28, CJ-29, WS-39
  two_nodes n("owners_forward");
  auto first = n.published(n.b, "b-1");
  CHECK(first.ok);
  CHECK(n.owner() == std::make_pair(std::string("node-00000000000000bb"), int64_t{1}));
  std::vector<workspace_outcome> through_a;
  for (int i = 1; i <= 5; ++i)
    through_a.push_back(n.published(n.a, "a-" + std::to_string(i)));
  CHECK(n.net->forwards == 5);
  for (int i = 0; i < 5; ++i)
    CHECK(seq_of(through_a[static_cast<std::size_t>(i)]) == i + 2);
  auto again = n.published(n.b, "a-3"); // the same participant and id, straight at the owner
  CHECK(again.remembered);
  CHECK(again.body == through_a[2].body);
  CHECK(n.seqs() == one_to(6));
  CHECK(n.owner().second == 1); // nobody took it over
}

TEST_CASE("an owner that does not answer keeps the log until its node is dead, and the caller is told to retry; then "
          "the next node takes the log, and the old owner's late command is refused by epoch and goes to the new owner",
          "[.][postgres][workspace][cluster]") { // CJ-29, CJ-9, CJ-13
  two_nodes n("owners_takeover");
  n.published(n.b, "b-1");
  n.net->set_down("node-00000000000000bb", true);
  auto refused = n.publish(n.a, "a-1");
  REQUIRE(std::holds_alternative<problem>(refused));
  CHECK(std::get<problem>(refused).kind == owner_unreachable);
  CHECK(std::get<problem>(refused).code == errc::unavailable);
  CHECK(std::get<problem>(refused).message == "the node that owns workspace prod did not answer; retry");

  n.declare_dead("node-00000000000000bb");
  auto taken = n.published(n.a, "a-1"); // the retry: B is dead, so A takes the log
  CHECK(seq_of(taken) == 2);
  CHECK(n.owner() == std::make_pair(std::string("node-00000000000000aa"), int64_t{2}));

  n.net->set_down("node-00000000000000bb", false); // B comes back, still thinking it owns epoch 1
  auto late = n.published(n.b, "b-2");
  CHECK(seq_of(late) == 3);
  CHECK(n.net->forwards == 1); // refused by the store under epoch 1, then forwarded to A
  CHECK(n.owner() == std::make_pair(std::string("node-00000000000000aa"), int64_t{2}));
  CHECK(n.seqs() == one_to(3));
}

TEST_CASE("a forwarded command reaching a node that no longer owns the log is refused as not_owner, and the sender "
          "reads the owner again and forwards it to the node that owns it now",
          "[.][postgres][workspace][cluster]") { // CJ-29 `not_owner`
  two_nodes n("owners_not_owner");
  auto c_status = std::make_shared<node_status>();
  auto peer_actor = caf::actor_cast<cluster_peers_actor>(n.actors[0]);
  auto c = n.start("node-00000000000000cc", c_status, peer_actor, 300);
  n.actors.push_back(caf::actor_cast<caf::actor>(c));
  n.published(n.b, "b-1");
  n.published(n.a, "a-1"); // A now believes B owns the log
  {
    pqxx::connection conn(n.url); // the log moves to C behind both their backs
    pqxx::nontransaction tx(conn);
    tx.exec("UPDATE workspaces SET owner_node = 'node-00000000000000cc', owner_epoch = owner_epoch + 1");
  }
  auto moved = n.published(n.a, "a-2"); // to B, refused by the store, not_owner; then to C
  CHECK(seq_of(moved) == 3);
  CHECK(n.net->forwards == 3);
  CHECK(n.owner() == std::make_pair(std::string("node-00000000000000cc"), int64_t{2}));
  CHECK(n.seqs() == one_to(3));
}

TEST_CASE("a log that retires idle gives its ownership up, and the next command anywhere takes it with the next epoch",
          "[.][postgres][workspace][cluster]") { // CJ-28, WS-128
  two_nodes n("owners_release", 0.2);
  n.published(n.b, "b-1");
  for (int i = 0; i < 200 && !n.owner().first.empty(); ++i)
    std::this_thread::sleep_for(20ms); // polls the database for the release, at most 4 s
  REQUIRE(n.owner().first.empty());
  auto after = n.published(n.a, "a-1");
  CHECK(seq_of(after) == 2);
  CHECK(n.net->forwards == 0);
  CHECK(n.owner() == std::make_pair(std::string("node-00000000000000aa"), int64_t{2}));
  CHECK(n.seqs() == one_to(2));
}

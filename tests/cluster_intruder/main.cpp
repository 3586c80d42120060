// A CAF 0.17 peer without the cluster secret (CJ-52 c): it connects to a node's published actor and
// tries what an intruder would, printing one JSON line per try for tests/integration/cluster.test.mjs:
//   troupe_cluster_intruder HOST PORT CLUSTER_ID NODE_ID RUN_ID
// NODE_ID is a live node's id, so that its hello gets a challenge and its wrong proofs count.
#include "actors/cluster_messages.hpp"
#include "actors/errors.hpp"
#include "io/cluster_peers.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <cstdio>
#include <string>

using namespace troupe;

namespace {

constexpr auto patience = std::chrono::seconds(5);

void report(const std::string& step, const std::string& outcome) {
  std::string quoted;
  for (auto c : outcome)
    if (c == '"' || c == '\\')
      quoted += '\\', quoted += c;
    else if (static_cast<unsigned char>(c) >= 0x20)
      quoted += c;
  std::printf("{\"step\":\"%s\",\"outcome\":\"%s\"}\n", step.c_str(), quoted.c_str());
  std::fflush(stdout);
}

// The refusal's kind (`cluster_unauthenticated`, `bad_proof`, ...), or what went through.
std::string refusal(const caf::error& err) {
  auto p = problem_of(err);
  return p.kind.empty() ? "error:" + p.message : p.kind;
}

template <class Answer, class... Ts>
std::string ask(caf::scoped_actor& self, const node_actor& node, Ts&&... xs) {
  std::string outcome;
  self->request(node, patience, std::forward<Ts>(xs)...)
    .receive([&](Answer&) { outcome = "answered"; }, [&](caf::error& err) { outcome = refusal(err); });
  return outcome;
}

// A hello that gets a challenge, then a made-up proof: what the node said to the proof.
std::string guess_proof(caf::scoped_actor& self, const node_actor& node, const std::string& cluster_id,
                        const std::string& node_id) {
  protocol::cluster_hello hello{std::string(protocol::cluster_protocol), cluster_id, node_id,
                                protocol::random_nonce()};
  std::string outcome;
  self->request(node, patience, hello_atom::value, hello)
    .receive(
      [&](protocol::cluster_challenge&) {
        outcome = ask<protocol::cluster_welcome>(self, node, auth_atom::value,
                                                 protocol::cluster_proof{std::string(64, '0')});
      },
      [&](caf::error& err) { outcome = "hello:" + refusal(err); });
  return outcome;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: troupe_cluster_intruder HOST PORT CLUSTER_ID NODE_ID RUN_ID\n");
    return 2;
  }
  std::string host = argv[1];
  auto port = static_cast<uint16_t>(std::stoi(argv[2]));
  std::string cluster_id = argv[3], node_id = argv[4], run_id = argv[5];

  caf::actor_system_config cfg;
  protocol::cluster_config cluster; // the middleman as a node sets it, which gets an intruder past CAF's handshake
  io::configure_remoting(cfg, cluster);
  add_error_category(cfg);
  caf::actor_system sys{cfg};
  auto node = sys.middleman().remote_actor<node_actor>(host, port);
  if (!node) {
    report("connect", sys.render(node.error()));
    return 1;
  }
  report("connect", "connected");
  caf::scoped_actor self{sys};
  for (int64_t epoch = 1; epoch <= 3; ++epoch)
    report("cancel", ask<cancel_ack>(self, *node, cancel_atom::value, cancel_request{"run", run_id, epoch}));
  report("ping", ask<pong>(self, *node, ping_atom::value));
  for (int i = 0; i < 3; ++i)
    report("proof", guess_proof(self, *node, cluster_id, node_id));
  report("proof", guess_proof(self, *node, cluster_id, node_id)); // muted now
  report("cancel", ask<cancel_ack>(self, *node, cancel_atom::value, cancel_request{"run", run_id, 1}));
  // No actor type is spawnable from another node.
  for (auto name : {"node_actor", "run_registry", "cluster_peers"}) {
    auto spawned = sys.middleman().remote_spawn<caf::actor>((*node)->node(), name, caf::make_message(), patience);
    report("spawn", spawned ? "spawned" : "refused");
  }
  return 0;
}

#include "io/cluster_peers.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <unordered_map>
#include <vector>

namespace troupe::io {

namespace {

using steady = std::chrono::steady_clock;

// Requests for a node whose connection and handshake are under way, at most this many.
constexpr std::size_t max_waiting = 1024;

// A request waiting for its node's connection: sent once the node is welcomed, else failed.
struct waiting_request {
  std::function<void(const node_actor&)> send;
  std::function<void(caf::error)> fail;
};

struct peer {
  node_actor handle; // once welcomed
  // Requests sent over the connection and not answered yet, by number: a connection that drops
  // fails them at once (CAF 0.17 would leave them to their timeouts).
  std::unordered_map<uint64_t, std::function<void(caf::error)>> in_flight;
  bool connecting = false;
  std::vector<waiting_request> waiting;
  steady::time_point retry_at{}; // after a failure, no new attempt before this (backoff up to 5 s)
  int failures = 0;
};

struct peers_state {
  static inline const char* name = "cluster_peers";
  node_store_actor nodes;
  cluster_peers_options options;
  caf::io::middleman_actor middleman;
  std::unordered_map<std::string, peer> peers; // by node id
  std::unordered_map<caf::actor_addr, std::string> node_of_handle;
  uint64_t next_request = 0; // numbers requests across peers, so a late answer never settles another's
};

using peers_pointer = cluster_peers_actor::stateful_pointer<peers_state>;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0) + 1);
}

std::chrono::milliseconds timeout(peers_pointer self) {
  return millis(self->state.options.request_timeout_seconds);
}

// Forgets the peer; what it has not answered fails now, so its callers take their fallbacks.
void drop_peer(peers_pointer self, const std::string& node_id, const std::string& why) {
  auto p = self->state.peers.find(node_id);
  if (p == self->state.peers.end())
    return;
  auto in_flight = std::move(p->second.in_flight);
  self->state.peers.erase(p);
  for (auto& [number, fail] : in_flight)
    fail(make_error(errc::unavailable, "node " + node_id + " dropped: " + why));
}

// The request's entry in its peer's in_flight, gone once answered; false when the connection dropped
// first (its promise was failed then).
bool settle(peers_pointer self, const std::string& node_id, uint64_t number) {
  auto p = self->state.peers.find(node_id);
  return p != self->state.peers.end() && p->second.in_flight.erase(number) == 1;
}

template <class Answer, class Atom, class Request>
void forward(peers_pointer self, const std::string& node_id, const node_actor& handle, Atom atom, Request request,
             caf::typed_response_promise<Answer> rp, std::chrono::milliseconds wait) {
  auto number = self->state.next_request++;
  self->state.peers[node_id].in_flight.emplace(number, [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
  self->request(handle, wait, atom, std::move(request))
    .then(
      [=](Answer& answer) mutable {
        if (settle(self, node_id, number))
          rp.deliver(std::move(answer));
      },
      [=](caf::error& err) mutable {
        if (!settle(self, node_id, number))
          return;
        // The node forgot this one (it rejoined as a new node): the next request proves it anew.
        if (code_of(err) == errc::unauthorized)
          drop_peer(self, node_id, "it no longer knows this node");
        rp.deliver(std::move(err));
      });
}

// Peers that are neither connected nor connecting, with nothing waiting and no backoff left, are
// forgotten once this many node ids were met (each rejoin is a new one), so the map stays bounded.
constexpr std::size_t peers_kept = 64;

void prune(peers_pointer self) {
  auto& peers = self->state.peers;
  if (peers.size() <= peers_kept)
    return;
  auto now = steady::now();
  for (auto it = peers.begin(); it != peers.end();) {
    auto& p = it->second;
    if (!p.handle && !p.connecting && p.waiting.empty() && p.in_flight.empty() && p.retry_at <= now)
      it = peers.erase(it);
    else
      ++it;
  }
}

void failed(peers_pointer self, const std::string& node_id, const std::string& why) {
  prune(self);
  auto& p = self->state.peers[node_id];
  p.connecting = false;
  p.failures = std::min(p.failures + 1, 6);
  p.retry_at = steady::now() + std::min<steady::duration>(std::chrono::milliseconds(100 << p.failures),
                                                         std::chrono::seconds(5));
  spdlog::warn("cluster: cannot reach node {}: {}", node_id, why);
  auto waiting = std::exchange(p.waiting, {});
  for (auto& w : waiting)
    w.fail(make_error(errc::unavailable, "node " + node_id + " cannot be reached: " + why));
}

void welcomed(peers_pointer self, const std::string& node_id, const node_actor& handle) {
  auto& st = self->state;
  auto& p = st.peers[node_id];
  p.handle = handle;
  p.connecting = false;
  p.failures = 0;
  if (st.node_of_handle.emplace(handle.address(), node_id).second)
    self->monitor(handle);
  auto waiting = std::exchange(p.waiting, {});
  for (auto& w : waiting)
    w.send(handle);
}

// CJ-23 steps 1 and 3, as the connecting node: the server proves the secret first.
void handshake(peers_pointer self, const std::string& node_id, const node_actor& handle) {
  auto& opts = self->state.options;
  auto me = opts.status->node_id();
  auto hello = protocol::make_hello(opts.cluster_id, me);
  auto fail = [=](caf::error& err) { failed(self, node_id, message_of(err)); };
  self->request(handle, timeout(self), hello_atom::value, hello)
    .then(
      [=](protocol::cluster_challenge& challenge) {
        auto& opts = self->state.options;
        if (challenge.node_id != node_id
            || !protocol::verify_server(challenge, opts.secret, opts.secret_previous, opts.cluster_id, me,
                                        hello.nonce)) {
          failed(self, node_id, "it did not prove the cluster secret");
          return;
        }
        auto proof = protocol::client_proof(challenge, opts.secret, opts.cluster_id, me, hello.nonce);
        self->request(handle, timeout(self), auth_atom::value, std::move(proof))
          .then([=](protocol::cluster_welcome&) { welcomed(self, node_id, handle); }, fail);
      },
      fail);
}

// host:port as a node's row advertises it; an IPv6 host is in brackets.
std::optional<std::pair<std::string, uint16_t>> split_endpoint(const std::string& endpoint) {
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon + 1 >= endpoint.size())
    return std::nullopt;
  auto host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  uint32_t port = 0;
  for (auto c : endpoint.substr(colon + 1)) {
    if (c < '0' || c > '9' || (port = port * 10 + static_cast<uint32_t>(c - '0')) > 65535)
      return std::nullopt;
  }
  if (host.empty() || port == 0)
    return std::nullopt;
  return std::make_pair(host, static_cast<uint16_t>(port));
}

void connect(peers_pointer self, const std::string& node_id) {
  self->state.peers[node_id].connecting = true;
  auto fail = [=](caf::error& err) { failed(self, node_id, message_of(err)); };
  self->request(self->state.nodes, timeout(self), list_nodes_atom::value)
    .then(
      [=](node_list& list) {
        auto row = std::find_if(list.begin(), list.end(), [&](const node_row& n) { return n.node_id == node_id; });
        if (row == list.end() || (row->state != "alive" && row->state != "draining")) {
          failed(self, node_id, "it is not alive in the cluster's nodes");
          return;
        }
        auto endpoint = split_endpoint(row->endpoint);
        if (!endpoint) {
          failed(self, node_id, "its endpoint is not host:port");
          return;
        }
        self->request(self->state.middleman, timeout(self), caf::connect_atom::value, endpoint->first, endpoint->second)
          .then(
            [=](caf::node_id&, caf::strong_actor_ptr& remote, std::set<std::string>&) {
              if (!remote) {
                failed(self, node_id, "nothing is published on its endpoint");
                return;
              }
              handshake(self, node_id, caf::actor_cast<node_actor>(std::move(remote)));
            },
            fail);
      },
      fail);
}

bool from_this_process(peers_pointer self) {
  auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

// `request` to node_id's actor, over the connection the node is welcomed on, made first when needed.
// `to_self` answers a request for this node itself; the answer is awaited for `wait` once sent.
template <class Answer, class Atom, class Request>
caf::result<Answer> ask_node(peers_pointer self, const std::string& node_id, Atom atom, Request request,
                             caf::result<Answer> to_self, std::chrono::milliseconds wait) {
  if (!from_this_process(self))
    return make_error(errc::forbidden, "cluster_peers serves this process's actors only");
  if (node_id == self->state.options.status->node_id())
    return to_self;
  auto& p = self->state.peers[node_id];
  auto rp = self->make_response_promise<Answer>();
  if (p.handle) {
    forward(self, node_id, p.handle, atom, std::move(request), rp, wait);
    return rp;
  }
  if (steady::now() < p.retry_at || p.waiting.size() >= max_waiting)
    return make_error(errc::unavailable, "node " + node_id + " cannot be reached now");
  p.waiting.push_back({[=](const node_actor& handle) { forward(self, node_id, handle, atom, request, rp, wait); },
                       [=](caf::error err) mutable { rp.deliver(std::move(err)); }});
  if (!p.connecting)
    connect(self, node_id);
  return rp;
}

} // namespace

namespace {

// OpenSSL's own words for what just failed, emptying its error queue.
std::string openssl_reason() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    out += (out.empty() ? " (" : "; ") + std::string(text);
  }
  return out.empty() ? out : out + ")";
}

// What CAF's OpenSSL sessions will load for every connection, loaded once here: a file missing,
// unreadable, not PEM, or a key that does not fit the certificate is named before anything starts.
std::optional<std::string> tls_files_problem(const protocol::cluster_tls_config& tls) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_method()), &SSL_CTX_free);
  if (!ctx)
    return "cluster.tls: OpenSSL cannot make a context";
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.certificate.c_str()) != 1)
    return "cluster.tls.certificate: cannot load a PEM certificate chain from " + tls.certificate + openssl_reason();
  std::unique_ptr<BIO, decltype(&BIO_free)> file(BIO_new_file(tls.key.c_str(), "r"), &BIO_free);
  auto no_passphrase = [](char*, int, int, void*) { return 0; }; // never a prompt on the terminal
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
    file ? PEM_read_bio_PrivateKey(file.get(), nullptr, no_passphrase, nullptr) : nullptr, &EVP_PKEY_free);
  if (!key)
    return "cluster.tls.key: cannot load a PEM private key (without passphrase) from " + tls.key + openssl_reason();
  if (SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 || SSL_CTX_check_private_key(ctx.get()) != 1)
    return "cluster.tls.key: " + tls.key + " is not the key of cluster.tls.certificate";
  if (SSL_CTX_load_verify_locations(ctx.get(), tls.ca_file.c_str(), nullptr) != 1)
    return "cluster.tls.ca_file: cannot load PEM CA certificates from " + tls.ca_file + openssl_reason();
  return std::nullopt;
}

} // namespace

std::optional<std::string> configure_remoting(caf::actor_system_config& cfg, const protocol::cluster_config& cluster) {
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.enable-automatic-connections", false);
  cfg.set("middleman.app-identifiers", std::vector<std::string>{std::string(protocol::cluster_protocol)});
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds(1)});
  cfg.set("middleman.connection-timeout",
          caf::timespan{std::chrono::milliseconds(static_cast<int64_t>(cluster.peer_timeout_seconds * 1000.0))});
  add_cluster_message_types(cfg);
  if (!cluster.tls.enabled())
    return std::nullopt;
  if (auto problem = tls_files_problem(cluster.tls))
    return problem;
  // With a certificate, a key and a CA, CAF requires and verifies a certificate on both sides.
  cfg.load<caf::openssl::manager>();
  cfg.openssl_certificate = cluster.tls.certificate;
  cfg.openssl_key = cluster.tls.key;
  cfg.openssl_cafile = cluster.tls.ca_file;
  return std::nullopt;
}

std::variant<uint16_t, std::string> publish_node_actor(caf::actor_system& sys, const node_actor& node,
                                                       const std::string& host, uint16_t port) {
  auto published = sys.has_openssl_manager() ? caf::openssl::publish(node, port, host.c_str())
                                             : sys.middleman().publish(node, port, host.c_str());
  if (!published)
    return "cannot publish the node actor on " + host + ":" + std::to_string(port) + " (cluster.host, cluster.port): "
           + sys.render(published.error());
  return *published;
}

bool is_private_host(const std::string& host) {
  if (host == "localhost")
    return true;
  std::array<unsigned char, 16> a{};
  if (inet_pton(AF_INET, host.c_str(), a.data()) == 1)
    return a[0] == 127 || a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168)
           || (a[0] == 169 && a[1] == 254);
  if (inet_pton(AF_INET6, host.c_str(), a.data()) == 1) {
    static constexpr std::array<unsigned char, 16> loopback{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return a == loopback || (a[0] & 0xfe) == 0xfc || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80);
  }
  return false;
}

namespace {

// The state goes in as arguments: CAF 0.17 spawning a function without any trips UBSan.
cluster_peers_actor::behavior_type peers_behavior(peers_pointer self, node_store_actor nodes,
                                                  cluster_peers_options options) {
  auto& st = self->state;
  st.nodes = std::move(nodes);
  st.options = std::move(options);
  auto& sys = self->system();
  st.middleman = sys.has_openssl_manager() ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
  // A connection that dropped: the next request connects and proves this node again.
  self->set_down_handler([=](caf::down_msg& msg) {
    auto& st = self->state;
    auto it = st.node_of_handle.find(msg.source);
    if (it == st.node_of_handle.end())
      return;
    auto node_id = it->second;
    st.node_of_handle.erase(it);
    if (auto p = st.peers.find(node_id); p != st.peers.end() && p->second.handle.address() == msg.source)
      drop_peer(self, node_id, "its connection closed");
  });
  return {
    [=](cancel_atom, std::string& node_id, cancel_request& request) {
      return ask_node(self, node_id, cancel_atom::value, std::move(request),
                      caf::result<cancel_ack>(cancel_ack{"not_here"}), timeout(self));
    },
    [=](resolve_atom, std::string& node_id, approval_resolution& resolution) {
      return ask_node(self, node_id, resolve_atom::value, std::move(resolution),
                      caf::result<resolve_ack>(resolve_ack{}), timeout(self));
    },
    [=](forward_atom, std::string& node_id, workspace_forward& forward) {
      return ask_node(self, node_id, forward_atom::value, std::move(forward),
                      caf::result<workspace_answer>(make_error(problem{
                        errc::conflict, "a workspace command is not forwarded to this node itself", {}, not_owner})),
                      millis(self->state.options.forward_timeout_seconds));
    },
    [=](subscribe_atom, std::string& node_id, feed_request& request) {
      // This node's own runs feed their streams through its registry: nothing to relay.
      return ask_node(self, node_id, subscribe_atom::value, std::move(request), caf::result<feed_ack>(feed_ack{}),
                      timeout(self));
    },
  };
}

} // namespace

cluster_peers_actor spawn_cluster_peers(caf::actor_system& sys, node_store_actor nodes, cluster_peers_options options) {
  return sys.spawn(peers_behavior, std::move(nodes), std::move(options));
}

} // namespace troupe::io

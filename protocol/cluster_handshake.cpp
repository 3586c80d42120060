#include "protocol/cluster_handshake.hpp"

#include "protocol/ids.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace troupe::protocol {

namespace {

constexpr std::string_view server_label = "server";
constexpr std::string_view client_label = "client";

handshake_refusal refuse(handshake_code code, std::string message) {
  return handshake_refusal{code, std::move(message)};
}

bool node_id_fits(std::string_view id) {
  return is_id_text(id) && id.find('|') == std::string_view::npos;
}

} // namespace

const char* to_string(handshake_code code) {
  switch (code) {
  case handshake_code::cluster_unauthenticated: return "cluster_unauthenticated";
  case handshake_code::wrong_protocol: return "wrong_protocol";
  case handshake_code::wrong_cluster: return "wrong_cluster";
  case handshake_code::unknown_node: return "unknown_node";
  case handshake_code::malformed: return "malformed";
  case handshake_code::peer_muted: return "peer_muted";
  case handshake_code::too_many_challenges: return "too_many_challenges";
  case handshake_code::too_many_peers: return "too_many_peers";
  case handshake_code::bad_proof: return "bad_proof";
  }
  return "unknown";
}

handshake_refusal unauthenticated_refusal() {
  return refuse(handshake_code::cluster_unauthenticated, "this node has not completed the cluster handshake");
}

std::string random_nonce(std::size_t size) {
  std::string out(size, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(size)) != 1)
    throw std::runtime_error("the system's random generator failed");
  return out;
}

std::string handshake_proof(std::string_view secret, std::string_view label, std::string_view cluster_id,
                            std::string_view node_c, std::string_view node_s, std::string_view nonce_c,
                            std::string_view nonce_s) {
  std::string text;
  text.reserve(cluster_protocol.size() + label.size() + cluster_id.size() + node_c.size() + node_s.size()
               + 2 * (nonce_c.size() + nonce_s.size()) + 6);
  for (auto part : {cluster_protocol, label, cluster_id, node_c, node_s}) {
    text.append(part);
    text.push_back('|');
  }
  text += lower_hex(nonce_c);
  text.push_back('|');
  text += lower_hex(nonce_s);
  return lower_hex(hmac_sha256(secret, text));
}

bool proof_matches(std::string_view proof, std::string_view secret, const std::optional<std::string>& previous,
                   std::string_view label, std::string_view cluster_id, std::string_view node_c,
                   std::string_view node_s, std::string_view nonce_c, std::string_view nonce_s) {
  if (proof.size() != cluster_proof_chars)
    return false;
  bool current =
    equal_in_constant_time(proof, handshake_proof(secret, label, cluster_id, node_c, node_s, nonce_c, nonce_s));
  // An empty previous secret is no secret: it must never verify anything.
  bool rotated = previous && !previous->empty()
                 && equal_in_constant_time(
                   proof, handshake_proof(*previous, label, cluster_id, node_c, node_s, nonce_c, nonce_s));
  return current || rotated;
}

std::optional<std::string> secret_problem(std::string_view secret) {
  if (secret.size() >= cluster_secret_min_bytes)
    return std::nullopt;
  const std::string key = "cluster.secret (env TROUPE_CLUSTER_SECRET)";
  const std::string fix = "; set the same random secret of at least 32 bytes on every node";
  if (secret.empty())
    return key + ": required while cluster.remoting is on" + fix;
  return key + ": expected at least 32 bytes, got " + std::to_string(secret.size()) + fix;
}

// --- The connecting node ---

cluster_hello make_hello(std::string_view cluster_id, std::string_view node_c) {
  return cluster_hello{std::string(cluster_protocol), std::string(cluster_id), std::string(node_c), random_nonce()};
}

bool verify_server(const cluster_challenge& challenge, std::string_view secret,
                   const std::optional<std::string>& previous, std::string_view cluster_id, std::string_view node_c,
                   std::string_view nonce_c) {
  if (challenge.nonce.size() != cluster_nonce_bytes || !node_id_fits(challenge.node_id))
    return false;
  return proof_matches(challenge.proof, secret, previous, server_label, cluster_id, node_c, challenge.node_id,
                       nonce_c, challenge.nonce);
}

cluster_proof client_proof(const cluster_challenge& challenge, std::string_view secret, std::string_view cluster_id,
                           std::string_view node_c, std::string_view nonce_c) {
  return cluster_proof{
    handshake_proof(secret, client_label, cluster_id, node_c, challenge.node_id, nonce_c, challenge.nonce)};
}

// --- The serving node ---

handshake_gate::handshake_gate(std::string node_s, std::string secret, std::optional<std::string> previous,
                               handshake_limits limits)
  : node_s_(std::move(node_s)), secret_(std::move(secret)), previous_(std::move(previous)), limits_(limits) {}

handshake_gate::~handshake_gate() {
  // The secrets do not outlive the gate in freed memory.
  OPENSSL_cleanse(secret_.data(), secret_.size());
  if (previous_)
    OPENSSL_cleanse(previous_->data(), previous_->size());
}

bool handshake_gate::peer_key_fits(std::string_view peer) const {
  return !peer.empty() && peer.size() <= limits_.max_peer_key_bytes;
}

bool handshake_gate::is_muted(const peer_state& p, time_point now) const {
  return p.muted_until && now < *p.muted_until;
}

void handshake_gate::prune(peer_state& p, time_point now) const {
  auto& cs = p.challenges;
  auto expired = [&](const challenge& c) { return now - c.issued >= limits_.challenge_ttl; };
  cs.erase(std::remove_if(cs.begin(), cs.end(), expired), cs.end());
  auto& fs = p.failures;
  auto stale = [&](time_point f) { return now - f >= limits_.failure_window; };
  fs.erase(std::remove_if(fs.begin(), fs.end(), stale), fs.end());
  if (p.muted_until && !is_muted(p, now))
    p.muted_until.reset();
}

// A peer whose loss changes nothing a later step would check: no challenge to answer, no welcome to
// honour, no mute to enforce. Failures short of a mute go with it, which only a full table causes.
bool handshake_gate::idle(peer_state& p, time_point now) const {
  prune(p, now);
  return p.challenges.empty() && !p.welcomed && !is_muted(p, now);
}

handshake_gate::peer_state* handshake_gate::admit(std::string_view peer, time_point now) {
  if (auto it = peers_.find(peer); it != peers_.end())
    return &it->second;
  if (peers_.size() >= limits_.max_peers) {
    for (auto it = peers_.begin(); it != peers_.end();)
      it = idle(it->second, now) ? peers_.erase(it) : std::next(it);
    if (peers_.size() >= limits_.max_peers)
      return nullptr;
  }
  return &peers_.emplace(std::string(peer), peer_state{}).first->second;
}

handshake_refusal handshake_gate::count_failure(peer_state& p, time_point now) {
  p.failures.push_back(now);
  if (p.failures.size() < limits_.failures_to_mute)
    return refuse(handshake_code::bad_proof, "auth: the proof matches no open challenge");
  p.muted_until = now + limits_.mute_for;
  p.failures.clear();
  p.challenges.clear(); // a muted peer cannot answer them
  return refuse(handshake_code::bad_proof, "auth: the proof matches no open challenge; too many failed proofs, the "
                                           "peer is muted for a while");
}

std::variant<cluster_challenge, handshake_refusal>
handshake_gate::on_hello(std::string_view peer, const cluster_hello& hello, std::string_view expected_cluster_id,
                         bool node_alive_or_draining, time_point now) {
  if (!peer_key_fits(peer))
    return refuse(handshake_code::malformed, "hello: the peer's key is empty or too long");
  if (auto it = peers_.find(peer); it != peers_.end() && is_muted(it->second, now))
    return refuse(handshake_code::peer_muted, "hello: the peer is muted after failed proofs");
  if (hello.protocol != cluster_protocol)
    return refuse(handshake_code::wrong_protocol, "hello: expected protocol troupe.cluster.v1");
  if (hello.cluster_id != expected_cluster_id)
    return refuse(handshake_code::wrong_cluster, "hello: the cluster id is not this cluster's");
  if (hello.nonce.size() != cluster_nonce_bytes)
    return refuse(handshake_code::malformed, "hello: the nonce must be 32 bytes");
  if (!node_id_fits(hello.node_id))
    return refuse(handshake_code::malformed, "hello: the node id must be 1 to 128 printable ASCII characters, "
                                             "no / or |, no space at either end");
  if (!node_alive_or_draining)
    return refuse(handshake_code::unknown_node, "hello: the connecting node is neither alive nor draining");

  auto* p = admit(peer, now);
  if (!p)
    return refuse(handshake_code::too_many_peers, "hello: this node is tracking as many peers as it may");
  prune(*p, now);
  if (p->challenges.size() >= limits_.max_open_challenges)
    return refuse(handshake_code::too_many_challenges, "hello: the peer has as many open challenges as it may");

  auto nonce_s = random_nonce();
  auto proof =
    handshake_proof(secret_, server_label, hello.cluster_id, hello.node_id, node_s_, hello.nonce, nonce_s);
  p->challenges.push_back(challenge{hello.cluster_id, hello.node_id, hello.nonce, nonce_s, now});
  return cluster_challenge{node_s_, std::move(nonce_s), std::move(proof)};
}

std::variant<cluster_welcome, handshake_refusal> handshake_gate::on_auth(std::string_view peer,
                                                                         const cluster_proof& proof, time_point now) {
  if (!peer_key_fits(peer))
    return refuse(handshake_code::malformed, "auth: the peer's key is empty or too long");
  auto it = peers_.find(peer);
  if (it == peers_.end()) // nothing was issued to it, so nothing is stored for it either
    return refuse(handshake_code::bad_proof, "auth: no challenge is open for this peer");
  auto& p = it->second;
  if (is_muted(p, now))
    return refuse(handshake_code::peer_muted, "auth: the peer is muted after failed proofs");
  prune(p, now);
  if (proof.proof.size() == cluster_proof_chars) {
    for (auto c = p.challenges.begin(); c != p.challenges.end(); ++c) {
      if (proof_matches(proof.proof, secret_, previous_, client_label, c->cluster_id, c->node_c, node_s_, c->nonce_c,
                        c->nonce_s)) {
        p.challenges.erase(c); // single use (CJ-23)
        p.welcomed = true;
        return cluster_welcome{};
      }
    }
  }
  return count_failure(p, now);
}

bool handshake_gate::welcomed(std::string_view peer) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second.welcomed;
}

bool handshake_gate::muted(std::string_view peer, time_point now) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && is_muted(it->second, now);
}

void handshake_gate::forget(std::string_view peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end())
    return;
  auto& p = it->second;
  p.challenges.clear();
  p.welcomed = false;
  if (!p.muted_until && p.failures.empty())
    peers_.erase(it);
}

std::size_t handshake_gate::open_challenges(std::string_view peer) const {
  auto it = peers_.find(peer);
  return it == peers_.end() ? 0 : it->second.challenges.size();
}

} // namespace troupe::protocol

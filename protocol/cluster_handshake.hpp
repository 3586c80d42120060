// The HMAC handshake between cluster nodes (CJ-23, CJ-24): its messages, proofs, the serving node's
// gate and the connecting node's checks. Pure: time comes in as `now`, the host supplies liveness.
//
// Wire form: a nonce is 32 raw random bytes; a proof is HMAC-SHA256 as 64 lowercase hex digits, over
//   troupe.cluster.v1|<label>|<cluster_id>|<node_c>|<node_s>|<hex nonce_c>|<hex nonce_s>
// with label `server` for the challenge's proof and `client` for the answer. A node id in a hello or
// challenge is id text (is_id_text: 1 to 128 printable ASCII, `node-` + 16 hex in practice) without
// `|`, so the proven fields cannot run into each other.
//
// Rotation: proofs are made with the current secret and checked against current and previous, so a
// cluster first sets previous = new everywhere, then swaps (current = new, previous = old), then drops
// previous; at every step each node verifies whatever secret another signs with.
//
// Memory of a handshake_gate is bounded: at most `max_peers` peers (1024), each holding at most
// `max_open_challenges` (8) challenges of ≤ 128 + cluster id + 64 bytes, and at most
// `failures_to_mute` (3) failure times. Peer keys above max_peer_key_bytes are refused.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace troupe::protocol {

inline constexpr std::string_view cluster_protocol = "troupe.cluster.v1";
inline constexpr std::size_t cluster_nonce_bytes = 32;
inline constexpr std::size_t cluster_proof_chars = 64;
inline constexpr std::size_t cluster_secret_min_bytes = 32;

struct cluster_hello {
  std::string protocol; // cluster_protocol
  std::string cluster_id;
  std::string node_id; // the connecting node, node_c
  std::string nonce;   // nonce_c, cluster_nonce_bytes raw bytes
};

struct cluster_challenge {
  std::string node_id; // the serving node, node_s
  std::string nonce;   // nonce_s, cluster_nonce_bytes raw bytes
  std::string proof;   // label `server`
};

struct cluster_proof {
  std::string proof; // label `client`
};

struct cluster_welcome {};

// Why a handshake step was refused. The codes are stable words a log or a metric can key on.
enum class handshake_code : uint8_t {
  cluster_unauthenticated, // a request other than hello/auth from a peer not welcomed
  wrong_protocol,
  wrong_cluster,
  unknown_node, // node_c is neither alive nor draining in `nodes`
  malformed,    // a nonce of the wrong size, a node id that is not id text, an empty or oversized peer key
  peer_muted,
  too_many_challenges,
  too_many_peers,
  bad_proof,
};

const char* to_string(handshake_code code);

// A refusal: its code and a sentence for the log. Neither ever holds a secret or echoes peer input.
struct handshake_refusal {
  handshake_code code;
  std::string message;
};

// The refusal a host gives every request of a peer that is not welcomed (CJ-24).
handshake_refusal unauthenticated_refusal();

// `size` fresh bytes from OpenSSL's CSPRNG (RAND_bytes).
std::string random_nonce(std::size_t size = cluster_nonce_bytes);

// The proof for one side of a handshake, as 64 lowercase hex digits; `label` is "server" or "client".
std::string handshake_proof(std::string_view secret, std::string_view label, std::string_view cluster_id,
                            std::string_view node_c, std::string_view node_s, std::string_view nonce_c,
                            std::string_view nonce_s);

// Whether `proof` is the one `secret` or, when present and not empty, `previous` gives (rotation,
// CJ-23); compared in constant time. A proof of the wrong length is refused before any mac is made.
bool proof_matches(std::string_view proof, std::string_view secret, const std::optional<std::string>& previous,
                   std::string_view label, std::string_view cluster_id, std::string_view node_c,
                   std::string_view node_s, std::string_view nonce_c, std::string_view nonce_s);

// Why `secret` cannot serve as cluster.secret (shorter than 32 bytes), naming the key and its env
// variable; nullopt when it can. The message tells the length, never the secret.
std::optional<std::string> secret_problem(std::string_view secret);

// --- The connecting node (C) ---

// A hello from node_c with a fresh nonce; keep its nonce for verify_server and client_proof.
cluster_hello make_hello(std::string_view cluster_id, std::string_view node_c);

// Whether S's challenge carries a server proof under `secret` or `previous` for this hello; on false
// C drops S (CJ-23 step 3).
bool verify_server(const cluster_challenge& challenge, std::string_view secret,
                   const std::optional<std::string>& previous, std::string_view cluster_id, std::string_view node_c,
                   std::string_view nonce_c);

// C's answer to a verified challenge, under its current secret.
cluster_proof client_proof(const cluster_challenge& challenge, std::string_view secret, std::string_view cluster_id,
                           std::string_view node_c, std::string_view nonce_c);

// --- The serving node (S) ---

struct handshake_limits {
  std::size_t max_peers = 1024;
  std::size_t max_open_challenges = 8;  // per peer (CJ-23)
  std::size_t failures_to_mute = 3;     // failed proofs within failure_window mute (CJ-24)
  std::size_t max_peer_key_bytes = 512; // the host's key for a peer, e.g. a CAF node id as text
  std::chrono::steady_clock::duration challenge_ttl = std::chrono::seconds(10);
  std::chrono::steady_clock::duration failure_window = std::chrono::seconds(60);
  std::chrono::steady_clock::duration mute_for = std::chrono::seconds(60);
};

// S's side of the handshake: open challenges, welcomes, failed proofs and mutes per peer. The host
// checks secret_problem before building one, and asks `welcomed` before serving any other request.
class handshake_gate {
public:
  using time_point = std::chrono::steady_clock::time_point;

  handshake_gate(std::string node_s, std::string secret, std::optional<std::string> previous,
                 handshake_limits limits = {});
  ~handshake_gate();
  handshake_gate(const handshake_gate&) = delete;
  handshake_gate& operator=(const handshake_gate&) = delete;

  // CJ-23 step 2. `node_alive_or_draining`: node_c's row in `nodes`, read by the host.
  std::variant<cluster_challenge, handshake_refusal> on_hello(std::string_view peer, const cluster_hello& hello,
                                                              std::string_view expected_cluster_id,
                                                              bool node_alive_or_draining, time_point now);

  // CJ-23 step 4: the proof must match one open challenge of this peer, which it consumes. A failed
  // proof of a tracked peer counts toward its mute; a peer with no state gets none from a proof.
  std::variant<cluster_welcome, handshake_refusal> on_auth(std::string_view peer, const cluster_proof& proof,
                                                           time_point now);

  bool welcomed(std::string_view peer) const;
  bool muted(std::string_view peer, time_point now) const;

  // On node_down: the peer's challenges and welcome go; its mute and recent failures stay, so that
  // reconnecting clears neither.
  void forget(std::string_view peer);

  std::size_t tracked_peers() const { return peers_.size(); }
  std::size_t open_challenges(std::string_view peer) const;

private:
  struct challenge {
    std::string cluster_id;
    std::string node_c;
    std::string nonce_c;
    std::string nonce_s;
    time_point issued;
  };
  struct peer_state {
    std::deque<challenge> challenges; // oldest first
    std::deque<time_point> failures;  // within failure_window, oldest first
    std::optional<time_point> muted_until;
    bool welcomed = false;
  };

  bool peer_key_fits(std::string_view peer) const;
  bool is_muted(const peer_state& p, time_point now) const;
  void prune(peer_state& p, time_point now) const;
  bool idle(peer_state& p, time_point now) const;
  peer_state* admit(std::string_view peer, time_point now);
  handshake_refusal count_failure(peer_state& p, time_point now);

  std::string node_s_;
  std::string secret_;
  std::optional<std::string> previous_;
  handshake_limits limits_;
  std::map<std::string, peer_state, std::less<>> peers_; // std::less<>: found by string_view
};

} // namespace troupe::protocol

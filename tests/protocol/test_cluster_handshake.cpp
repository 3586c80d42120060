// The cluster handshake's proofs, gate and client checks (protocol/cluster_handshake.hpp).
#include "protocol/cluster_handshake.hpp"

#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace troupe::protocol;
using namespace std::chrono_literals;

namespace {

const std::string secret = "a-cluster-secret-of-forty-bytes-length!!";
const std::string old_secret = "the-secret-before-rotation-also-40-bytes";
const std::string cluster = "cluster-1";
const std::string node_c = "node-00112233445566aa";
const std::string node_s = "node-ffeeddccbbaa9988";
const std::string peer = "caf-node-c#1234";
const auto t0 = std::chrono::steady_clock::time_point{} + 1h;

// HMAC-SHA256 as lowercase hex, straight from OpenSSL, so the known-answer test does not lean on the
// module's own helpers.
std::string reference_hmac_hex(const std::string& key, const std::string& text) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(text.data()),
       text.size(), mac, &len);
  std::string out;
  char pair[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(pair, sizeof pair, "%02x", mac[i]);
    out += pair;
  }
  return out;
}

std::string code_of(const handshake_refusal& r) { return to_string(r.code); }

template <class Ok>
std::string refusal_code(const std::variant<Ok, handshake_refusal>& answer) {
  auto* r = std::get_if<handshake_refusal>(&answer);
  return r ? code_of(*r) : "accepted";
}

// One connecting node's side: its hello, and its answer to the challenge it gets.
struct client {
  std::string secret_ = secret;
  std::optional<std::string> previous_;
  cluster_hello hello = make_hello(cluster, node_c);

  std::optional<cluster_proof> answer(const cluster_challenge& ch) const {
    if (!verify_server(ch, secret_, previous_, cluster, node_c, hello.nonce))
      return std::nullopt;
    return client_proof(ch, secret_, cluster, node_c, hello.nonce);
  }
};

cluster_challenge challenge_for(handshake_gate& gate, const client& c, std::chrono::steady_clock::time_point now,
                                const std::string& key = peer) {
  auto answer = gate.on_hello(key, c.hello, cluster, true, now);
  REQUIRE(std::holds_alternative<cluster_challenge>(answer));
  return std::get<cluster_challenge>(answer);
}

cluster_proof a_wrong_proof() { return cluster_proof{std::string(64, 'a')}; }

} // namespace

TEST_CASE("a handshake proof is HMAC-SHA256 over the documented text, as lowercase hex", "[cluster][handshake]") {
  // CJ-23
  std::string nonce_c, nonce_s;
  for (int i = 0; i < 32; ++i) {
    nonce_c.push_back(static_cast<char>(i));
    nonce_s.push_back(static_cast<char>(0xff - i));
  }
  const std::string text = "troupe.cluster.v1|server|c1|node-c|node-s|"
                           "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f|"
                           "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0efeeedecebeae9e8e7e6e5e4e3e2e1e0";
  const std::string key(40, 'k');
  auto proof = handshake_proof(key, "server", "c1", "node-c", "node-s", nonce_c, nonce_s);
  CHECK(proof == reference_hmac_hex(key, text));
  // The same value from an independent HMAC implementation, pinned.
  CHECK(proof == "53bdad5ff524c2576e842f6583434a20142a52e53b6c56cd853689ab12c8c1ea");

  auto client_text = text;
  client_text.replace(client_text.find("server"), 6, "client");
  CHECK(handshake_proof(key, "client", "c1", "node-c", "node-s", nonce_c, nonce_s)
        == reference_hmac_hex(key, client_text));
  CHECK(handshake_proof(key, "client", "c1", "node-c", "node-s", nonce_c, nonce_s) != proof);
}

TEST_CASE("a node with the cluster secret completes the handshake and is welcomed", "[cluster][handshake]") {
  // CJ-23 steps 1 to 4
  handshake_gate gate(node_s, secret, std::nullopt);
  client c;
  CHECK(c.hello.protocol == "troupe.cluster.v1");
  CHECK(c.hello.nonce.size() == 32);
  CHECK_FALSE(gate.welcomed(peer));

  auto ch = challenge_for(gate, c, t0);
  CHECK(ch.node_id == node_s);
  CHECK(ch.nonce.size() == 32);
  CHECK(ch.nonce != c.hello.nonce);
  CHECK(gate.open_challenges(peer) == 1);

  auto proof = c.answer(ch);
  REQUIRE(proof);
  CHECK(refusal_code(gate.on_auth(peer, *proof, t0 + 1s)) == "accepted");
  CHECK(gate.welcomed(peer));
  CHECK(gate.open_challenges(peer) == 0);
  CHECK_FALSE(gate.welcomed("another-peer"));
}

TEST_CASE("nonces are 32 fresh random bytes", "[cluster][handshake]") { // CJ-23
  auto a = random_nonce();
  auto b = random_nonce();
  CHECK(a.size() == 32);
  CHECK(a != b);
  CHECK(make_hello(cluster, node_c).nonce != make_hello(cluster, node_c).nonce);
}

TEST_CASE("the previous secret also verifies, on both sides, during rotation", "[cluster][handshake]") {
  // CJ-23: cluster.secret_previous
  // A node still signing with the old secret that already verifies the new one (first rotation step),
  // answering a gate that signs with the new one.
  auto old_signer_answer = [](handshake_gate& gate) {
    client c;
    c.secret_ = old_secret;
    c.previous_ = secret;
    auto proof = c.answer(challenge_for(gate, c, t0));
    REQUIRE(proof);
    return gate.on_auth(peer, *proof, t0);
  };
  SECTION("the gate accepts a client proof made with its previous secret") {
    handshake_gate gate(node_s, secret, old_secret);
    CHECK(refusal_code(old_signer_answer(gate)) == "accepted");
  }
  SECTION("without a previous secret the same proof is refused") {
    handshake_gate gate(node_s, secret, std::nullopt);
    CHECK(refusal_code(old_signer_answer(gate)) == "bad_proof");
  }
  SECTION("a client accepts a server proof made with its previous secret") {
    handshake_gate gate(node_s, old_secret, std::nullopt);
    client c;
    auto ch = challenge_for(gate, c, t0);
    CHECK_FALSE(verify_server(ch, secret, std::nullopt, cluster, node_c, c.hello.nonce));
    CHECK(verify_server(ch, secret, old_secret, cluster, node_c, c.hello.nonce));
  }
  SECTION("an empty previous secret verifies nothing, not even a proof made with the empty key") {
    handshake_gate empty_signer(node_s, "", std::nullopt);
    client c;
    c.secret_ = "";
    auto ch = challenge_for(empty_signer, c, t0);
    CHECK_FALSE(verify_server(ch, secret, std::string(), cluster, node_c, c.hello.nonce));
    handshake_gate gate(node_s, secret, std::string());
    auto forged = client_proof(challenge_for(gate, c, t0), "", cluster, node_c, c.hello.nonce);
    CHECK(refusal_code(gate.on_auth(peer, forged, t0)) == "bad_proof");
  }
}

TEST_CASE("a node with another secret fails both ways and is not welcomed", "[cluster][handshake]") { // CJ-23
  handshake_gate gate(node_s, secret, std::nullopt);
  client c;
  c.secret_ = std::string(40, 'x');
  auto ch = challenge_for(gate, c, t0);
  CHECK_FALSE(c.answer(ch)); // C drops S
  auto forged = client_proof(ch, c.secret_, cluster, node_c, c.hello.nonce);
  auto answer = gate.on_auth(peer, forged, t0);
  CHECK(refusal_code(answer) == "bad_proof");
  CHECK(std::get<handshake_refusal>(answer).message.find(secret) == std::string::npos);
  CHECK_FALSE(gate.welcomed(peer));
}

TEST_CASE("a client refuses a challenge bound to another hello or altered in any field", "[cluster][handshake]") {
  // CJ-23 step 3
  handshake_gate gate(node_s, secret, std::nullopt);
  client c;
  auto ch = challenge_for(gate, c, t0);
  REQUIRE(verify_server(ch, secret, std::nullopt, cluster, node_c, c.hello.nonce));
  CHECK_FALSE(verify_server(ch, secret, std::nullopt, cluster, node_c, random_nonce()));
  CHECK_FALSE(verify_server(ch, secret, std::nullopt, "cluster-2", node_c, c.hello.nonce));
  CHECK_FALSE(verify_server(ch, secret, std::nullopt, cluster, "node-other", c.hello.nonce));
  auto altered = ch;
  altered.node_id = "node-0000000000000000";
  CHECK_FALSE(verify_server(altered, secret, std::nullopt, cluster, node_c, c.hello.nonce));
  altered = ch;
  altered.nonce = random_nonce();
  CHECK_FALSE(verify_server(altered, secret, std::nullopt, cluster, node_c, c.hello.nonce));
  altered = ch;
  altered.proof[0] = altered.proof[0] == '0' ? '1' : '0';
  CHECK_FALSE(verify_server(altered, secret, std::nullopt, cluster, node_c, c.hello.nonce));
}

TEST_CASE("a proof is used once: replayed after its welcome it is refused", "[cluster][handshake]") {
  // CJ-23: challenges are single-use
  handshake_gate gate(node_s, secret, std::nullopt);
  client first, second;
  auto proof1 = first.answer(challenge_for(gate, first, t0));
  auto proof2 = second.answer(challenge_for(gate, second, t0));
  REQUIRE(proof1);
  REQUIRE(proof2);
  CHECK(gate.open_challenges(peer) == 2);
  CHECK(refusal_code(gate.on_auth(peer, *proof1, t0)) == "accepted");
  CHECK(refusal_code(gate.on_auth(peer, *proof1, t0)) == "bad_proof"); // not even with another open
  CHECK(refusal_code(gate.on_auth(peer, *proof2, t0)) == "accepted");
  CHECK(refusal_code(gate.on_auth(peer, *proof2, t0)) == "bad_proof");
  CHECK(gate.open_challenges(peer) == 0);
}

TEST_CASE("a proof is refused once its challenge is 10 s old", "[cluster][handshake]") {
  // CJ-23: challenges live 10 s
  handshake_gate gate(node_s, secret, std::nullopt);
  client late, in_time;
  auto late_proof = late.answer(challenge_for(gate, late, t0));
  auto in_time_proof = in_time.answer(challenge_for(gate, in_time, t0 + 1ms));
  REQUIRE(late_proof);
  REQUIRE(in_time_proof);
  CHECK(refusal_code(gate.on_auth(peer, *late_proof, t0 + 10s)) == "bad_proof");
  CHECK(refusal_code(gate.on_auth(peer, *in_time_proof, t0 + 10s)) == "accepted");
}

TEST_CASE("a peer holds at most 8 open challenges; the 9th hello is refused until some expire",
          "[cluster][handshake]") {
  // CJ-23: at most 8 per peer
  handshake_gate gate(node_s, secret, std::nullopt);
  client c;
  for (int i = 0; i < 8; ++i)
    challenge_for(gate, c, t0 + std::chrono::seconds(i));
  auto ninth = gate.on_hello(peer, c.hello, cluster, true, t0 + 8s);
  CHECK(refusal_code(ninth) == "too_many_challenges");
  CHECK(gate.open_challenges(peer) == 8);
  // Another peer is not affected by this one's challenges.
  CHECK(refusal_code(gate.on_hello("other-peer", c.hello, cluster, true, t0 + 8s)) == "accepted");
  // At t0 + 10 s the first has expired and is pruned before counting.
  CHECK(refusal_code(gate.on_hello(peer, c.hello, cluster, true, t0 + 10s)) == "accepted");
  CHECK(gate.open_challenges(peer) == 8);
}

TEST_CASE("3 failed proofs within 60 s mute a peer for 60 s, after which it may handshake again",
          "[cluster][handshake]") {
  // CJ-24
  handshake_gate gate(node_s, secret, std::nullopt);
  client c;
  auto good = c.answer(challenge_for(gate, c, t0));
  REQUIRE(good);
  CHECK(refusal_code(gate.on_auth(peer, a_wrong_proof(), t0)) == "bad_proof");
  CHECK(refusal_code(gate.on_auth(peer, a_wrong_proof(), t0 + 20s)) == "bad_proof");
  CHECK_FALSE(gate.muted(peer, t0 + 20s));
  auto challenge = challenge_for(gate, c, t0 + 30s);
  CHECK(refusal_code(gate.on_auth(peer, cluster_proof{"short"}, t0 + 59s)) == "bad_proof");
  CHECK(gate.muted(peer, t0 + 59s));

  // While muted, even a correct proof and a fresh hello are refused.
  CHECK(refusal_code(gate.on_auth(peer, *c.answer(challenge), t0 + 59s)) == "peer_muted");
  CHECK(refusal_code(gate.on_hello(peer, c.hello, cluster, true, t0 + 118s)) == "peer_muted");
  CHECK_FALSE(gate.welcomed(peer));

  // The mute ends 60 s after the third failure.
  CHECK_FALSE(gate.muted(peer, t0 + 119s));
  auto again = c.answer(challenge_for(gate, c, t0 + 119s));
  REQUIRE(again);
  CHECK(refusal_code(gate.on_auth(peer, *again, t0 + 119s)) == "accepted");
}

TEST_CASE("failed proofs further apart than 60 s do not mute", "[cluster][handshake]") { // CJ-24
  handshake_gate gate(node_s, secret, std::nullopt);
  client c;
  challenge_for(gate, c, t0);
  gate.on_auth(peer, a_wrong_proof(), t0);
  gate.on_auth(peer, a_wrong_proof(), t0 + 30s);
  CHECK(refusal_code(gate.on_auth(peer, a_wrong_proof(), t0 + 60s)) == "bad_proof");
  CHECK_FALSE(gate.muted(peer, t0 + 60s));
  CHECK(refusal_code(gate.on_auth(peer, a_wrong_proof(), t0 + 61s)) == "bad_proof");
  CHECK(gate.muted(peer, t0 + 61s));
}

TEST_CASE("forgetting a peer on node_down drops its welcome and challenges but not its mute",
          "[cluster][handshake]") {
  // CJ-23 step 4, CJ-24
  handshake_gate gate(node_s, secret, std::nullopt);
  client c;
  SECTION("welcome and challenges go") {
    auto proof = c.answer(challenge_for(gate, c, t0));
    challenge_for(gate, c, t0);
    REQUIRE(refusal_code(gate.on_auth(peer, *proof, t0)) == "accepted");
    gate.forget(peer);
    CHECK_FALSE(gate.welcomed(peer));
    CHECK(gate.open_challenges(peer) == 0);
    CHECK(gate.tracked_peers() == 0);
  }
  SECTION("a mute stays") {
    challenge_for(gate, c, t0);
    for (int i = 0; i < 3; ++i)
      gate.on_auth(peer, a_wrong_proof(), t0);
    REQUIRE(gate.muted(peer, t0));
    gate.forget(peer);
    CHECK(gate.muted(peer, t0 + 1s));
    CHECK(refusal_code(gate.on_hello(peer, c.hello, cluster, true, t0 + 1s)) == "peer_muted");
  }
  SECTION("recent failures stay, so a reconnect does not reset the count") {
    challenge_for(gate, c, t0);
    gate.on_auth(peer, a_wrong_proof(), t0);
    gate.on_auth(peer, a_wrong_proof(), t0);
    gate.forget(peer);
    challenge_for(gate, c, t0 + 1s);
    gate.on_auth(peer, a_wrong_proof(), t0 + 1s);
    CHECK(gate.muted(peer, t0 + 1s));
  }
}

TEST_CASE("a hello with the wrong protocol, cluster id or a dead node is refused and leaves no state",
          "[cluster][handshake]") {
  // CJ-23 step 2
  handshake_gate gate(node_s, secret, std::nullopt);
  client c;
  auto hello = c.hello;
  hello.protocol = "troupe.cluster.v2";
  CHECK(refusal_code(gate.on_hello(peer, hello, cluster, true, t0)) == "wrong_protocol");
  hello = c.hello;
  hello.cluster_id = "cluster-2";
  CHECK(refusal_code(gate.on_hello(peer, hello, cluster, true, t0)) == "wrong_cluster");
  CHECK(refusal_code(gate.on_hello(peer, c.hello, cluster, false, t0)) == "unknown_node");
  CHECK(gate.tracked_peers() == 0);
  CHECK(refusal_code(gate.on_hello(peer, c.hello, cluster, true, t0)) == "accepted");
}

TEST_CASE("a proof from a peer that was never challenged is refused and stores nothing", "[cluster][handshake]") {
  // CJ-24
  handshake_gate gate(node_s, secret, std::nullopt);
  for (int i = 0; i < 10; ++i)
    CHECK(refusal_code(gate.on_auth("peer-" + std::to_string(i), a_wrong_proof(), t0)) == "bad_proof");
  CHECK(gate.tracked_peers() == 0);
}

TEST_CASE("hostile values in every field are refused without crashing", "[cluster][handshake]") { // CJ-23, CJ-24
  const std::vector<std::string> hostile = {
    "",
    std::string(10 << 20, 'x'),
    std::string("node\0c", 6),
    std::string(31, '\0'),
    "\xff\xfe\xc3\x28 not utf-8",
    std::string(64, '\xff'),
    "node|c",
  };
  handshake_gate gate(node_s, secret, std::nullopt);
  auto expect_refused = [&](const auto& answer) {
    REQUIRE(std::holds_alternative<handshake_refusal>(answer));
    const auto& message = std::get<handshake_refusal>(answer).message;
    CHECK(message.size() < 200); // nothing of the input is echoed
    CHECK(message.find(secret) == std::string::npos);
  };
  for (std::size_t i = 0; i < hostile.size(); ++i) {
    CAPTURE(i);
    const auto& bad = hostile[i];
    client c;
    auto hello = c.hello;
    hello.protocol = bad;
    expect_refused(gate.on_hello(peer, hello, cluster, true, t0));
    hello = c.hello;
    hello.cluster_id = bad;
    expect_refused(gate.on_hello(peer, hello, cluster, true, t0));
    hello = c.hello;
    hello.node_id = bad;
    expect_refused(gate.on_hello(peer, hello, cluster, true, t0));
    hello = c.hello;
    hello.nonce = bad;
    expect_refused(gate.on_hello(peer, hello, cluster, true, t0));

    // The client side refuses the same values in a challenge.
    handshake_gate other(node_s, secret, std::nullopt);
    auto ch = challenge_for(other, c, t0);
    for (auto field : {&cluster_challenge::node_id, &cluster_challenge::nonce, &cluster_challenge::proof}) {
      auto altered = ch;
      altered.*field = bad;
      CHECK_FALSE(verify_server(altered, secret, std::nullopt, cluster, node_c, c.hello.nonce));
    }
  }
  CHECK(gate.tracked_peers() == 0);
  expect_refused(gate.on_hello("", client{}.hello, cluster, true, t0));
  expect_refused(gate.on_hello(std::string(10 << 20, 'p'), client{}.hello, cluster, true, t0));

  // Proofs: a fresh gate per value, so that the mute does not answer in the proof's place.
  for (std::size_t i = 0; i < hostile.size(); ++i) {
    CAPTURE(i);
    handshake_gate g(node_s, secret, std::nullopt);
    client c;
    challenge_for(g, c, t0);
    auto answer = g.on_auth(peer, cluster_proof{hostile[i]}, t0);
    CHECK(refusal_code(answer) == "bad_proof");
    expect_refused(answer);
    CHECK_FALSE(g.welcomed(peer));
  }
}

TEST_CASE("the gate tracks at most max_peers peers and evicts only idle ones", "[cluster][handshake]") {
  // CJ-24: bounded memory
  SECTION("the default bound is 1024 peers") {
    handshake_gate gate(node_s, secret, std::nullopt);
    client c;
    int refused = 0;
    for (int i = 0; i < 1500; ++i)
      if (refusal_code(gate.on_hello("peer-" + std::to_string(i), c.hello, cluster, true, t0)) == "too_many_peers")
        ++refused;
    CHECK(gate.tracked_peers() == 1024);
    CHECK(refused == 1500 - 1024);
  }
  SECTION("peers with expired challenges make room; welcomed and muted peers do not") {
    handshake_limits limits;
    limits.max_peers = 3;
    handshake_gate gate(node_s, secret, std::nullopt, limits);
    client c;
    auto proof = c.answer(challenge_for(gate, c, t0, "welcomed"));
    REQUIRE(refusal_code(gate.on_auth("welcomed", *proof, t0)) == "accepted");
    challenge_for(gate, c, t0, "muted");
    for (int i = 0; i < 3; ++i)
      gate.on_auth("muted", a_wrong_proof(), t0);
    REQUIRE(gate.muted("muted", t0));
    challenge_for(gate, c, t0, "waiting");

    CHECK(refusal_code(gate.on_hello("newcomer", c.hello, cluster, true, t0 + 9s)) == "too_many_peers");
    CHECK(refusal_code(gate.on_hello("newcomer", c.hello, cluster, true, t0 + 10s)) == "accepted");
    CHECK(gate.tracked_peers() == 3);
    CHECK(gate.welcomed("welcomed"));
    CHECK(gate.muted("muted", t0 + 10s));
    CHECK(gate.open_challenges("waiting") == 0);
    CHECK(refusal_code(gate.on_hello("late", c.hello, cluster, true, t0 + 10s)) == "too_many_peers");
  }
}

TEST_CASE("a secret shorter than 32 bytes is named with its key and env variable, never shown",
          "[cluster][handshake]") {
  // CJ-23
  CHECK_FALSE(secret_problem(std::string(32, 's')));
  auto short_one = secret_problem("hunter2-is-too-short");
  REQUIRE(short_one);
  CHECK(short_one->find("cluster.secret") != std::string::npos);
  CHECK(short_one->find("TROUPE_CLUSTER_SECRET") != std::string::npos);
  CHECK(short_one->find("32") != std::string::npos);
  CHECK(short_one->find("hunter2") == std::string::npos);
  auto missing = secret_problem("");
  REQUIRE(missing);
  CHECK(missing->find("cluster.secret") != std::string::npos);
}

TEST_CASE("refusal codes are stable words", "[cluster][handshake]") { // CJ-24
  CHECK(code_of(unauthenticated_refusal()) == "cluster_unauthenticated");
  CHECK(std::string(to_string(handshake_code::peer_muted)) == "peer_muted");
  CHECK(std::string(to_string(handshake_code::too_many_challenges)) == "too_many_challenges");
  CHECK(std::string(to_string(handshake_code::wrong_cluster)) == "wrong_cluster");
  CHECK(std::string(to_string(handshake_code::unknown_node)) == "unknown_node");
  CHECK(std::string(to_string(handshake_code::wrong_protocol)) == "wrong_protocol");
  CHECK(std::string(to_string(handshake_code::bad_proof)) == "bad_proof");
}

// Workspace logs (workspace-stream.md WS-25, WS-128, WS-133): one log actor per (tenant, workspace)
// carries out its commands through the store, keeps the shared ring of recent envelopes and wakes its
// subscribers; the `workspaces` actor starts logs on first use and retires idle ones.
#pragma once

#include "actors/atoms.hpp"
#include "actors/cluster_messages.hpp"
#include "actors/envelope_ring.hpp"
#include "actors/wakeups.hpp"
#include "actors/workspace_store.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace troupe {

class node_status;

using ring_ptr = std::shared_ptr<const envelope_ring>;

// Every message names its workspace; the `workspaces` actor hands it to that workspace's log.
using workspaces_actor = caf::typed_actor<
  caf::replies_to<command_atom, workspace_command>::with<workspace_outcome>,
  // A command another node forwarded (CJ-29): carried out here while this node owns the log, else
  // refused as `not_owner`; never forwarded again.
  caf::replies_to<forward_atom, workspace_command>::with<workspace_outcome>,
  caf::replies_to<read_atom, workspace_key, workspace_read>::with<workspace_slice>,
  // Subscribes an actor to the log: it gets `(wake_atom, int64_t head)` after appends and reads new
  // envelopes from the ring (or the store once behind it). Answers the head at subscription, read
  // atomically with it (WS-50), and the ring. The subscription ends when the subscriber does.
  caf::replies_to<subscribe_atom, workspace_key, caf::actor>::with<int64_t, ring_ptr>,
  // A log asking to retire after `handled` messages, idle (sent by the logs).
  caf::reacts_to<idle_atom, workspace_key, uint64_t>,
  // Forgets command results past their retention, then again every hour (WS-40).
  caf::reacts_to<prune_atom>,
  // Another node appended to the log up to `head` (CJ-10's troupe_ws): a live log here reads what
  // it lacks from the store for its subscribers (CJ-29's live tails elsewhere).
  caf::reacts_to<appended_atom, workspace_key, int64_t>,
  // A poll (CJ-10): every live log reads what other nodes appended since its head.
  caf::reacts_to<appended_atom>>;

// In a cluster with remoting (CJ-28, CJ-29), one node at a time owns a log: a command reaching any
// other node is forwarded to the owner, and a log with no live owner is taken by the node a command
// reaches. Without `node`, every node carries commands out itself (the head-row lock orders them).
struct workspace_cluster {
  std::shared_ptr<node_status> node; // this node's id now
  cluster_peers_actor peers;
  double forward_timeout_seconds = 5;
};

struct workspaces_options {
  double log_idle_timeout = 300; // seconds without a message or subscriber before a log stops
  std::size_t ring_capacity = 4096;
  double command_result_retention = 7 * 86400.0; // seconds
  workspace_cluster cluster;
};

// The kind of a command's error when the owner of its log did not answer and still holds it: a
// fault the caller retries (CJ-29, WS-42), answered 503 with Retry-After at the edge.
inline constexpr const char* owner_unreachable = "workspace_owner_unreachable";

// `notifier`, when valid, tells the other nodes of each log's new head after its appends (CJ-10).
workspaces_actor spawn_workspaces(caf::actor_system& sys, workspace_store_actor store, workspaces_options options,
                                  notifier_actor notifier = {});

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::ring_ptr)

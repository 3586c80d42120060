// The workspace logs' store port (workspace-stream.md WS-15, WS-29, WS-40): envelopes in seq order
// and remembered command results, each command carried out inside one transaction. Adapters live in
// io/ (SQLite, PostgreSQL).
#pragma once

#include "actors/atoms.hpp"
#include "protocol/workspace_commands.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

using own_atom = caf::atom_constant<caf::atom("own")>;
using disown_atom = caf::atom_constant<caf::atom("disown")>;

// WS-1: a workspace is a tenant's workspace id.
struct workspace_key {
  std::string tenant;
  std::string workspace;
  bool operator<(const workspace_key& o) const {
    return tenant < o.tenant || (tenant == o.tenant && workspace < o.workspace);
  }
};

// CJ-28: the node that owns a log in a cluster, and the epoch it took the log at ("" and 0: none).
struct workspace_owner {
  std::string node_id;
  int64_t epoch = 0;
};

// One command for the store to carry out against the log it names, keyed by its sender's
// participant and command id (WS-38; a REST publish body has no key).
struct workspace_command {
  workspace_key key;
  std::string participant;
  protocol::reflexr::command_request request;
  protocol::reflexr::command_context context;
  // CJ-9: in a cluster, the ownership it is carried out under; the store refuses it (kind
  // `workspace_ownership_lost`) once the log has another owner or epoch. Epoch 0: no owners.
  workspace_owner fence;
};

inline constexpr const char* ownership_lost = "workspace_ownership_lost";

// What a command answered and what it appended. `body` is the answer's JSON: a `command_result`
// frame, or for a publish body the outcomes array or the `{"detail": …}` of its rejection.
struct workspace_outcome {
  std::string body;
  errc code = errc::none; // the rejection's, or none: the edge renders the status (WS-27)
  bool ok = true;
  int64_t max_seq = 0;               // WS-132
  std::vector<std::string> appended; // envelope JSON, in seq order
  std::vector<std::string> types;    // the event type of each appended envelope
  int64_t first_seq = 0;             // seq of appended[0]
  bool remembered = false;           // the key's first result, read back (WS-39)
};

// A slice of a log: `after_seq` < seq < `before_seq` (0: no bound), of `types` (empty: all), the
// first `limit` or, with `from_end`, the last `limit`, oldest first.
struct workspace_read {
  int64_t after_seq = 0;
  int64_t before_seq = 0;
  std::vector<std::string> types;
  int64_t limit = 1000;
  bool from_end = false;
};

// Envelopes read: JSON and type, oldest first.
struct workspace_slice {
  std::vector<int64_t> seqs;
  std::vector<std::string> envelopes;
  std::vector<std::string> types;
};

using workspace_store_actor = caf::typed_actor<
  // Carries out a command in one transaction with its envelopes and, for a keyed command, its
  // result; a key already answered returns that first answer and changes nothing.
  caf::replies_to<command_atom, workspace_command>::with<workspace_outcome>,
  caf::replies_to<read_atom, workspace_key, workspace_read>::with<workspace_slice>,
  // The log's head seq (0 when empty).
  caf::replies_to<head_atom, workspace_key>::with<int64_t>,
  // Forgets command results older than `retention` seconds (WS-40).
  caf::replies_to<prune_atom, double>::with<bool>,
  // CJ-28, PostgreSQL only: the log goes to the node named unless a live node owns it; answers the
  // owner either way.
  caf::replies_to<own_atom, workspace_key, std::string>::with<workspace_owner>,
  // Gives the log up if this owner still holds it at its epoch; answers whether it did.
  caf::replies_to<disown_atom, workspace_key, workspace_owner>::with<bool>>;

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::workspace_key)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::workspace_command)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::workspace_owner)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::workspace_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::workspace_read)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::workspace_slice)

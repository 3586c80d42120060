// Who appended an envelope (workspace-stream.md WS-21): the actor object and its participant, the
// sender's stable identity that commands are deduplicated by.
#pragma once

#include "protocol/json.hpp"

#include <optional>
#include <string>
#include <variant>

namespace troupe::protocol {

// An actor as the envelope carries it; "" fields are absent.
struct workspace_actor {
  std::string kind; // user | agent | external_agent | system | source | evaluator
  std::string id;        // user
  std::string name;      // user?, agent, external_agent?, system (default "reflexr"), source, evaluator
  std::string rule;      // agent
  std::string run_id;    // agent
  std::string client_id; // external_agent
  std::string version;   // evaluator
};

// `user:<id>`, `agent:<rule>`, `external_agent:<client_id>`, `system:<name>`, `source:<name>`,
// `evaluator:<name>@<version>`.
std::string participant(const workspace_actor& a);

// The actor object of an envelope.
void write_actor(json::writer& w, const workspace_actor& a);

// Reads an actor object (from configuration or a stored envelope); an error names the field missing
// or the unknown kind.
std::variant<workspace_actor, std::string> parse_actor(const json::value& v);

} // namespace troupe::protocol

// What every run of a node shares: its ports, its store and the loop's settings.
#pragma once

#include "actors/approval_registry.hpp"
#include "actors/cluster_messages.hpp"
#include "actors/metrics.hpp"
#include "actors/store.hpp"
#include "actors/tool_port.hpp"
#include "actors/wakeups.hpp"
#include "actors/model_port.hpp"
#include "actors/prompt_port.hpp"
#include "protocol/loop_settings.hpp"
#include "protocol/policy.hpp"

#include <memory>
#include <string>

namespace troupe {

struct run_environment {
  std::shared_ptr<model_port> model; // the default upstream: the agent service's rounds
  std::shared_ptr<tool_port> tools;
  std::shared_ptr<prompt_port> prompts; // AGENTS.md, SOUL.md and skills; none: the system message has none
  store_actor store; // may be invalid: nothing is persisted then
  std::shared_ptr<node_metrics> metrics = std::make_shared<node_metrics>();
  // The service policy every call is checked against (AS-35); a `danger` call waits for its approval.
  protocol::policy_config policy;
  protocol::safety_config safety;
  approval_registry_actor approvals; // may be invalid: a call needing approval is then denied
  cluster_peers_actor peers; // the other nodes (CJ-22); invalid without remoting: their runs end through the store
  notifier_actor notifier;   // wakes the other nodes when runs become claimable (CJ-10); invalid on one node
  double approval_timeout_seconds = 300;
  protocol::loop_settings loop = protocol::loop_settings::agent_service();
  std::string default_model = "scripted";
  int64_t default_max_tokens = 4096;
  bool stream = true;
  std::string workspaces_root = "./var/workspaces";
  // A background attempt that fails retryably waits base·2^(attempt−1) s, at most max (AS-53).
  double retry_base_seconds = 5;
  double retry_max_seconds = 300;
};

} // namespace troupe

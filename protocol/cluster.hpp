// A cluster's nodes as GET /v1/cluster shows them (CJ-17), and a node's own state as
// GET /v1/cluster/health does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

struct node_row {
  std::string node_id;  // node-<16 hex>, fresh per start
  std::string name;     // cluster.name, or the host name
  std::string endpoint; // host:port its peers reach it on
  std::string version;
  std::string state;        // alive | draining | dead | left
  std::string started_at;   // AS-78 timestamps, from the database clock
  std::string heartbeat_at;
  double heartbeat_age_seconds = 0;
  int64_t leases_held = 0; // runs it holds
};

// {"object":"list","data":[{"object":"cluster.node",...}],"node_id":<this node>}. `reachable` is
// null for other nodes while nothing connects the nodes but the database.
std::string cluster_json(const std::vector<node_row>& nodes, const std::string& self_id);

// {"state":"alive","node_id":...}
std::string cluster_health_json(const std::string& state, const std::string& node_id);

// The longest NOTIFY payload PostgreSQL takes (in bytes, its default build).
inline constexpr std::size_t max_wakeup_payload = 7999;

// CJ-10's troupe_ws payload: a workspace log's head after a node appended to it, as the JSON array
// ["tenant","workspace",head].
struct workspace_head {
  std::string tenant;
  std::string workspace;
  int64_t head = 0;
};

std::string workspace_wakeup(const workspace_head& h);

// Anyone who may connect to the database may NOTIFY, so a payload is read like any input from
// outside: nullopt unless it is exactly that array, at most max_wakeup_payload bytes,
// with non-empty names and a positive head.
std::optional<workspace_head> parse_workspace_wakeup(std::string_view payload);

} // namespace troupe::protocol

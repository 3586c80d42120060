#include "protocol/cluster.hpp"

#include "protocol/json.hpp"

namespace troupe::protocol {

std::string cluster_json(const std::vector<node_row>& nodes, const std::string& self_id) {
  return json::object([&](json::writer& w) {
    w.Key("object");
    w.String("list");
    w.Key("node_id");
    w.String(self_id.c_str(), static_cast<rapidjson::SizeType>(self_id.size()));
    w.Key("data");
    w.StartArray();
    for (auto& n : nodes) {
      w.StartObject();
      auto text = [&](const char* key, const std::string& v) {
        w.Key(key);
        w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
      };
      text("object", "cluster.node");
      text("node_id", n.node_id);
      text("name", n.name);
      text("endpoint", n.endpoint);
      text("state", n.state);
      text("version", n.version);
      text("started_at", n.started_at);
      text("heartbeat_at", n.heartbeat_at);
      w.Key("heartbeat_age_seconds");
      w.Double(n.heartbeat_age_seconds);
      w.Key("reachable");
      if (n.node_id == self_id)
        w.Bool(true);
      else
        w.Null();
      w.Key("leases_held");
      w.Int64(n.leases_held);
      w.EndObject();
    }
    w.EndArray();
  });
}

std::string cluster_health_json(const std::string& state, const std::string& node_id) {
  return json::object([&](json::writer& w) {
    w.Key("state");
    w.String(state.c_str(), static_cast<rapidjson::SizeType>(state.size()));
    w.Key("node_id");
    w.String(node_id.c_str(), static_cast<rapidjson::SizeType>(node_id.size()));
  });
}

std::string workspace_wakeup(const workspace_head& h) {
  std::string out = "[" + json::quote(h.tenant) + "," + json::quote(h.workspace) + ",";
  return out + std::to_string(h.head) + "]";
}

std::optional<workspace_head> parse_workspace_wakeup(std::string_view payload) {
  if (payload.size() > max_wakeup_payload)
    return std::nullopt;
  auto doc = json::parse(payload);
  if (!doc || !doc->IsArray() || doc->Size() != 3)
    return std::nullopt;
  auto& a = *doc;
  if (!a[0].IsString() || !a[1].IsString() || !a[2].IsInt64() || a[2].GetInt64() <= 0)
    return std::nullopt;
  workspace_head h{std::string(a[0].GetString(), a[0].GetStringLength()),
                   std::string(a[1].GetString(), a[1].GetStringLength()), a[2].GetInt64()};
  if (h.tenant.empty() || h.workspace.empty())
    return std::nullopt;
  return h;
}

} // namespace troupe::protocol

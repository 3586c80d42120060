#include "actors/cluster_messages.hpp"

#include "actors/errors.hpp"
#include "actors/workspace_store.hpp"

#include <caf/actor_system_config.hpp>

namespace troupe {

namespace rx = protocol::reflexr;

workspace_forward forward_of(const workspace_command& c) {
  workspace_forward f;
  f.tenant_id = c.key.tenant;
  f.workspace_id = c.key.workspace;
  f.participant = c.participant;
  f.command_id = c.request.command_id;
  f.frame = c.request.body ? protocol::json::serialize(*c.request.body) : std::string("null");
  f.publish_body = c.request.publish_body;
  f.actor = c.context.actor;
  f.now = c.context.now;
  f.traceparent = c.context.traceparent;
  return f;
}

workspace_answer answer_of(const workspace_outcome& o) {
  return {o.body, o.code, o.ok, o.max_seq, o.remembered};
}

workspace_outcome outcome_of(workspace_answer a) {
  workspace_outcome o;
  o.body = std::move(a.body);
  o.code = a.code;
  o.ok = a.ok;
  o.max_seq = a.max_seq;
  o.remembered = a.remembered;
  return o;
}

std::variant<workspace_command, std::string> command_of(const workspace_forward& f,
                                                        std::shared_ptr<const rx::event_registry> types,
                                                        int max_depth) {
  // The frame goes through the parser a client's does, so a peer's command is checked as one.
  auto parsed = f.publish_body ? rx::parse_publish_body(f.frame, *types)
                               : rx::parse_command_frame("{\"type\":\"command\",\"command_id\":"
                                                           + protocol::json::quote(f.command_id)
                                                           + ",\"command\":" + f.frame + "}",
                                                         *types);
  if (auto bad = std::get_if<rx::problems>(&parsed))
    return "workspace_forward.frame: " + rx::first_problem(*bad);
  if (!rx::is_workspace_id(f.workspace_id) || f.participant != protocol::participant(f.actor))
    return std::string("workspace_forward: the workspace id or the participant does not hold");
  workspace_command c;
  c.key = {f.tenant_id, f.workspace_id};
  c.participant = f.participant;
  c.request = std::get<rx::command_request>(std::move(parsed));
  c.context.workspace_id = f.workspace_id;
  c.context.actor = f.actor;
  c.context.now = f.now;
  c.context.traceparent = f.traceparent;
  c.context.max_depth = max_depth;
  c.context.types = std::move(types);
  return c;
}

void add_cluster_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<protocol::cluster_hello>("troupe.cluster_hello");
  cfg.add_message_type<protocol::cluster_challenge>("troupe.cluster_challenge");
  cfg.add_message_type<protocol::cluster_proof>("troupe.cluster_proof");
  cfg.add_message_type<protocol::cluster_welcome>("troupe.cluster_welcome");
  cfg.add_message_type<cancel_request>("troupe.cancel_request");
  cfg.add_message_type<cancel_ack>("troupe.cancel_ack");
  cfg.add_message_type<approval_resolution>("troupe.approval_resolution");
  cfg.add_message_type<resolve_ack>("troupe.resolve_ack");
  cfg.add_message_type<pong>("troupe.pong");
  cfg.add_message_type<workspace_forward>("troupe.workspace_forward");
  cfg.add_message_type<workspace_answer>("troupe.workspace_answer");
  cfg.add_message_type<feed_request>("troupe.feed_request");
  cfg.add_message_type<feed_ack>("troupe.feed_ack");
  cfg.add_message_type<feed_events>("troupe.feed_events");
  cfg.add_message_type<feed_end>("troupe.feed_end");
  cfg.add_message_type<problem>("troupe.problem"); // the context of every troupe error a node answers
}

} // namespace troupe

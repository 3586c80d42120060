// Values that travel between troupe's actors (node-local: allowed as unsafe message types).
#pragma once

#include "actors/tool_port.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/chat_request.hpp"
#include "protocol/chat_types.hpp"

#include <caf/allowed_unsafe_message_type.hpp>

#include <string>
#include <vector>

namespace troupe {

// Everything a run needs to start, resolved by the edge from the request and the caller.
struct run_spec {
  std::string run_id;
  std::string run_kind = "chat";
  std::string tenant_key;
  std::string user_key;
  protocol::chat_request request;
  bool caller_named_id = false; // metadata.run_id: it may name a stored run
  int attempt = 1;            // a reopened chat run counts on (AS-10)
  int64_t first_sequence = 0; // and continues its event sequence
};

// A run's stored state; a chat run is stored as a run too (AS-91).
struct run_record {
  std::string run_id;
  std::string run_kind;
  std::string session_id;
  std::string tenant_key;
  std::string user_key;
  std::string status; // running | completed | failed | cancelled
  int attempts = 0;
  int64_t event_count = 0;
  std::string created_at;
  std::string updated_at;
};

// How a run ended; sent to its subscriber after the terminal event.
struct run_result {
  std::string run_id;
  std::string session_id;
  std::string status; // completed | failed | cancelled
  std::string content; // the final answer, or ""
  std::string error;   // the error event's content, when there was one
  double duration_ms = 0;
  int64_t event_count = 0;
  std::vector<std::string> cited_source_ids;
};

// A session's latest state, kept per (tenant_key, user_key, session_id).
struct session_record {
  std::string tenant_key;
  std::string user_key;
  std::string session_id;
  std::string created_at;
  std::string updated_at;
  int64_t run_count = 0;
  std::string last_run_id;
  std::string last_status;
  std::string last_query;
  std::string last_answer;
};

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_spec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::session_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::tool_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::agent_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::model_outcome)

#include "protocol/responses_replay.hpp"

namespace troupe::protocol::responses {

const char* terminal_type(std::string_view status) {
  if (status == "completed")
    return "response.completed";
  if (status == "failed")
    return "response.failed";
  return "response.incomplete";
}

std::vector<stream_event> canonical_replay(std::string_view snapshot_json) {
  auto doc = json::parse(snapshot_json);
  if (!doc || !doc->IsObject())
    return {};
  std::vector<item> items;
  if (auto output = json::member(*doc, "output"); output && output->IsArray())
    for (auto& v : output->GetArray())
      items.push_back(item_from_json(v));
  auto status = json::get_string(*doc, "status");
  // The object as it stood when the run began.
  json::document start;
  start.CopyFrom(*doc, start.GetAllocator());
  start["status"].SetString("in_progress", start.GetAllocator());
  if (start.HasMember("output"))
    start["output"].SetArray();
  for (auto key : {"usage", "completed_at", "error", "incomplete_details"})
    if (start.HasMember(key))
      start[key].SetNull();
  auto begin = json::serialize(start);
  response_stream stream(nullptr, -1);
  stream.created(begin, false);
  stream.in_progress(begin);
  for (auto& it : items)
    stream.replay_item(it);
  stream.terminal(terminal_type(status), json::serialize(*doc));
  return stream.take_events();
}

} // namespace troupe::protocol::responses

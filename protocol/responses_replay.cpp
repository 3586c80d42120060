#include "protocol/responses_replay.hpp"

namespace troupe::protocol::responses {

const char* terminal_type(response_status status) {
  if (status == response_status::completed)
    return "response.completed";
  if (status == response_status::failed)
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
  auto status = parse_response_status(json::get_string(*doc, "status")).value_or(response_status::incomplete);
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

namespace {

struct folded {
  item it;
  bool done = false;
  bool part_open = false;
  bool arguments_done = false;
};

std::string part_json(const content_part& p) {
  item holder;
  holder.type = item_kind::message;
  holder.content.push_back(p);
  auto text = to_json(holder);
  auto doc = json::parse(text);
  return json::serialize((*doc)["content"][0]);
}

} // namespace

std::vector<stream_event> failed_ending(const std::vector<std::string>& logged, std::string_view snapshot_json,
                                        const std::string& error_json, std::string& final_snapshot) {
  std::vector<folded> items;
  int64_t next = 0;
  for (auto& text : logged) {
    auto doc = json::parse(text);
    if (!doc || !doc->IsObject())
      continue;
    const json::value& e = *doc;
    next = json::get_int(e, "sequence_number").value_or(next) + 1;
    auto type = json::get_string(e, "type");
    auto index = static_cast<std::size_t>(json::get_int(e, "output_index").value_or(-1));
    if (type == "response.output_item.added" || type == "response.output_item.done") {
      if (index >= items.size())
        items.resize(index + 1);
      if (auto v = json::member(e, "item"))
        items[index].it = item_from_json(*v);
      items[index].done = type == "response.output_item.done";
      continue;
    }
    if (index >= items.size())
      continue;
    auto& f = items[index];
    auto delta = json::get_string(e, "delta");
    if (type == "response.content_part.added") {
      if (auto p = json::member(e, "part")) {
        content_part part;
        part.type = parse_part_kind(json::get_string(*p, "type")).value_or(part_kind::unknown);
        f.it.content.push_back(part);
        f.part_open = true;
      }
    } else if (type == "response.content_part.done") {
      f.part_open = false;
    } else if ((type == "response.output_text.delta" || type == "response.refusal.delta"
                || type == "response.reasoning_text.delta")
               && !f.it.content.empty()) {
      f.it.content.back().text += delta;
      append_logprobs(f.it.content.back().logprobs, logprobs_json(json::member(e, "logprobs")));
    } else if (type == "response.function_call_arguments.delta" || type == "response.mcp_call_arguments.delta") {
      f.it.arguments += delta;
    } else if (type == "response.function_call_arguments.done" || type == "response.mcp_call_arguments.done") {
      f.arguments_done = true;
    }
  }
  std::vector<stream_event> out;
  auto emit = [&](const char* type, const std::string& members) { out.push_back(make_event(next++, type, members)); };
  auto scoped = [&](std::size_t index, const std::string& rest) {
    return "\"item_id\":" + json::quote(items[index].it.id) + ",\"output_index\":" + std::to_string(index)
           + (rest.empty() ? "" : "," + rest);
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& f = items[i];
    if (f.done)
      continue;
    if (f.part_open && !f.it.content.empty()) {
      auto& part = f.it.content.back();
      auto ci = "\"content_index\":" + std::to_string(f.it.content.size() - 1);
      if (part.type == part_kind::refusal)
        emit("response.refusal.done", scoped(i, ci + ",\"refusal\":" + json::quote(part.text)));
      else if (part.type == part_kind::reasoning_text)
        emit("response.reasoning_text.done", scoped(i, ci + ",\"text\":" + json::quote(part.text)));
      else
        emit("response.output_text.done", scoped(i, ci + ",\"text\":" + json::quote(part.text) + ",\"logprobs\":"
                                                       + (part.logprobs.empty() ? "[]" : part.logprobs)));
      emit("response.content_part.done", scoped(i, ci + ",\"part\":" + part_json(part)));
    }
    if (!f.arguments_done && f.it.type == item_kind::function_call)
      emit("response.function_call_arguments.done",
           scoped(i, "\"name\":" + json::quote(f.it.name) + ",\"arguments\":" + json::quote(f.it.arguments)));
    if (!f.arguments_done && f.it.type == item_kind::mcp_call)
      emit("response.mcp_call_arguments.done", scoped(i, "\"arguments\":" + json::quote(f.it.arguments)));
    f.it.status = "incomplete";
    emit("response.output_item.done", "\"output_index\":" + std::to_string(i) + ",\"item\":" + to_json(f.it));
  }
  auto doc = json::parse(snapshot_json);
  if (!doc || !doc->IsObject())
    doc = json::parse("{}");
  auto& alloc = doc->GetAllocator();
  auto set = [&](const char* key, json::value v) {
    if (doc->HasMember(key))
      (*doc)[key] = v;
    else
      doc->AddMember(json::value(key, alloc), v, alloc);
  };
  set("status", json::value("failed", alloc));
  auto error = json::parse(error_json);
  set("error", error ? json::value(*error, alloc) : json::value());
  json::value output(rapidjson::kArrayType);
  for (auto& f : items) {
    auto one = json::parse(to_json(f.it));
    output.PushBack(one ? json::value(*one, alloc) : json::value(), alloc);
  }
  set("output", std::move(output));
  final_snapshot = json::serialize(*doc);
  emit("response.failed", "\"response\":" + final_snapshot);
  return out;
}

} // namespace troupe::protocol::responses

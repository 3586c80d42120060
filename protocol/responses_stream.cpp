#include "protocol/responses_stream.hpp"

#include "protocol/ids.hpp"
#include "protocol/mcp.hpp"
#include "protocol/responses_search.hpp"

#include <algorithm>
#include <utility>

namespace troupe::protocol::responses {

namespace {

// The members of a JSON object's text, without its braces.
std::string members(const std::string& object_text) {
  return object_text.size() <= 2 ? std::string() : object_text.substr(1, object_text.size() - 2);
}

void write_str(json::writer& w, const char* key, std::string_view v) {
  w.Key(key);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}

void write_empty_array(json::writer& w, const char* key) {
  w.Key(key);
  w.StartArray();
  w.EndArray();
}

// An output_text part's or delta's logprobs ("" = none).
void write_logprobs(json::writer& w, const std::string& logprobs) {
  w.Key("logprobs");
  json::write_raw(w, logprobs.empty() ? "[]" : logprobs);
}

const char* delta_type(part_kind part_type) {
  if (part_type == part_kind::refusal)
    return "response.refusal.delta";
  if (part_type == part_kind::reasoning_text)
    return "response.reasoning_text.delta";
  return "response.output_text.delta";
}

bool is_search(item_kind k) {
  return k == item_kind::web_search_call || k == item_kind::file_search_call;
}

} // namespace

stream_event make_event(int64_t sequence, std::string type, std::string_view members) {
  stream_event e;
  e.sequence = sequence;
  e.json.reserve(type.size() + members.size() + 48);
  e.json += "{\"type\":\"";
  e.json += type;
  e.json += "\",\"sequence_number\":";
  e.json += std::to_string(sequence);
  if (!members.empty()) {
    e.json += ',';
    e.json += members;
  }
  e.json += '}';
  e.type = std::move(type);
  return e;
}

std::string error_members(const problem& e) {
  // Flat and nested carry the same values, so both SDK parsers raise (RS-40).
  return members(json::object([&](json::writer& w) {
    json::write_nullable(w, "code", e.kind);
    write_str(w, "message", e.message);
    json::write_nullable(w, "param", e.param);
    w.Key("error");
    w.StartObject();
    write_str(w, "type", openai_error_type(e.code));
    json::write_nullable(w, "code", e.kind);
    write_str(w, "message", e.message);
    json::write_nullable(w, "param", e.param);
    w.EndObject();
  }));
}

// ---- response_stream ----

response_stream::response_stream(route_lookup lookup, int64_t gateway_budget)
  : lookup_(std::move(lookup)), budget_(gateway_budget), limit_(gateway_budget) {}

void response_stream::push(std::string type, std::string body) {
  queue_bytes_ += body.size();
  queue_.push_back({std::move(type), std::move(body)});
  release();
}

void response_stream::push_barrier(std::size_t position) {
  barriers_open_.insert(position);
  queued q;
  q.barrier = position;
  queue_.push_back(std::move(q));
}

void response_stream::release() {
  while (!queue_.empty()) {
    auto& q = queue_.front();
    if (q.barrier != SIZE_MAX) {
      if (barriers_open_.count(q.barrier))
        return;
      queue_.pop_front();
      continue;
    }
    queue_bytes_ -= q.body.size();
    ready_.push_back(make_event(sequence_++, std::move(q.type), q.body));
    queue_.pop_front();
  }
}

std::vector<stream_event> response_stream::take_events() {
  return std::exchange(ready_, {});
}

void response_stream::created(const std::string& response_json, bool queued) {
  push("response.created", "\"response\":" + response_json);
  if (queued)
    push("response.queued", "\"response\":" + response_json);
}

void response_stream::in_progress(const std::string& response_json) {
  push("response.in_progress", "\"response\":" + response_json);
}

void response_stream::terminal(std::string_view type, const std::string& response_json) {
  if (ended_)
    return;
  ended_ = true;
  push(std::string(type), "\"response\":" + response_json);
}

void response_stream::error(const problem& e) {
  if (ended_)
    return;
  ended_ = true;
  // An error ends the stream even behind a gateway call; what was held back there is never sent
  // (RS-37.7).
  auto held = std::find_if(queue_.begin(), queue_.end(), [](const queued& q) { return q.barrier != SIZE_MAX; });
  for (auto it = held; it != queue_.end(); ++it)
    queue_bytes_ -= it->body.size();
  queue_.erase(held, queue_.end());
  barriers_open_.clear();
  push("error", error_members(e));
}

void response_stream::emit_item(const char* type, std::size_t position) {
  auto body = json::object([&](json::writer& w) {
    w.Key("output_index");
    w.Uint64(position);
    w.Key("item");
    write_item(w, output_[position]);
  });
  push(type, members(body));
}

void response_stream::emit_scoped(const char* type, std::size_t position,
                                  const std::function<void(json::writer&)>& fill) {
  auto body = json::object([&](json::writer& w) {
    write_str(w, "item_id", output_[position].id);
    w.Key("output_index");
    w.Uint64(position);
    if (fill)
      fill(w);
  });
  push(type, members(body));
}

std::size_t response_stream::open_item(item it) {
  auto position = output_.size();
  output_.push_back(std::move(it));
  emit_item("response.output_item.added", position);
  return position;
}

namespace {

void write_part_event(json::writer& w, std::size_t content_index, const content_part& part) {
  w.Key("content_index");
  w.Uint64(content_index);
  w.Key("part");
  w.StartObject();
  write_str(w, "type", to_string(part.type));
  if (part.type == part_kind::refusal) {
    write_str(w, "refusal", part.text);
  } else {
    write_str(w, "text", part.text);
    if (part.type == part_kind::output_text) {
      write_empty_array(w, "annotations");
      write_logprobs(w, part.logprobs);
    }
  }
  w.EndObject();
}

} // namespace

void response_stream::add_part(std::size_t position, part_kind part_type) {
  auto& content = output_[position].content;
  content.push_back({part_type, {}, {}, "auto"});
  auto index = content.size() - 1;
  emit_scoped("response.content_part.added", position,
              [&](json::writer& w) { write_part_event(w, index, content.back()); });
}

void response_stream::append_part(std::size_t position, const std::string& delta, const std::string& logprobs) {
  auto& content = output_[position].content;
  auto index = content.size() - 1;
  content.back().text += delta;
  append_logprobs(content.back().logprobs, logprobs);
  emit_scoped(delta_type(content.back().type), position, [&](json::writer& w) {
    w.Key("content_index");
    w.Uint64(index);
    write_str(w, "delta", delta);
    if (content.back().type == part_kind::output_text)
      write_logprobs(w, logprobs);
  });
}

void response_stream::close_part(std::size_t position) {
  auto& content = output_[position].content;
  if (content.empty())
    return;
  auto index = content.size() - 1;
  auto& part = content.back();
  const char* done = part.type == part_kind::refusal          ? "response.refusal.done"
                     : part.type == part_kind::reasoning_text ? "response.reasoning_text.done"
                                                     : "response.output_text.done";
  emit_scoped(done, position, [&](json::writer& w) {
    w.Key("content_index");
    w.Uint64(index);
    write_str(w, part.type == part_kind::refusal ? "refusal" : "text", part.text);
    if (part.type == part_kind::output_text)
      write_logprobs(w, part.logprobs);
  });
  emit_scoped("response.content_part.done", position, [&](json::writer& w) { write_part_event(w, index, part); });
}

void response_stream::ensure_text_part(item_kind item_type, part_kind part_type) {
  if (open_ && output_[*open_].type == item_type && !current_call_) {
    auto& content = output_[*open_].content;
    if (!content.empty() && content.back().type == part_type)
      return;
    close_part(*open_);
    add_part(*open_, part_type);
    return;
  }
  close_open("completed");
  item it;
  it.type = item_type;
  it.id = mint_item_id(item_type);
  it.status = "in_progress";
  if (item_type == item_kind::message)
    it.role = "assistant";
  open_ = open_item(std::move(it));
  add_part(*open_, part_type);
}

void response_stream::close_item(std::size_t position, const std::string& status) {
  auto& it = output_[position];
  if (it.type == item_kind::message || it.type == item_kind::reasoning)
    close_part(position);
  it.status = status;
  emit_item("response.output_item.done", position);
  done_.insert(position);
}

std::string response_stream::unique_call_id(const std::string& proposed) {
  auto id = proposed;
  if (id.empty() || call_ids_.count(id))
    id = "call_" + uuid7_id("").substr(8);
  call_ids_.insert(id);
  return id;
}

namespace {

constexpr std::string_view gateway_prefix = "mcp__";

// The server and tool a gateway name no lookup knows claims: `mcp__<server>__<tool>`.
gateway_route unoffered_route(const std::string& name) {
  auto rest = name.substr(gateway_prefix.size());
  auto split = rest.find("__");
  gateway_route r;
  r.server_label = rest.substr(0, split);
  r.tool = split == std::string::npos ? std::string() : rest.substr(split + 2);
  return r;
}

// What the model reads for a gateway call beyond max_tool_calls (RS-24).
item limit_output(const std::string& call_id, int64_t limit) {
  item out;
  out.type = item_kind::function_call_output;
  out.id = mint_item_id(item_kind::function_call_output);
  out.call_id = call_id;
  out.output = json::quote("{\"error\":\"Reached tool call limit of " + std::to_string(limit) + "\"}");
  out.status = "completed";
  return out;
}

} // namespace

void response_stream::hide_call(const std::string& call_id, const std::string& name, const std::string& arguments) {
  // Beyond max_tool_calls: a pair only the model sees, never the client (RS-24).
  item fc;
  fc.type = item_kind::function_call;
  fc.id = mint_item_id(item_kind::function_call);
  fc.call_id = call_id;
  fc.name = name;
  fc.arguments = arguments;
  fc.status = "completed";
  hidden_.push_back({output_.size(), {std::move(fc), limit_output(call_id, limit_)}});
}

void response_stream::close_open(const std::string& status) {
  if (current_call_) {
    auto index = *current_call_;
    current_call_.reset();
    closed_calls_.insert(index);
    auto& call = round_calls_[index];
    if (call.gateway && !call.position && !call.approval) {
      hide_call(call.call_id, call.name, call.arguments);
    } else if (call.approval && tool_arguments_error(call.arguments)) {
      // Nobody is asked to approve a call that cannot run: it goes to execution, which refuses its
      // arguments (RS-25), so the model learns why in this response.
      --client_actions_;
      if (budget_ == 0) {
        hide_call(call.call_id, call.name, call.arguments);
      } else {
        if (budget_ > 0)
          --budget_;
        open_whole_call(call.route.server_label, call.route.tool, call.arguments, {});
      }
    } else if (call.approval) {
      item req;
      req.type = item_kind::mcp_approval_request;
      req.id = mint_item_id(item_kind::mcp_approval_request);
      req.server_label = call.route.server_label;
      req.name = call.route.tool;
      req.arguments = call.arguments;
      auto position = open_item(std::move(req));
      emit_item("response.output_item.done", position);
      done_.insert(position);
    } else if (call.position) {
      auto position = *call.position;
      auto& it = output_[position];
      if (is_search(it.type)) {
        // RS-27: searching once the query is known; the provider's answer ends it.
        if (status != "completed") {
          close_item(position, status);
        } else {
          it.query = query_of(it.arguments).query;
          emit_scoped((search_event_family(it.type) + ".searching").c_str(), position, {});
          push_barrier(position);
          pending_.push_back({position, {}, search_function_name(it.type), it.arguments});
        }
      } else if (it.type == item_kind::function_call) {
        emit_scoped("response.function_call_arguments.done", position, [&](json::writer& w) {
          write_str(w, "name", it.name);
          write_str(w, "arguments", it.arguments);
        });
        close_item(position, status);
      } else {
        emit_scoped("response.mcp_call_arguments.done", position,
                    [&](json::writer& w) { write_str(w, "arguments", it.arguments); });
        if (status != "completed") {
          close_item(position, status);
        } else {
          push_barrier(position);
          pending_.push_back({position, it.server_label, it.name, it.arguments});
        }
      }
    }
    open_.reset();
    return;
  }
  if (open_) {
    close_item(*open_, status);
    open_.reset();
  }
}

bool response_stream::feed(const upstream_event& e) {
  using kind = upstream_event::kind;
  auto fail = [&](std::string why) {
    failure_ = std::move(why);
    return false;
  };
  if (ended_)
    return fail("the response already ended");
  if (round_finished_)
    return fail(e.what == kind::finish ? "the upstream finished the round twice"
                                       : "the upstream sent more after the round finished");
  switch (e.what) {
  case kind::reasoning:
  case kind::text:
  case kind::refusal: {
    if (e.text.empty())
      return true;
    const item_kind item_type = e.what == kind::reasoning ? item_kind::reasoning : item_kind::message;
    const part_kind part_type = e.what == kind::reasoning ? part_kind::reasoning_text
                                : e.what == kind::refusal ? part_kind::refusal
                                                          : part_kind::output_text;
    ensure_text_part(item_type, part_type);
    // Logprobs reach the client only when it asked for them (RS-14 include, top_logprobs).
    append_part(*open_, e.text, logprobs_ && e.what == kind::text ? e.logprobs : std::string());
    return true;
  }
  case kind::call: {
    if (round_calls_.count(e.index))
      return fail("the upstream opened tool call " + std::to_string(e.index) + " twice");
    if (e.name.empty())
      return fail("the upstream sent tool call " + std::to_string(e.index) + " without a name");
    close_open("completed");
    round_call call;
    call.name = e.name;
    call.call_id = unique_call_id(e.call_id);
    auto route = lookup_ ? lookup_(e.name) : std::nullopt;
    if (!route && e.name.rfind(gateway_prefix, 0) == 0)
      route = unoffered_route(e.name); // RS-31: clients never see these names
    if (route) {
      call.gateway = true;
      call.route = *route;
      ++gateway_calls_;
      if (route->needs_approval) {
        call.approval = true;
        ++client_actions_;
      } else if (budget_ != 0 && route->search != item_kind::unknown) {
        if (budget_ > 0)
          --budget_;
        item it;
        it.type = route->search;
        it.id = mint_item_id(route->search);
        it.status = "in_progress";
        call.position = open_item(std::move(it));
        emit_scoped((search_event_family(route->search) + ".in_progress").c_str(), *call.position, {});
      } else if (budget_ != 0) {
        if (budget_ > 0)
          --budget_;
        item it;
        it.type = item_kind::mcp_call;
        it.id = mint_item_id(item_kind::mcp_call);
        it.server_label = route->server_label;
        it.name = route->tool;
        it.status = "in_progress";
        call.position = open_item(std::move(it));
        emit_scoped("response.mcp_call.in_progress", *call.position, {});
      }
    } else {
      ++client_actions_;
      item it;
      it.type = item_kind::function_call;
      it.id = mint_item_id(item_kind::function_call);
      it.call_id = call.call_id;
      it.name = e.name;
      it.status = "in_progress";
      call.position = open_item(std::move(it));
    }
    round_calls_[e.index] = std::move(call);
    current_call_ = e.index;
    open_ = round_calls_[e.index].position;
    return true;
  }
  case kind::arguments: {
    if (closed_calls_.count(e.index))
      return fail("the upstream sent arguments for tool call " + std::to_string(e.index) + " after it closed");
    if (!current_call_ || *current_call_ != e.index)
      return fail("the upstream sent arguments for tool call " + std::to_string(e.index) + ", which is not open");
    auto& call = round_calls_[e.index];
    call.arguments += e.text;
    if (call.position && !e.text.empty()) {
      auto position = *call.position;
      output_[position].arguments += e.text;
      if (is_search(output_[position].type))
        return true; // a search's arguments are the model's, never streamed (RS-27)
      bool mcp = output_[position].type == item_kind::mcp_call;
      emit_scoped(mcp ? "response.mcp_call_arguments.delta" : "response.function_call_arguments.delta", position,
                  [&](json::writer& w) { write_str(w, "delta", e.text); });
    }
    return true;
  }
  case kind::finish:
    round_usage_ = e.tokens;
    finish_ = e.finish.empty() ? "stop" : e.finish;
    close_open(finish_ == "length" || finish_ == "content_filter" ? "incomplete" : "completed");
    round_finished_ = true;
    return true;
  case kind::item_end:
    if (!current_call_)
      close_open("completed");
    return true;
  case kind::failure:
    return fail(e.text.empty() ? "the upstream round failed" : e.text);
  }
  return true;
}

void response_stream::next_round() {
  round_calls_.clear();
  closed_calls_.clear();
  current_call_.reset();
  open_.reset();
  round_finished_ = false;
  finish_.clear();
  failure_.clear();
  client_actions_ = 0;
  gateway_calls_ = 0;
  round_usage_ = {};
}

std::vector<pending_call> response_stream::take_pending() {
  return std::exchange(pending_, {});
}

void response_stream::resolve_barrier(std::size_t position, const std::function<void()>& emit_end) {
  // The call's end takes its barrier's place, so what was held back behind it follows it.
  auto at = queue_.begin();
  while (at != queue_.end() && at->barrier != position)
    ++at;
  std::deque<queued> tail(std::make_move_iterator(at == queue_.end() ? at : std::next(at)),
                          std::make_move_iterator(queue_.end()));
  queue_.erase(at, queue_.end());
  barriers_open_.erase(position);
  emit_end();
  done_.insert(position);
  for (auto& q : tail) {
    if (q.barrier != SIZE_MAX) {
      queue_.push_back(std::move(q));
      continue;
    }
    queue_bytes_ -= q.body.size();
    push(std::move(q.type), std::move(q.body));
  }
  release();
}

void response_stream::complete_call(std::size_t position, std::string output, std::string error_json) {
  if (!barriers_open_.count(position))
    return;
  auto& it = output_[position];
  bool failed = !error_json.empty();
  it.status = failed ? "failed" : "completed";
  it.output = failed ? std::string() : json::quote(output);
  it.error = std::move(error_json);
  resolve_barrier(position, [&] {
    emit_scoped(failed ? "response.mcp_call.failed" : "response.mcp_call.completed", position, {});
    emit_item("response.output_item.done", position);
  });
}

void response_stream::complete_search(std::size_t position, bool failed, std::string results,
                                      std::string model_text) {
  if (!barriers_open_.count(position))
    return;
  auto& it = output_[position];
  it.status = failed ? "failed" : "completed";
  it.results = failed ? std::string() : std::move(results);
  it.output = std::move(model_text);
  resolve_barrier(position, [&] {
    // The closed event set has no search `.failed`: a failed search ends with its item (RS-36).
    if (!failed)
      emit_scoped((search_event_family(it.type) + ".completed").c_str(), position, {});
    emit_item("response.output_item.done", position);
  });
}

void response_stream::abandon_calls() {
  // Every call still open, taken for execution or not: a call whose result never comes would hold
  // back everything after it, the terminal event included.
  pending_.clear();
  for (auto position : std::set<std::size_t>(barriers_open_)) {
    output_[position].status = "incomplete";
    resolve_barrier(position, [&] { emit_item("response.output_item.done", position); });
  }
}

void response_stream::interrupt() {
  if (ended_)
    return;
  close_open("incomplete");
  abandon_calls();
}

void response_stream::open_approved_call(const std::string& server_label, const std::string& tool,
                                         const std::string& arguments, const std::string& approval_request_id) {
  close_open("completed");
  if (budget_ == 0) {
    // The approval request already renders as this call, under the request's id (RS-46): the
    // model gets only its output, or it would see the call twice.
    hidden_.push_back({output_.size(), {limit_output(approval_request_id, limit_)}});
    return;
  }
  if (budget_ > 0)
    --budget_;
  open_whole_call(server_label, tool, arguments, approval_request_id);
}

void response_stream::open_whole_call(const std::string& server_label, const std::string& tool,
                                      const std::string& arguments, const std::string& approval_request_id) {
  item it;
  it.type = item_kind::mcp_call;
  it.id = mint_item_id(item_kind::mcp_call);
  it.server_label = server_label;
  it.name = tool;
  it.status = "in_progress";
  it.approval_request_id = approval_request_id;
  auto position = open_item(std::move(it));
  emit_scoped("response.mcp_call.in_progress", position, {});
  output_[position].arguments = arguments;
  emit_scoped("response.mcp_call_arguments.delta", position,
              [&](json::writer& w) { write_str(w, "delta", arguments); });
  emit_scoped("response.mcp_call_arguments.done", position,
              [&](json::writer& w) { write_str(w, "arguments", arguments); });
  push_barrier(position);
  pending_.push_back({position, server_label, tool, arguments});
}

void response_stream::add_item(item it) {
  close_open("completed");
  if (it.type == item_kind::mcp_list_tools) {
    auto full = it;
    it.tools = "[]";
    it.error.clear();
    auto position = open_item(std::move(it));
    emit_scoped("response.mcp_list_tools.in_progress", position, {});
    output_[position] = std::move(full);
    emit_scoped(output_[position].error.empty() ? "response.mcp_list_tools.completed"
                                                : "response.mcp_list_tools.failed",
                position, {});
    emit_item("response.output_item.done", position);
    done_.insert(position);
    return;
  }
  auto position = open_item(std::move(it));
  emit_item("response.output_item.done", position);
  done_.insert(position);
}

void response_stream::replay_item(const item& stored) {
  close_open("completed");
  if (stored.type == item_kind::message || stored.type == item_kind::reasoning) {
    auto it = stored;
    it.content.clear();
    it.summary.clear();
    it.status = "in_progress";
    auto position = open_item(std::move(it));
    for (auto& part : stored.content) {
      if (!output_[position].content.empty())
        close_part(position);
      add_part(position, part.type);
      if (!part.text.empty())
        append_part(position, part.text, part.logprobs);
    }
    output_[position].summary = stored.summary;
    close_item(position, stored.status);
    return;
  }
  if (stored.type == item_kind::function_call || stored.type == item_kind::mcp_call) {
    auto it = stored;
    it.arguments.clear();
    it.output.clear();
    it.error.clear();
    it.status = "in_progress";
    auto position = open_item(std::move(it));
    bool mcp = stored.type == item_kind::mcp_call;
    if (mcp)
      emit_scoped("response.mcp_call.in_progress", position, {});
    output_[position].arguments = stored.arguments;
    emit_scoped(mcp ? "response.mcp_call_arguments.delta" : "response.function_call_arguments.delta", position,
                [&](json::writer& w) { write_str(w, "delta", stored.arguments); });
    emit_scoped(mcp ? "response.mcp_call_arguments.done" : "response.function_call_arguments.done", position,
                [&](json::writer& w) {
                  if (!mcp)
                    write_str(w, "name", stored.name);
                  write_str(w, "arguments", stored.arguments);
                });
    output_[position] = stored;
    if (mcp && stored.status != "incomplete")
      emit_scoped(stored.status == "failed" ? "response.mcp_call.failed" : "response.mcp_call.completed", position,
                  {});
    emit_item("response.output_item.done", position);
    done_.insert(position);
    return;
  }
  if (is_search(stored.type)) {
    auto it = stored;
    it.query.clear();
    it.results.clear();
    it.status = "in_progress";
    auto position = open_item(std::move(it));
    auto family = search_event_family(stored.type);
    emit_scoped((family + ".in_progress").c_str(), position, {});
    if (stored.status != "incomplete")
      emit_scoped((family + ".searching").c_str(), position, {});
    output_[position] = stored;
    if (stored.status == "completed")
      emit_scoped((family + ".completed").c_str(), position, {});
    emit_item("response.output_item.done", position);
    done_.insert(position);
    return;
  }
  add_item(stored);
}

std::vector<item> response_stream::model_items() const {
  std::vector<item> out;
  std::size_t h = 0;
  for (std::size_t i = 0; i <= output_.size(); ++i) {
    while (h < hidden_.size() && hidden_[h].first == i) {
      for (auto& it : hidden_[h].second)
        out.push_back(it);
      ++h;
    }
    if (i < output_.size())
      out.push_back(output_[i]);
  }
  return out;
}

} // namespace troupe::protocol::responses

#include "protocol/scripted_model.hpp"

#include "protocol/json.hpp"

#include <cstdio>

namespace troupe::protocol {

namespace {

void replace_all(std::string& s, std::string_view what, std::string_view with) {
  for (auto pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + with.size()))
    s.replace(pos, what.size(), with);
}

int64_t estimate_tokens(std::size_t bytes) {
  return static_cast<int64_t>((bytes + 3) / 4);
}

} // namespace

std::variant<script, std::string> parse_script(std::string_view text) {
  auto doc = json::parse(text);
  if (!doc || !doc->IsArray())
    return std::string("expected an array of turns");
  script out;
  std::size_t i = 0;
  for (auto& t : doc->GetArray()) {
    auto where = "[" + std::to_string(i++) + "]";
    if (!t.IsObject())
      return where + ": expected an object with content and/or tool_calls";
    script_turn turn;
    auto content = json::member(t, "content");
    if (content && !content->IsString())
      return where + ".content: expected a string";
    turn.content = json::get_string(t, "content");
    if (auto d = json::member(t, "delay_ms")) {
      if (!d->IsInt64() || d->GetInt64() < 0)
        return where + ".delay_ms: expected a non-negative integer";
      turn.delay_ms = d->GetInt64();
    }
    if (auto calls = json::member(t, "tool_calls")) {
      if (!calls->IsArray())
        return where + ".tool_calls: expected an array";
      std::size_t j = 0;
      for (auto& c : calls->GetArray()) {
        auto cwhere = where + ".tool_calls[" + std::to_string(j++) + "]";
        auto name = json::member(c, "name");
        if (!name || !name->IsString() || name->GetStringLength() == 0)
          return cwhere + ".name: expected the tool's name";
        tool_call call;
        call.name = name->GetString();
        if (auto args = json::member(c, "arguments")) {
          if (!args->IsObject())
            return cwhere + ".arguments: expected an object";
          call.arguments = json::serialize(*args);
        }
        turn.tool_calls.push_back(std::move(call));
      }
    }
    out.push_back(std::move(turn));
  }
  if (out.empty())
    return std::string("expected at least one turn");
  return out;
}

std::variant<script_book, std::string> script_book::parse(std::string_view default_script,
                                                          std::string_view named_scripts) {
  script_book book;
  auto d = parse_script(default_script);
  if (auto err = std::get_if<std::string>(&d))
    return "model.script" + (err->front() == '[' ? *err : ": " + *err);
  book.default_ = std::get<script>(std::move(d));
  auto named = json::parse(named_scripts);
  if (!named || !named->IsObject())
    return std::string("model.scripts: expected an object of scripts");
  for (auto& m : named->GetObject()) {
    std::string name = m.name.GetString();
    auto s = parse_script(json::serialize(m.value));
    if (auto err = std::get_if<std::string>(&s))
      return "model.scripts." + name + (err->front() == '[' ? *err : ": " + *err);
    book.named_.emplace(name, std::get<script>(std::move(s)));
  }
  return book;
}

const script* script_book::find(std::string_view model) const {
  constexpr std::string_view prefix = "scripted:";
  if (model.substr(0, prefix.size()) != prefix)
    return &default_;
  auto it = named_.find(model.substr(prefix.size()));
  return it == named_.end() ? nullptr : &it->second;
}

script_turn scripted_turn(const script& s, const model_request& request) {
  std::size_t step = 0;
  std::string query, last_tool_result;
  for (auto& m : request.messages) {
    if (m.role == "user") {
      step = 0;
      query = m.content;
    } else if (m.role == "assistant") {
      ++step;
    } else if (m.role == "tool") {
      last_tool_result = m.content;
    }
  }
  auto turn = s[std::min(step, s.size() - 1)];
  replace_all(turn.content, "{{query}}", query);
  replace_all(turn.content, "{{last_tool_result}}", last_tool_result);
  for (std::size_t i = 0; i < turn.tool_calls.size(); ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "call_%08zx%04zx", step, i);
    turn.tool_calls[i].id = id;
  }
  return turn;
}

model_reply scripted_reply(const script& s, const model_request& request) {
  auto turn = scripted_turn(s, request);
  model_reply reply;
  reply.content = std::move(turn.content);
  reply.tool_calls = std::move(turn.tool_calls);
  reply.finish_reason = reply.tool_calls.empty() ? "stop" : "tool_calls";
  for (auto& m : request.messages)
    reply.usage.prompt_tokens += estimate_tokens(m.content.size()) + 4;
  std::size_t out_bytes = reply.content.size();
  for (auto& c : reply.tool_calls)
    out_bytes += c.name.size() + c.arguments.size();
  reply.usage.completion_tokens = estimate_tokens(out_bytes);
  reply.usage.total_tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens;
  return reply;
}

} // namespace troupe::protocol

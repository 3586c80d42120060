#include "protocol/model_round.hpp"

#include "protocol/ids.hpp"
#include "protocol/json.hpp"
#include "protocol/responses_search.hpp"
#include "protocol/utf8.hpp"

#include <algorithm>
#include <map>

namespace troupe::protocol::responses {

namespace {

std::string quote_error(const std::string& message) {
  return json::object([&](json::writer& w) {
    w.Key("error");
    w.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  });
}

} // namespace

std::string output_text_of(const item& o) {
  if (o.output.empty())
    return {};
  auto doc = json::parse(o.output);
  if (!doc)
    return o.output;
  if (doc->IsString())
    return doc->GetString();
  std::string joined;
  if (doc->IsArray())
    for (auto& part : doc->GetArray()) {
      if (!joined.empty())
        joined += "\n";
      auto type = json::get_string(part, "type");
      joined += (type == "input_text" || type == "output_text" || type == "text") ? json::get_string(part, "text")
                                                                                    : "[non-text output omitted]";
    }
  return joined;
}

std::string mcp_function_name(const std::string& server_label, const std::string& tool) {
  auto full = "mcp__" + server_label + "__" + tool;
  // One `_` per character outside [A-Za-z0-9_-], however many UTF-8 bytes it takes.
  std::string name;
  for (std::size_t i = 0; i < full.size();) {
    auto c = static_cast<unsigned char>(full[i]);
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    name.push_back(keep ? full[i] : '_');
    i += std::max<std::size_t>(1, utf8_sequence_length(full, i));
  }
  if (name.size() <= 64)
    return name;
  return name.substr(0, 55) + "_" + sha256_hex(full).substr(0, 8);
}

std::vector<item> model_view(const std::vector<item>& history) {
  std::size_t start = 0;
  std::optional<std::size_t> compaction;
  for (std::size_t i = 0; i < history.size(); ++i)
    if (history[i].type == item_kind::compaction)
      compaction = i;
  std::map<std::string, const item*> responses; // approval request id → its response
  for (auto& it : history)
    if (it.type == item_kind::mcp_approval_response)
      responses[it.approval_request_id] = &it;
  std::vector<item> out;
  auto call = [&](const std::string& call_id, const std::string& name, const std::string& arguments) {
    item fc;
    fc.type = item_kind::function_call;
    fc.id = call_id;
    fc.call_id = call_id;
    fc.name = name;
    fc.arguments = arguments;
    fc.status = "completed";
    out.push_back(std::move(fc));
  };
  auto output = [&](const std::string& call_id, std::string text) {
    item o;
    o.type = item_kind::function_call_output;
    o.id = "fco_" + call_id;
    o.call_id = call_id;
    o.output = json::quote(text);
    o.status = "completed";
    out.push_back(std::move(o));
  };
  if (compaction) {
    for (std::size_t i = 0; i < *compaction; ++i)
      if (history[i].type == item_kind::message && history[i].role == "user")
        out.push_back(history[i]);
    item summary;
    summary.type = item_kind::message;
    summary.id = history[*compaction].id;
    summary.role = "assistant";
    summary.status = "completed";
    summary.content.push_back({part_kind::output_text, history[*compaction].encrypted_content, {}, "auto"});
    out.push_back(std::move(summary));
    start = *compaction + 1;
  }
  for (std::size_t i = start; i < history.size(); ++i) {
    auto& it = history[i];
    if (it.type == item_kind::mcp_list_tools || it.type == item_kind::mcp_approval_response || it.type == item_kind::compaction)
      continue;
    if ((it.type == item_kind::function_call || it.type == item_kind::mcp_call) && it.status == "incomplete")
      continue;
    if (it.type == item_kind::mcp_call) {
      auto text = output_text_of(it);
      if (!it.error.empty())
        text = json::object([&](json::writer& w) {
          w.Key("error");
          json::write_raw(w, it.error);
        });
      if (it.approval_request_id.empty()) {
        call(it.id, mcp_function_name(it.server_label, it.name), it.arguments);
        output(it.id, text);
      } else {
        output(it.approval_request_id, text);
      }
    } else if (it.type == item_kind::web_search_call || it.type == item_kind::file_search_call) {
      if (it.status == "incomplete")
        continue;
      // RS-46: the search function the model called, and the results it read.
      call(it.id, search_function_name(it.type), json::object([&](json::writer& w) {
             w.Key("query");
             w.String(it.query.c_str(), static_cast<rapidjson::SizeType>(it.query.size()));
           }));
      output(it.id, search_history_text(it));
    } else if (it.type == item_kind::mcp_approval_request) {
      auto response = responses.find(it.id);
      if (response == responses.end())
        continue;
      call(it.id, mcp_function_name(it.server_label, it.name), it.arguments);
      if (!response->second->approve) {
        auto reason = response->second->reason;
        output(it.id, quote_error("Tool call was not approved by the user." + (reason.empty() ? "" : " " + reason)));
      }
    } else {
      out.push_back(it);
    }
  }
  return out;
}

namespace {

// A function tool's name, description, parameters and strict: the same in either upstream protocol,
// which differ only in where they nest them.
void write_function_members(json::writer& w, const upstream_tool& t) {
  w.Key("name");
  w.String(t.name.c_str());
  w.Key("description");
  w.String(t.description.c_str(), static_cast<rapidjson::SizeType>(t.description.size()));
  w.Key("parameters");
  json::write_raw(w, t.parameters);
  if (!t.strict.empty()) {
    w.Key("strict");
    json::write_raw(w, t.strict);
  }
}

void write_tools_chat(json::writer& w, const std::vector<upstream_tool>& tools) {
  w.Key("tools");
  w.StartArray();
  for (auto& t : tools) {
    w.StartObject();
    w.Key("type");
    w.String("function");
    w.Key("function");
    w.StartObject();
    write_function_members(w, t);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
}

// The tool_choice a round sends: the request's, or auto after gateway calls; a named MCP choice
// becomes its model-facing function name.
std::string round_choice(const round_request& r, bool chat) {
  auto& c = r.choice;
  if (r.force_auto || c.mode == "auto")
    return "\"auto\"";
  if (c.mode == "none" || c.mode == "required")
    return json::quote(c.mode);
  auto name = c.mode == "function" ? c.name : (c.name.empty() ? "" : mcp_function_name(c.server_label, c.name));
  if (name.empty())
    return "\"required\"";
  return chat ? R"({"type":"function","function":{"name":)" + json::quote(name) + "}}"
              : R"({"type":"function","name":)" + json::quote(name) + "}";
}

void write_common_settings(json::writer& w, const round_request& r) {
  if (r.temperature) {
    w.Key("temperature");
    w.Double(*r.temperature);
  }
  if (r.top_p) {
    w.Key("top_p");
    w.Double(*r.top_p);
  }
  if (r.parallel_tool_calls && !r.tools.empty()) {
    w.Key("parallel_tool_calls");
    w.Bool(*r.parallel_tool_calls);
  }
}

} // namespace

bool wants_logprobs(const round_request& r) {
  return std::count(r.include.begin(), r.include.end(), "message.output_text.logprobs") > 0
         || (r.top_logprobs && *r.top_logprobs > 0);
}

std::string render_chat_request(const round_request& r, const chat_options& options) {
  auto view = model_view(r.history);
  return json::object([&](json::writer& w) {
    w.Key("model");
    w.String(r.model.c_str());
    w.Key("messages");
    w.StartArray();
    auto& system = r.instructions;
    if (system) {
      w.StartObject();
      w.Key("role");
      w.String("system");
      w.Key("content");
      w.String(system->c_str(), static_cast<rapidjson::SizeType>(system->size()));
      w.EndObject();
    }
    std::map<std::string, std::string> called; // call_id → the tool, for named tool messages
    for (auto& it : view)
      if (it.type == item_kind::function_call)
        called[it.call_id] = it.name;
    std::string pending_reasoning;
    for (std::size_t i = 0; i < view.size(); ++i) {
      auto& it = view[i];
      if (it.type == item_kind::reasoning) {
        if (options.replay_reasoning)
          pending_reasoning += message_text(it);
        continue;
      }
      if (it.type == item_kind::message && it.role != "assistant") {
        w.StartObject();
        w.Key("role");
        auto role = it.role == "user" ? std::string("user") : options.developer_role;
        w.String(role.c_str());
        w.Key("content");
        bool single_text = it.content.size() == 1 && it.content[0].type != part_kind::input_image;
        if (single_text) {
          w.String(it.content[0].text.c_str(), static_cast<rapidjson::SizeType>(it.content[0].text.size()));
        } else {
          w.StartArray();
          for (auto& p : it.content) {
            w.StartObject();
            if (p.type == part_kind::input_image) {
              w.Key("type");
              w.String("image_url");
              w.Key("image_url");
              w.StartObject();
              w.Key("url");
              w.String(p.image_url.c_str());
              w.Key("detail");
              w.String(p.detail.c_str());
              w.EndObject();
            } else {
              w.Key("type");
              w.String("text");
              w.Key("text");
              w.String(p.text.c_str(), static_cast<rapidjson::SizeType>(p.text.size()));
            }
            w.EndObject();
          }
          w.EndArray();
        }
        w.EndObject();
        continue;
      }
      if (it.type == item_kind::function_call_output) {
        w.StartObject();
        w.Key("role");
        w.String("tool");
        w.Key("tool_call_id");
        w.String(it.call_id.c_str());
        if (r.name_tool_messages)
          if (auto name = called.find(it.call_id); name != called.end()) {
            w.Key("name");
            w.String(name->second.c_str());
          }
        w.Key("content");
        auto text = output_text_of(it);
        w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
        w.EndObject();
        continue;
      }
      if (it.type != item_kind::message && it.type != item_kind::function_call)
        continue;
      // An assistant turn: its text, then the function calls that directly follow it.
      std::string text;
      if (it.type == item_kind::message)
        text = message_text(it);
      std::size_t j = it.type == item_kind::message ? i + 1 : i;
      w.StartObject();
      w.Key("role");
      w.String("assistant");
      w.Key("content");
      bool has_calls = j < view.size() && view[j].type == item_kind::function_call;
      if (text.empty() && has_calls)
        w.Null();
      else
        w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
      if (!pending_reasoning.empty()) {
        w.Key("reasoning_content");
        w.String(pending_reasoning.c_str(), static_cast<rapidjson::SizeType>(pending_reasoning.size()));
        pending_reasoning.clear();
      }
      if (has_calls) {
        w.Key("tool_calls");
        w.StartArray();
        for (; j < view.size() && view[j].type == item_kind::function_call; ++j) {
          w.StartObject();
          w.Key("id");
          w.String(view[j].call_id.c_str());
          w.Key("type");
          w.String("function");
          w.Key("function");
          w.StartObject();
          w.Key("name");
          w.String(view[j].name.c_str());
          w.Key("arguments");
          w.String(view[j].arguments.c_str(), static_cast<rapidjson::SizeType>(view[j].arguments.size()));
          w.EndObject();
          w.EndObject();
        }
        w.EndArray();
      }
      w.EndObject();
      i = j - 1;
    }
    w.EndArray();
    if (!r.tools.empty()) {
      write_tools_chat(w, r.tools);
      w.Key("tool_choice");
      json::write_raw(w, round_choice(r, true));
    }
    if (auto doc = json::parse(r.text)) {
      auto format = json::member(*doc, "format");
      auto type = format ? json::get_string(*format, "type") : std::string();
      if (type == "json_object") {
        w.Key("response_format");
        json::write_raw(w, R"({"type":"json_object"})");
      } else if (type == "json_schema") {
        w.Key("response_format");
        w.StartObject();
        w.Key("type");
        w.String("json_schema");
        w.Key("json_schema");
        w.StartObject();
        for (auto key : {"name", "schema", "strict", "description"})
          if (auto v = json::member(*format, key)) {
            w.Key(key);
            v->Accept(w);
          }
        w.EndObject();
        w.EndObject();
      }
    }
    if (r.max_output_tokens) {
      w.Key(options.max_tokens_field.c_str());
      w.Int64(*r.max_output_tokens);
    }
    if (!r.reasoning.empty())
      if (auto doc = json::parse(r.reasoning); doc && json::member(*doc, "effort")) {
        w.Key("reasoning_effort");
        (*doc)["effort"].Accept(w);
      }
    write_common_settings(w, r);
    if (wants_logprobs(r)) {
      w.Key("logprobs");
      w.Bool(true);
      if (r.top_logprobs) {
        w.Key("top_logprobs");
        w.Int64(*r.top_logprobs);
      }
    }
    w.Key("stream");
    w.Bool(r.stream);
    if (r.stream) {
      w.Key("stream_options");
      json::write_raw(w, R"({"include_usage":true})");
    }
  });
}

std::string render_responses_request(const round_request& r) {
  auto view = model_view(r.history);
  return json::object([&](json::writer& w) {
    w.Key("model");
    w.String(r.model.c_str());
    w.Key("input");
    w.StartArray();
    for (auto& it : view)
      write_item(w, it);
    w.EndArray();
    auto& system = r.instructions;
    if (system) {
      w.Key("instructions");
      w.String(system->c_str(), static_cast<rapidjson::SizeType>(system->size()));
    }
    if (!r.tools.empty()) {
      w.Key("tools");
      w.StartArray();
      for (auto& t : r.tools) {
        w.StartObject();
        w.Key("type");
        w.String("function");
        write_function_members(w, t);
        w.EndObject();
      }
      w.EndArray();
      w.Key("tool_choice");
      json::write_raw(w, round_choice(r, false));
    }
    if (r.max_output_tokens) {
      w.Key("max_output_tokens");
      w.Int64(*r.max_output_tokens);
    }
    write_common_settings(w, r);
    w.Key("text");
    json::write_raw(w, r.text);
    if (!r.reasoning.empty()) {
      w.Key("reasoning");
      json::write_raw(w, r.reasoning);
    }
    w.Key("truncation");
    w.String(r.truncation.c_str());
    std::vector<std::string> include;
    for (auto& i : r.include)
      if (i == "reasoning.encrypted_content")
        include.push_back(i);
    if (wants_logprobs(r)) {
      include.push_back("message.output_text.logprobs");
      if (r.top_logprobs) {
        w.Key("top_logprobs");
        w.Int64(*r.top_logprobs);
      }
    }
    if (!include.empty()) {
      w.Key("include");
      w.StartArray();
      for (auto& i : include)
        w.String(i.c_str());
      w.EndArray();
    }
    w.Key("stream");
    w.Bool(r.stream);
    w.Key("store");
    w.Bool(false);
  });
}

model_request chat_model_request(const round_request& r) {
  model_request out;
  out.model = r.model;
  out.stream = false;
  out.temperature = r.temperature;
  out.top_p = r.top_p;
  out.max_tokens = r.max_output_tokens;
  for (auto& t : r.tools)
    out.tools.push_back({t.name, t.description, t.parameters});
  auto& system = r.instructions;
  if (system)
    out.messages.push_back(text_message("system", *system));
  for (auto& m : chat_messages(r.history))
    out.messages.push_back(std::move(m));
  return out;
}

std::vector<chat_message> chat_messages(const std::vector<item>& history) {
  std::vector<chat_message> out;
  std::map<std::string, std::string> names; // call_id → the called tool
  for (auto& it : model_view(history)) {
    if (it.type == item_kind::message) {
      out.push_back(text_message(it.role == "assistant" ? "assistant" : it.role == "user" ? "user" : "system",
                                 message_text(it)));
    } else if (it.type == item_kind::function_call) {
      if (out.empty() || out.back().role != "assistant")
        out.push_back(text_message("assistant", ""));
      out.back().content_null = out.back().content.empty();
      out.back().tool_calls.push_back({it.call_id, it.name, it.arguments});
      names[it.call_id] = it.name;
    } else if (it.type == item_kind::function_call_output) {
      auto m = text_message("tool", output_text_of(it));
      m.tool_call_id = it.call_id;
      if (auto n = names.find(it.call_id); n != names.end())
        m.name = n->second;
      out.push_back(std::move(m));
    }
  }
  return out;
}

std::vector<item> items_of(const std::vector<chat_message>& messages) {
  std::vector<item> out;
  auto message = [&](const std::string& role, part_kind part, const std::string& text) {
    item m;
    m.type = item_kind::message;
    m.id = mint_item_id(item_kind::message);
    m.role = role;
    m.status = "completed";
    m.content.push_back({part, text, {}, "auto"});
    out.push_back(std::move(m));
  };
  for (auto& m : messages) {
    if (m.role == "tool") {
      item o;
      o.type = item_kind::function_call_output;
      o.id = mint_item_id(item_kind::function_call_output);
      o.call_id = m.tool_call_id;
      o.output = json::quote(m.content);
      o.status = "completed";
      out.push_back(std::move(o));
    } else if (m.role == "assistant") {
      // Calls join the assistant message before them, so a message of calls alone that follows
      // another assistant turn keeps its own (empty) message.
      bool follows_assistant = !out.empty() && (out.back().type == item_kind::function_call
                                                || (out.back().type == item_kind::message && out.back().role == "assistant"));
      if (!m.content.empty() || m.tool_calls.empty() || follows_assistant)
        message("assistant", part_kind::output_text, m.content);
      for (auto& c : m.tool_calls) {
        item fc;
        fc.type = item_kind::function_call;
        fc.id = mint_item_id(item_kind::function_call);
        fc.call_id = c.id;
        fc.name = c.name;
        fc.arguments = c.arguments;
        fc.status = "completed";
        out.push_back(std::move(fc));
      }
    } else {
      message(m.role, part_kind::input_text, m.content);
    }
  }
  return out;
}

} // namespace troupe::protocol::responses

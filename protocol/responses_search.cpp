#include "protocol/responses_search.hpp"

#include "protocol/utf8.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace troupe::protocol::responses {

namespace {

problem bad_tool(const std::string& param, std::string message) {
  return {errc::bad_request, std::move(message), param, "invalid_value"};
}

std::string cut(std::string_view s, std::size_t max_bytes) {
  return utf8_repaired(utf8_prefix(s, max_bytes));
}

// A result's string member: absent or null is "", another type is an error naming it.
bool read_string(const json::value& entry, const char* key, std::size_t max_bytes, std::string& into,
                 const std::string& at, std::string& error) {
  auto v = json::member(entry, key);
  if (!v || v->IsNull())
    return true;
  if (!v->IsString()) {
    error = at + "." + key + " is not a string";
    return false;
  }
  into = cut(std::string_view(v->GetString(), v->GetStringLength()), max_bytes);
  return true;
}

bool read_hit(item_kind call, const json::value& entry, const std::string& at, search_hit& hit, std::string& error) {
  if (!entry.IsObject()) {
    error = at + " is not an object";
    return false;
  }
  if (call == item_kind::web_search_call)
    return read_string(entry, "title", max_search_field_bytes, hit.title, at, error)
           && read_string(entry, "url", max_search_field_bytes, hit.url, at, error)
           && read_string(entry, "snippet", max_search_text_bytes, hit.snippet, at, error);
  if (!read_string(entry, "file_id", max_search_field_bytes, hit.file_id, at, error)
      || !read_string(entry, "filename", max_search_field_bytes, hit.filename, at, error)
      || !read_string(entry, "text", max_search_text_bytes, hit.text, at, error))
    return false;
  if (auto s = json::member(entry, "score"); s && !s->IsNull()) {
    if (!s->IsNumber() || !std::isfinite(s->GetDouble())) {
      error = at + ".score is not a number";
      return false;
    }
    hit.score = s->GetDouble();
  }
  return true;
}

void write_str(json::writer& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

} // namespace

std::variant<search_declaration, problem> parse_search_tool(const json::value& tool, const std::string& type,
                                                           const std::string& at,
                                                           const std::vector<search_declaration>& earlier) {
  search_declaration d;
  d.call = type == "file_search" ? item_kind::file_search_call : item_kind::web_search_call;
  bool repeated = std::any_of(earlier.begin(), earlier.end(), [&](auto& e) { return e.call == d.call; });
  if (repeated)
    return bad_tool(at + ".type", "A request may declare the '" + search_function_name(d.call) + "' tool once.");
  if (d.call == item_kind::web_search_call)
    return d;
  if (auto ids = json::member(tool, "vector_store_ids"); ids && !ids->IsNull()) {
    if (!ids->IsArray() || ids->Size() > max_vector_store_ids)
      return bad_tool(at + ".vector_store_ids", "Invalid value for '" + at + ".vector_store_ids': expected an array of at most "
                                                  + std::to_string(max_vector_store_ids) + " strings.");
    for (auto& id : ids->GetArray()) {
      if (!id.IsString() || id.GetStringLength() == 0 || id.GetStringLength() > 256)
        return bad_tool(at + ".vector_store_ids",
                        "Invalid value for '" + at + ".vector_store_ids': each id is a string of 1 to 256 characters.");
      d.vector_store_ids.emplace_back(id.GetString(), id.GetStringLength());
    }
  }
  if (auto n = json::member(tool, "max_num_results"); n && !n->IsNull()) {
    if (!n->IsInt64() || n->GetInt64() < 1 || n->GetInt64() > max_file_search_results)
      return bad_tool(at + ".max_num_results", "Invalid value for '" + at + ".max_num_results': expected an integer 1.."
                                                 + std::to_string(max_file_search_results) + ".");
    d.max_num_results = n->GetInt64();
  }
  return d;
}

std::optional<problem> check_search_tools(const request& r, bool web_search_enabled, bool file_search_enabled) {
  for (auto& d : r.search) {
    auto at = "tools[" + std::to_string(d.index) + "]";
    bool enabled = d.call == item_kind::web_search_call ? web_search_enabled : file_search_enabled;
    if (!enabled) {
      // The type as the client wrote it is in the echo; the call type names the family.
      auto echo = json::parse(r.tools_echo);
      std::string type = search_function_name(d.call);
      if (echo && echo->IsArray() && d.index < echo->Size())
        type = json::get_string((*echo)[static_cast<rapidjson::SizeType>(d.index)], "type", type);
      return bad_tool(at + ".type", "Tool type '" + type + "' is not enabled on this server.");
    }
    auto name = search_function_name(d.call);
    for (auto& f : r.functions)
      if (f.name == name)
        return bad_tool(at + ".type", "The function '" + name + "' clashes with the " + name
                                        + " tool; rename the function.");
  }
  return std::nullopt;
}

upstream_tool search_function(item_kind call) {
  upstream_tool t;
  t.name = search_function_name(call);
  t.description = call == item_kind::file_search_call ? "Search the files of the user's vector stores."
                                                      : "Search the web.";
  t.parameters = R"({"type":"object","properties":{"query":{"type":"string","description":"What to search for."}},)"
                 R"("required":["query"]})";
  return t;
}

std::string search_function_name(item_kind call) {
  return call == item_kind::file_search_call ? "file_search" : "web_search";
}

std::optional<item_kind> search_call_of(std::string_view function_name) {
  if (function_name == "web_search")
    return item_kind::web_search_call;
  if (function_name == "file_search")
    return item_kind::file_search_call;
  return std::nullopt;
}

std::string search_event_family(item_kind call) {
  return call == item_kind::file_search_call ? "response.file_search_call" : "response.web_search_call";
}

bool includes_search_results(const request& r, item_kind call) {
  auto name = call == item_kind::file_search_call ? "file_search_call.results" : "web_search_call.action.sources";
  return std::find(r.include.begin(), r.include.end(), name) != r.include.end();
}

search_query query_of(std::string_view arguments) {
  search_query q;
  auto doc = json::parse(arguments);
  if (!doc || !doc->IsObject()) {
    q.error = "the arguments are not a JSON object";
    return q;
  }
  auto v = json::member(*doc, "query");
  if (!v || !v->IsString() || v->GetStringLength() == 0) {
    q.error = "the arguments have no non-empty string 'query'";
    return q;
  }
  q.query = cut(std::string_view(v->GetString(), v->GetStringLength()), max_search_text_bytes);
  return q;
}

std::string provider_request(const search_declaration& d, const std::string& query) {
  return json::object([&](json::writer& w) {
    write_str(w, "query", query);
    if (d.call != item_kind::file_search_call)
      return;
    w.Key("vector_store_ids");
    w.StartArray();
    for (auto& id : d.vector_store_ids)
      w.String(id.c_str(), static_cast<rapidjson::SizeType>(id.size()));
    w.EndArray();
    w.Key("max_num_results");
    w.Int64(d.max_num_results);
  });
}

search_reply parse_search_reply(item_kind call, std::string_view text, std::size_t max_results) {
  search_reply r;
  if (text.size() > max_search_reply_bytes) {
    r.error = "the search provider's reply is larger than " + std::to_string(max_search_reply_bytes) + " bytes";
    return r;
  }
  auto parsed = json::parse_text(text);
  if (auto* failure = std::get_if<json::parse_failure>(&parsed)) {
    r.error = "the search provider's reply is not valid JSON: " + failure->message();
    return r;
  }
  auto& doc = std::get<json::document>(parsed);
  const json::value* list = &doc;
  if (doc.IsObject())
    list = json::member(doc, "results");
  if (!list || !list->IsArray()) {
    r.error = "the search provider's reply is neither an array of results nor an object with a 'results' array";
    return r;
  }
  for (rapidjson::SizeType i = 0; i < list->Size() && r.hits.size() < max_results; ++i) {
    search_hit hit;
    if (!read_hit(call, (*list)[i], "the search provider's results[" + std::to_string(i) + "]", hit, r.error)) {
      r.hits.clear();
      return r;
    }
    r.hits.push_back(std::move(hit));
  }
  return r;
}

std::optional<std::string> search_http_failure(int status, std::string_view body) {
  if (status >= 200 && status < 300)
    return std::nullopt;
  auto why = "the search provider answered HTTP " + std::to_string(status);
  auto excerpt = cut(body, 200);
  if (!excerpt.empty())
    why += ": " + excerpt;
  return why;
}

std::string numbered_results(item_kind call, const std::string& query, const std::vector<search_hit>& hits) {
  if (hits.empty())
    return "No results for \"" + query + "\".";
  std::string out;
  for (std::size_t i = 0; i < hits.size(); ++i) {
    auto& h = hits[i];
    if (i > 0)
      out += "\n\n";
    out += "[" + std::to_string(i + 1) + "] ";
    if (call == item_kind::web_search_call) {
      out += h.title.empty() ? h.url : h.title;
      if (!h.url.empty())
        out += "\nURL: " + h.url;
      if (!h.snippet.empty())
        out += "\n" + h.snippet;
    } else {
      out += h.filename.empty() ? h.file_id : h.filename;
      if (!h.file_id.empty())
        out += " (file " + h.file_id + ")";
      char score[32];
      std::snprintf(score, sizeof score, "%.4g", h.score);
      out += "\nScore: ";
      out += score;
      if (!h.text.empty())
        out += "\n" + h.text;
    }
  }
  return out;
}

std::string results_json(item_kind call, const std::vector<search_hit>& hits) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  w.StartArray();
  for (auto& h : hits) {
    w.StartObject();
    if (call == item_kind::web_search_call) {
      write_str(w, "type", "url");
      write_str(w, "url", h.url);
    } else {
      w.Key("attributes");
      w.StartObject();
      w.EndObject();
      write_str(w, "file_id", h.file_id);
      write_str(w, "filename", h.filename);
      w.Key("score");
      w.Double(h.score);
      write_str(w, "text", h.text);
    }
    w.EndObject();
  }
  w.EndArray();
  return std::string(buf.GetString(), buf.GetSize());
}

std::string search_error_output(const std::string& message) {
  return json::object([&](json::writer& w) { write_str(w, "error", message); });
}

std::string search_history_text(const item& it) {
  if (!it.output.empty())
    return it.output;
  if (it.status != "completed")
    return search_error_output("The search did not complete.");
  // Stored without its results (the request did not include them): the model learns only that it ran.
  if (it.results.empty())
    return "The search for \"" + it.query + "\" ran; its results are no longer available.";
  return numbered_results(it.type, it.query, parse_search_reply(it.type, it.results).hits);
}

} // namespace troupe::protocol::responses

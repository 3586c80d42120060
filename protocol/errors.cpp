#include "protocol/errors.hpp"

#include "protocol/json.hpp"

#include <cctype>

namespace troupe {

namespace {

struct errc_entry {
  errc code;
  int status;
  const char* name;
  const char* openai_type;
};

// The one table: every code, its status, its name and the OpenAI error type it maps to (RS-1:
// invalid_request_error for 4xx, rate_limit_error for 429, server_error for 5xx).
constexpr errc_entry errc_table[] = {
  {errc::none, 200, "none", ""},
  {errc::bad_request, 400, "bad_request", "invalid_request_error"},
  {errc::unauthorized, 401, "unauthorized", "invalid_request_error"},
  {errc::forbidden, 403, "forbidden", "invalid_request_error"},
  {errc::not_found, 404, "not_found", "invalid_request_error"},
  {errc::method_not_allowed, 405, "method_not_allowed", "invalid_request_error"},
  {errc::conflict, 409, "conflict", "invalid_request_error"},
  {errc::payload_too_large, 413, "payload_too_large", "invalid_request_error"},
  {errc::validation_failed, 422, "validation_failed", "invalid_request_error"},
  {errc::rate_limited, 429, "rate_limited", "rate_limit_error"},
  {errc::unavailable, 503, "unavailable", "server_error"},
  {errc::internal, 500, "internal", "server_error"},
  {errc::upstream_failed, 502, "upstream_failed", "server_error"},
  {errc::cancelled, 499, "cancelled", "server_error"},
  {errc::unsupported_media_type, 415, "unsupported_media_type", "invalid_request_error"},
  {errc::misdirected, 421, "misdirected_request", "invalid_request_error"},
};

const errc_entry& entry(errc code) {
  for (auto& e : errc_table)
    if (e.code == code)
      return e;
  return errc_table[static_cast<int>(errc::internal)];
}

} // namespace

const char* to_string(errc code) {
  return entry(code).name;
}

namespace protocol {

int http_status(errc code) {
  return entry(code).status;
}

const char* openai_error_type(errc code) {
  return entry(code).openai_type;
}

rendered_error render_error(dialect d, const problem& p) {
  rendered_error out;
  out.status = entry(p.code).status;
  out.body = json::object([&](json::writer& w) {
    if (d == dialect::agent) {
      w.Key("detail");
      w.String(p.message);
      return;
    }
    w.Key("error");
    w.StartObject();
    w.Key("message");
    w.String(p.message);
    w.Key("type");
    w.String(entry(p.code).openai_type);
    json::write_nullable(w, "param", p.param);
    json::write_nullable(w, "code", p.kind);
    w.EndObject();
  });
  return out;
}

std::string error_body(dialect d, errc code, std::string_view message) {
  return render_error(d, {code, std::string(message), {}, entry(code).name}).body;
}

std::string validation_body(const std::vector<validation_issue>& issues) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  w.StartObject();
  w.Key("detail");
  w.StartArray();
  for (auto& issue : issues) {
    w.StartObject();
    w.Key("loc");
    w.StartArray();
    for (auto& part : issue.loc) {
      bool numeric = !part.empty() && part.size() <= 18; // an index, never a member name stoll cannot hold
      for (char c : part)
        numeric = numeric && std::isdigit(static_cast<unsigned char>(c));
      if (numeric)
        w.Int64(std::stoll(part));
      else
        w.String(part);
    }
    w.EndArray();
    w.Key("msg");
    w.String(issue.msg);
    w.Key("type");
    w.String(issue.type);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

dialect dialect_for_path(std::string_view path) {
  for (std::string_view prefix : {"/v1/responses", "/v1/conversations", "/v1/models"})
    if (path.substr(0, prefix.size()) == prefix)
      return dialect::openai;
  return dialect::agent;
}

} // namespace protocol
} // namespace troupe

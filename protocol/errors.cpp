#include "protocol/errors.hpp"

#include "protocol/json.hpp"
#include "protocol/json_schema.hpp"

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
  {errc::upgrade_required, 426, "upgrade_required", "invalid_request_error"},
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

std::optional<errc> errc_named(std::string_view name) {
  for (auto& e : errc_table)
    if (name == e.name)
      return e.code;
  return std::nullopt;
}

namespace protocol {

int http_status(errc code) {
  return entry(code).status;
}

const char* openai_error_type(errc code) {
  return entry(code).openai_type;
}

namespace {

// AS-2's 422 list: loc, msg, type.
void write_agent_issues(json::writer& w, const std::vector<validation_issue>& issues) {
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
}

void write_openai_error(json::writer& w, const problem& p) {
  w.Key("error");
  w.StartObject();
  w.Key("message");
  w.String(p.message);
  w.Key("type");
  w.String(entry(p.code).openai_type);
  json::write_nullable(w, "param", p.param);
  json::write_nullable(w, "code", p.kind);
  w.EndObject();
}

} // namespace

rendered_error render_error(dialect d, const problem& p) {
  rendered_error out;
  out.status = entry(p.code).status;
  if (d == dialect::reflexr) {
    out.body = json::object([&](json::writer& w) {
      w.Key("detail");
      if (p.message.empty())
        json_schema::write_problems(w, p.issues);
      else if (p.kind.empty())
        w.String(p.message);
      else
        json::write_raw(w, rejection_object(p));
    });
    return out;
  }
  out.body = json::object([&](json::writer& w) {
    if (d == dialect::openai)
      return write_openai_error(w, p);
    w.Key("detail");
    if (p.issues.empty())
      w.String(p.message);
    else
      write_agent_issues(w, p.issues);
  });
  return out;
}

std::string rejection_object(const problem& p) {
  return json::object([&](json::writer& w) {
    w.Key("type");
    w.String(p.kind);
    w.Key("message");
    w.String(p.message);
    if (p.kind == "validation_failed") {
      w.Key("errors");
      json_schema::write_problems(w, p.issues);
    }
  });
}

std::string error_body(dialect d, errc code, std::string_view message) {
  return render_error(d, {code, std::string(message), {}, entry(code).name}).body;
}

problem invalid(std::vector<validation_issue> issues) {
  auto message = issues.empty() ? std::string() : issues.front().msg;
  return {errc::validation_failed, std::move(message), {}, {}, std::move(issues)};
}

dialect dialect_for_path(std::string_view path) {
  for (std::string_view prefix : {"/v1/responses", "/v1/conversations", "/v1/models"})
    if (path.substr(0, prefix.size()) == prefix)
      return dialect::openai;
  return dialect::agent;
}

} // namespace protocol
} // namespace troupe

#include "protocol/jobs.hpp"

#include "protocol/identity.hpp"
#include "protocol/ids.hpp"
#include "protocol/policy.hpp"
#include "protocol/redaction.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/utf8.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

namespace troupe::protocol::jobs {

namespace {

using issues = std::vector<validation_issue>;
using loc = std::vector<std::string>;

constexpr char payload_placeholder[] = "{{job.payload}}";
constexpr char result_placeholder[] = "{{job.result}}";

loc at(const loc& base, std::string member) {
  auto out = base;
  out.push_back(std::move(member));
  return out;
}

std::string text_of(const json::value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// An integer member within [low, high], or its default when absent or null.
void integer(const json::value& obj, const char* key, const loc& base, int64_t low, int64_t high, int64_t& out,
             issues& bad) {
  auto v = json::member(obj, key);
  if (!v || v->IsNull())
    return;
  if (!v->IsInt64()) {
    bad.push_back({at(base, key), "Input should be a valid integer", "int_type"});
    return;
  }
  auto n = v->GetInt64();
  if (n < low)
    bad.push_back({at(base, key), "Input should be greater than or equal to " + std::to_string(low),
                   "greater_than_equal"});
  else if (n > high)
    bad.push_back({at(base, key), "Input should be less than or equal to " + std::to_string(high), "less_than_equal"});
  else
    out = n;
}

// A string member that is_name_text holds for; nullopt when absent or null.
std::optional<std::string> name(const json::value& obj, const char* key, const loc& base, issues& bad) {
  auto v = json::member(obj, key);
  if (!v || v->IsNull())
    return std::nullopt;
  if (!v->IsString() || !is_name_text(text_of(*v))) {
    bad.push_back({at(base, key), std::string("Input should be ") + name_text_rule, "string_type"});
    return std::nullopt;
  }
  return text_of(*v);
}

// A body from outside as a JSON object, or AS-2's refusal.
std::variant<json::document, request_error> body_object(std::string_view body) {
  auto parsed = json::parse_body(body);
  if (auto failure = std::get_if<json::parse_failure>(&parsed))
    return body_refusal(*failure);
  if (!std::get<json::document>(parsed).IsObject())
    return request_error{invalid({{{"body"}, "Input should be a valid dictionary", "dict_type"}})};
  return std::move(std::get<json::document>(parsed));
}

// Every member of `obj` not in `allowed` is an issue.
void forbid_extra(const json::value& obj, const std::vector<std::string>& allowed, const loc& base, issues& bad) {
  for (auto m = obj.MemberBegin(); m != obj.MemberEnd(); ++m) {
    std::string key(m->name.GetString(), m->name.GetStringLength());
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      bad.push_back({at(base, key), "Extra inputs are not permitted", "extra_forbidden"});
  }
}

// CJ-41: a pska.digest job names the PSKA job it carries out.
void check_pska_payload(const json::value& payload, const loc& base, issues& bad) {
  auto where = at(base, "payload");
  if (!payload.IsObject()) {
    bad.push_back({where, "A pska.digest payload is an object with pska_job_id", "dict_type"});
    return;
  }
  for (auto m = payload.MemberBegin(); m != payload.MemberEnd(); ++m) {
    std::string key(m->name.GetString(), m->name.GetStringLength());
    if (key != "pska_job_id" && key != "tenant_id" && key != "represented_user_id")
      bad.push_back({at(where, key), "Extra inputs are not permitted", "extra_forbidden"});
    else if (!m->value.IsString() || !is_name_text(text_of(m->value)))
      bad.push_back({at(where, key), std::string("Input should be ") + name_text_rule, "string_type"});
  }
  if (!json::member(payload, "pska_job_id"))
    bad.push_back({at(where, "pska_job_id"), "Field required", "missing"});
}

// CJ-40: `{"start_run":{…}}`, whose body rendered with this job's payload and a null result must be
// a valid POST /v1/runs body.
void check_on_complete(const json::value& v, const new_job& job, const loc& base, issues& bad) {
  auto where = at(base, "on_complete");
  auto start_run = json::member(v, "start_run");
  if (!v.IsObject() || v.MemberCount() != 1 || !start_run || !start_run->IsObject()) {
    bad.push_back({where, "on_complete is {\"start_run\": {a POST /v1/runs body}}", "value_error"});
    return;
  }
  auto rendered = render_start_run(json::serialize(*start_run), {"job_0", job.type, job.payload, "null"});
  if (!rendered) {
    bad.push_back({at(where, "start_run"),
                   "Its placeholders would add more than " + std::to_string(max_rendered_growth) + " bytes",
                   "value_error"});
    return;
  }
  auto parsed = parse_chat_request(*rendered, request_kind::background_run);
  if (auto err = std::get_if<request_error>(&parsed)) {
    auto body_loc = at(where, "start_run");
    if (err->what.issues.empty())
      bad.push_back({body_loc, err->what.message, "value_error"});
    for (auto& issue : err->what.issues) {
      auto l = body_loc;
      l.insert(l.end(), issue.loc.begin() + (issue.loc.empty() || issue.loc[0] != "body" ? 0 : 1), issue.loc.end());
      bad.push_back({l, issue.msg, issue.type});
    }
  }
}

const std::vector<std::string> job_members{"type",           "payload",         "priority",  "run_after",
                                           "idempotency_key", "max_attempts",    "timeout_seconds",
                                           "tenant_key",      "on_complete"};

// One job object at `base`; a payload past the limit is reported through `too_large`.
new_job read_job(const json::value& obj, const loc& base, const enqueue_limits& limits, issues& bad,
                 bool& too_large) {
  new_job job;
  if (!obj.IsObject()) {
    bad.push_back({base, "Input should be a valid dictionary", "dict_type"});
    return job;
  }
  forbid_extra(obj, job_members, base, bad);
  auto type = json::member(obj, "type");
  if (!type)
    bad.push_back({at(base, "type"), "Field required", "missing"});
  else if (!type->IsString() || !is_job_type(text_of(*type)))
    bad.push_back({at(base, "type"),
                   "A job type is dotted lowercase names (^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$), at most 100 "
                   "characters",
                   "string_pattern_mismatch"});
  else
    job.type = text_of(*type);
  bool pska = job.type == pska_digest_type;
  if (pska) {
    job.max_attempts = 3;
    job.timeout_seconds = 3600;
  }
  if (auto payload = json::member(obj, "payload")) {
    job.payload = json::serialize(*payload);
    if (static_cast<int64_t>(job.payload.size()) > limits.max_payload_bytes)
      too_large = true;
    if (pska)
      check_pska_payload(*payload, base, bad);
  } else if (pska) {
    bad.push_back({at(base, "payload"), "Field required", "missing"});
  }
  integer(obj, "priority", base, -100, 100, job.priority, bad);
  integer(obj, "max_attempts", base, 1, 100, job.max_attempts, bad);
  integer(obj, "timeout_seconds", base, 1, 86400, job.timeout_seconds, bad);
  if (auto run_after = json::member(obj, "run_after"); run_after && !run_after->IsNull()) {
    auto t = run_after->IsString() ? parse_rfc3339(text_of(*run_after)) : std::nullopt;
    if (!t)
      bad.push_back({at(base, "run_after"), "Input should be an RFC 3339 date-time", "datetime_parsing"});
    else
      job.run_after = iso_timestamp(*t);
  }
  job.idempotency_key = name(obj, "idempotency_key", base, bad).value_or("");
  job.tenant_key = name(obj, "tenant_key", base, bad);
  if (auto on_complete = json::member(obj, "on_complete"); on_complete && !on_complete->IsNull()) {
    check_on_complete(*on_complete, job, base, bad);
    job.on_complete = json::serialize(*on_complete);
  }
  return job;
}

// Renders one value of a start_run body into `w`, spending `budget` on what placeholders add; false
// once it is spent.
class start_run_renderer {
public:
  start_run_renderer(const job_values& job, std::size_t budget) : job_(job), budget_(budget) {}

  bool value(json::writer& w, const json::value& v) {
    if (v.IsString()) {
      auto text = text_of(v);
      if (text == payload_placeholder || text == result_placeholder) {
        auto& json_text = text == payload_placeholder ? job_.payload : job_.result;
        if (!spend(json_text.size()))
          return false;
        json::write_raw(w, json_text);
        return true;
      }
      std::string out;
      if (!substitute(text, out))
        return false;
      w.String(out.c_str(), static_cast<rapidjson::SizeType>(out.size()));
    } else if (v.IsObject()) {
      w.StartObject();
      for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
        w.Key(m->name.GetString(), m->name.GetStringLength());
        if (!value(w, m->value)) // bounded: a parsed document nests at most json::max_depth deep
          return false;
      }
      w.EndObject();
    } else if (v.IsArray()) {
      w.StartArray();
      for (auto& item : v.GetArray())
        if (!value(w, item))
          return false;
      w.EndArray();
    } else {
      json::write_raw(w, json::serialize(v));
    }
    return true;
  }

private:
  bool spend(std::size_t n) {
    if (n > budget_)
      return false;
    budget_ -= n;
    return true;
  }

  // One pass: what a placeholder brings in is not read for placeholders again.
  bool substitute(std::string_view text, std::string& out) {
    const std::pair<std::string_view, const std::string*> names[] = {
      {"{{job.id}}", &job_.id}, {"{{job.type}}", &job_.type}, {payload_placeholder, &job_.payload},
      {result_placeholder, &job_.result}};
    std::size_t from = 0;
    for (auto at = text.find("{{job."); at != std::string_view::npos; at = text.find("{{job.", from)) {
      out.append(text.substr(from, at - from));
      from = at + 2;
      out.append("{{");
      for (auto& [placeholder, value] : names)
        if (text.substr(at, placeholder.size()) == placeholder) {
          if (!spend(value->size()))
            return false;
          out.resize(out.size() - 2);
          out.append(*value);
          from = at + placeholder.size();
          break;
        }
    }
    out.append(text.substr(from));
    return true;
  }

  const job_values& job_;
  std::size_t budget_;
};

} // namespace

bool is_job_type(std::string_view type) {
  if (type.empty() || type.size() > max_type_length)
    return false;
  bool at_start = true; // of a dotted name: a letter must come
  for (char c : type) {
    bool lower = c >= 'a' && c <= 'z';
    if (at_start) {
      if (!lower)
        return false;
      at_start = false;
    } else if (c == '.') {
      at_start = true;
    } else if (!lower && !(c >= '0' && c <= '9') && c != '_') {
      return false;
    }
  }
  return !at_start;
}

std::variant<enqueue_request, request_error> parse_enqueue(std::string_view body, const enqueue_limits& limits) {
  auto parsed = body_object(body);
  if (auto err = std::get_if<request_error>(&parsed))
    return std::move(*err);
  auto& doc = std::get<json::document>(parsed);
  enqueue_request out;
  issues bad;
  bool too_large = false;
  auto jobs = json::member(doc, "jobs");
  if (jobs && doc.MemberCount() == 1) {
    out.batch = true;
    if (!jobs->IsArray() || jobs->Empty() || jobs->Size() > max_batch)
      return request_error{invalid({{{"body", "jobs"}, "Input should be a list of 1 to 1000 jobs", "list_type"}})};
    for (rapidjson::SizeType i = 0; i < jobs->Size(); ++i)
      out.jobs.push_back(read_job((*jobs)[i], {"body", "jobs", std::to_string(i)}, limits, bad, too_large));
  } else {
    out.jobs.push_back(read_job(doc, {"body"}, limits, bad, too_large));
  }
  if (too_large)
    return request_error{problem{errc::payload_too_large,
                                 "A job payload is larger than jobs.max_payload_bytes (" +
                                   std::to_string(limits.max_payload_bytes) + " bytes)",
                                 "payload", "payload_too_large"}};
  if (!bad.empty())
    return request_error{invalid(std::move(bad))};
  return out;
}

namespace {

void nullable_raw(json::writer& w, const char* key, const std::optional<std::string>& json_text) {
  w.Key(key);
  if (json_text)
    json::write_raw(w, *json_text);
  else
    w.Null();
}

void nullable_string(json::writer& w, const char* key, const std::optional<std::string>& text) {
  w.Key(key);
  if (text)
    w.String(text->c_str(), static_cast<rapidjson::SizeType>(text->size()));
  else
    w.Null();
}

void string_member(json::writer& w, const char* key, const std::string& text) {
  w.Key(key);
  w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
}

void integer_member(json::writer& w, const char* key, int64_t n) {
  w.Key(key);
  w.Int64(n);
}

} // namespace

namespace {

void write_job(json::writer& w, const job_record& j, bool with_token) {
  string_member(w, "object", "job");
  string_member(w, "id", j.id);
  string_member(w, "type", j.type);
  string_member(w, "tenant_key", j.tenant_key);
  string_member(w, "status", j.status);
  integer_member(w, "priority", j.priority);
  w.Key("payload");
  json::write_raw(w, j.payload);
  nullable_raw(w, "result", j.result);
  nullable_string(w, "idempotency_key", j.idempotency_key);
  integer_member(w, "attempt", j.attempt);
  integer_member(w, "max_attempts", j.max_attempts);
  integer_member(w, "timeout_seconds", j.timeout_seconds);
  string_member(w, "run_after", j.run_after);
  string_member(w, "created_at", j.created_at);
  string_member(w, "updated_at", j.updated_at);
  nullable_string(w, "started_at", j.started_at);
  nullable_string(w, "completed_at", j.completed_at);
  nullable_string(w, "cancelled_at", j.cancelled_at);
  nullable_string(w, "dead_at", j.dead_at);
  nullable_string(w, "worker_id", j.worker_id);
  integer_member(w, "lease_epoch", j.lease_epoch);
  nullable_string(w, "lease_expires_at", j.lease_expires_at);
  nullable_string(w, "last_error", j.last_error);
  w.Key("errors");
  json::write_raw(w, j.errors);
  nullable_raw(w, "progress", j.progress);
  nullable_raw(w, "on_complete", j.on_complete);
  nullable_string(w, "on_complete_run_id", j.on_complete_run_id);
  nullable_string(w, "on_complete_error", j.on_complete_error);
  if (with_token)
    string_member(w, "lease_token", j.lease_token);
}

} // namespace

std::string job_json(const job_record& j) {
  return json::object([&](json::writer& w) { write_job(w, j, false); });
}

std::string leased_job_json(const job_record& j) {
  return json::object([&](json::writer& w) { write_job(w, j, true); });
}

std::variant<run_record, std::string> follow_up_run(const job_record& job, int run_max_attempts) {
  auto on_complete = json::parse(job.on_complete.value_or(""));
  auto start_run = on_complete && on_complete->IsObject() ? json::member(*on_complete, "start_run") : nullptr;
  if (!start_run || !start_run->IsObject())
    return std::string("on_complete has no start_run object");
  auto body = render_start_run(json::serialize(*start_run),
                               {job.id, job.type, job.payload, job.result.value_or("null")});
  if (!body)
    return "start_run's placeholders would add more than " + std::to_string(max_rendered_growth) + " bytes";
  auto parsed = parse_chat_request(*body, request_kind::background_run);
  if (auto err = std::get_if<request_error>(&parsed)) {
    auto why = err->what.message;
    for (auto& issue : err->what.issues) {
      why += why.empty() ? "" : "; ";
      for (auto& part : issue.loc)
        why += part + ".";
      why += " " + issue.msg;
    }
    return "start_run is no valid POST /v1/runs body: " + why;
  }
  auto& chat = std::get<chat_request>(parsed);
  identity id;
  id.tenant_key = job.tenant_key;
  id.user_key = job.user_key;
  id.subject = job.user_key;
  id.auth_provider = "job";
  run_record r;
  r.run_id = "job-" + job.id;
  r.run_kind = "background";
  r.session_id = chat.session_id;
  r.tenant_key = job.tenant_key;
  r.user_key = job.user_key;
  // AS-85: as for any background run, secrets never reach the stored record.
  r.metadata = redact_record_json(run_metadata_json(chat.metadata, id, normalize_tool_policy(chat.tool_policy).json()));
  r.generation_options = generation_options_json(chat);
  r.max_attempts = run_max_attempts;
  r.priority = chat.priority;
  r.request = redact_record_json(*body);
  return r;
}

std::string append_error(std::string_view errors, int64_t attempt, const std::string& at, std::string_view error) {
  auto doc = json::parse(errors);
  bool usable = doc && doc->IsArray();
  auto kept = usable ? doc->Size() : 0;
  auto skip = kept >= max_errors_kept ? kept - (max_errors_kept - 1) : 0;
  auto cut = utf8_prefix(error, max_error_bytes);
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  w.StartArray();
  for (auto i = static_cast<rapidjson::SizeType>(skip); i < kept; ++i)
    json::write_raw(w, json::serialize((*doc)[i]));
  w.StartObject();
  integer_member(w, "attempt", attempt);
  string_member(w, "at", at);
  w.Key("error");
  w.String(cut.data(), static_cast<rapidjson::SizeType>(cut.size()));
  w.EndObject();
  w.EndArray();
  return std::string(buf.GetString(), buf.GetSize());
}

std::variant<lease_request, request_error> parse_lease(std::string_view body) {
  auto parsed = body_object(body);
  if (auto err = std::get_if<request_error>(&parsed))
    return std::move(*err);
  auto& doc = std::get<json::document>(parsed);
  lease_request out;
  issues bad;
  loc base{"body"};
  static const std::vector<std::string> members{"worker_id", "types", "max_jobs", "lease_seconds", "wait_seconds",
                                                "tenant_keys"};
  forbid_extra(doc, members, base, bad);
  if (auto worker = name(doc, "worker_id", base, bad))
    out.worker_id = *worker;
  else if (!json::member(doc, "worker_id"))
    bad.push_back({at(base, "worker_id"), "Field required", "missing"});
  auto list = [&](const char* key, std::vector<std::string>& into, const std::function<bool(std::string_view)>& ok,
                  const char* rule) {
    auto v = json::member(doc, key);
    if (!v || v->IsNull())
      return;
    if (!v->IsArray() || v->Size() > 100) {
      bad.push_back({at(base, key), "Input should be a list of at most 100 strings", "list_type"});
      return;
    }
    for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
      auto& item = (*v)[i];
      if (!item.IsString() || !ok(text_of(item)))
        bad.push_back({at(at(base, key), std::to_string(i)), rule, "string_type"});
      else
        into.push_back(text_of(item));
    }
  };
  list("types", out.types, is_job_type, "Input should be a job type");
  list("tenant_keys", out.tenant_keys, is_name_text, name_text_rule);
  integer(doc, "max_jobs", base, 1, 100, out.max_jobs, bad);
  integer(doc, "lease_seconds", base, 5, 3600, out.lease_seconds, bad);
  integer(doc, "wait_seconds", base, 0, 30, out.wait_seconds, bad);
  if (!bad.empty())
    return request_error{invalid(std::move(bad))};
  return out;
}

std::string lease_token(int64_t epoch, std::string_view random_hex32) {
  return "lt_" + std::to_string(epoch) + "_" + std::string(random_hex32);
}

std::optional<int64_t> token_epoch(std::string_view token) {
  if (token.size() < 3 + 1 + 1 + 32 || token.substr(0, 3) != "lt_")
    return std::nullopt;
  auto rest = token.substr(3);
  auto sep = rest.find('_');
  if (sep == 0 || sep == std::string_view::npos || sep > 18 || rest.size() - sep - 1 != 32)
    return std::nullopt;
  int64_t epoch = 0;
  for (char c : rest.substr(0, sep)) {
    if (c < '0' || c > '9')
      return std::nullopt;
    epoch = epoch * 10 + (c - '0');
  }
  for (char c : rest.substr(sep + 1))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return std::nullopt;
  return epoch;
}

double retry_delay_seconds(int64_t attempt, double base_seconds, double max_seconds, double u) {
  auto exponent = static_cast<double>(std::clamp<int64_t>(attempt - 1, 0, 62));
  auto delay = std::min(max_seconds, base_seconds * std::pow(2.0, exponent));
  return delay * (1.0 + std::clamp(u, 0.0, 0.1));
}

std::optional<std::string> render_start_run(std::string_view start_run, const job_values& job) {
  auto doc = json::parse(start_run);
  if (!doc || !doc->IsObject())
    return std::nullopt;
  start_run_renderer renderer(job, max_rendered_growth);
  bool whole = true;
  auto out = json::object([&](json::writer& w) {
    for (auto m = doc->MemberBegin(); m != doc->MemberEnd() && whole; ++m) {
      w.Key(m->name.GetString(), m->name.GetStringLength());
      whole = renderer.value(w, m->value);
    }
  });
  if (!whole)
    return std::nullopt;
  return out;
}

namespace {

constexpr std::size_t max_token_bytes = 128;

// The lease_token member every settling body carries (CJ-38).
std::string token_member(const json::value& obj, const loc& base, issues& bad) {
  auto v = json::member(obj, "lease_token");
  if (!v)
    bad.push_back({at(base, "lease_token"), "Field required", "missing"});
  else if (!v->IsString() || v->GetStringLength() == 0 || v->GetStringLength() > max_token_bytes)
    bad.push_back({at(base, "lease_token"), "Input should be the lease_token the lease answered", "string_type"});
  else
    return text_of(*v);
  return {};
}

// Any JSON member as compact text, at most `limit` bytes; `too_large` says it was longer.
std::optional<std::string> json_member(const json::value& obj, const char* key, std::size_t limit, bool& too_large) {
  auto v = json::member(obj, key);
  if (!v)
    return std::nullopt;
  auto text = json::serialize(*v);
  if (text.size() > limit) {
    too_large = true;
    return std::nullopt;
  }
  return text;
}

request_error result_too_large(const enqueue_limits& limits) {
  return request_error{problem{errc::payload_too_large,
                               "A job result is larger than jobs.max_payload_bytes (" +
                                 std::to_string(limits.max_payload_bytes) + " bytes)",
                               "result", "payload_too_large"}};
}

completion_request read_completion(const json::value& obj, const loc& base, const enqueue_limits& limits,
                                   bool with_id, issues& bad, bool& too_large) {
  completion_request out;
  if (!obj.IsObject()) {
    bad.push_back({base, "Input should be a valid dictionary", "dict_type"});
    return out;
  }
  forbid_extra(obj, with_id ? std::vector<std::string>{"id", "lease_token", "result"}
                            : std::vector<std::string>{"lease_token", "result"},
               base, bad);
  if (with_id) {
    auto id = json::member(obj, "id");
    if (!id)
      bad.push_back({at(base, "id"), "Field required", "missing"});
    else if (!id->IsString() || !is_id_text(text_of(*id)))
      bad.push_back({at(base, "id"), "Input should be a job id", "string_type"});
    else
      out.id = text_of(*id);
  }
  out.lease_token = token_member(obj, base, bad);
  if (auto result = json_member(obj, "result", static_cast<std::size_t>(limits.max_payload_bytes), too_large))
    out.result = *result;
  return out;
}

} // namespace

std::variant<heartbeat_request, request_error> parse_heartbeat(std::string_view body) {
  auto parsed = body_object(body);
  if (auto err = std::get_if<request_error>(&parsed))
    return std::move(*err);
  auto& doc = std::get<json::document>(parsed);
  heartbeat_request out;
  issues bad;
  loc base{"body"};
  forbid_extra(doc, {"lease_token", "lease_seconds", "progress"}, base, bad);
  out.lease_token = token_member(doc, base, bad);
  integer(doc, "lease_seconds", base, 5, 3600, out.lease_seconds, bad);
  bool too_large = false;
  out.progress = json_member(doc, "progress", max_progress_bytes, too_large);
  if (too_large)
    bad.push_back({at(base, "progress"), "progress is at most " + std::to_string(max_progress_bytes) + " bytes of JSON",
                   "value_error"});
  if (!bad.empty())
    return request_error{invalid(std::move(bad))};
  return out;
}

std::variant<completion_request, request_error> parse_completion(std::string_view body, const enqueue_limits& limits) {
  auto parsed = body_object(body);
  if (auto err = std::get_if<request_error>(&parsed))
    return std::move(*err);
  issues bad;
  bool too_large = false;
  auto out = read_completion(std::get<json::document>(parsed), {"body"}, limits, false, bad, too_large);
  if (too_large)
    return result_too_large(limits);
  if (!bad.empty())
    return request_error{invalid(std::move(bad))};
  return out;
}

std::variant<std::vector<completion_request>, request_error> parse_completions(std::string_view body,
                                                                                 const enqueue_limits& limits) {
  auto parsed = body_object(body);
  if (auto err = std::get_if<request_error>(&parsed))
    return std::move(*err);
  auto& doc = std::get<json::document>(parsed);
  issues bad;
  forbid_extra(doc, {"completions"}, {"body"}, bad);
  auto items = json::member(doc, "completions");
  if (!items || !items->IsArray() || items->Empty() || items->Size() > max_batch)
    return request_error{
      invalid({{{"body", "completions"}, "Input should be a list of 1 to 1000 completions", "list_type"}})};
  std::vector<completion_request> out;
  bool too_large = false;
  for (rapidjson::SizeType i = 0; i < items->Size(); ++i)
    out.push_back(read_completion((*items)[i], {"body", "completions", std::to_string(i)}, limits, true, bad, too_large));
  if (too_large)
    return result_too_large(limits);
  if (!bad.empty())
    return request_error{invalid(std::move(bad))};
  return out;
}

std::variant<failure_request, request_error> parse_failure(std::string_view body) {
  auto parsed = body_object(body);
  if (auto err = std::get_if<request_error>(&parsed))
    return std::move(*err);
  auto& doc = std::get<json::document>(parsed);
  failure_request out;
  issues bad;
  loc base{"body"};
  forbid_extra(doc, {"lease_token", "error", "retryable", "retry_after_seconds"}, base, bad);
  out.lease_token = token_member(doc, base, bad);
  auto error = json::member(doc, "error");
  if (!error)
    bad.push_back({at(base, "error"), "Field required", "missing"});
  else if (!error->IsString() || error->GetStringLength() == 0)
    bad.push_back({at(base, "error"), "Input should be a non-empty string", "string_type"});
  else
    out.error = std::string(utf8_prefix(text_of(*error), max_error_bytes));
  if (auto retryable = json::member(doc, "retryable"); retryable && !retryable->IsNull()) {
    if (retryable->IsBool())
      out.retryable = retryable->GetBool();
    else
      bad.push_back({at(base, "retryable"), "Input should be a valid boolean", "bool_type"});
  }
  if (auto after = json::member(doc, "retry_after_seconds"); after && !after->IsNull()) {
    if (!after->IsNumber() || after->GetDouble() < 0 || after->GetDouble() > max_retry_after_seconds)
      bad.push_back({at(base, "retry_after_seconds"), "Input should be a number from 0 to 2592000",
                     "value_error"});
    else
      out.retry_after_seconds = after->GetDouble();
  }
  if (!bad.empty())
    return request_error{invalid(std::move(bad))};
  return out;
}

std::variant<list_request, request_error> parse_list(const std::map<std::string, std::string>& query) {
  list_request out;
  issues bad;
  auto value = [&](const char* key) -> const std::string* {
    auto it = query.find(key);
    return it == query.end() ? nullptr : &it->second;
  };
  if (auto type = value("type")) {
    if (!is_job_type(*type))
      bad.push_back({{"query", "type"}, "Input should be a job type", "string_type"});
    out.type = *type;
  }
  if (auto status = value("status")) {
    static const std::vector<std::string> statuses{"queued", "leased", "completed", "cancelled", "dead"};
    if (std::find(statuses.begin(), statuses.end(), *status) == statuses.end())
      bad.push_back({{"query", "status"}, "Input should be queued, leased, completed, cancelled or dead", "enum"});
    out.status = *status;
  }
  for (auto [key, into] : {std::pair{"worker_id", &out.worker_id}, std::pair{"tenant_key", &out.tenant_key}})
    if (auto v = value(key)) {
      if (!is_name_text(*v))
        bad.push_back({{"query", key}, std::string("Input should be ") + name_text_rule, "string_type"});
      *into = *v;
    }
  if (auto after = value("after")) {
    if (!is_id_text(*after))
      bad.push_back({{"query", "after"}, "Input should be a job id", "string_type"});
    out.after = *after;
  }
  if (auto limit = value("limit")) {
    char* end = nullptr;
    auto n = limit->empty() || limit->size() > 4 ? -1 : std::strtol(limit->c_str(), &end, 10);
    if (n < 1 || n > 200 || (end && *end))
      bad.push_back({{"query", "limit"}, "Input should be an integer from 1 to 200", "int_parsing"});
    else
      out.limit = n;
  }
  if (auto order = value("order")) {
    if (*order != "newest" && *order != "oldest")
      bad.push_back({{"query", "order"}, "Input should be newest or oldest", "enum"});
    out.ascending = *order == "oldest";
  }
  if (!bad.empty())
    return request_error{invalid(std::move(bad))};
  return out;
}

std::string heartbeat_json(const job_record& job) {
  return json::object([&](json::writer& w) {
    string_member(w, "id", job.id);
    string_member(w, "status", job.status);
    integer_member(w, "lease_epoch", job.lease_epoch);
    nullable_string(w, "lease_expires_at", job.lease_expires_at);
  });
}

std::string jobs_page_json(const std::vector<job_record>& jobs, int64_t limit, bool has_more) {
  return json::object([&](json::writer& w) {
    string_member(w, "object", "list");
    w.Key("jobs");
    w.StartArray();
    for (auto& j : jobs) {
      w.StartObject();
      write_job(w, j, false);
      w.EndObject();
    }
    w.EndArray();
    integer_member(w, "count", static_cast<int64_t>(jobs.size()));
    integer_member(w, "limit", limit);
    w.Key("has_more");
    w.Bool(has_more);
    nullable_string(w, "next_after", has_more && !jobs.empty() ? std::optional<std::string>(jobs.back().id) : std::nullopt);
  });
}

std::string job_stats_json(const std::vector<status_count>& counts) {
  static const std::vector<std::string> statuses{"queued", "leased", "completed", "cancelled", "dead"};
  struct tally {
    std::map<std::string, int64_t> by_status;
    std::optional<double> oldest_ready_age_ms;
  };
  std::map<std::string, tally> types;
  tally total;
  for (auto& c : counts) {
    for (auto* t : {&types[c.type], &total}) {
      t->by_status[c.status] += c.count;
      if (c.oldest_ready_age_ms)
        t->oldest_ready_age_ms = std::max(t->oldest_ready_age_ms.value_or(0), *c.oldest_ready_age_ms);
    }
  }
  auto write_tally = [&](json::writer& w, const tally& t) {
    w.StartObject();
    for (auto& s : statuses) {
      auto it = t.by_status.find(s);
      integer_member(w, s.c_str(), it == t.by_status.end() ? 0 : it->second);
    }
    w.Key("oldest_ready_age_ms");
    if (t.oldest_ready_age_ms)
      w.Double(*t.oldest_ready_age_ms);
    else
      w.Null();
    w.EndObject();
  };
  return json::object([&](json::writer& w) {
    string_member(w, "object", "job_stats");
    w.Key("types");
    w.StartObject();
    for (auto& [type, t] : types) {
      w.Key(type.c_str(), static_cast<rapidjson::SizeType>(type.size()));
      write_tally(w, t);
    }
    w.EndObject();
    w.Key("total");
    write_tally(w, total);
  });
}

} // namespace troupe::protocol::jobs

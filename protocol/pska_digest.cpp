#include "protocol/pska_digest.hpp"

#include "protocol/digest_guard.hpp"
#include "protocol/ids.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/utf8.hpp"

#include <algorithm>
#include <chrono>

namespace troupe::protocol::pska {

namespace {

constexpr std::size_t max_failure_body = 2000;
constexpr std::size_t max_reported_calls = 200; // a run's tool calls the result lists
constexpr std::size_t max_content_bytes = 16384; // a run's final answer as the result carries it

// AS-72: tools a digest run must never call.
constexpr const char* forbidden_tools[] = {"exec", "read_file", "write_file", "edit_file", "list_dir"};

std::string text_member(const json::value& obj, const char* key) {
  auto v = json::member(obj, key);
  if (!v || v->IsNull())
    return {};
  if (v->IsString())
    return std::string(v->GetString(), v->GetStringLength());
  return json::serialize(*v); // a number cursor reads as its text
}

void string_member(json::writer& w, const char* key, const std::string& text) {
  w.Key(key);
  w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
}

} // namespace

namespace {

// The digest jobs of a GET /jobs answer whose status `wanted` accepts; nullopt for no such answer.
template <class Wanted>
std::optional<std::vector<job>> digest_jobs(std::string_view jobs_body, Wanted wanted) {
  auto doc = json::parse(jobs_body);
  auto list = doc && doc->IsObject() ? json::member(*doc, "jobs") : nullptr;
  if (!list || !list->IsArray())
    return std::nullopt;
  std::vector<job> out;
  for (auto& j : list->GetArray()) {
    if (!j.IsObject() || text_member(j, "job_type") != digest_job_type || !wanted(text_member(j, "status")))
      continue;
    job found;
    found.id = text_member(j, "id");
    // An id with a control character (a NUL would blur CJ-45's run id key) is no job to take.
    if (!is_name_text(found.id))
      continue;
    found.run_after = text_member(j, "run_after");
    found.priority = json::get_int(j, "priority").value_or(0);
    found.created_at = text_member(j, "created_at");
    found.json = json::serialize(j);
    out.push_back(std::move(found));
  }
  return out;
}

} // namespace

std::optional<job> named_job(std::string_view jobs_body, const std::string& id) {
  auto jobs = digest_jobs(jobs_body, [](const std::string& s) { return s == "queued" || s == "leased"; });
  if (jobs)
    for (auto& j : *jobs)
      if (j.id == id)
        return j;
  return std::nullopt;
}

std::optional<std::vector<job>> ready_jobs(std::string_view jobs_body, double now_epoch_seconds) {
  auto jobs = digest_jobs(jobs_body, [](const std::string& s) { return s == "queued"; });
  if (!jobs)
    return std::nullopt;
  std::vector<job> out;
  for (auto& j : *jobs) {
    if (!j.run_after.empty()) {
      auto at = parse_rfc3339(j.run_after);
      if (!at || std::chrono::duration<double>(at->time_since_epoch()).count() > now_epoch_seconds)
        continue;
    }
    out.push_back(std::move(j));
  }
  std::stable_sort(out.begin(), out.end(), [](const job& a, const job& b) {
    if (a.priority != b.priority)
      return a.priority > b.priority;
    if (a.run_after != b.run_after)
      return a.run_after < b.run_after;
    return a.created_at < b.created_at;
  });
  return out;
}

header_list pska_headers(const tenant& t, const std::string& pska_service_token) {
  header_list h{{"X-PSKA-Caller", "agent_service"},
                {"X-PSKA-Tenant-Id", t.tenant_id},
                {"X-PSKA-User-Id", t.represented_user_id},
                {"X-PSKA-Represented-User-Id", t.represented_user_id},
                {"Content-Type", "application/json; charset=utf-8"}};
  if (!pska_service_token.empty())
    h.emplace_back("X-PSKA-Service-Token", pska_service_token);
  return h;
}

header_list troupe_headers(const tenant& t, const std::string& troupe_service_token) {
  header_list h{{"X-FastReAct-Tenant-Key", t.tenant_id},
                {"X-FastReAct-User-Key", "pska:" + t.represented_user_id},
                {"Content-Type", "application/json; charset=utf-8"}};
  if (!troupe_service_token.empty())
    h.emplace_back("X-FastReAct-Service-Token", troupe_service_token);
  return h;
}

std::string url_component(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  return out;
}

bool succeeded(int status) {
  return status / 100 == 2;
}

reply heartbeat_reply(int status) {
  if (succeeded(status))
    return reply::ok;
  if (status == 404 || status == 405)
    return reply::renew_by_lease;
  if (status / 100 == 4 && status != 408 && status != 429)
    return reply::lease_lost;
  return reply::retry;
}

reply settle_reply(int status) {
  return succeeded(status) ? reply::ok : status == 409 ? reply::lease_lost : reply::failed;
}

reply run_start_reply(int status) {
  return succeeded(status) ? reply::ok : status == 409 ? reply::exists : reply::failed;
}

std::string step_failure(std::string_view method, std::string_view url, int status, std::string_view body) {
  return std::string(method) + " " + std::string(url) + " failed with HTTP " + std::to_string(status) + ": " +
         std::string(utf8_prefix(body, max_failure_body));
}

std::optional<batch_page> parse_batch_page(std::string_view body) {
  auto doc = json::parse(body);
  if (!doc || !doc->IsObject())
    return std::nullopt;
  batch_page page;
  page.cursor = text_member(*doc, "cursor");
  auto next = text_member(*doc, "next_cursor");
  if (!next.empty())
    page.next_cursor = next;
  page.has_more = json::get_bool(*doc, "has_more").value_or(false);
  auto items = json::member(*doc, "source_items");
  page.source_items = items && items->IsArray() ? items->Size() : 0;
  // The job travels beside the batch in the prompt: the page's copy of it is left out.
  doc->RemoveMember("job");
  page.json = json::serialize(*doc);
  return page;
}

std::string batch_run_id(const std::string& tenant_id, const std::string& job_id, const std::string& cursor, int n) {
  std::string key = tenant_id;
  key += '\0';
  key += job_id;
  key += '\0';
  key += cursor;
  key += '\0';
  key += std::to_string(n);
  return "pskad_" + sha256_hex(key).substr(0, 24);
}

const char* const digest_rules =
  "You digest one batch of a PSKA knowledge job into candidates for the knowledge base.\n"
  "- Read the batch in the user message. Call pska_pska_job_context at most once, only if the batch "
  "alone does not say what the job wants.\n"
  "- Then make exactly one merged call of pska_pska_write_candidates carrying every candidate of this "
  "batch. Each candidate has schema_version 'pska.candidates.v1', the job_id, source_refs naming the "
  "source items it rests on, a confidence from 0 to 1, and producer 'fastreact'.\n"
  "- Put facts in knowledge_claims. digest_notes and hyperedges are allowed only together with "
  "knowledge_claims in the same write.\n"
  "- Use no other tool. Do not invent sources. Finish with a one-paragraph summary of what you wrote.";

std::string batch_run_body(const run_settings& s, const std::string& job_json, const batch_page& page) {
  auto user = json::object([&](json::writer& w) {
    w.Key("job");
    json::write_raw(w, job_json);
    string_member(w, "cursor", s.cursor);
    w.Key("batch");
    json::write_raw(w, page.json);
  });
  auto user_key = "pska:" + s.who.represented_user_id;
  return json::object([&](json::writer& w) {
    w.Key("messages");
    w.StartArray();
    for (auto [role, content] : {std::pair<const char*, const std::string*>{"system", nullptr}, {"user", &user}}) {
      w.StartObject();
      string_member(w, "role", role);
      string_member(w, "content", content ? *content : std::string(digest_rules));
      w.EndObject();
    }
    w.EndArray();
    w.Key("stream");
    w.Bool(false);
    w.Key("skills");
    w.StartArray();
    w.String("pska_digest");
    w.EndArray();
    string_member(w, "user_key", user_key);
    w.Key("tool_policy");
    w.StartObject();
    string_member(w, "mode", "allowlist");
    w.Key("allowed_tools");
    w.StartArray();
    w.String(digest_job_context_tool.data(), static_cast<rapidjson::SizeType>(digest_job_context_tool.size()));
    w.String(digest_write_tool.data(), static_cast<rapidjson::SizeType>(digest_write_tool.size()));
    w.EndArray();
    w.EndObject();
    w.Key("metadata");
    w.StartObject();
    string_member(w, "run_id", s.run_id);
    string_member(w, "caller", "pska_digest_worker");
    string_member(w, "purpose", "digest");
    string_member(w, "tenant_key", s.who.tenant_id);
    string_member(w, "pska_tenant_id", s.who.tenant_id);
    string_member(w, "pska_user_id", s.who.represented_user_id);
    string_member(w, "pska_job_id", s.job_id);
    w.Key("max_context_tokens");
    w.Int64(s.max_context_tokens);
    w.Key("scope");
    w.StartObject();
    string_member(w, "job_id", s.job_id);
    string_member(w, "cursor", s.cursor);
    w.EndObject();
    json::write_counts(w, "tool_budget",
                       {{std::string(digest_write_tool), 1}, {std::string(digest_job_context_tool), 1}});
    w.EndObject();
  });
}

batch_judge::batch_judge(const json::value& metadata) {
  if (auto guard = digest_guard::for_run(json::serialize(metadata)))
    budget_ = guard->report().tool_budget;
}

void batch_judge::add_event(const json::value& event) {
  auto type = text_member(event, "type");
  auto meta = json::member(event, "metadata");
  auto flag = [&](const char* key) { return meta && json::get_bool(*meta, key).value_or(false); };
  auto broke = [&](std::string why) {
    if (!broken_)
      broken_ = std::move(why);
  };
  if (type == "error") {
    error_event_ = true;
  } else if (type == "session_end") {
    content_ = std::string(utf8_prefix(text_member(event, "content"), max_content_bytes));
  } else if (type == "think") {
    budget_denied_ = budget_denied_ || flag("tool_budget_denied");
  } else if (type == "tool_call") {
    auto tool = text_member(event, "tool_name");
    if (tool_calls_.size() < max_reported_calls)
      tool_calls_.push_back(tool);
    for (auto forbidden : forbidden_tools)
      if (tool == forbidden)
        broke("ForbiddenTool: the run called " + tool + ", which a digest run may not use");
    auto id = text_member(event, "tool_call_id");
    pending_[id] = tool;
    if (tool == digest_write_tool) {
      auto args = json::member(event, "tool_args");
      pending_args_[id] = args && args->IsString() ? text_member(event, "tool_args")
                                                     : (args ? json::serialize(*args) : std::string("null"));
    }
  } else if (type == "tool_result") {
    auto id = text_member(event, "tool_call_id");
    auto call = pending_.find(id);
    if (call == pending_.end())
      return;
    auto tool = call->second;
    pending_.erase(call);
    auto args = pending_args_.find(id);
    std::string arguments = args == pending_args_.end() ? std::string() : args->second;
    if (args != pending_args_.end())
      pending_args_.erase(args);
    if (flag("digest_validation_error")) {
      rejected_unanswered_ = rejected_unanswered_ || tool == digest_write_tool;
      return;
    }
    if (flag("tool_policy_denied"))
      return;
    auto used = ++effective_[tool];
    auto limit = budget_.find(tool);
    if (limit != budget_.end() && used > limit->second)
      broke("BudgetExceeded: " + tool + " ran " + std::to_string(used) + " times, over its budget of " +
            std::to_string(limit->second));
    if (tool == digest_write_tool) {
      if (auto why = digest_write_problem(arguments))
        broke("InvalidWrite: " + *why);
      rejected_unanswered_ = false;
    }
  }
}

std::optional<std::string> batch_judge::verdict(const std::string& run_status) const {
  if (run_status != "completed")
    return "RunNotCompleted: the batch run ended " + run_status;
  if (error_event_)
    return std::string("RunError: the batch run has an error event");
  if (broken_)
    return broken_;
  if (rejected_unanswered_)
    return std::string("RejectedWrite: a rejected write was never followed by an effective write");
  return std::nullopt;
}

run_report batch_judge::report(run_report base) const {
  base.content = content_;
  base.tool_calls = tool_calls_;
  auto count = [&](std::string_view tool) {
    auto it = effective_.find(std::string(tool));
    return it == effective_.end() ? int64_t{0} : it->second;
  };
  base.write_call_count = count(digest_write_tool);
  base.job_context_call_count = count(digest_job_context_tool);
  base.tool_budget_exceeded = budget_denied_;
  return base;
}

std::string complete_body(const std::string& worker_id, const std::string& leased_job_json,
                          const std::vector<run_report>& runs) {
  return json::object([&](json::writer& w) {
    w.Key("result");
    w.StartObject();
    w.Key("ok");
    w.Bool(true);
    string_member(w, "worker_id", worker_id);
    w.Key("leased_job");
    json::write_raw(w, leased_job_json.empty() ? "null" : leased_job_json);
    w.Key("batch_count");
    w.Int64(static_cast<int64_t>(runs.size()));
    w.Key("fastreact_runs");
    w.StartArray();
    for (auto& r : runs) {
      w.StartObject();
      string_member(w, "run_id", r.run_id);
      string_member(w, "batch_cursor", r.batch_cursor);
      json::write_nullable(w, "next_cursor", r.next_cursor.value_or("")); // a page never names "" next
      string_member(w, "status", r.status);
      string_member(w, "content", r.content);
      w.Key("tool_calls");
      w.StartArray();
      for (auto& t : r.tool_calls)
        w.String(t.c_str(), static_cast<rapidjson::SizeType>(t.size()));
      w.EndArray();
      w.Key("write_call_count");
      w.Int64(r.write_call_count);
      w.Key("job_context_call_count");
      w.Int64(r.job_context_call_count);
      w.Key("tool_budget_exceeded");
      w.Bool(r.tool_budget_exceeded);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  });
}

std::string fail_body(const std::string& error, bool retryable) {
  return json::object([&](json::writer& w) {
    string_member(w, "error", std::string(utf8_prefix(error, 4096)));
    w.Key("retryable");
    w.Bool(retryable);
  });
}

std::vector<troupe_job> troupe_jobs(std::string_view lease_body, const tenant& defaults) {
  std::vector<troupe_job> out;
  auto doc = json::parse(lease_body);
  auto jobs = doc && doc->IsObject() ? json::member(*doc, "jobs") : nullptr;
  if (!jobs || !jobs->IsArray())
    return out;
  for (auto& j : jobs->GetArray()) {
    auto payload = j.IsObject() ? json::member(j, "payload") : nullptr;
    if (!payload || !payload->IsObject())
      continue;
    troupe_job t;
    t.id = text_member(j, "id");
    t.lease_token = text_member(j, "lease_token");
    t.pska_job_id = text_member(*payload, "pska_job_id");
    t.who.tenant_id = text_member(*payload, "tenant_id");
    t.who.represented_user_id = text_member(*payload, "represented_user_id");
    if (t.who.tenant_id.empty())
      t.who.tenant_id = defaults.tenant_id;
    if (t.who.represented_user_id.empty())
      t.who.represented_user_id = defaults.represented_user_id;
    if (!is_name_text(t.id) || t.lease_token.empty() || !is_name_text(t.pska_job_id) ||
        !is_name_text(t.who.tenant_id) || !is_name_text(t.who.represented_user_id))
      continue;
    out.push_back(std::move(t));
  }
  return out;
}

std::string troupe_lease_body(const std::string& worker_id, int64_t max_jobs, int64_t lease_seconds) {
  return json::object([&](json::writer& w) {
    string_member(w, "worker_id", worker_id);
    w.Key("types");
    w.StartArray();
    w.String("pska.digest");
    w.EndArray();
    w.Key("max_jobs");
    w.Int64(std::clamp<int64_t>(max_jobs, 1, 100));
    w.Key("lease_seconds");
    w.Int64(std::clamp<int64_t>(lease_seconds, 5, 3600));
    w.Key("wait_seconds");
    w.Int(20);
  });
}

std::string troupe_beat_body(const std::string& lease_token) {
  return json::object([&](json::writer& w) { string_member(w, "lease_token", lease_token); });
}

std::string troupe_complete_body(const std::string& lease_token, const std::string& pska_complete_body) {
  auto doc = json::parse(pska_complete_body);
  auto result = doc && doc->IsObject() ? json::member(*doc, "result") : nullptr;
  return json::object([&](json::writer& w) {
    string_member(w, "lease_token", lease_token);
    w.Key("result");
    json::write_raw(w, result ? json::serialize(*result) : std::string("null"));
  });
}

std::string troupe_fail_body(const std::string& lease_token, const std::string& error) {
  return json::object([&](json::writer& w) {
    string_member(w, "lease_token", lease_token);
    string_member(w, "error", std::string(utf8_prefix(error, 4096)));
    w.Key("retryable");
    w.Bool(true);
  });
}

bool breaker_failure(int status) {
  return status == 0 || status == 429 || status / 100 == 5;
}

void breaker::record(double now, int status, double retry_after_seconds) {
  if (retry_after_seconds > 0)
    paused_until_ = std::max(paused_until_, now + std::min(retry_after_seconds, 3600.0));
  if (!breaker_failure(status)) {
    failures_ = 0;
    probe_after_ = 1;
    return;
  }
  bool was_open = open();
  ++failures_;
  if (!open())
    return;
  // A failed probe doubles the wait; the failure that opened it starts at 1 s.
  probe_after_ = was_open ? std::min(probe_after_ * 2, 60.0) : 1;
  next_probe_ = now + probe_after_;
}

bool breaker::admits(double now) {
  if (now < paused_until_)
    return false;
  if (!open())
    return true;
  if (now < next_probe_)
    return false;
  next_probe_ = now + probe_after_; // one probe per wait
  return true;
}

} // namespace troupe::protocol::pska

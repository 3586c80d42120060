#include "protocol/upstream_readers.hpp"

#include "protocol/json.hpp"
#include "protocol/utf8.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace troupe::protocol::responses {

namespace {

std::string string_of(const json::value* v) {
  return v && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
}

int64_t int_of(const json::value& obj, const char* key) {
  return json::get_int(obj, key).value_or(0);
}

// Token counts under either protocol's names (RS-19, RS-48).
usage usage_of(const json::value& u, const char* input, const char* output, const char* input_details,
               const char* output_details) {
  usage out;
  out.input_tokens = int_of(u, input);
  out.output_tokens = int_of(u, output);
  if (auto d = json::member(u, input_details))
    out.cached_tokens = int_of(*d, "cached_tokens");
  if (auto d = json::member(u, output_details))
    out.reasoning_tokens = int_of(*d, "reasoning_tokens");
  return out;
}

usage chat_usage(const json::value& u) {
  return usage_of(u, "prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details");
}

usage responses_usage(const json::value& u) {
  return usage_of(u, "input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details");
}

// Arguments of a call whose name has not come yet wait in a bounded buffer (RS-39).
constexpr std::size_t name_pending_bytes = 256 * 1024;

upstream_event make(upstream_event::kind k, std::string text = {}, int64_t index = 0) {
  upstream_event e;
  e.what = k;
  e.text = std::move(text);
  e.index = index;
  return e;
}

upstream_event call_event(int64_t index, std::string call_id, std::string name) {
  auto e = make(upstream_event::kind::call, {}, index);
  e.call_id = std::move(call_id);
  e.name = std::move(name);
  return e;
}

upstream_event finish_event(std::string reason, usage tokens) {
  auto e = make(upstream_event::kind::finish);
  e.finish = std::move(reason);
  e.tokens = tokens;
  return e;
}

std::string chat_finish(std::string reason) {
  if (reason == "length" || reason == "content_filter" || reason == "tool_calls")
    return reason;
  if (reason == "function_call")
    return "tool_calls";
  return "stop";
}

// The finish of a Responses object: its incomplete reason mapped to the chat vocabulary.
std::string responses_finish(const json::value& response) {
  if (json::get_string(response, "status") != "incomplete")
    return "stop";
  auto details = json::member(response, "incomplete_details");
  auto reason = details ? json::get_string(*details, "reason") : std::string();
  return reason == "content_filter" ? "content_filter" : "length";
}

std::string error_message(const json::value& v, const char* fallback) {
  if (auto e = json::member(v, "error")) {
    if (e->IsString())
      return e->GetString();
    auto m = json::get_string(*e, "message");
    if (!m.empty())
      return m;
  }
  auto m = json::get_string(v, "message");
  return m.empty() ? fallback : m;
}

} // namespace

// ---- chat_chunk_reader ----

bool chat_chunk_reader::fail(std::string message, std::vector<upstream_event>& out) {
  failed_ = true;
  out.push_back(make(upstream_event::kind::failure, std::move(message)));
  return false;
}

void chat_chunk_reader::close_current() {
  if (current_ >= 0)
    closed_.insert(current_);
  current_ = -1;
}

// Some servers send no index: a piece continues the open call unless it names another id, which
// starts the next call.
int64_t chat_chunk_reader::call_index(const json::value& piece) const {
  if (auto given = json::get_int(piece, "index"))
    return *given;
  auto id = json::get_string(piece, "id");
  if (current_ >= 0) {
    auto& open = calls_.at(current_);
    if (id.empty() || open.id.empty() || open.id == id)
      return current_;
  }
  return calls_.empty() ? 0 : calls_.rbegin()->first + 1;
}

bool chat_chunk_reader::feed(std::string_view payload, std::vector<upstream_event>& out) {
  if (failed_)
    return false;
  while (!payload.empty() && (payload.front() == ' ' || payload.front() == '\n'))
    payload.remove_prefix(1);
  if (payload == "[DONE]")
    return true;
  auto doc = json::parse(payload);
  if (!doc || !doc->IsObject())
    return fail("the upstream sent a chunk that is not a JSON object", out);
  const json::value& chunk = *doc;
  if (json::member(chunk, "error"))
    return fail(error_message(chunk, "the upstream reported an error"), out);
  if (auto u = json::member(chunk, "usage"); u && u->IsObject())
    tokens_ = chat_usage(*u);
  auto choices = json::member(chunk, "choices");
  if (!choices || !choices->IsArray() || choices->Empty())
    return true;
  auto& choice = (*choices)[0];
  if (auto delta = json::member(choice, "delta"); delta && delta->IsObject()) {
    auto reasoning = string_of(json::member(*delta, "reasoning_content"));
    if (reasoning.empty())
      reasoning = string_of(json::member(*delta, "reasoning"));
    if (!reasoning.empty()) {
      close_current();
      out.push_back(make(upstream_event::kind::reasoning, std::move(reasoning)));
    }
    if (auto content = string_of(json::member(*delta, "content")); !content.empty()) {
      close_current();
      out.push_back(make(upstream_event::kind::text, std::move(content)));
      if (auto lp = json::member(choice, "logprobs"); lp && lp->IsObject())
        out.back().logprobs = logprobs_json(json::member(*lp, "content"));
    }
    if (auto refusal = string_of(json::member(*delta, "refusal")); !refusal.empty()) {
      close_current();
      out.push_back(make(upstream_event::kind::refusal, std::move(refusal)));
    }
    if (auto calls = json::member(*delta, "tool_calls"); calls && calls->IsArray()) {
      for (auto& tc : calls->GetArray()) {
        auto index = call_index(tc);
        if (closed_.count(index))
          return fail("the upstream sent arguments for tool call " + std::to_string(index)
                        + " after that call had closed",
                      out);
        if (index != current_) {
          close_current();
          current_ = index;
        }
        auto& call = calls_[index];
        if (auto id = json::get_string(tc, "id"); !id.empty()) {
          if (!call.id.empty() && call.id != id)
            return fail("tool call " + std::to_string(index) + " changed its id from " + call.id + " to " + id, out);
          call.id = id;
        }
        auto fn = json::member(tc, "function");
        auto name = fn ? json::get_string(*fn, "name") : std::string();
        if (!name.empty()) {
          if (!call.name.empty() && call.name != name)
            return fail("tool call " + std::to_string(index) + " changed its name", out);
          call.name = name;
        }
        auto fragment = fn ? json::get_string(*fn, "arguments") : std::string();
        if (!call.announced && !call.name.empty()) {
          call.announced = true;
          out.push_back(call_event(index, call.id, call.name));
          fragment = std::exchange(call.pending, {}) + fragment;
        }
        if (!call.announced) {
          call.pending += fragment;
          if (call.pending.size() > name_pending_bytes)
            return fail("the upstream sent more than " + std::to_string(name_pending_bytes)
                          + " bytes of arguments for tool call " + std::to_string(index) + " without its name",
                        out);
        } else if (!fragment.empty())
          out.push_back(make(upstream_event::kind::arguments, std::move(fragment), index));
      }
    }
  }
  if (auto reason = json::member(choice, "finish_reason"); reason && reason->IsString())
    finish_ = chat_finish(reason->GetString());
  return true;
}

void chat_chunk_reader::end(std::vector<upstream_event>& out) {
  if (failed_)
    return;
  for (auto& [index, call] : calls_)
    if (!call.announced) {
      fail("the upstream sent tool call " + std::to_string(index) + " without a function name", out);
      return;
    }
  if (finish_.empty()) {
    fail("the upstream stream ended without a finish_reason", out);
    return;
  }
  out.push_back(finish_event(finish_, tokens_));
}

// ---- responses_event_reader ----

bool responses_event_reader::fail(std::string message, std::vector<upstream_event>& out) {
  failed_ = true;
  out.push_back(make(upstream_event::kind::failure, std::move(message)));
  return false;
}

void responses_event_reader::finish(const json::value& response, std::string reason,
                                    std::vector<upstream_event>& out) {
  finished_ = true;
  usage tokens;
  if (auto u = json::member(response, "usage"); u && u->IsObject())
    tokens = responses_usage(*u);
  out.push_back(finish_event(std::move(reason), tokens));
}

void responses_event_reader::release_held(std::vector<upstream_event>& out) {
  if (!held_)
    return;
  auto [index, text] = std::move(*held_);
  held_.reset();
  arguments_[index].relayed += text;
  out.push_back(make(upstream_event::kind::arguments, std::move(text), index));
}

bool responses_event_reader::feed(std::string_view payload, std::vector<upstream_event>& out) {
  if (failed_ || finished_)
    return !failed_;
  while (!payload.empty() && (payload.front() == ' ' || payload.front() == '\n'))
    payload.remove_prefix(1);
  if (payload == "[DONE]") // vLLM ends its streams so; a missing terminal is end()'s to report
    return true;
  auto doc = json::parse(payload);
  if (!doc || !doc->IsObject())
    return fail("the upstream sent an event that is not a JSON object", out);
  const json::value& ev = *doc;
  auto type = json::get_string(ev, "type");
  auto index = json::get_int(ev, "output_index").value_or(0);
  auto delta = json::get_string(ev, "delta");
  if (type == "response.function_call_arguments.delta") {
    if (delta.empty())
      return true;
    if (held_ && held_->first != index)
      release_held(out);
    auto& args = arguments_[index];
    if (args.deltas++ == 0) {
      held_.emplace(index, std::move(delta));
      return true;
    }
    if (held_) {
      // A complete JSON value followed by the start of another was a placeholder: drop it.
      auto first = delta.find_first_not_of(" \t\r\n");
      bool restarts = first != std::string::npos && (delta[first] == '{' || delta[first] == '[');
      if (restarts && json::parse(held_->second))
        held_.reset();
      else
        release_held(out);
    }
    args.relayed += delta;
    out.push_back(make(upstream_event::kind::arguments, std::move(delta), index));
    return true;
  }
  release_held(out);
  bool terminal = type == "response.completed" || type == "response.done" || type == "response.incomplete";
  bool item_ended = std::exchange(end_held_, false);
  if (item_ended && !terminal)
    out.push_back(make(upstream_event::kind::item_end));
  if (type == "response.output_item.added" || type == "response.output_item.done"
      || type == "response.function_call_arguments.done") {
    auto item = json::member(ev, "item");
    const json::value& call = item ? *item : ev;
    if (item && json::get_string(*item, "type") != "function_call") {
      end_held_ = type == "response.output_item.done";
      return true;
    }
    auto arguments = json::get_string(call, "arguments");
    if (type == "response.output_item.added")
      out.push_back(call_event(index, json::get_string(call, "call_id"), json::get_string(call, "name")));
    // Arguments not streamed as deltas (or only partly) arrive with the item; the final text is
    // the call's, so only what extends what was given out can still be given.
    auto& relayed = arguments_[index].relayed;
    if (arguments.size() > relayed.size() && arguments.compare(0, relayed.size(), relayed) == 0) {
      out.push_back(make(upstream_event::kind::arguments, arguments.substr(relayed.size()), index));
      relayed = arguments;
    }
  } else if (type == "response.output_text.delta") {
    if (!delta.empty()) {
      out.push_back(make(upstream_event::kind::text, std::move(delta)));
      out.back().logprobs = logprobs_json(json::member(ev, "logprobs"));
    }
  } else if (type == "response.refusal.delta") {
    if (!delta.empty())
      out.push_back(make(upstream_event::kind::refusal, std::move(delta)));
  } else if (type == "response.reasoning_text.delta") {
    if (!delta.empty())
      out.push_back(make(upstream_event::kind::reasoning, std::move(delta)));
  } else if (terminal) {
    auto response = json::member(ev, "response");
    static const json::value empty(rapidjson::kObjectType);
    const json::value& r = response ? *response : empty;
    auto reason = responses_finish(r);
    // The last item ended before the terminal event: it ends with the round, incomplete when cut.
    if (item_ended && reason == "stop")
      out.push_back(make(upstream_event::kind::item_end));
    finish(r, std::move(reason), out);
  } else if (type == "response.failed") {
    auto response = json::member(ev, "response");
    return fail(response ? error_message(*response, "the upstream response failed") : "the upstream response failed",
                out);
  } else if (type == "error") {
    return fail(error_message(ev, "the upstream reported an error"), out);
  }
  return true;
}

void responses_event_reader::end(std::vector<upstream_event>& out) {
  if (!failed_ && !finished_)
    fail("the upstream stream ended without a terminal event", out);
}

namespace {

// A non-streamed answer's body as a JSON object; none, and a failure event, when it is not one.
std::optional<json::document> answer_object(std::string_view body, std::vector<upstream_event>& out) {
  auto doc = json::parse(body);
  if (doc && doc->IsObject())
    return doc;
  out.push_back(make(upstream_event::kind::failure, "the upstream answered with a body that is not JSON"));
  return std::nullopt;
}

} // namespace

std::vector<upstream_event> chat_completion_events(std::string_view body) {
  std::vector<upstream_event> out;
  auto doc = answer_object(body, out);
  if (!doc)
    return out;
  const json::value& v = *doc;
  auto choices = json::member(v, "choices");
  if (json::member(v, "error") || !choices || !choices->IsArray() || choices->Empty()) {
    out.push_back(make(upstream_event::kind::failure, error_message(v, "the upstream answered without choices")));
    return out;
  }
  auto& choice = (*choices)[0];
  if (auto msg = json::member(choice, "message")) {
    auto reasoning = string_of(json::member(*msg, "reasoning_content"));
    if (reasoning.empty())
      reasoning = string_of(json::member(*msg, "reasoning"));
    if (!reasoning.empty())
      out.push_back(make(upstream_event::kind::reasoning, reasoning));
    if (auto content = string_of(json::member(*msg, "content")); !content.empty()) {
      out.push_back(make(upstream_event::kind::text, content));
      if (auto lp = json::member(choice, "logprobs"); lp && lp->IsObject())
        out.back().logprobs = logprobs_json(json::member(*lp, "content"));
    }
    if (auto refusal = string_of(json::member(*msg, "refusal")); !refusal.empty())
      out.push_back(make(upstream_event::kind::refusal, refusal));
    if (auto calls = json::member(*msg, "tool_calls"); calls && calls->IsArray()) {
      int64_t i = 0;
      for (auto& tc : calls->GetArray()) {
        auto fn = json::member(tc, "function");
        out.push_back(call_event(i, json::get_string(tc, "id"), fn ? json::get_string(*fn, "name") : ""));
        auto arguments = fn ? json::get_string(*fn, "arguments") : std::string();
        if (!arguments.empty())
          out.push_back(make(upstream_event::kind::arguments, arguments, i));
        ++i;
      }
    }
  }
  usage tokens;
  if (auto u = json::member(v, "usage"); u && u->IsObject())
    tokens = chat_usage(*u);
  out.push_back(finish_event(chat_finish(json::get_string(choice, "finish_reason", "stop")), tokens));
  return out;
}

std::vector<upstream_event> responses_object_events(std::string_view body) {
  std::vector<upstream_event> out;
  auto doc = answer_object(body, out);
  if (!doc)
    return out;
  const json::value& v = *doc;
  if (json::get_string(v, "status") == "failed" || (json::member(v, "error") && !json::member(v, "output"))) {
    out.push_back(make(upstream_event::kind::failure, error_message(v, "the upstream response failed")));
    return out;
  }
  if (auto output = json::member(v, "output"); output && output->IsArray()) {
    int64_t index = 0;
    for (auto& entry : output->GetArray()) {
      auto it = item_from_json(entry);
      if (it.type == item_kind::reasoning || it.type == item_kind::message) {
        for (auto& p : it.content) {
          auto k = p.type == part_kind::refusal          ? upstream_event::kind::refusal
                   : p.type == part_kind::reasoning_text ? upstream_event::kind::reasoning
                                                : upstream_event::kind::text;
          if (!p.text.empty()) {
            out.push_back(make(k, p.text));
            out.back().logprobs = p.logprobs; // read through logprobs_json by item_from_json
          }
        }
        out.push_back(make(upstream_event::kind::item_end));
      } else if (it.type == item_kind::function_call) {
        out.push_back(call_event(index, it.call_id, it.name));
        if (!it.arguments.empty())
          out.push_back(make(upstream_event::kind::arguments, it.arguments, index));
      }
      ++index;
    }
  }
  usage tokens;
  if (auto u = json::member(v, "usage"); u && u->IsObject())
    tokens = responses_usage(*u);
  auto reason = responses_finish(v);
  // A cut round leaves its last item open, to end incomplete (as streamed, RS-49).
  if (reason != "stop" && !out.empty() && out.back().what == upstream_event::kind::item_end)
    out.pop_back();
  out.push_back(finish_event(std::move(reason), tokens));
  return out;
}

std::string upstream_error_message(std::string_view body) {
  constexpr std::size_t max_bytes = 512;
  auto doc = json::parse(body);
  if (!doc || !doc->IsObject())
    return {};
  std::string message;
  if (auto e = json::member(*doc, "error"))
    message = e->IsString() ? std::string(e->GetString(), e->GetStringLength()) : json::get_string(*e, "message");
  if (message.empty())
    message = json::get_string(*doc, "message");
  for (auto& c : message)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = ' ';
  return std::string(utf8_prefix(message, max_bytes));
}

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int64_t number_of(std::string_view digits) {
  int64_t n = 0;
  for (char c : digits)
    n = n * 10 + (c - '0');
  return n;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) as epoch seconds.
std::optional<int64_t> imf_fixdate(std::string_view v) {
  static constexpr std::array<std::string_view, 7> days{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  static constexpr std::array<std::string_view, 12> months{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (v.size() != 29 || v.substr(3, 2) != ", " || v[7] != ' ' || v[11] != ' ' || v[16] != ' ' || v[19] != ':'
      || v[22] != ':' || v.substr(25) != " GMT")
    return std::nullopt;
  if (std::find(days.begin(), days.end(), v.substr(0, 3)) == days.end())
    return std::nullopt;
  auto month = std::find(months.begin(), months.end(), v.substr(8, 3));
  auto day = v.substr(5, 2), year = v.substr(12, 4), hh = v.substr(17, 2), mm = v.substr(20, 2), ss = v.substr(23, 2);
  if (month == months.end() || !all_digits(day) || !all_digits(year) || !all_digits(hh) || !all_digits(mm)
      || !all_digits(ss))
    return std::nullopt;
  auto d = number_of(day), h = number_of(hh), mi = number_of(mm), s = number_of(ss);
  if (d < 1 || d > 31 || h > 23 || mi > 59 || s > 60)
    return std::nullopt;
  auto days_since = days_from_civil(number_of(year), month - months.begin() + 1, d);
  return days_since * 86400 + h * 3600 + mi * 60 + s;
}

} // namespace

std::optional<int64_t> retry_after_seconds(std::string_view value, int64_t now) {
  constexpr int64_t max_wait = 24 * 3600;
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
    value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
    value.remove_suffix(1);
  if (all_digits(value))
    return value.size() > 9 ? max_wait : std::min(number_of(value), max_wait);
  auto at = imf_fixdate(value);
  if (!at)
    return std::nullopt;
  return std::clamp<int64_t>(*at - now, 0, max_wait);
}

} // namespace troupe::protocol::responses

#include "run_command.hpp"

#include "io/web_call.hpp"
#include "protocol/json.hpp"
#include "protocol/pska_digest.hpp"
#include "protocol/run_view.hpp"
#include "protocol/sse_parser.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>
#include <thread>

#include <unistd.h>

namespace troupe::app {

namespace {

namespace json = protocol::json;
namespace rv = protocol::run_view;
using protocol::pska::url_component;

constexpr double call_timeout_seconds = 30;
// A live stream carries a heartbeat every service.sse_heartbeat_seconds (15 by default): a minute
// of silence means the connection is gone.
constexpr double stream_idle_seconds = 60;
constexpr int page_poll_ms = 1000;

// A line for stderr: what went wrong, as safe to print as any event.
void say(const std::string& text) {
  std::fprintf(stderr, "troupe run: %s\n", rv::bounded_line(rv::terminal_safe(text), 400).c_str());
  std::fflush(stderr);
}

void pause_ms(int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// The listener the configuration gives, as the PSKA worker's default troupe_url (AS-94); a
// wildcard host is reached on the loopback.
std::string default_url(const protocol::config& cfg) {
  auto host = cfg.service.host;
  if (host.empty() || host == "0.0.0.0" || host == "::")
    host = "127.0.0.1";
  if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(cfg.service.port);
}

struct server {
  std::string base; // without a trailing slash
  std::string token;

  web_request request(const char* method, const std::string& path, std::string body = {}) const {
    web_request r;
    r.method = method;
    r.url = base + path;
    if (!token.empty())
      r.headers.emplace_back("Authorization", "Bearer " + token);
    if (!body.empty())
      r.headers.emplace_back("Content-Type", "application/json");
    r.body = std::move(body);
    r.timeout_seconds = call_timeout_seconds;
    return r;
  }
};

// Why a call got no useful answer: the transport's words, or the status and the server's detail (AS-2).
std::string failure_of(const io::web_call_result& r, const std::string& what) {
  if (!r.error.empty())
    return what + ": " + r.error;
  std::string detail;
  if (auto doc = json::parse(r.response.body)) {
    if (auto* d = json::member(*doc, "detail"))
      detail = d->IsString() ? std::string(d->GetString(), d->GetStringLength()) : json::serialize(*d);
  }
  return what + " answered " + std::to_string(r.response.status) + (detail.empty() ? "" : ": " + detail);
}

// A JSON object answered 200, or nullopt once it said why not.
std::optional<json::document> object_answer(const io::web_call_result& r, const std::string& what) {
  if (!r.error.empty() || r.response.status != 200) {
    say(failure_of(r, what));
    return std::nullopt;
  }
  auto doc = json::parse(r.response.body);
  if (!doc || !doc->IsObject()) {
    say(what + " answered something other than a JSON object");
    return std::nullopt;
  }
  return doc;
}

// Follows one run to its end: prints its events once each, in order, whichever way they arrive.
class follower {
public:
  follower(const server& s, const run_command_options& o, std::string run_id)
    : server_(s), options_(o), run_id_(std::move(run_id)), cursor_(o.after),
      interactive_(isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)), ui_(o.json ? stderr : stdout) {}

  int follow(const json::value& snapshot) {
    progress(snapshot);
    int failures = 0; // attempts in a row that brought no event
    for (;;) {
      auto attempt = stream_once();
      if (attempt.ended)
        return finish();
      if (attempt.fatal)
        return rv::exit_unreachable;
      if (attempt.events > 0)
        failures = 0;
      if (++failures > rv::max_reconnects)
        return page();
      auto delay = rv::reconnect_delay_ms(failures);
      say("stream of " + run_id_ + " dropped (" + attempt.why + "); resuming after sequence " +
          std::to_string(cursor_) + " in " + std::to_string(delay) + " ms (attempt " + std::to_string(failures) +
          " of " + std::to_string(rv::max_reconnects) + ")");
      pause_ms(delay);
    }
  }

private:
  struct stream_attempt {
    bool ended = false; // `done` came: the run is over
    bool fatal = false; // refused for good (401, 404...)
    int events = 0;
    std::string why;
  };

  std::string run_path() const { return "/v1/runs/" + url_component(run_id_); }

  // One connection to the stream, from the cursor (AS-74: Last-Event-ID wins).
  stream_attempt stream_once() {
    stream_attempt out;
    auto req = server_.request("GET", run_path() + "/stream");
    req.headers.emplace_back("Accept", "text/event-stream");
    if (cursor_ >= 0)
      req.headers.emplace_back("Last-Event-ID", std::to_string(cursor_));
    req.timeout_seconds = stream_idle_seconds;
    protocol::sse_parser parser;
    std::vector<protocol::sse_event> frames;
    auto r = io::web_stream(req, [&](std::string_view bytes) {
      frames.clear();
      bool ok = parser.feed(bytes, frames);
      for (auto& f : frames) {
        if (f.event == "done") {
          out.ended = true;
          return false;
        }
        auto doc = json::parse(f.data);
        if (doc && doc->IsObject() && take(*doc))
          ++out.events;
      }
      return ok;
    });
    if (out.ended)
      return out;
    if (r.error.empty() && r.response.status / 100 != 2) {
      out.fatal = !rv::retryable_status(r.response.status);
      if (out.fatal)
        say(failure_of(r, "GET " + run_path() + "/stream"));
    }
    out.why = parser.failed() ? parser.error() : !r.error.empty() ? r.error
                                              : r.response.status / 100 != 2 ? failure_of(r, "the stream")
                                                                             : "it ended before done";
    return out;
  }

  // The stream is out of reach: read the log by page until the run is over (AS-51).
  int page() {
    say("the stream of " + run_id_ + " stays out of reach; reading its events by page");
    int failures = 0;
    for (;;) {
      auto query = "/events?limit=1000" + (cursor_ >= 0 ? "&after_sequence=" + std::to_string(cursor_) : "");
      auto r = io::web_call(server_.request("GET", run_path() + query));
      if (r.error.empty() && r.response.status != 200 && !rv::retryable_status(r.response.status)) {
        say(failure_of(r, "GET " + run_path() + "/events"));
        return rv::exit_unreachable;
      }
      auto doc = r.error.empty() && r.response.status == 200 ? json::parse(r.response.body) : std::nullopt;
      auto* events = doc ? json::member(*doc, "events") : nullptr;
      if (!events || !events->IsArray()) {
        if (++failures > rv::max_reconnects) {
          say(failure_of(r, "GET " + run_path() + "/events") + "; giving up");
          return rv::exit_unreachable;
        }
        pause_ms(rv::reconnect_delay_ms(failures));
        continue;
      }
      failures = 0;
      for (auto& e : events->GetArray())
        if (e.IsObject())
          take(e);
      if (json::get_bool(*doc, "has_more").value_or(false))
        continue;
      if (rv::exit_code_of(json::get_string(*doc, "status")))
        return finish();
      pause_ms(page_poll_ms);
    }
  }

  // Shows an event unless it was shown already; true when it was new.
  bool take(const json::value& event) {
    auto seq = json::get_int(event, "sequence");
    if (seq && *seq <= cursor_)
      return false;
    if (seq)
      cursor_ = *seq;
    if (options_.json) {
      std::printf("%s\n", rv::terminal_safe_json(json::serialize(event)).c_str()); // one line, controls escaped
    } else {
      for (auto& line : rv::event_lines(event))
        std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
    if (json::get_string(event, "type") == "step_end")
      ++steps_;
    if (auto approval = rv::approval_of(event))
      ask(*approval);
    return true;
  }

  void ui(const std::string& line) {
    std::fprintf(ui_, "%s\n", rv::bounded_line(rv::terminal_safe(line), 400).c_str());
    std::fflush(ui_);
  }

  // AS-46..AS-48: a pending approval is put to the person at the terminal, or explained.
  void ask(const rv::approval_request& a) {
    if (!asked_.insert(a.id).second)
      return;
    auto path = "/v1/approvals/" + url_component(a.id);
    auto r = io::web_call(server_.request("GET", path));
    if (auto doc = object_answer(r, "GET " + path)) {
      auto* record = json::member(*doc, "approval");
      auto status = record ? json::get_string(*record, "status") : std::string();
      if (status != "pending") {
        ui("[approval] " + a.id + " is " + (status.empty() ? "unknown" : status));
        return;
      }
    }
    if (interactive_ && !stdin_closed_) {
      std::fprintf(ui_, "approve %s? [y/N] ", rv::terminal_safe(a.tool_name).c_str());
      std::fflush(ui_);
      std::string answer;
      if (std::getline(std::cin, answer)) {
        bool yes = answer == "y" || answer == "Y" || answer == "yes";
        auto verb = yes ? "approve" : "deny";
        auto resolved = io::web_call(server_.request("POST", path + "/" + verb, "{}"));
        if (auto doc = object_answer(resolved, std::string("POST ") + path + "/" + verb))
          ui("[approval] " + a.id + " " + json::get_string(*doc, "status"));
        return;
      }
      stdin_closed_ = true;
    }
    ui("[approval] waiting for " + a.id + ": resolve it with POST " + server_.base + path + "/approve (or /deny)");
  }

  void progress(const json::value& snapshot) { ui(rv::progress_line(snapshot, steps_)); }

  // The stream said done: the run's final status decides the exit code.
  int finish() {
    auto r = io::web_call(server_.request("GET", run_path()));
    auto doc = object_answer(r, "GET " + run_path());
    if (!doc)
      return rv::exit_unreachable;
    progress(*doc);
    return rv::exit_code_of(json::get_string(*doc, "status")).value_or(rv::exit_unreachable);
  }

  const server& server_;
  const run_command_options& options_;
  std::string run_id_;
  int64_t cursor_;
  bool interactive_;
  bool stdin_closed_ = false;
  std::FILE* ui_; // progress and prompts: stderr under --json, whose stdout holds events only
  int64_t steps_ = 0;
  std::set<std::string> asked_;
};

// POST /v1/runs (AS-49) with the prompt as the one user message.
std::optional<json::document> create_run(const server& s, const run_command_options& o) {
  auto body = json::object([&](json::writer& w) {
    w.Key("messages");
    w.StartArray();
    w.StartObject();
    w.Key("role");
    w.String("user");
    w.Key("content");
    w.String(o.prompt.data(), static_cast<rapidjson::SizeType>(o.prompt.size()));
    w.EndObject();
    w.EndArray();
    if (!o.model.empty()) {
      w.Key("model");
      w.String(o.model.data(), static_cast<rapidjson::SizeType>(o.model.size()));
    }
  });
  return object_answer(io::web_call(s.request("POST", "/v1/runs", body)), "POST " + s.base + "/v1/runs");
}

} // namespace

CLI::App* add_run_command(CLI::App& app, run_command_options& o) {
  auto cmd = app.add_subcommand("run", "start a run on a troupe server and follow its events");
  cmd->add_option("prompt", o.prompt, "what to ask (the run's user message)");
  cmd->add_option("--url", o.url, "the server (default: http://<service.host>:<service.port> of the configuration)");
  cmd->add_option("--token", o.token, "the service token (default: service.service_token, FASTREACT_SERVICE_TOKEN)");
  cmd->add_option("--model", o.model, "the model for this run (default: the server's)");
  auto background = cmd->add_flag("--background", o.background, "start the run, print its id and exit");
  auto follow = cmd->add_option("--follow", o.follow, "attach to an existing run by its id");
  cmd->add_option("--after", o.after, "with --follow: show only events after this sequence")->needs(follow);
  cmd->add_flag("--json", o.json, "print the raw events, one JSON object per line");
  follow->excludes(background);
  return cmd;
}

int run_command(const run_command_options& o, const protocol::config& cfg) {
  if (o.prompt.empty() == o.follow.empty()) {
    say(o.follow.empty() ? "give a prompt, or --follow RUN_ID" : "give either a prompt or --follow RUN_ID, not both");
    return rv::exit_usage;
  }
  server s{o.url.empty() ? default_url(cfg) : o.url, o.token};
  while (!s.base.empty() && s.base.back() == '/')
    s.base.pop_back();
  if (s.token.empty() && !cfg.service.service_tokens.empty())
    s.token = cfg.service.service_tokens.front();
  std::optional<json::document> run;
  if (o.follow.empty()) {
    run = create_run(s, o);
  } else {
    auto path = "/v1/runs/" + url_component(o.follow);
    run = object_answer(io::web_call(s.request("GET", path)), "GET " + s.base + path);
  }
  if (!run)
    return rv::exit_unreachable;
  auto run_id = json::get_string(*run, "run_id");
  if (run_id.empty()) {
    say("the server answered a run without a run_id");
    return rv::exit_unreachable;
  }
  if (o.background) {
    std::printf("%s\n", (o.json ? rv::terminal_safe_json(json::serialize(*run)) : rv::terminal_safe(run_id)).c_str());
    std::fflush(stdout);
    return rv::exit_completed;
  }
  return follower(s, o, run_id).follow(*run);
}

} // namespace troupe::app

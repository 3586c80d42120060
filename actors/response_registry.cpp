#include "actors/response_registry.hpp"

#include "actors/errors.hpp"
#include "actors/response_compaction.hpp"
#include "actors/response_recovery.hpp"
#include "actors/tool_router.hpp"
#include "protocol/json.hpp"
#include "protocol/responses_mcp.hpp"
#include "protocol/responses_replay.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <sstream>

namespace troupe {

namespace {

namespace rs = protocol::responses;

constexpr std::size_t max_request_tools = 128; // MCP tools per request (RS-30)
constexpr auto store_timeout = std::chrono::seconds(30);

// The registry's own messages besides its public interface: a declared MCP server of a creation
// changed its status, a creation's discovery ran out of time, a foreground response ended.
using registry_impl = response_registry_actor::extend<caf::reacts_to<status_atom, std::string>,
                                                      caf::reacts_to<timeout_atom, std::string>,
                                                      caf::reacts_to<run_end_atom, std::string, response_end>>;

// A request on its way to its run: admitted step by step (RS-20, RS-14, RS-30).
struct creation {
  response_job job;
  sink_opener open_sink;
  caf::typed_response_promise<response_answer> answer;
  bool discovering = false;
};

struct live_response {
  response_run_actor run;
  std::string owner;
};

struct registry_state {
  static inline const char* name = "response_registry";
  std::shared_ptr<const response_environment> env;
  response_registry_options options;
  std::map<std::string, creation> creating;  // by response id
  std::map<std::string, live_response> live; // by response id
  std::map<std::string, caf::typed_response_promise<response_answer>> awaited; // foreground JSON answers
  // (owner key, conversation) → the response holding it (RS-54)
  std::map<std::pair<std::string, std::string>, std::string> conversations;
  std::set<std::string> active;                                   // background runs executing
  std::deque<std::pair<std::string, response_run_actor>> waiting; // background runs queued (RS-55)
};

using registry_pointer = registry_impl::stateful_pointer<registry_state>;

problem response_not_found(const std::string& id) {
  return rs::not_found("Response with id '" + id + "' not found.");
}

problem lookup_failure(const caf::error& err, const std::string& id) {
  return code_of(err) == errc::not_found ? response_not_found(id) : store_failure(err);
}

problem conversation_locked(const std::string& id) {
  return {errc::conflict, "Another response is in progress for conversation '" + id + "'.", "conversation",
          "conversation_locked"};
}

std::vector<rs::item> parse_items(const std::vector<stored_item>& stored) {
  std::vector<rs::item> out;
  for (auto& s : stored)
    if (auto it = rs::item_from_json(s.json))
      out.push_back(std::move(*it));
  return out;
}

// ---- live runs ----

response_run_actor find_live(registry_state& st, const std::string& id, const response_owner* owner = nullptr) {
  auto it = st.live.find(id);
  if (it == st.live.end() || (owner && it->second.owner != owner->key))
    return {};
  return it->second.run;
}

bool conversation_busy(const registry_state& st, const response_owner& owner, const std::string& conversation) {
  return st.conversations.count({owner.key, conversation}) > 0;
}

// Everything held for response `id` is let go; the next queued background response starts.
void forget(registry_pointer self, const std::string& id) {
  auto& st = self->state;
  st.live.erase(id);
  st.creating.erase(id);
  for (auto it = st.conversations.begin(); it != st.conversations.end();)
    it = it->second == id ? st.conversations.erase(it) : std::next(it);
  for (auto it = st.waiting.begin(); it != st.waiting.end();)
    it = it->first == id ? st.waiting.erase(it) : std::next(it);
  if (st.active.erase(id) && !st.waiting.empty()) {
    auto [next_id, next] = std::move(st.waiting.front());
    st.waiting.pop_front();
    st.active.insert(next_id);
    self->send(next, start_atom::value);
  }
}

void start_background(registry_pointer self, const std::string& id, const response_run_actor& run) {
  auto& st = self->state;
  if (st.active.size() >= st.options.max_active_background) {
    st.waiting.emplace_back(id, run);
    return;
  }
  st.active.insert(id);
  self->send(run, start_atom::value);
}

response_run_actor spawn_run(registry_pointer self, response_job job, caf::actor waiter,
                             std::shared_ptr<event_sink> sink) {
  auto& st = self->state;
  auto id = job.id;
  auto owner = job.owner;
  auto run = spawn_response_run(self->system(), st.env, caf::actor_cast<caf::actor>(self), std::move(job),
                                std::move(waiter), std::move(sink));
  st.live[id] = {run, owner};
  return run;
}

// ---- creation (RS-20, RS-14, RS-30) ----

void refuse(registry_pointer self, const std::string& id, problem why) {
  auto& st = self->state;
  auto c = st.creating.find(id);
  if (c == st.creating.end())
    return;
  auto answer = c->second.answer;
  if (auto& declared = c->second.job.declared)
    declared->stop();
  forget(self, id);
  answer.deliver(make_error(std::move(why)));
}

// RS-55: a background response is stored, queued, before anything else; then it is answered (its
// queued object, or its stream) and waits for its turn.
void queue_background(registry_pointer self, const std::string& id) {
  auto& c = self->state.creating.at(id);
  response_commit commit;
  commit.response = queued_row(c.job);
  for (auto& item : c.job.input)
    commit.items.push_back({item.id, rs::to_json(item)});
  auto snapshot = commit.response.snapshot;
  self->request(self->state.env->store, store_timeout, save_response_atom::value, std::move(commit))
    .then(
      [=](int64_t) {
        auto& st = self->state;
        auto it = st.creating.find(id);
        if (it == st.creating.end())
          return;
        creation admitted = std::move(it->second);
        st.creating.erase(it);
        bool streaming = admitted.job.req.stream;
        auto sink = streaming ? admitted.open_sink() : nullptr;
        auto run = spawn_run(self, std::move(admitted.job), {}, std::move(sink));
        response_end queued{rs::response_status::queued, snapshot, false, {}};
        admitted.answer.deliver(streaming ? response_answer{true, {}} : response_answer{false, std::move(queued)});
        start_background(self, id, run);
      },
      [=](caf::error& err) { refuse(self, id, store_failure(err)); });
}

// A foreground response's JSON answer (RS-4, RS-43) comes when its run ends.
caf::behavior json_waiter(caf::event_based_actor* self, caf::actor registry, std::string id) {
  return {
    [](event_atom, const std::vector<rs::stream_event>&) { return true; },
    [=](run_end_atom, response_end& end) {
      self->send(caf::actor_cast<registry_impl>(registry), run_end_atom::value, id, std::move(end));
      self->quit();
    },
  };
}

void launch(registry_pointer self, const std::string& id) {
  auto& st = self->state;
  auto& c = st.creating.at(id);
  if (c.job.req.background)
    return queue_background(self, id);
  creation admitted = std::move(c);
  st.creating.erase(id);
  if (admitted.job.req.stream) {
    auto run = spawn_run(self, std::move(admitted.job), {}, admitted.open_sink());
    admitted.answer.deliver(response_answer{true, {}});
    self->send(run, start_atom::value);
    return;
  }
  st.awaited[id] = admitted.answer;
  auto waiter = self->spawn(json_waiter, caf::actor_cast<caf::actor>(self), id);
  self->send(spawn_run(self, std::move(admitted.job), waiter, nullptr), start_atom::value);
}

// A server's tools as the request filters them, or why the request cannot use it.
std::optional<problem> bind_tools(mcp_binding& b, const mcp_server_status& status, const rs::mcp_declaration& d,
                                  const std::vector<rs::item>& history) {
  b.tools.clear();
  for (auto& t : status.tools)
    if (rs::tool_allowed(d.allowed_tools, t))
      b.tools.push_back(t);
  if (status.tools.size() && b.tools.empty())
    return problem{errc::bad_request, "'allowed_tools' leaves no tool of MCP server '" + d.server_label + "'.",
                   "tools[" + std::to_string(d.index) + "].allowed_tools", "invalid_value"};
  if (!status.alive)
    b.error = status.error.empty() ? "the server is not running" : status.error;
  for (auto& it : history)
    if (it.type == rs::item_kind::mcp_list_tools && it.server_label == b.label && it.error.empty())
      b.listed = true;
  return std::nullopt;
}

std::optional<problem> check_tool_count(const response_job& job) {
  std::size_t tools = 0;
  for (auto& b : job.servers)
    tools += b.tools.size();
  if (tools <= max_request_tools)
    return std::nullopt;
  return problem{errc::bad_request,
                 "The MCP servers of this request offer " + std::to_string(tools) + " tools; at most "
                   + std::to_string(max_request_tools) + " are allowed. Narrow them with 'allowed_tools'.",
                 "tools", "invalid_value"};
}

// RS-30: each declared MCP server is a configured one, bound now, or the request's own, started
// here (its status changes reach the registry) and bound once discovered.
std::optional<problem> bind_servers(registry_pointer self, creation& c) {
  auto& req = c.job.req;
  auto& st = self->state;
  std::vector<mcp_server_status> statuses;
  if (st.env->tools)
    statuses = st.env->tools->servers();
  for (auto& d : req.mcp) {
    auto at = "tools[" + std::to_string(d.index) + "]";
    auto status = std::find_if(statuses.begin(), statuses.end(), [&](auto& s) { return s.name == d.server_label; });
    mcp_binding b;
    b.label = d.server_label;
    b.require_approval = d.require_approval;
    if (!d.server_url.empty()) {
      if (status != statuses.end())
        return problem{errc::bad_request,
                       "MCP server '" + d.server_label + "' is configured on this server; omit 'server_url'.",
                       at + ".server_url", "invalid_value"};
      auto config = rs::declared_server(st.options.mcp, d, at);
      if (auto err = std::get_if<problem>(&config))
        return *err;
      if (!c.job.declared)
        c.job.declared = std::make_shared<tool_router>(self->system(), nullptr);
      mcp_server_options o;
      o.config = std::move(std::get<protocol::mcp_server_config>(config));
      o.call_timeout_seconds = st.options.mcp_call_timeout_seconds;
      o.start_timeout_seconds = st.options.mcp_connect_timeout_seconds;
      auto me = caf::actor_cast<registry_impl>(self);
      o.on_status = [me, id = c.job.id](const mcp_server_status&) { caf::anon_send(me, status_atom::value, id); };
      c.job.declared->add_server(std::move(o), st.options.declared_transport);
      b.declared = true;
      c.job.servers.push_back(std::move(b));
      continue;
    }
    if (status == statuses.end())
      return problem{errc::bad_request,
                     "Unknown MCP server '" + d.server_label + "': name one of mcp.servers or give 'server_url'.",
                     at + ".server_label", "invalid_value"};
    if (auto err = bind_tools(b, *status, d, c.job.history))
      return err;
    c.job.servers.push_back(std::move(b));
  }
  return std::nullopt;
}

// RS-30, RS-32: the request's own servers are listed before its run starts; one that neither lists
// its tools nor fails within mcp.connect_timeout fails its listing.
void settle_discovery(registry_pointer self, const std::string& id, bool out_of_time) {
  auto& st = self->state;
  auto it = st.creating.find(id);
  if (it == st.creating.end() || !it->second.discovering)
    return;
  auto& c = it->second;
  auto statuses = c.job.declared->servers();
  // A server has listed its tools, or failed; until then its error reads "starting".
  auto discovered = [&](const std::string& label) -> const mcp_server_status* {
    for (auto& s : statuses)
      if (s.name == label && (s.alive || (!s.error.empty() && s.error != "starting")))
        return &s;
    return nullptr;
  };
  for (auto& b : c.job.servers)
    if (b.declared && !discovered(b.label) && !out_of_time)
      return;
  mcp_server_status late;
  std::ostringstream within;
  within << st.options.mcp_connect_timeout_seconds;
  late.error = "no tool list within " + within.str() + " s (mcp.connect_timeout)";
  auto& req = c.job.req;
  for (auto& b : c.job.servers) {
    if (!b.declared)
      continue;
    auto d = std::find_if(req.mcp.begin(), req.mcp.end(), [&](auto& m) { return m.server_label == b.label; });
    auto status = discovered(b.label);
    if (auto err = bind_tools(b, status ? *status : late, *d, c.job.history))
      return refuse(self, id, *err);
  }
  if (auto err = check_tool_count(c.job))
    return refuse(self, id, *err);
  c.discovering = false;
  launch(self, id);
}

// The history checks and the MCP servers, then the run.
void admit(registry_pointer self, const std::string& id) {
  auto& st = self->state;
  auto& c = st.creating.at(id);
  if (auto err = rs::check_history(c.job.history, c.job.input, c.job.req.mcp))
    return refuse(self, id, *err);
  if (auto err = bind_servers(self, c))
    return refuse(self, id, *err);
  if (c.job.declared) {
    c.discovering = true;
    auto limit = std::chrono::milliseconds(static_cast<int64_t>(st.options.mcp_connect_timeout_seconds * 1000));
    self->delayed_send(self, limit, timeout_atom::value, id);
    return settle_discovery(self, id, false); // every status may have come already
  }
  if (auto err = check_tool_count(c.job))
    return refuse(self, id, *err);
  launch(self, id);
}

// RS-14: input items whose id is stored are used by reference. Only ids the client gave can be
// stored ones, so input without them costs no store round trip.
void resolve_input(registry_pointer self, const std::string& id) {
  auto& c = self->state.creating.at(id);
  if (!c.job.req.input_has_ids)
    return admit(self, id);
  std::vector<std::string> ids;
  for (auto& it : c.job.input)
    ids.push_back(it.id);
  self->request(self->state.env->store, store_timeout, get_items_atom::value, ids, response_owner{c.job.owner})
    .then(
      [=](std::vector<stored_item>& found) {
        auto it = self->state.creating.find(id);
        if (it == self->state.creating.end())
          return;
        std::map<std::string, std::string> stored;
        for (auto& s : found)
          stored[s.id] = s.json;
        auto& input = it->second.job.input;
        for (std::size_t i = 0; i < input.size(); ++i) {
          auto hit = stored.find(input[i].id);
          if (hit != stored.end()) {
            if (auto item = rs::item_from_json(hit->second))
              input[i] = std::move(*item);
          } else if (input[i].type == rs::item_kind::item_reference) {
            return refuse(self, id,
                          {errc::bad_request, "No item found with id '" + input[i].id + "'.",
                           "input[" + std::to_string(i) + "].id", "invalid_value"});
          }
        }
        admit(self, id);
      },
      [=](caf::error& err) { refuse(self, id, store_failure(err)); });
}

// RS-20: the history a response continues, from one stored list.
void rehydrate(registry_pointer self, const std::string& id) {
  auto& st = self->state;
  auto& c = st.creating.at(id);
  auto& req = c.job.req;
  response_owner owner{c.job.owner};
  auto with_history = [=](std::vector<stored_item>& items) {
    if (auto it = self->state.creating.find(id); it != self->state.creating.end()) {
      it->second.job.history = parse_items(items);
      resolve_input(self, id);
    }
  };
  if (!req.previous_response_id.empty()) {
    auto prev = req.previous_response_id;
    self->request(st.env->store, store_timeout, get_response_atom::value, prev, owner)
      .then(
        [=](response_row& row) {
          if (rs::in_flight(row.status))
            return refuse(self, id,
                          {errc::bad_request, "Previous response with id '" + prev + "' is still in progress.",
                           "previous_response_id", "invalid_value"});
          self->request(self->state.env->store, store_timeout, get_items_atom::value, row.history_item_ids, owner)
            .then(with_history, [=](caf::error& err) { refuse(self, id, store_failure(err)); });
        },
        [=](caf::error& err) {
          if (code_of(err) != errc::not_found)
            return refuse(self, id, store_failure(err));
          refuse(self, id,
                 {errc::bad_request, "Previous response with id '" + prev + "' not found.", "previous_response_id",
                  "previous_response_not_found"});
        });
    return;
  }
  if (!req.conversation_id.empty()) {
    auto conv = req.conversation_id;
    if (!st.conversations.emplace(std::make_pair(owner.key, conv), id).second)
      return refuse(self, id, conversation_locked(conv));
    self->request(st.env->store, store_timeout, conversation_items_atom::value, conv, owner)
      .then(
        [=](conversation_row& row, std::vector<stored_item>& items) {
          if (auto it = self->state.creating.find(id); it != self->state.creating.end())
            it->second.job.conversation_revision = row.revision;
          with_history(items);
        },
        [=](caf::error& err) {
          refuse(self, id,
                 code_of(err) == errc::not_found
                   ? rs::not_found("Conversation with id '" + conv + "' not found.", "conversation")
                   : store_failure(err));
        });
    return;
  }
  resolve_input(self, id);
}

// ---- lookups of stored or live responses ----

void answer_get(registry_pointer self, caf::typed_response_promise<std::string> rp, const std::string& id,
                const response_owner& owner) {
  self->request(self->state.env->store, store_timeout, get_response_atom::value, id, owner)
    .then(
      [=](response_row& row) mutable {
        auto run = row.background ? find_live(self->state, id) : response_run_actor{};
        if (!run) {
          rp.deliver(row.snapshot);
          return;
        }
        // RS-5: a running response as it stands.
        self->request(run, store_timeout, snapshot_atom::value)
          .then([=](std::string& snapshot) mutable { rp.deliver(std::move(snapshot)); },
                [=](caf::error&) mutable { rp.deliver(row.snapshot); });
      },
      [=](caf::error& err) mutable { rp.deliver(make_error(lookup_failure(err, id))); });
}

void answer_replay(registry_pointer self, caf::typed_response_promise<response_replay> rp, const std::string& id,
                   const response_owner& owner, int64_t after, caf::actor relay) {
  auto store = self->state.env->store;
  self->request(store, store_timeout, get_response_atom::value, id, owner)
    .then(
      [=](response_row& row) mutable {
        response_replay out;
        if (!row.background) {
          for (auto& e : rs::canonical_replay(row.snapshot))
            if (e.sequence > after)
              out.events.push_back(std::move(e));
          rp.deliver(std::move(out));
          return;
        }
        if (auto run = find_live(self->state, id)) {
          // RS-6: the run sends what it delivered after `after`, then follows.
          caf::anon_send(run, subscribe_atom::value, relay, after);
          out.following = true;
          rp.deliver(std::move(out));
          return;
        }
        if (rs::in_flight(row.status) && self->state.options.tail.count() > 0) {
          // CJ-27: another node runs it; its events reach the store first (RS-55).
          spawn_response_tail(self->system(), store, id, owner, after, relay, self->state.options.tail,
                              self->state.options.peers);
          out.following = true;
          rp.deliver(std::move(out));
          return;
        }
        self->request(store, store_timeout, response_events_atom::value, id, after)
          .then(
            [=](std::vector<response_event>& events) mutable {
              response_replay stored;
              stored.events = stream_events(events);
              rp.deliver(std::move(stored));
            },
            [=](caf::error& err) mutable { rp.deliver(make_error(store_failure(err))); });
      },
      [=](caf::error& err) mutable { rp.deliver(make_error(lookup_failure(err, id))); });
}

void answer_cancel(registry_pointer self, caf::typed_response_promise<std::string> rp, const std::string& id,
                   const response_owner& owner) {
  static const problem foreground{errc::bad_request, "Only responses created with background=true can be cancelled.",
                                  {}, {}};
  auto store = self->state.env->store;
  auto cannot = [](rs::response_status status) {
    return problem{errc::bad_request, "Cannot cancel a " + std::string(rs::to_string(status)) + " response.", {}, {}};
  };
  self->request(store, store_timeout, get_response_atom::value, id, owner)
    .then(
      [=](response_row& row) mutable {
        if (!row.background) {
          rp.deliver(make_error(foreground));
          return;
        }
        if (row.status == rs::response_status::cancelled) {
          rp.deliver(row.snapshot);
          return;
        }
        auto run = find_live(self->state, id);
        if (!rs::in_flight(row.status)) {
          rp.deliver(make_error(cannot(row.status)));
          return;
        }
        if (!run) {
          rp.deliver(row.snapshot);
          return;
        }
        self->request(run, store_timeout, cancel_atom::value)
          .then([=](std::string& snapshot) mutable { rp.deliver(std::move(snapshot)); },
                [=](caf::error&) mutable {
                  // The run ended meanwhile: what it stored is the answer.
                  self->request(store, store_timeout, get_response_atom::value, id, owner)
                    .then(
                      [=](response_row& now) mutable {
                        if (now.status == rs::response_status::cancelled) {
                          rp.deliver(now.snapshot);
                          return;
                        }
                        rp.deliver(make_error(cannot(now.status)));
                      },
                      [=](caf::error& err) mutable { rp.deliver(make_error(store_failure(err))); });
                });
      },
      [=](caf::error& err) mutable {
        if (code_of(err) == errc::not_found && find_live(self->state, id, &owner)) {
          rp.deliver(make_error(foreground));
          return;
        }
        rp.deliver(make_error(lookup_failure(err, id)));
      });
}

void answer_delete(registry_pointer self, caf::typed_response_promise<bool> rp, const std::string& id,
                   const response_owner& owner) {
  auto store = self->state.env->store;
  self->request(store, store_timeout, get_response_atom::value, id, owner)
    .then(
      [=](response_row& row) mutable {
        if (rs::in_flight(row.status)) {
          rp.deliver(make_error(
            problem{errc::bad_request, "Cannot delete a response that is still in progress; cancel it first.", {}, {}}));
          return;
        }
        self->request(store, store_timeout, delete_response_atom::value, id, owner)
          .then([=](bool deleted) mutable { rp.deliver(deleted); },
                [=](caf::error& err) mutable { rp.deliver(make_error(store_failure(err))); });
      },
      [=](caf::error& err) mutable { rp.deliver(make_error(lookup_failure(err, id))); });
}

// A conversation edit, unless a response holds the conversation (RS-54).
template <class T, class... Ts>
caf::result<T> edit_conversation(registry_pointer self, const std::string& id, const response_owner& owner,
                                 Ts... xs) {
  if (conversation_busy(self->state, owner, id))
    return make_error(conversation_locked(id));
  auto rp = self->make_response_promise<T>();
  self->request(self->state.env->store, store_timeout, xs...)
    .then([=](T& value) mutable { rp.deliver(std::move(value)); },
          [=](caf::error& err) mutable { rp.deliver(make_error(conversation_failure(err, id))); });
  return rp;
}

registry_impl::behavior_type response_registry(registry_pointer self, std::shared_ptr<const response_environment> env,
                                               response_registry_options options) {
  self->state.env = std::move(env);
  self->state.options = std::move(options);
  return {
    [=](create_response_atom, response_job& job, sink_opener& open_sink) -> caf::result<response_answer> {
      auto id = job.id;
      if (self->state.options.node_id)
        job.node_id = self->state.options.node_id();
      auto rp = self->make_response_promise<response_answer>();
      self->state.creating.emplace(id, creation{std::move(job), std::move(open_sink), rp});
      rehydrate(self, id);
      return rp;
    },
    [=](disconnect_atom, const std::string& id) {
      if (auto run = find_live(self->state, id))
        return self->send(run, disconnect_atom::value);
      auto c = self->state.creating.find(id);
      if (c != self->state.creating.end() && !c->second.job.req.background) // RS-42: nobody waits for it
        refuse(self, id, {errc::cancelled, "The client went away.", {}, {}});
    },
    [=](get_response_atom, const std::string& id, const response_owner& owner) -> caf::result<std::string> {
      auto rp = self->make_response_promise<std::string>();
      answer_get(self, rp, id, owner);
      return rp;
    },
    [=](subscribe_atom, const std::string& id, const response_owner& owner, int64_t after,
        caf::actor& relay) -> caf::result<response_replay> {
      auto rp = self->make_response_promise<response_replay>();
      answer_replay(self, rp, id, owner, after, std::move(relay));
      return rp;
    },
    [=](subscribe_atom, const std::string& id, int64_t after, caf::actor& relay) {
      auto run = find_live(self->state, id);
      if (run)
        caf::anon_send(run, subscribe_atom::value, std::move(relay), after);
      return static_cast<bool>(run);
    },
    [=](cancel_atom, const std::string& id, const response_owner& owner) -> caf::result<std::string> {
      auto rp = self->make_response_promise<std::string>();
      answer_cancel(self, rp, id, owner);
      return rp;
    },
    [=](delete_response_atom, const std::string& id, const response_owner& owner) -> caf::result<bool> {
      auto rp = self->make_response_promise<bool>();
      answer_delete(self, rp, id, owner);
      return rp;
    },
    [=](compact_atom, rs::request& req, const response_owner& owner) {
      return self->delegate(spawn_response_compaction(self->system(), self->state.env), compact_atom::value,
                            std::move(req), owner);
    },
    [=](add_conversation_items_atom, const std::string& id, const response_owner& owner,
        std::vector<stored_item>& items) -> caf::result<std::vector<stored_item>> {
      return edit_conversation<std::vector<stored_item>>(self, id, owner, add_conversation_items_atom::value, id,
                                                         owner, std::move(items));
    },
    [=](remove_conversation_item_atom, const std::string& id, const response_owner& owner,
        const std::string& item_id) -> caf::result<conversation_row> {
      return edit_conversation<conversation_row>(self, id, owner, remove_conversation_item_atom::value, id, owner,
                                                 item_id);
    },
    [=](run_ended_atom, const std::string& id) { forget(self, id); },
    [=](status_atom, const std::string& id) { settle_discovery(self, id, false); },
    [=](timeout_atom, const std::string& id) { settle_discovery(self, id, true); },
    [=](run_end_atom, const std::string& id, response_end& end) {
      auto& st = self->state;
      auto it = st.awaited.find(id);
      if (it == st.awaited.end())
        return;
      it->second.deliver(response_answer{false, std::move(end)});
      st.awaited.erase(it);
    },
  };
}

} // namespace

problem store_failure(const caf::error& err) {
  auto code = code_of(err);
  if (code == errc::not_found)
    return rs::not_found(message_of(err));
  if (code == errc::conflict)
    return {errc::bad_request, message_of(err), {}, {}};
  return {errc::internal, message_of(err), {}, "server_error"};
}

problem conversation_failure(const caf::error& err, const std::string& id) {
  if (problem_of(err).kind == missing_conversation)
    return rs::not_found("Conversation with id '" + id + "' not found.");
  if (code_of(err) == errc::conflict)
    return {errc::bad_request, message_of(err), "items", "item_already_in_conversation"};
  return store_failure(err);
}

response_registry_actor spawn_response_registry(caf::actor_system& sys, std::shared_ptr<const response_environment> env,
                                                response_registry_options options) {
  return caf::actor_cast<response_registry_actor>(sys.spawn(response_registry, std::move(env), std::move(options)));
}

} // namespace troupe

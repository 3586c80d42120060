// One reflexr.v1 WebSocket connection (workspace-stream.md §4): authentication before any frame, the
// hello and its resume decision, replay, live events pulled from the log's ring, and commands whose
// results follow the events they caused (WS-132). Each connection is an actor; the socket is the
// edge's `websocket`.
#include "io/workspace_surface.hpp"

#include "protocol/json.hpp"
#include "protocol/workspace_stream.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace troupe::io {

namespace {

namespace rx = protocol::reflexr;

constexpr const char* hello_first = "the first frame must be hello";
// Room above the event bound for the frames that are not events (welcome, replay_complete,
// results, errors), which are sent when they are due rather than pulled.
constexpr std::size_t control_frames = 64;
constexpr std::size_t page_limit = 256;
constexpr auto drain_poll = std::chrono::milliseconds(2);

enum class phase { hello, live, closed };

struct pending_result {
  int64_t after_seq;
  std::string frame;
};

struct socket_state {
  static inline const char* name = "workspace_socket";
  std::shared_ptr<const workspace_surface> surface;
  std::shared_ptr<websocket> ws;
  rx::workspace_caller caller;
  workspace_key key;
  std::string traceparent; // the upgrade request's, parent of every append this connection makes
  phase at = phase::hello;
  std::optional<std::set<std::string>> types; // null: every type
  ring_ptr ring;
  int64_t position = 0;   // every seq up to here is sent or skipped
  int64_t known_head = 0; // the log's head as last heard
  int64_t replay_upto = 0;
  bool replaying = true;
  bool reading_store = false;
  bool drain_scheduled = false;
  std::size_t outbox = 1000;
  caf::timespan stall_limit;
  std::optional<std::chrono::steady_clock::time_point> full_since; // the outbox full, nothing written
  std::deque<pending_result> results;
};

using socket_actor = caf::stateful_actor<socket_state>;

void close(socket_actor* self, uint16_t code, std::string reason) {
  auto& st = self->state;
  if (st.at == phase::closed)
    return;
  st.at = phase::closed;
  st.ws->close(code, std::move(reason));
}

void send_frame(socket_actor* self, std::string frame) {
  if (self->state.at != phase::closed && !self->state.ws->send(std::move(frame)))
    close(self, 4429, "the client is not keeping up");
}

std::string error_frame(const std::string& message) {
  return protocol::json::object([&](protocol::json::writer& w) {
    w.Key("type");
    w.String("error");
    w.Key("message");
    w.String(message);
  });
}

// Results whose events have gone out follow them (WS-132).
void release_results(socket_actor* self) {
  auto& st = self->state;
  for (auto it = st.results.begin(); it != st.results.end() && st.at != phase::closed;) {
    if (it->after_seq <= st.position) {
      send_frame(self, std::move(it->frame));
      it = st.results.erase(it);
    } else {
      ++it;
    }
  }
}

// One envelope reaches the client, or is skipped by its types. pump() pulls only what fits, so a
// frame that does not fit is a fault of the edge's, closed 4429 all the same (WS-56).
void deliver(socket_actor* self, int64_t seq, const std::string& frame, const std::string& type) {
  auto& st = self->state;
  if (st.at == phase::closed || seq <= st.position)
    return;
  if (!st.types || st.types->count(type)) {
    if (st.ws->queued() >= st.outbox || !st.ws->send(frame)) {
      close(self, 4429, "the client is not keeping up");
      return;
    }
  }
  st.position = seq;
}

void after_progress(socket_actor* self) {
  auto& st = self->state;
  if (st.at == phase::closed)
    return;
  if (st.replaying && st.position >= st.replay_upto) {
    st.replaying = false;
    send_frame(self, protocol::json::object([&](protocol::json::writer& w) {
      w.Key("type");
      w.String("replay_complete");
      w.Key("up_to_seq");
      w.Int64(st.replay_upto);
    }));
  }
  release_results(self);
}

void pump(socket_actor* self);

// How far the next page may reach: a replay stops at its head, so replay_complete comes between the
// replayed events and anything appended since (WS-54).
int64_t replay_bound(const socket_state& st) {
  return st.replaying ? std::min(st.replay_upto, st.known_head) : st.known_head;
}

// Behind the ring: a page of the log from the store, unfiltered so the position moves past
// envelopes the types skip.
void read_store(socket_actor* self, std::size_t limit) {
  auto& st = self->state;
  st.reading_store = true;
  workspace_read r;
  r.after_seq = st.position;
  r.before_seq = replay_bound(st) + 1;
  r.limit = static_cast<int64_t>(limit);
  self->request(st.surface->logs, std::chrono::seconds(60), read_atom::value, st.key, r)
    .then(
      [=](workspace_slice& slice) {
        self->state.reading_store = false;
        for (std::size_t i = 0; i < slice.envelopes.size(); ++i)
          deliver(self, slice.seqs[i], rx::event_frame(slice.envelopes[i]), slice.types[i]);
        after_progress(self);
        if (!slice.envelopes.empty())
          pump(self);
      },
      [=](caf::error&) { close(self, 1011, "the log could not be read"); });
}

// Waits for the client to take frames from a full outbox. A client that takes none for
// client_stall_timeout while more is waiting is not keeping up (WS-56, WS-133).
void await_room(socket_actor* self) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  if (!st.full_since)
    st.full_since = now;
  else if (now - *st.full_since >= st.stall_limit)
    return close(self, 4429, "the client is not keeping up");
  if (!st.drain_scheduled) {
    st.drain_scheduled = true;
    self->delayed_send(self, drain_poll, drained_atom::value);
  }
}

// Sends what the client has not seen, up to the known head. One rule for replay and live: events
// are pulled from the ring (or the store) only into the room the outbox has, so a batch of any size
// goes at the client's pace, and only a client that stops taking frames is closed 4429.
void pump(socket_actor* self) {
  auto& st = self->state;
  while (st.at == phase::live && !st.reading_store && st.position < st.known_head) {
    auto bound = replay_bound(st);
    if (bound <= st.position)
      return;
    auto queued = st.ws->queued();
    if (queued >= st.outbox)
      return await_room(self);
    st.full_since.reset();
    std::size_t limit = std::min<std::size_t>({static_cast<std::size_t>(bound - st.position), page_limit,
                                               st.outbox - queued});
    std::vector<envelope_ring::entry> entries;
    if (!st.ring->after(st.position, bound, limit, entries)) {
      read_store(self, limit);
      return;
    }
    if (entries.empty())
      return;
    for (auto& e : entries)
      deliver(self, e.seq, *e.frame, e.type);
    after_progress(self);
  }
}

void on_hello(socket_actor* self, const std::string& text, bool binary) {
  auto& st = self->state;
  if (binary)
    return close(self, 4400, hello_first);
  auto parsed = protocol::parse_hello(text);
  if (auto bad = std::get_if<protocol::hello_rejection>(&parsed))
    return close(self, 4400, bad->reason);
  auto hello = std::get<protocol::hello_frame>(std::move(parsed));
  if (hello.types)
    st.types.emplace(hello.types->begin(), hello.types->end());
  st.at = phase::live; // later frames are commands, even while the subscription is set up
  // The head comes with the subscription (WS-50); nothing else is handled until it arrives.
  self->request(st.surface->logs, std::chrono::seconds(60), subscribe_atom::value, st.key, caf::actor_cast<caf::actor>(self))
    .await(
      [=](int64_t head, ring_ptr& ring) {
        auto& st = self->state;
        st.ring = std::move(ring);
        auto decision = std::get<protocol::resume_decision>(protocol::resume(hello, head));
        st.position = decision.replay_after;
        st.known_head = std::max(head, st.ring->head());
        st.replay_upto = head;
        send_frame(self, protocol::json::object([&](protocol::json::writer& w) {
          w.Key("type");
          w.String("welcome");
          w.Key("protocol");
          w.String(protocol::stream_protocol);
          w.Key("workspace_id");
          w.String(st.key.workspace);
          w.Key("head_seq");
          w.Int64(head);
          w.Key("reset");
          w.Bool(decision.reset);
        }));
        after_progress(self);
        pump(self);
      },
      [=](caf::error&) { close(self, 1011, "the workspace log is unavailable"); });
}

void on_command(socket_actor* self, const std::string& text, bool binary) {
  auto& st = self->state;
  if (binary)
    return send_frame(self, error_frame("not a command frame: a frame must be text"));
  auto parsed = rx::parse_command_frame(text, *st.surface->types);
  if (auto bad = std::get_if<rx::problems>(&parsed))
    return send_frame(self, error_frame("not a command frame: " + rx::first_problem(*bad)));
  auto command = address_command(*st.surface, st.caller, st.key, std::get<rx::command_request>(std::move(parsed)),
                                 st.traceparent);
  auto id = command.request.command_id;
  self->request(st.surface->logs, std::chrono::seconds(60), command_atom::value, std::move(command))
    .then(
      [=](workspace_outcome& o) {
        auto& st = self->state;
        st.results.push_back({o.ok ? o.max_seq : 0, std::move(o.body)});
        after_progress(self);
      },
      [=](caf::error&) { send_frame(self, error_frame("command " + id + " failed on the server")); });
}

caf::behavior workspace_socket(socket_actor* self, std::shared_ptr<const workspace_surface> surface,
                               std::shared_ptr<websocket> ws, rx::workspace_caller caller, workspace_key key,
                               std::string traceparent) {
  auto& st = self->state;
  st.traceparent = std::move(traceparent);
  st.surface = std::move(surface);
  st.ws = std::move(ws);
  st.caller = std::move(caller);
  st.key = std::move(key);
  st.outbox = static_cast<std::size_t>(st.surface->config.outbox_frames);
  st.stall_limit = std::chrono::duration_cast<caf::timespan>(
    std::chrono::duration<double>(st.surface->config.client_stall_timeout));
  auto actor = caf::actor_cast<caf::actor>(self);
  st.ws->start({[actor](std::string data, bool binary) { caf::anon_send(actor, frame_atom::value, std::move(data), binary); },
                [actor] { caf::anon_send(actor, closed_atom::value); }});
  self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::duration<double>(st.surface->config.hello_timeout)),
                     timeout_atom::value);
  return {
    [=](frame_atom, const std::string& data, bool binary) {
      switch (self->state.at) {
      case phase::hello:
        return on_hello(self, data, binary);
      case phase::live:
        return on_command(self, data, binary);
      case phase::closed:
        return;
      }
    },
    [=](wake_atom, int64_t head) {
      self->state.known_head = std::max(self->state.known_head, head);
      pump(self);
    },
    [=](drained_atom) {
      self->state.drain_scheduled = false;
      pump(self);
    },
    [=](timeout_atom) {
      if (self->state.at == phase::hello)
        close(self, 4408, "hello was not received in time");
    },
    [=](closed_atom) {
      self->state.at = phase::closed;
      self->quit();
    },
  };
}

} // namespace

void open_workspace_stream(std::shared_ptr<const workspace_surface> s, const http_request& req,
                           std::shared_ptr<http_exchange> ex) {
  // WS-44: the subprotocol is selected only when the client offers it.
  bool offered = false;
  auto& header = req.header("sec-websocket-protocol");
  for (std::size_t start = 0; start <= header.size();) {
    auto comma = header.find(',', start);
    auto item = header.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    offered = offered || item == protocol::stream_protocol;
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  auto outbox = static_cast<std::size_t>(s->config.outbox_frames) + control_frames;
  auto ws = ex->upgrade(offered ? protocol::stream_protocol : "", outbox);
  if (!ws)
    return ex->respond(error_response(protocol::dialect::reflexr,
                                      {errc::upgrade_required, "this endpoint is a WebSocket: connect with Upgrade: websocket"}));
  if (req.cross_origin) // CO-10: a page of another origin gets the upgrade (WS-44), then this close
    return ws->close(4403, "Cross-origin request refused");
  // WS-45: authentication and authorization come before any frame is read.
  auto& workspace_id = req.params.at("workspace_id");
  auto caller = rx::authenticate(req.header("authorization"), s->config, s->service_tokens, s->open);
  if (!caller)
    return ws->close(4401, "unauthorized");
  if (!rx::is_workspace_id(workspace_id) || !rx::may_use(*caller, workspace_id))
    return ws->close(4403, rx::not_yours_message);
  workspace_key key{caller->tenant, workspace_id};
  s->sys->spawn(workspace_socket, s, std::move(ws), std::move(*caller), std::move(key), req.header("traceparent"));
}

} // namespace troupe::io

#include "actors/response_compaction.hpp"

#include "actors/errors.hpp"
#include "protocol/ids.hpp"
#include "protocol/json.hpp"

#include <caf/all.hpp>

#include <chrono>

namespace troupe {

namespace {

namespace rs = protocol::responses;

constexpr auto store_timeout = std::chrono::seconds(30);

struct compaction_state {
  static inline const char* name = "response_compaction";
  std::shared_ptr<const response_environment> env;
  caf::typed_response_promise<std::string> answer;
  rs::request req;
  response_owner owner;
  std::vector<rs::item> history;
  std::string summary;
  rs::usage tokens;
  std::shared_ptr<model_round> round;
};

using compaction_pointer = response_compaction_actor::stateful_pointer<compaction_state>;

int64_t epoch_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void fail(compaction_pointer self, problem why) {
  self->state.answer.deliver(make_error(std::move(why)));
  self->quit();
}

void summarize(compaction_pointer self) {
  auto& st = self->state;
  auto history = st.history;
  history.insert(history.end(), st.req.input.begin(), st.req.input.end());
  st.history = history;
  history.push_back(rs::compaction_request());
  rs::round_request r;
  rs::fill_round(r, st.req);
  r.history = std::move(history);
  r.max_output_tokens = st.env->loop.summary_tokens;
  r.stream = false;
  response_compaction_actor me = self;
  st.round = st.env->model->open(r, [me](std::vector<rs::upstream_event> events) {
    caf::anon_send(me, upstream_atom::value, uint64_t{0}, std::move(events));
  });
}

void store_compacted(compaction_pointer self) {
  auto& st = self->state;
  auto output = rs::compacted_window(st.history, st.summary);
  auto id = protocol::uuid7_id("resp_");
  auto created = epoch_seconds();
  auto snapshot = protocol::json::object([&](protocol::json::writer& w) {
    w.Key("id");
    w.String(id.c_str());
    w.Key("object");
    w.String("response.compaction");
    w.Key("created_at");
    w.Int64(created);
    w.Key("output");
    w.StartArray();
    for (auto& it : output)
      rs::write_item(w, it);
    w.EndArray();
    w.Key("usage");
    rs::write_usage(w, st.tokens);
  });
  response_commit c;
  c.response.id = id;
  c.response.created_at = created;
  c.response.status = rs::response_status::completed;
  c.response.model = st.req.model;
  c.response.snapshot = snapshot;
  for (auto& it : output) {
    c.response.history_item_ids.push_back(it.id);
    c.items.push_back({it.id, rs::to_json(it)});
  }
  c.response.input_count = static_cast<int64_t>(output.size());
  c.response.previous_response_id = st.req.previous_response_id;
  c.response.owner = st.owner.key;
  self->request(st.env->store, store_timeout, save_response_atom::value, std::move(c))
    .then(
      [=](int64_t) {
        self->state.answer.deliver(snapshot);
        self->quit();
      },
      [=](caf::error& err) { fail(self, store_failure(err)); });
}

// The history the summary continues (RS-20), then the summary round.
void begin(compaction_pointer self) {
  auto& st = self->state;
  if (st.req.previous_response_id.empty())
    return summarize(self);
  auto prev = st.req.previous_response_id;
  auto store = st.env->store;
  self->request(store, store_timeout, get_response_atom::value, prev, st.owner)
    .then(
      [=](response_row& row) {
        self->request(store, store_timeout, get_items_atom::value, row.history_item_ids, self->state.owner)
          .then(
            [=](std::vector<stored_item>& items) {
              for (auto& s : items)
                if (auto it = rs::item_from_json(s.json))
                  self->state.history.push_back(std::move(*it));
              summarize(self);
            },
            [=](caf::error& err) { fail(self, store_failure(err)); });
      },
      [=](caf::error&) {
        fail(self, {errc::bad_request, "Previous response with id '" + prev + "' not found.", "previous_response_id",
                    "previous_response_not_found"});
      });
}

response_compaction_actor::behavior_type compaction(compaction_pointer self,
                                                    std::shared_ptr<const response_environment> env) {
  self->state.env = std::move(env);
  return {
    [=](compact_atom, rs::request& req, const response_owner& owner) -> caf::result<std::string> {
      auto& st = self->state;
      st.req = std::move(req);
      st.owner = owner;
      st.answer = self->make_response_promise<std::string>();
      begin(self);
      return st.answer;
    },
    [=](upstream_atom, uint64_t, std::vector<rs::upstream_event>& events) {
      auto& st = self->state;
      for (auto& e : events) {
        using kind = rs::upstream_event::kind;
        if (e.what == kind::text)
          st.summary += e.text;
        else if (e.what == kind::finish)
          st.tokens += e.tokens;
        else if (e.what == kind::failure) {
          auto said = e.upstream_message.empty() ? e.text : e.upstream_message;
          auto why = rs::upstream_failure("The summary call failed: " + said, e.http_status, true, e.retry_after_seconds);
          why.kind = "server_error";
          return fail(self, std::move(why));
        }
        if (e.what == kind::finish)
          return store_compacted(self);
      }
      if (st.round)
        st.round->resume();
    },
  };
}

} // namespace

response_compaction_actor spawn_response_compaction(caf::actor_system& sys,
                                                    std::shared_ptr<const response_environment> env) {
  return sys.spawn(compaction, std::move(env));
}

} // namespace troupe

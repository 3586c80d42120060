// The workspace store's operations (io/workspace_store_db.hpp), once for both engines.
#include "io/workspace_store_db.hpp"

#include "actors/errors.hpp"
#include "io/pg_connection.hpp"
#include "io/sqlite_support.hpp"
#include "io/workspace_store_statements.hpp"
#include "protocol/json.hpp"
#include "protocol/workspace_record.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <type_traits>

namespace troupe::io::workspace_store {

namespace rx = protocol::reflexr;

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

template <class Conn>
class workspace_db<Conn>::reader : public rx::log_reader {
public:
  reader(workspace_db& db, const workspace_key& key) : db_(db), key_(key) {}

  int64_t head() override { return db_.head(key_); }

  std::string last_ts() override {
    auto q = db_.sql(workspace_sql::last_ts);
    q.bind(1, key_.tenant).bind(2, key_.workspace);
    return q.row() ? q.text(0) : std::string();
  }

  std::optional<rx::chain_link> find(const std::string& id) override {
    auto q = db_.sql(workspace_sql::find_event);
    q.bind(1, key_.tenant).bind(2, key_.workspace).bind(3, id);
    if (!q.row())
      return std::nullopt;
    return rx::chain_link{q.integer(0), q.text(1)};
  }

private:
  workspace_db& db_;
  const workspace_key& key_;
};

template <class Conn>
caf::error workspace_db<Conn>::failed(const char* what) const {
  return make_error(errc::unavailable, std::string("workspace store: ") + what + ": " + error());
}

template <class Conn>
int64_t workspace_db<Conn>::head(const workspace_key& key) {
  auto q = sql(workspace_sql::head);
  q.bind(1, key.tenant).bind(2, key.workspace);
  return q.row() ? q.integer(0) : 0;
}

template <class Conn>
workspace_owner workspace_db<Conn>::lock_head(const workspace_key& key) {
  auto q = sql(workspace_sql::lock_head);
  q.bind(1, key.tenant).bind(2, key.workspace);
  if (!q.row())
    return {};
  return {q.text(1), q.integer(2)};
}

template <class Conn>
std::optional<workspace_outcome> workspace_db<Conn>::remembered(const workspace_command& c) {
  auto q = sql(workspace_sql::remembered_result);
  q.bind(1, c.key.tenant).bind(2, c.key.workspace).bind(3, c.participant).bind(4, c.request.command_id);
  if (!q.row())
    return std::nullopt;
  workspace_outcome out;
  out.code = errc_named(q.text(0)).value_or(errc::internal);
  out.ok = q.integer(1) != 0;
  out.max_seq = q.integer(2);
  out.body = q.text(3);
  out.remembered = true;
  return out;
}

template <class Conn>
outcome<workspace_outcome> workspace_db<Conn>::carry_out(const workspace_command& c) {
  // Held before the key is looked up, so a command sent twice at once is carried out once.
  auto owner = lock_head(c.key);
  if (c.fence.epoch != 0 && (owner.node_id != c.fence.node_id || owner.epoch != c.fence.epoch))
    return make_error(problem{errc::conflict, "workspace " + c.key.workspace + " has another owner now", {},
                              ownership_lost});
  bool keyed = !c.request.command_id.empty();
  if (keyed)
    if (auto first = remembered(c))
      return std::move(*first);
  reader log(*this, c.key);
  auto record = rx::record_of(c.request, rx::carry_out(c.request, c.context, log));
  workspace_outcome out;
  out.code = record.code;
  out.ok = record.ok;
  out.max_seq = record.max_seq;
  out.body = std::move(record.body);
  for (std::size_t i = 0; i < record.appended.size(); ++i) {
    auto& e = record.appended[i];
    auto q = sql(workspace_sql::append_envelope);
    q.bind(1, c.key.tenant).bind(2, c.key.workspace).bind(3, e.seq).bind(4, e.id).bind(5, e.type).bind(6, e.ts);
    q.bind(7, e.correlation_id).bind(8, record.appended_json[i]);
    if (!q.done())
      return failed("appending an event");
    if (out.appended.empty())
      out.first_seq = e.seq;
    out.appended.push_back(std::move(record.appended_json[i]));
    out.types.push_back(e.type);
  }
  if (keyed) {
    auto q = sql(workspace_sql::remember_result);
    q.bind(1, c.key.tenant).bind(2, c.key.workspace).bind(3, c.participant).bind(4, c.request.command_id);
    q.bind(5, std::string(to_string(out.code))).bind(6, int64_t{out.ok}).bind(7, out.max_seq).bind(8, out.body);
    q.bind(9, std::optional<double>(now_seconds()));
    if (!q.done())
      return failed("remembering a command's result");
  }
  return out;
}

template <class Conn>
workspace_slice workspace_db<Conn>::read(const workspace_key& key, const workspace_read& r) {
  std::string types = "[";
  for (std::size_t i = 0; i < r.types.size(); ++i)
    types += (i ? "," : "") + protocol::json::quote(r.types[i]);
  types += "]";
  auto q = sql(r.from_end ? workspace_sql::read_descending : workspace_sql::read_ascending);
  q.bind(1, key.tenant).bind(2, key.workspace).bind(3, r.after_seq);
  q.bind(4, r.before_seq > 0 ? r.before_seq : std::numeric_limits<int64_t>::max()).bind(5, types).bind(6, r.limit);
  workspace_slice out;
  while (q.row()) {
    out.seqs.push_back(q.integer(0));
    out.envelopes.push_back(q.text(1));
    out.types.push_back(q.text(2));
  }
  if (r.from_end) {
    std::reverse(out.seqs.begin(), out.seqs.end());
    std::reverse(out.envelopes.begin(), out.envelopes.end());
    std::reverse(out.types.begin(), out.types.end());
  }
  return out;
}

template <class Conn>
void workspace_db<Conn>::prune(double retention) {
  auto q = sql(workspace_sql::prune_results);
  q.bind(1, std::optional<double>(now_seconds() - retention));
  q.done();
}

template <class Conn>
outcome<workspace_owner> workspace_db<Conn>::own(const workspace_key& key, const std::string& node_id) {
  if constexpr (!std::is_same_v<Conn, pg::connection>) {
    return make_error(errc::internal, "workspace store: an embedded store has no owners");
  } else {
    auto q = sql(workspace_sql::take_owner);
    q.bind(1, key.tenant).bind(2, key.workspace).bind(3, node_id);
    if (!q.row())
      return workspace_owner{}; // a race with another node's take: the caller asks again
    return workspace_owner{q.text(0), q.integer(1)};
  }
}

template <class Conn>
outcome<bool> workspace_db<Conn>::disown(const workspace_key& key, const workspace_owner& owner) {
  if constexpr (!std::is_same_v<Conn, pg::connection>) {
    return make_error(errc::internal, "workspace store: an embedded store has no owners");
  } else {
    sql(workspace_sql::give_up_owner).bind(1, key.tenant).bind(2, key.workspace).bind(3, owner.node_id)
      .bind(4, owner.epoch).done();
    return this->changes() == 1;
  }
}

template class workspace_db<sqlite::connection>;
template class workspace_db<pg::connection>;

} // namespace troupe::io::workspace_store

#include "io/pg_wakeups.hpp"

#include "protocol/cluster.hpp"

#include <caf/all.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <map>
#include <utility>

namespace troupe::io {

namespace {

using flush_wakeups_atom = caf::atom_constant<caf::atom("flush_wake")>;

struct notifier_state {
  static inline const char* name = "pg_notifier";
  std::string conninfo;
  caf::timespan coalesce{};
  std::unique_ptr<pqxx::connection> conn;
  std::map<std::pair<std::string, std::string>, std::string> pending; // (channel, subject) → payload
  bool armed = false;
  bool failing = false; // logged once until a send works again
};

void send_pending(notifier_state& st) {
  auto pending = std::move(st.pending);
  st.pending.clear();
  try {
    if (!st.conn || !st.conn->is_open())
      st.conn = std::make_unique<pqxx::connection>(st.conninfo);
    pqxx::nontransaction tx(*st.conn);
    for (auto& [to, payload] : pending) {
      // PostgreSQL refuses a longer payload, and the error would drop the rest: this one alone is
      // left to the listeners' poll.
      if (payload.size() > protocol::max_wakeup_payload) {
        spdlog::warn("cluster: a {}-byte wake-up on {} is over PostgreSQL's {} bytes; the others find it at "
                     "their next poll", payload.size(), to.first, protocol::max_wakeup_payload);
        continue;
      }
      tx.exec_params("SELECT pg_notify($1, $2)", to.first, payload);
    }
    st.failing = false;
  } catch (const std::exception& e) {
    st.conn.reset();
    if (!st.failing)
      spdlog::warn("cluster: wake-ups not sent ({}); the other nodes find the work at their next poll", e.what());
    st.failing = true;
  }
}

} // namespace

notifier_actor spawn_pg_notifier(caf::actor_system& sys, std::string url, pg::session_limits limits,
                                 double coalesce_seconds) {
  auto coalesce = std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(coalesce_seconds));
  auto conninfo = pg::connection_url(url, limits, "troupe-notify");
  // Detached: sending blocks on the database.
  return caf::actor_cast<notifier_actor>(sys.spawn<caf::detached>(
    [](caf::stateful_actor<notifier_state>* self, std::string conninfo, caf::timespan coalesce) -> caf::behavior {
      self->state.conninfo = std::move(conninfo);
      self->state.coalesce = coalesce;
      // What a leaving node told last (its handback) still goes out.
      self->set_exit_handler([=](caf::exit_msg& msg) {
        if (!self->state.pending.empty())
          send_pending(self->state);
        self->quit(msg.reason);
      });
      return {
        [=](notify_atom, std::string& channel, std::string& subject, std::string& payload) {
          auto& st = self->state;
          st.pending[{std::move(channel), std::move(subject)}] = std::move(payload);
          if (st.armed)
            return;
          st.armed = true;
          self->delayed_send(self, st.coalesce, flush_wakeups_atom::value);
        },
        [=](flush_wakeups_atom) {
          self->state.armed = false;
          send_pending(self->state);
        },
      };
    },
    std::move(conninfo), coalesce));
}

pg_listener::pg_listener(std::string url, pg::session_limits limits, std::vector<std::string> channels,
                         double poll_seconds, wake_function wake)
  : url_(std::move(url)),
    limits_(limits),
    channels_(std::move(channels)),
    poll_seconds_(poll_seconds),
    wake_(std::move(wake)),
    thread_([this] { run(); }) {}

pg_listener::~pg_listener() {
  stopping_ = true;
  if (thread_.joinable())
    thread_.join();
}

namespace {

class receiver : public pqxx::notification_receiver {
public:
  receiver(pqxx::connection_base& c, const std::string& channel, const pg_listener::wake_function& wake)
    : pqxx::notification_receiver(c, channel), wake_(wake) {}
  void operator()(const std::string& payload, int) override { wake_(channel(), payload); }

private:
  const pg_listener::wake_function& wake_;
};

using clock = std::chrono::steady_clock;

clock::duration span(double seconds) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
}

} // namespace

// Listens until the connection is lost (true) or the listener stops (false); polls meanwhile.
bool pg_listener::listen_until_lost() {
  pqxx::connection conn(pg::connection_url(url_, limits_, "troupe-listen"));
  std::vector<std::unique_ptr<receiver>> receivers;
  for (auto& channel : channels_)
    receivers.push_back(std::make_unique<receiver>(conn, channel, wake_)); // LISTEN channel
  wake_("", ""); // what was notified while nothing listened
  auto next_poll = clock::now() + span(poll_seconds_);
  while (!stopping_) {
    conn.await_notification(0, 200'000); // a lost connection throws
    if (!conn.is_open())
      return true;
    if (clock::now() >= next_poll) {
      wake_("", "");
      next_poll = clock::now() + span(poll_seconds_);
    }
  }
  return false;
}

void pg_listener::run() {
  double backoff = 0.1;
  auto next_poll = clock::now() + span(poll_seconds_);
  while (!stopping_) {
    try {
      if (!listen_until_lost())
        return;
      spdlog::warn("cluster: the LISTEN connection closed; reconnecting");
      backoff = 0.1;
    } catch (const std::exception& e) {
      spdlog::warn("cluster: the LISTEN connection failed ({}); reconnecting in {} s, polling meanwhile", e.what(),
                   backoff);
    }
    // Until it listens again the node polls; the wait ends early when the listener stops.
    auto until = clock::now() + span(backoff);
    while (!stopping_ && clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (clock::now() >= next_poll) {
        wake_("", "");
        next_poll = clock::now() + span(poll_seconds_);
      }
    }
    backoff = std::min(backoff * 2, std::max(poll_seconds_, 0.1));
  }
}

} // namespace troupe::io

// CJ-10 on PostgreSQL: the notifier that sends a node's wake-ups and the listener that receives the
// others', each on a connection of its own so that neither waits behind the stores' work.
#pragma once

#include "actors/wakeups.hpp"
#include "io/pg_session.hpp"

#include <caf/actor_system.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace troupe::io {

// Sends pg_notify for each distinct (channel, payload) told within `coalesce_seconds`, outside any data
// transaction. A failure drops those wake-ups (the listeners' polls cover them) and reconnects next
// time.
notifier_actor spawn_pg_notifier(caf::actor_system& sys, std::string url, pg::session_limits limits,
                                 double coalesce_seconds);

// LISTENs on `channels` on its own connection (application_name troupe-listen) and calls
// `wake(channel, payload)` on each notification, and `wake("", "")` every `poll_seconds` and right
// after it (re)connects, for what was sent meanwhile. A lost connection is reconnected with backoff;
// `wake` is called from its thread.
class pg_listener {
public:
  using wake_function = std::function<void(const std::string& channel, const std::string& payload)>;
  pg_listener(std::string url, pg::session_limits limits, std::vector<std::string> channels, double poll_seconds,
              wake_function wake);
  ~pg_listener(); // stops listening and joins its thread
  pg_listener(const pg_listener&) = delete;
  pg_listener& operator=(const pg_listener&) = delete;

private:
  void run();
  bool listen_until_lost(); // false once stopped

  std::string url_;
  pg::session_limits limits_;
  std::vector<std::string> channels_;
  double poll_seconds_;
  wake_function wake_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

} // namespace troupe::io

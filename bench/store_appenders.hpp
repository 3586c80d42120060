// Durable event appends through a run store's port, as run attempts make them: one appender actor per
// run, each sending its next event once the previous one was acknowledged, all started together.
// Shared by the SQLite (bench/store_append.cpp) and PostgreSQL (bench/pg_store.cpp) store benchmarks.
#pragma once

#include "actors/store.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/timestamp.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe::bench {

// A run id as long as a real one.
inline std::string run_id_of(int i) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "run_bench%06d%018d", i, i);
  return buf;
}

// A tool_result event as a run stores it: about 600 bytes of JSON.
inline stored_event make_event(const std::string& run_id, int64_t sequence) {
  protocol::agent_event e;
  e.type = "tool_result";
  e.sequence = sequence;
  e.run_id = run_id;
  e.session_id = "sess_3f9a1c0b7e2d4a6f8b5c";
  e.timestamp = protocol::iso_now();
  e.content = "notes/\nnotes/welcome.txt (19 bytes)\nreport.md (2048 bytes)\nsrc/main.py (733 bytes)\n";
  e.tool_name = "list_dir";
  e.tool_args = R"({"path":".","recursive":true})";
  e.tool_call_id = "call_" + std::to_string(sequence) + "_0";
  e.duration_ms = 1.37;
  e.metadata = R"({"iteration":3,"tool_status":"ok","truncated":false})";
  return {sequence, e.type, protocol::to_json(e)};
}

struct appends_result {
  std::vector<double> latency_ms; // per acknowledged append
  int errors = 0;                 // refused appends (each stops its run's appender)
  double wall_s = 0;              // from the start to the last appender's end
};

// What a benchmark's actors are told to start with, and what they report when done.
using go_atom = caf::atom_constant<caf::atom("bench_go")>;
using report_atom = caf::atom_constant<caf::atom("bench_rep")>;

namespace detail {

using steady = std::chrono::steady_clock;

struct appender_state {
  store_actor store;
  std::string run_id;
  int64_t epoch = 0;
  std::vector<stored_event> events;
  caf::actor report_to;
  std::size_t next = 0;
  int errors = 0;
  std::vector<double> latency_ms;
  steady::time_point sent;
};

using appender_pointer = caf::stateful_actor<appender_state>*;

inline void append_next(appender_pointer self) {
  auto& st = self->state;
  if (st.next == st.events.size()) {
    self->send(st.report_to, report_atom::value, std::move(st.latency_ms), st.errors,
               steady::now().time_since_epoch().count());
    self->quit();
    return;
  }
  st.sent = steady::now();
  self->request(st.store, caf::infinite, append_atom::value, st.run_id, st.epoch, st.events[st.next])
    .then(
      [=](bool) {
        auto& st = self->state;
        st.latency_ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - st.sent).count());
        ++st.next;
        append_next(self);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.errors++ == 0)
          std::fprintf(stderr, "append to %s failed: %s\n", st.run_id.c_str(), to_string(err).c_str());
        st.next = st.events.size(); // fenced: the run stops, as a run attempt would
        append_next(self);
      });
}

inline caf::behavior appender(appender_pointer self, store_actor store, std::string run_id, int64_t epoch,
                              std::vector<stored_event> events, caf::actor report_to) {
  auto& st = self->state;
  st.store = std::move(store);
  st.run_id = std::move(run_id);
  st.epoch = epoch;
  st.events = std::move(events);
  st.report_to = std::move(report_to);
  st.latency_ms.reserve(st.events.size());
  return {[=](go_atom) { append_next(self); }};
}

} // namespace detail

// Runs `runs` appenders (run i is run_id_of(i), held at epochs[run_id_of(i)]), `events` appends each;
// the events are made before the clock starts.
inline appends_result run_appenders(caf::actor_system& sys, const store_actor& store,
                                    const std::unordered_map<std::string, int64_t>& epochs, int runs, int events) {
  using namespace detail;
  caf::scoped_actor self{sys};
  std::vector<caf::actor> appenders;
  for (int i = 0; i < runs; ++i) {
    auto id = run_id_of(i);
    std::vector<stored_event> made;
    for (int k = 0; k < events; ++k)
      made.push_back(make_event(id, k));
    appenders.push_back(sys.spawn(appender, store, id, epochs.at(id), std::move(made), caf::actor{self}));
  }
  appends_result out;
  auto t0 = steady::now();
  for (auto& a : appenders)
    self->send(a, go_atom::value);
  steady::rep last_end = 0;
  for (int i = 0; i < runs; ++i)
    self->receive([&](report_atom, std::vector<double>& lat, int errors, steady::rep end) {
      out.latency_ms.insert(out.latency_ms.end(), lat.begin(), lat.end());
      out.errors += errors;
      last_end = std::max(last_end, end);
    });
  out.wall_s = std::chrono::duration<double>(steady::time_point(steady::duration(last_end)) - t0).count();
  return out;
}

} // namespace troupe::bench

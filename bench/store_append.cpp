// Durable event appends: through troupe's store actor (io::spawn_sqlite_store, group commit) versus a
// raw SQLite loop with the same durability settings (WAL, synchronous=FULL), in the same process and
// on the same file system, in alternating rounds. Prints one JSON object on stdout.
//
// Every variant starts from a fresh database made by the store itself (the real schema and
// indexes) holding `runs` runs claimed as `running`. Then:
//   raw_insert  one INSERT INTO run_events per committed transaction (BEGIN IMMEDIATE .. COMMIT):
//               "each append durable before it is acknowledged", the honest baseline;
//   raw_append  the store's own two statements per append (the fenced UPDATE of runs.event_count,
//               then the INSERT), one committed transaction each;
//   raw_batched the same two statements, `batch` appends per transaction: the ceiling that group
//               commit can approach;
//   actor       `runs` concurrent appender actors, each appending `events` events to its run in
//               order, sending the next only when the previous one was acknowledged (append_atom
//               with the run's claim epoch and sequence == event_count).
// Each event is a ~600-byte protocol::to_json(agent_event) payload (a tool_result), generated
// before the clock starts. After each actor round every run's event_count is checked.
//
//   troupe_bench_store --dir DIR [--runs R] [--events M] [--raw-appends K] [--batch B] [--rounds N]
#include "actors/store.hpp"
#include "io/sqlite_store.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/timestamp.hpp"

#include "bench_stats.hpp"
#include "store_appenders.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

using namespace troupe;
using steady = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

using troupe::bench::json_list;
using troupe::bench::median;
using troupe::bench::percentile;
using troupe::bench::seconds_since;

using troupe::bench::make_event;
using troupe::bench::run_id_of;

struct options {
  std::string dir;
  int runs = 100;
  int events = 50;
  int raw_appends = 1000;
  int batch = 100;
  int rounds = 3;
};

// --- a fresh database with `runs` running runs, made through the store actor ---------------------------

struct prepared {
  store_actor store;
  std::unordered_map<std::string, int64_t> epochs; // run id -> lease epoch of the claim
};

prepared prepare_store(caf::actor_system& sys, const std::string& path, int runs) {
  fs::remove(path);
  fs::remove(path + "-wal");
  fs::remove(path + "-shm");
  auto spawned = io::spawn_sqlite_store(sys, path);
  if (auto err = std::get_if<std::string>(&spawned)) {
    std::fprintf(stderr, "troupe_bench_store: %s\n", err->c_str());
    std::exit(1);
  }
  prepared p{std::get<store_actor>(spawned), {}};
  caf::scoped_actor self{sys};
  for (int i = 0; i < runs; ++i) {
    run_record r;
    r.run_id = run_id_of(i);
    r.session_id = "sess_bench";
    r.tenant_key = "bench";
    r.user_key = "bench";
    r.request = R"({"messages":[{"role":"user","content":"bench"}]})";
    self->send(p.store, create_run_atom::value, std::move(r));
  }
  for (int i = 0; i < runs; ++i)
    self->receive([](run_record&) {},
                  [](caf::error& err) {
                    std::fprintf(stderr, "troupe_bench_store: create_run failed: %s\n", to_string(err).c_str());
                    std::exit(1);
                  });
  self->request(p.store, caf::infinite, claim_atom::value,
                claim_request{"bench-worker", 3600.0, static_cast<uint32_t>(runs)})
    .receive(
      [&](run_claim& c) {
        for (auto& r : c.runs)
          p.epochs[r.run_id] = r.lease_epoch;
      },
      [](caf::error& err) {
        std::fprintf(stderr, "troupe_bench_store: claim failed: %s\n", to_string(err).c_str());
        std::exit(1);
      });
  if (static_cast<int>(p.epochs.size()) != runs) {
    std::fprintf(stderr, "troupe_bench_store: claimed %zu of %d runs\n", p.epochs.size(), runs);
    std::exit(1);
  }
  return p;
}

void stop_store(caf::actor_system& sys, const store_actor& store) {
  caf::scoped_actor self{sys};
  self->send_exit(store, caf::exit_reason::user_shutdown);
  self->wait_for(store);
}

// --- raw SQLite ---------------------------------------------------------------------------------------

struct raw_db {
  sqlite3* db = nullptr;
  sqlite3_stmt* insert = nullptr;
  sqlite3_stmt* update = nullptr;

  explicit raw_db(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
      die("open");
    sqlite3_busy_timeout(db, 5000);
    for (auto pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"})
      exec(pragma);
    if (sqlite3_prepare_v2(db, "INSERT INTO run_events (run_id, sequence, type, payload) VALUES (?1, ?2, ?3, ?4)", -1,
                           &insert, nullptr)
        != SQLITE_OK)
      die("prepare insert");
    if (sqlite3_prepare_v2(db, R"sql(
      UPDATE runs SET event_count = ?3 + 1, updated_at = ?4
      WHERE run_id = ?1 AND lease_epoch = ?2 AND status = 'running' AND event_count = ?3)sql",
                           -1, &update, nullptr)
        != SQLITE_OK)
      die("prepare update");
  }
  ~raw_db() {
    sqlite3_finalize(insert);
    sqlite3_finalize(update);
    sqlite3_close_v2(db);
  }

  [[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "troupe_bench_store: raw %s: %s\n", what, db ? sqlite3_errmsg(db) : "no db");
    std::exit(1);
  }
  void exec(const char* sql) {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
      die(sql);
  }
  void step(sqlite3_stmt* s, const char* what) {
    if (sqlite3_step(s) != SQLITE_DONE)
      die(what);
    sqlite3_reset(s);
  }

  void insert_event(const std::string& run_id, const stored_event& e) {
    sqlite3_bind_text(insert, 1, run_id.data(), static_cast<int>(run_id.size()), SQLITE_STATIC);
    sqlite3_bind_int64(insert, 2, e.sequence);
    sqlite3_bind_text(insert, 3, e.type.data(), static_cast<int>(e.type.size()), SQLITE_STATIC);
    sqlite3_bind_text(insert, 4, e.json.data(), static_cast<int>(e.json.size()), SQLITE_STATIC);
    step(insert, "insert");
  }
  void append(const std::string& run_id, int64_t epoch, const stored_event& e) {
    auto now = protocol::iso_now();
    sqlite3_bind_text(update, 1, run_id.data(), static_cast<int>(run_id.size()), SQLITE_STATIC);
    sqlite3_bind_int64(update, 2, epoch);
    sqlite3_bind_int64(update, 3, e.sequence);
    sqlite3_bind_text(update, 4, now.data(), static_cast<int>(now.size()), SQLITE_STATIC);
    step(update, "update");
    if (sqlite3_changes(db) != 1)
      die("append fenced");
    insert_event(run_id, e);
  }
};

enum class raw_mode { insert, append, batched };

// Appends `count` events round-robin over the runs (sequence k of run i), `per_txn` per transaction.
double raw_rate(caf::actor_system& sys, const std::string& path, const options& o, raw_mode mode, int count) {
  auto p = prepare_store(sys, path, o.runs);
  auto epochs = p.epochs;
  stop_store(sys, p.store);
  std::vector<std::string> ids;
  for (int i = 0; i < o.runs; ++i)
    ids.push_back(run_id_of(i));
  std::vector<stored_event> events;
  events.reserve(count);
  for (int k = 0; k < count; ++k)
    events.push_back(make_event(ids[k % o.runs], k / o.runs));
  raw_db db(path);
  int per_txn = mode == raw_mode::batched ? o.batch : 1;
  auto t0 = steady::now();
  for (int k = 0; k < count;) {
    db.exec("BEGIN IMMEDIATE");
    for (int j = 0; j < per_txn && k < count; ++j, ++k) {
      auto& id = ids[k % o.runs];
      if (mode == raw_mode::insert)
        db.insert_event(id, events[k]);
      else
        db.append(id, epochs[id], events[k]);
    }
    db.exec("COMMIT");
  }
  return count / seconds_since(t0);
}

// --- through the store actor ----------------------------------------------------------------------------

struct actor_round {
  double appends_per_s = 0;
  double wall_s = 0;
  int errors = 0;
  int wrong_counts = 0; // runs whose event_count is not `events` afterwards
  std::vector<double> latency_ms;
};

actor_round actor_rate(caf::actor_system& sys, const std::string& path, const options& o) {
  auto p = prepare_store(sys, path, o.runs);
  auto appended = troupe::bench::run_appenders(sys, p.store, p.epochs, o.runs, o.events);
  actor_round out;
  out.latency_ms = std::move(appended.latency_ms);
  out.errors = appended.errors;
  out.wall_s = appended.wall_s;
  out.appends_per_s = static_cast<double>(out.latency_ms.size()) / out.wall_s;
  caf::scoped_actor self{sys};
  for (int i = 0; i < o.runs; ++i)
    self->request(p.store, caf::infinite, get_run_atom::value, run_id_of(i))
      .receive([&](run_record& r) { out.wrong_counts += r.event_count == o.events ? 0 : 1; },
               [&](caf::error&) { ++out.wrong_counts; });
  stop_store(sys, p.store);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"durable event appends through the store actor versus raw SQLite"};
  app.add_option("--dir", o.dir, "where the databases are made")->required();
  app.add_option("--runs", o.runs)->check(CLI::PositiveNumber);
  app.add_option("--events", o.events)->check(CLI::PositiveNumber);
  app.add_option("--raw-appends", o.raw_appends)->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch)->check(CLI::PositiveNumber);
  app.add_option("--rounds", o.rounds)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  fs::create_directories(o.dir);
  auto db_path = (fs::path(o.dir) / "store-bench.db").string();

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};

  std::vector<double> raw_insert, raw_append, raw_batched, actor;
  std::vector<double> actor_latency;
  int errors = 0, wrong_counts = 0;
  for (int round = 1; round <= o.rounds; ++round) {
    raw_insert.push_back(raw_rate(sys, db_path, o, raw_mode::insert, o.raw_appends));
    auto a = actor_rate(sys, db_path, o);
    actor.push_back(a.appends_per_s);
    errors += a.errors;
    wrong_counts += a.wrong_counts;
    actor_latency.insert(actor_latency.end(), a.latency_ms.begin(), a.latency_ms.end());
    raw_append.push_back(raw_rate(sys, db_path, o, raw_mode::append, o.raw_appends));
    raw_batched.push_back(raw_rate(sys, db_path, o, raw_mode::batched, std::max(o.raw_appends, o.runs * o.events)));
    std::fprintf(stderr,
                 "[store] round %d/%d: raw_insert %.0f/s, raw_append %.0f/s, raw_batched(%d) %.0f/s, actor %.0f/s "
                 "(%d x %d, %.2f s, errors %d, wrong counts %d)\n",
                 round, o.rounds, raw_insert.back(), raw_append.back(), o.batch, raw_batched.back(), actor.back(),
                 o.runs, o.events, a.wall_s, a.errors, a.wrong_counts);
  }
  for (auto suffix : {"", "-wal", "-shm"})
    fs::remove(db_path + suffix);

  auto m_insert = median(raw_insert), m_append = median(raw_append), m_batched = median(raw_batched),
       m_actor = median(actor);
  std::vector<double> per_round;
  for (std::size_t i = 0; i < actor.size(); ++i)
    per_round.push_back(actor[i] / raw_insert[i]);
  auto payload = make_event(run_id_of(0), 7).json.size();
  std::printf("{\"runs\":%d,\"events_per_run\":%d,\"appends_per_round\":%d,\"raw_appends_per_round\":%d,"
              "\"payload_bytes\":%zu,\"batch\":%d,\"rounds\":%d,"
              "\"raw_insert_per_s\":%s,\"raw_append_per_s\":%s,\"raw_batched_per_s\":%s,\"actor_per_s\":%s,"
              "\"raw_insert_per_s_median\":%.1f,\"raw_append_per_s_median\":%.1f,\"raw_batched_per_s_median\":%.1f,"
              "\"actor_per_s_median\":%.1f,\"ratio_actor_over_raw_insert\":%.3f,\"per_round_ratio\":%s,"
              "\"ratio_actor_over_raw_append\":%.3f,\"ratio_actor_over_raw_batched\":%.3f,"
              "\"actor_latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f},\"errors\":%d,\"wrong_event_counts\":%d}\n",
              o.runs, o.events, o.runs * o.events, o.raw_appends, payload, o.batch, o.rounds, json_list(raw_insert).c_str(),
              json_list(raw_append).c_str(), json_list(raw_batched).c_str(), json_list(actor).c_str(), m_insert, m_append, m_batched,
              m_actor, m_actor / m_insert, json_list(per_round, "%.3f").c_str(), m_actor / m_append, m_actor / m_batched,
              percentile(actor_latency, 50), percentile(actor_latency, 99),
              actor_latency.empty() ? -1.0 : *std::max_element(actor_latency.begin(), actor_latency.end()), errors,
              wrong_counts);
  return errors == 0 && wrong_counts == 0 ? 0 : 1;
}

// Durable publishes through the workspace logs (workspace-stream.md WS-128) versus a raw SQLite loop
// with the same durability settings (WAL, synchronous=FULL), in the same process and on the same file
// system, in alternating rounds. Prints one JSON object on stdout, progress on stderr.
//
// Every variant starts from a fresh database made by io::spawn_sqlite_workspace_store itself (the
// real schema and indexes). Each round measures, in this order (reversed in even rounds):
//   raw_insert   one INSERT INTO workspace_events per committed transaction (BEGIN IMMEDIATE ..
//                COMMIT) of the very rows the store writes: "each publish durable before it is
//                acknowledged", the honest baseline;
//   log_c1       1 publisher, 1 workspace: through the `workspaces` actor (spawn_workspaces) and the
//                workspace's log actor to the store, each publish awaited before the next;
//   log_c16      16 concurrent publishers on the same workspace;
//   raw_publish  the store's own statements per publish (the head, the last ts, a savepoint, the
//                INSERT), one committed transaction each;
//   log_100ws    100 publishers, each on its own workspace (100 workspaces at once);
//   log_100x1    100 publishers, all on one workspace;
//   raw_batched  `batch` INSERTs per transaction: the ceiling that group commit can approach; and
//                the same over 100 workspaces (row k in workspace k % 100), the ceiling of log_100ws.
// A publisher is an actor that sends `command_atom` with the workspace_command io::address_command
// builds (tenant `default`, user `local`, as REST without credentials) from a body parsed by
// parse_publish_body (`{"event":{"type":"ops:deploy.finished","service":…}}`, parsed before the
// clock starts), and sends its next publish only when the previous one was acknowledged. After every
// log round each workspace's head is read from the store and the seqs the publishes were answered
// with are checked to be exactly 1..head: nothing lost, nothing doubled. Besides publishes/s and
// each variant's latency (send to acknowledgement), the 100-workspace variant reports each
// workspace's own p99 (all rounds pooled), to be read against the lone publisher's p99 (WS-128).
//
//   troupe_bench_workspace --dir DIR [--raw-publishes K] [--batch B] [--c1-publishes N]
//       [--c16-publishes N] [--c100-publishes N] [--rounds R]
// (--cN-publishes are per publisher.)
#include "actors/workspace_log.hpp"
#include "actors/workspace_store.hpp"
#include "io/sqlite_workspace_store.hpp"
#include "io/workspace_surface.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/workspace_commands.hpp"
#include "protocol/workspace_events.hpp"

#include "bench_stats.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace troupe;
using steady = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace rx = troupe::protocol::reflexr;

namespace {

using troupe::bench::json_list;
using troupe::bench::median;
using troupe::bench::percentile;
using troupe::bench::seconds_since;

using go_atom = caf::atom_constant<caf::atom("bench_go")>;
using report_atom = caf::atom_constant<caf::atom("bench_rep")>;

struct options {
  std::string dir;
  int raw_publishes = 500;
  int batch = 100;
  int c1_publishes = 500;
  int c16_publishes = 100;
  int c100_publishes = 50;
  int rounds = 7;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "troupe_bench_workspace: %s\n", what.c_str());
  std::exit(1);
}

// The default configuration's deploy event: `service` is a required string.
protocol::workspaces_config bench_config() {
  protocol::workspaces_config c;
  protocol::workspace_event_type deploy;
  deploy.name = "ops:deploy.finished";
  deploy.schema = R"({"type":"object","properties":{"service":{"type":"string"}},"required":["service"]})";
  c.event_types.push_back(deploy);
  return c;
}

std::string workspace_of(int i) { return "bench-" + std::to_string(i); }

std::string body_of(int publisher, int k) {
  char buf[128];
  std::snprintf(buf, sizeof buf, R"({"event":{"type":"ops:deploy.finished","service":"svc-%03d-%06d"}})", publisher, k);
  return buf;
}

rx::command_request parse_body(const rx::event_registry& types, const std::string& body) {
  auto parsed = rx::parse_publish_body(body, types);
  if (auto bad = std::get_if<rx::problems>(&parsed))
    fail("the publish body does not parse: " + rx::first_problem(*bad));
  return std::get<rx::command_request>(std::move(parsed));
}

// --- a fresh database, made by the workspace store itself ----------------------------------------

workspace_store_actor fresh_store(caf::actor_system& sys, const std::string& path) {
  for (auto suffix : {"", "-wal", "-shm"})
    fs::remove(path + suffix);
  auto spawned = io::spawn_sqlite_workspace_store(sys, path);
  if (auto err = std::get_if<std::string>(&spawned))
    fail(*err);
  return std::get<workspace_store_actor>(spawned);
}

void stop(caf::actor_system& sys, const caf::actor_addr& a) {
  caf::scoped_actor self{sys};
  auto handle = caf::actor_cast<caf::actor>(a);
  if (!handle)
    return;
  self->send_exit(handle, caf::exit_reason::user_shutdown);
  self->wait_for(handle);
}

// --- raw SQLite ------------------------------------------------------------------------------------

// The row the store writes for one publish.
struct row {
  std::string workspace;
  int64_t seq;
  std::string id, type, ts, correlation_id, envelope;
};

// An in-memory log for rx::carry_out, so the raw rows are made by the code that makes the store's.
class memory_log : public rx::log_reader {
public:
  int64_t head_seq = 0;
  std::string ts;
  int64_t head() override { return head_seq; }
  std::string last_ts() override { return ts; }
  std::optional<rx::chain_link> find(const std::string&) override { return std::nullopt; }
};

std::vector<row> make_rows(const io::workspace_surface& s, const rx::workspace_caller& caller, const std::string& ws,
                           int count) {
  std::vector<row> rows;
  rows.reserve(count);
  memory_log log;
  for (int k = 0; k < count; ++k) {
    auto c = io::address_command(s, caller, {caller.tenant, ws}, parse_body(*s.types, body_of(0, k)), "");
    auto effect = rx::carry_out(c.request, c.context, log);
    if (effect.rejected || effect.appended.size() != 1)
      fail("carry_out did not append one envelope");
    auto& e = effect.appended[0];
    rows.push_back({ws, e.seq, e.id, e.type, e.ts, e.correlation_id, rx::envelope_json(e)});
    log.head_seq = e.seq;
    log.ts = e.ts;
  }
  return rows;
}

// `count` rows for each of `workspaces` workspaces, interleaved as 100 publishers would send them.
std::vector<row> make_spread_rows(const io::workspace_surface& s, const rx::workspace_caller& caller, int workspaces,
                                  int count) {
  std::vector<std::vector<row>> each;
  for (int w = 0; w < workspaces; ++w)
    each.push_back(make_rows(s, caller, workspace_of(w), count));
  std::vector<row> rows;
  for (int k = 0; k < count; ++k)
    for (int w = 0; w < workspaces; ++w)
      rows.push_back(std::move(each[w][k]));
  return rows;
}

struct raw_db {
  sqlite3* db = nullptr;
  sqlite3_stmt* insert = nullptr;
  sqlite3_stmt* head = nullptr;
  sqlite3_stmt* last_ts = nullptr;

  explicit raw_db(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
      die("open");
    sqlite3_busy_timeout(db, 5000);
    for (auto pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"})
      exec(pragma);
    // The store's statements, text for text.
    prepare(insert, R"sql(
        INSERT INTO workspace_events (tenant, workspace, seq, id, type, ts, correlation_id, envelope)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8))sql");
    prepare(head, "SELECT COALESCE(MAX(seq), 0) FROM workspace_events WHERE tenant = ?1 AND workspace = ?2");
    prepare(last_ts, "SELECT ts FROM workspace_events WHERE tenant = ?1 AND workspace = ?2 ORDER BY seq DESC LIMIT 1");
  }
  ~raw_db() {
    for (auto s : {insert, head, last_ts})
      sqlite3_finalize(s);
    sqlite3_close_v2(db);
  }

  [[noreturn]] void die(const char* what) { fail(std::string("raw ") + what + ": " + (db ? sqlite3_errmsg(db) : "no db")); }
  void prepare(sqlite3_stmt*& s, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
      die("prepare");
  }
  void exec(const char* sql) {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
      die(sql);
  }
  static void text(sqlite3_stmt* s, int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }

  void insert_row(const std::string& tenant, const row& r) {
    text(insert, 1, tenant);
    text(insert, 2, r.workspace);
    sqlite3_bind_int64(insert, 3, r.seq);
    text(insert, 4, r.id);
    text(insert, 5, r.type);
    text(insert, 6, r.ts);
    text(insert, 7, r.correlation_id);
    text(insert, 8, r.envelope);
    if (sqlite3_step(insert) != SQLITE_DONE)
      die("insert");
    sqlite3_reset(insert);
  }

  // What the store reads before a publish: the head and the last ts.
  int64_t read_head(const std::string& tenant, const std::string& ws) {
    text(head, 1, tenant);
    text(head, 2, ws);
    int64_t h = sqlite3_step(head) == SQLITE_ROW ? sqlite3_column_int64(head, 0) : -1;
    sqlite3_reset(head);
    text(last_ts, 1, tenant);
    text(last_ts, 2, ws);
    sqlite3_step(last_ts);
    sqlite3_reset(last_ts);
    return h;
  }
};

enum class raw_mode { insert, publish, batched };

double raw_rate(caf::actor_system& sys, const std::string& path, const std::string& tenant,
                const std::vector<row>& rows, raw_mode mode, int batch) {
  stop(sys, fresh_store(sys, path).address());
  raw_db db(path);
  int per_txn = mode == raw_mode::batched ? batch : 1;
  int count = static_cast<int>(rows.size());
  auto t0 = steady::now();
  for (int k = 0; k < count;) {
    db.exec("BEGIN IMMEDIATE");
    for (int j = 0; j < per_txn && k < count; ++j, ++k) {
      if (mode == raw_mode::publish) {
        if (db.read_head(tenant, rows[k].workspace) != rows[k].seq - 1)
          fail("raw publish: wrong head");
        db.exec("SAVEPOINT store_write");
        db.insert_row(tenant, rows[k]);
        db.exec("RELEASE store_write");
      } else {
        db.insert_row(tenant, rows[k]);
      }
    }
    db.exec("COMMIT");
  }
  return count / seconds_since(t0);
}

// --- through the workspace logs ---------------------------------------------------------------------

struct publisher_state {
  std::shared_ptr<const io::workspace_surface> surface;
  rx::workspace_caller caller;
  workspace_key key;
  std::vector<rx::command_request> requests;
  caf::actor report_to;
  int index = 0;
  std::size_t next = 0;
  int errors = 0;
  std::string error_sample;
  std::vector<double> latency_ms;
  std::vector<int64_t> seqs;
  steady::time_point sent;
};

using publisher_pointer = caf::stateful_actor<publisher_state>*;

void publish_next(publisher_pointer self) {
  auto& st = self->state;
  if (st.next == st.requests.size()) {
    self->send(st.report_to, report_atom::value, st.index, std::move(st.latency_ms), std::move(st.seqs), st.errors,
               std::move(st.error_sample), steady::now().time_since_epoch().count());
    self->quit();
    return;
  }
  st.sent = steady::now();
  auto command = io::address_command(*st.surface, st.caller, st.key, st.requests[st.next], "");
  self->request(st.surface->logs, caf::infinite, command_atom::value, std::move(command))
    .then(
      [=](workspace_outcome& o) {
        auto& st = self->state;
        st.latency_ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - st.sent).count());
        if (!o.ok || o.code != errc::none || o.appended.size() != 1) {
          ++st.errors;
          if (st.error_sample.empty())
            st.error_sample = std::string(to_string(o.code)) + " " + o.body;
        } else {
          st.seqs.push_back(o.max_seq);
        }
        ++st.next;
        publish_next(self);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        ++st.errors;
        if (st.error_sample.empty())
          st.error_sample = self->system().render(err);
        ++st.next;
        publish_next(self);
      });
}

caf::behavior publisher(publisher_pointer self, std::shared_ptr<const io::workspace_surface> surface,
                        rx::workspace_caller caller, workspace_key key, std::vector<rx::command_request> requests,
                        caf::actor report_to, int index) {
  auto& st = self->state;
  st.surface = std::move(surface);
  st.caller = std::move(caller);
  st.key = std::move(key);
  st.requests = std::move(requests);
  st.report_to = std::move(report_to);
  st.index = index;
  st.latency_ms.reserve(st.requests.size());
  st.seqs.reserve(st.requests.size());
  return {[=](go_atom) { publish_next(self); }};
}

struct log_round {
  int publishers = 0;
  int workspaces = 0;
  double publishes_per_s = 0;
  double wall_s = 0;
  int errors = 0;
  std::string error_sample;
  int lost = 0; // workspaces whose head or answered seqs are not exactly 1..published
  std::vector<std::vector<double>> latency_ms; // per publisher
};

// `publishers` publishers, publisher i on workspace i % workspaces, `each` publishes apiece.
log_round log_rate(caf::actor_system& sys, const std::string& path, const io::workspace_surface& base,
                   const rx::workspace_caller& caller, int publishers, int workspaces, int each) {
  auto store = fresh_store(sys, path);
  auto surface = std::make_shared<io::workspace_surface>(base);
  surface->logs = spawn_workspaces(sys, store, workspaces_options{});
  caf::scoped_actor self{sys};
  std::vector<caf::actor> actors;
  for (int i = 0; i < publishers; ++i) {
    std::vector<rx::command_request> requests;
    requests.reserve(each);
    for (int k = 0; k < each; ++k)
      requests.push_back(parse_body(*surface->types, body_of(i, k)));
    actors.push_back(sys.spawn(publisher, std::shared_ptr<const io::workspace_surface>(surface), caller,
                               workspace_key{caller.tenant, workspace_of(i % workspaces)}, std::move(requests),
                               caf::actor{self}, i));
  }
  log_round out;
  out.publishers = publishers;
  out.workspaces = workspaces;
  out.latency_ms.resize(publishers);
  std::vector<std::vector<int64_t>> seqs(workspaces);
  auto t0 = steady::now();
  for (auto& a : actors)
    self->send(a, go_atom::value);
  steady::rep last_end = 0;
  for (int i = 0; i < publishers; ++i)
    self->receive([&](report_atom, int index, std::vector<double>& lat, std::vector<int64_t>& answered, int errors,
                      std::string& sample, steady::rep end) {
      out.latency_ms[index] = std::move(lat);
      auto& ws_seqs = seqs[index % workspaces];
      ws_seqs.insert(ws_seqs.end(), answered.begin(), answered.end());
      out.errors += errors;
      if (out.error_sample.empty())
        out.error_sample = std::move(sample);
      last_end = std::max(last_end, end);
    });
  out.wall_s = std::chrono::duration<double>(steady::time_point(steady::duration(last_end)) - t0).count();
  std::size_t total = 0;
  for (auto& l : out.latency_ms)
    total += l.size();
  out.publishes_per_s = static_cast<double>(total) / out.wall_s;
  // No loss: each workspace's head is what was published to it, and its publishes were answered
  // with exactly the seqs 1..head.
  int per_workspace = each * (publishers / workspaces);
  for (int w = 0; w < workspaces; ++w) {
    auto& s = seqs[w];
    std::sort(s.begin(), s.end());
    bool exact = static_cast<int>(s.size()) == per_workspace;
    for (std::size_t k = 0; exact && k < s.size(); ++k)
      exact = s[k] == static_cast<int64_t>(k + 1);
    int64_t head = -1;
    self->request(store, caf::infinite, head_atom::value, workspace_key{caller.tenant, workspace_of(w)})
      .receive([&](int64_t h) { head = h; }, [&](caf::error&) {});
    if (!exact || head != per_workspace) {
      ++out.lost;
      if (out.lost == 1)
        std::fprintf(stderr, "[workspaces] workspace %s: head %lld, %zu answered seqs, %d published\n",
                     workspace_of(w).c_str(), static_cast<long long>(head), s.size(), per_workspace);
    }
  }
  // The registry stops its logs with it; the store stops after committing what it holds.
  stop(sys, surface->logs.address());
  stop(sys, store.address());
  return out;
}

struct variant_stats {
  std::vector<double> rates;
  std::vector<std::vector<double>> latency_by_publisher; // pooled over rounds
  int errors = 0;
  int lost = 0;
  std::string error_sample;

  void add(log_round& r) {
    rates.push_back(r.publishes_per_s);
    errors += r.errors;
    lost += r.lost;
    if (error_sample.empty())
      error_sample = r.error_sample;
    latency_by_publisher.resize(r.latency_ms.size());
    for (std::size_t i = 0; i < r.latency_ms.size(); ++i)
      latency_by_publisher[i].insert(latency_by_publisher[i].end(), r.latency_ms[i].begin(), r.latency_ms[i].end());
  }
  std::vector<double> all_latency() const {
    std::vector<double> all;
    for (auto& l : latency_by_publisher)
      all.insert(all.end(), l.begin(), l.end());
    return all;
  }
  // The p-th percentile of each publisher's own latencies (all rounds pooled).
  std::vector<double> per_publisher(double p) const {
    std::vector<double> out;
    for (auto& l : latency_by_publisher)
      out.push_back(percentile(l, p));
    return out;
  }
};

std::string latency_json(const std::vector<double>& v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, R"({"p50":%.3f,"p90":%.3f,"p99":%.3f,"max":%.3f,"samples":%zu})", percentile(v, 50),
                percentile(v, 90), percentile(v, 99), percentile(v, 100), v.size());
  return buf;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\')
      out += '\\', out += ch;
    else if (static_cast<unsigned char>(ch) < 0x20)
      out += ' ';
    else
      out += ch;
  }
  return out + "\"";
}

} // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"durable publishes through the workspace logs versus raw SQLite"};
  app.add_option("--dir", o.dir, "where the databases are made")->required();
  app.add_option("--raw-publishes", o.raw_publishes, "rows per raw round")->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "rows per transaction in raw_batched")->check(CLI::PositiveNumber);
  app.add_option("--c1-publishes", o.c1_publishes, "publishes of the lone publisher")->check(CLI::PositiveNumber);
  app.add_option("--c16-publishes", o.c16_publishes, "publishes per publisher, 16 on one workspace")
    ->check(CLI::PositiveNumber);
  app.add_option("--c100-publishes", o.c100_publishes, "publishes per publisher, 100 publishers")
    ->check(CLI::PositiveNumber);
  app.add_option("--rounds", o.rounds)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  fs::create_directories(o.dir);
  auto db_path = (fs::path(o.dir) / "workspace-bench.db").string();

  caf::actor_system_config cfg;
  // As `troupe serve` does: one scheduler worker per core (CAF's default of at least 4 polls).
  cfg.set("scheduler.max-threads", static_cast<size_t>(std::max(2u, std::thread::hardware_concurrency())));
  caf::actor_system sys{cfg};

  io::workspace_surface base;
  base.sys = &sys;
  base.config = bench_config();
  auto types = rx::event_registry::build(base.config);
  if (auto errs = std::get_if<std::vector<std::string>>(&types))
    fail("event types: " + (errs->empty() ? std::string("?") : errs->front()));
  base.types = std::get<std::shared_ptr<const rx::event_registry>>(types);
  base.open = true;
  auto caller = rx::authenticate("", base.config, {}, base.open);
  if (!caller)
    fail("no caller without credentials");

  auto raw_rows = make_rows(base, *caller, workspace_of(0), o.raw_publishes);
  auto batched_rows = make_rows(base, *caller, workspace_of(0), std::max(o.raw_publishes, 100 * o.c100_publishes));
  auto spread_rows = make_spread_rows(base, *caller, 100, std::max(o.raw_publishes / 100, o.c100_publishes));
  auto payload = raw_rows.front().envelope.size();

  std::vector<double> raw_insert, raw_publish, raw_batched, raw_batched_100ws;
  variant_stats c1, c16, ws100, x100;
  for (int round = 1; round <= o.rounds; ++round) {
    log_round r1, r16, rws, rx100;
    std::vector<std::function<void()>> steps{
      [&] { raw_insert.push_back(raw_rate(sys, db_path, caller->tenant, raw_rows, raw_mode::insert, 1)); },
      [&] { r1 = log_rate(sys, db_path, base, *caller, 1, 1, o.c1_publishes); },
      [&] { r16 = log_rate(sys, db_path, base, *caller, 16, 1, o.c16_publishes); },
      [&] { raw_publish.push_back(raw_rate(sys, db_path, caller->tenant, raw_rows, raw_mode::publish, 1)); },
      [&] { rws = log_rate(sys, db_path, base, *caller, 100, 100, o.c100_publishes); },
      [&] { rx100 = log_rate(sys, db_path, base, *caller, 100, 1, o.c100_publishes); },
      [&] {
        raw_batched.push_back(raw_rate(sys, db_path, caller->tenant, batched_rows, raw_mode::batched, o.batch));
        raw_batched_100ws.push_back(raw_rate(sys, db_path, caller->tenant, spread_rows, raw_mode::batched, o.batch));
      },
    };
    // Odd rounds run the variants in the order above, even rounds in reverse, so that neither side
    // of a ratio always comes first after a fresh file.
    if (round % 2 == 0)
      std::reverse(steps.begin(), steps.end());
    for (auto& step : steps)
      step();
    std::fprintf(stderr,
                 "[workspaces] round %d/%d: raw insert %.0f/s, raw store SQL %.0f/s, raw batched(%d) %.0f/s, "
                 "over 100 workspaces %.0f/s; log c1 %.0f/s, c16 %.0f/s, 100 workspaces %.0f/s, 100 on 1 %.0f/s "
                 "(errors %d, lost %d)\n",
                 round, o.rounds, raw_insert.back(), raw_publish.back(), o.batch, raw_batched.back(),
                 raw_batched_100ws.back(), r1.publishes_per_s, r16.publishes_per_s, rws.publishes_per_s,
                 rx100.publishes_per_s, r1.errors + r16.errors + rws.errors + rx100.errors,
                 r1.lost + r16.lost + rws.lost + rx100.lost);
    c1.add(r1);
    c16.add(r16);
    ws100.add(rws);
    x100.add(rx100);
  }
  for (auto suffix : {"", "-wal", "-shm"})
    fs::remove(db_path + suffix);

  auto m_insert = median(raw_insert), m_publish = median(raw_publish), m_batched = median(raw_batched),
       m_batched_100ws = median(raw_batched_100ws);
  auto ratio_rounds = [&](const variant_stats& v) {
    std::vector<double> r;
    for (std::size_t i = 0; i < v.rates.size(); ++i)
      r.push_back(v.rates[i] / raw_insert[i]);
    return r;
  };
  auto c1_lat = c1.all_latency(), ws_lat = ws100.all_latency(), x_lat = x100.all_latency(), c16_lat = c16.all_latency();
  auto ws_p99 = ws100.per_publisher(99), ws_p50 = ws100.per_publisher(50);
  auto c1_p99 = percentile(c1_lat, 99), c1_p50 = percentile(c1_lat, 50);
  char buf[512];
  auto num = [&](const char* key, double v, const char* fmt = "%.3f") {
    std::string f = std::string("\"%s\":") + fmt + ",";
    std::snprintf(buf, sizeof buf, f.c_str(), key, v);
    return std::string(buf);
  };
  auto list = [&](const char* key, const std::vector<double>& v, const char* fmt = "%.1f") {
    return "\"" + std::string(key) + "\":" + json_list(v, fmt) + ",";
  };
  auto variant_json = [&](const char* name, const variant_stats& v, const std::vector<double>& lat) {
    return "\"" + std::string(name) + "\":{" + list("per_s", v.rates) + num("per_s_median", median(v.rates), "%.1f") +
           num("ratio_over_raw_insert", median(v.rates) / m_insert) + list("per_round_ratio", ratio_rounds(v), "%.3f") +
           "\"latency_ms\":" + latency_json(lat) + "},";
  };
  int errors = c1.errors + c16.errors + ws100.errors + x100.errors;
  int lost = c1.lost + c16.lost + ws100.lost + x100.lost;
  std::string sample = !c1.error_sample.empty() ? c1.error_sample
                       : !c16.error_sample.empty() ? c16.error_sample
                       : !ws100.error_sample.empty() ? ws100.error_sample
                                                     : x100.error_sample;
  std::string out = "{";
  out += num("envelope_bytes", static_cast<double>(payload), "%.0f") + num("rounds", o.rounds, "%.0f") +
         num("raw_publishes_per_round", o.raw_publishes, "%.0f") + num("batch", o.batch, "%.0f") +
         num("c1_publishes", o.c1_publishes, "%.0f") + num("c16_publishes_each", o.c16_publishes, "%.0f") +
         num("c100_publishes_each", o.c100_publishes, "%.0f");
  out += list("raw_insert_per_s", raw_insert) + list("raw_publish_per_s", raw_publish) +
         list("raw_batched_per_s", raw_batched) + list("raw_batched_100ws_per_s", raw_batched_100ws);
  out += num("raw_insert_per_s_median", m_insert, "%.1f") + num("raw_publish_per_s_median", m_publish, "%.1f") +
         num("raw_batched_per_s_median", m_batched, "%.1f") + num("raw_batched_100ws_per_s_median", m_batched_100ws, "%.1f");
  out += variant_json("log_c1", c1, c1_lat) + variant_json("log_c16", c16, c16_lat) +
         variant_json("log_100ws", ws100, ws_lat) + variant_json("log_100x1", x100, x_lat);
  // (a) the log against raw SQLite with the same durability.
  out += num("ratio_c1_over_raw_insert", median(c1.rates) / m_insert) +
         num("ratio_c16_over_raw_insert", median(c16.rates) / m_insert) +
         num("ratio_c1_over_raw_publish", median(c1.rates) / m_publish) +
         num("ratio_c16_over_raw_batched", median(c16.rates) / m_batched) +
         num("ratio_100x1_over_raw_batched", median(x100.rates) / m_batched) +
         num("ratio_100ws_over_raw_batched_100ws", median(ws100.rates) / m_batched_100ws);
  // (c) 100 workspaces at once against one publisher alone (WS-128).
  out += "\"per_workspace_p99_ms\":{" + num("median", median(ws_p99)) + num("max", percentile(ws_p99, 100)) +
         num("min", percentile(ws_p99, 0)) + "\"workspaces\":" + std::to_string(ws_p99.size()) + "},";
  out += "\"per_workspace_p50_ms\":{" + num("median", median(ws_p50)) + num("max", percentile(ws_p50, 100)) +
         "\"workspaces\":" + std::to_string(ws_p50.size()) + "},";
  out += num("ratio_100ws_workspace_p99_over_c1_p99", median(ws_p99) / c1_p99) +
         num("ratio_100ws_max_workspace_p99_over_c1_p99", percentile(ws_p99, 100) / c1_p99) +
         num("diff_100ws_workspace_p99_minus_c1_p99_ms", median(ws_p99) - c1_p99) +
         num("ratio_100ws_p50_over_c1_p50", percentile(ws_lat, 50) / c1_p50) +
         num("ratio_100ws_per_s_over_100x1_per_s", median(ws100.rates) / median(x100.rates)) +
         num("ratio_raw_batched_100ws_over_raw_batched", m_batched_100ws / m_batched);
  out += "\"errors\":" + std::to_string(errors) + ",\"error_sample\":" + json_quote(sample) +
         ",\"lost\":" + std::to_string(lost) + "}";
  std::printf("%s\n", out.c_str());
  return errors == 0 && lost == 0 ? 0 : 1;
}

// The PostgreSQL run store (io::spawn_pg_stores: a pool of connections, group commit) against pgbench
// on the same server in the same run, in alternating rounds. Prints one JSON object on stdout.
//
//   appends  troupe: `runs` runs created and claimed through the store, then `runs` concurrent
//            appender actors, each appending `events` events to its run in order, sending the next
//            only when the previous one was acknowledged (append_atom with the claim's epoch and
//            sequence == event_count). Baseline: pgbench, one single-row INSERT of the same payload
//            per transaction into bench_events, a table made LIKE run_events INCLUDING ALL (same
//            columns, primary key and indexes), for `seconds` with as many clients as the pool has
//            connections, then (for reference) with as many clients as troupe has appenders.
//   claims   troupe: `claims` queued runs created through the store (not timed), then `claimers`
//            concurrent claimer actors, each asking claim_atom with claim_request{worker, 300, 1}
//            until a claim comes back empty. Baseline: the same runs made the same way, then
//            pgbench running the store's own claim statement (claim_ready_runs: FOR UPDATE SKIP
//            LOCKED), one claim of 1 per transaction, `claimers` clients, until every run is taken.
//            With --claim-batch B > 1 the same again with B runs per claim.
// Around troupe's timed parts the database's committed transactions are counted
// (pg_stat_database.xact_commit), which tells how many appends or claims a commit carried.
// Each round starts from empty tables; the store runs its own migrations. After each troupe round
// every run's event_count is checked, and every run must be claimed exactly once; a failed check
// fails the program.
//
//   troupe_bench_pg_store [--url URL] [--pgbench PATH] [--runs R] [--events M] [--seconds S]
//                         [--claims N] [--claimers C] [--claim-batch B] [--rounds K] [--pool-size P]
#include "actors/store.hpp"
#include "io/pg_store.hpp"
#include "io/run_store_statements.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/timestamp.hpp"

#include "bench_stats.hpp"
#include "store_appenders.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <pqxx/pqxx>

#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

extern char** environ;

using namespace troupe;
using steady = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

using troupe::bench::json_list;
using troupe::bench::median;
using troupe::bench::percentile;

using troupe::bench::go_atom;
using troupe::bench::make_event;
using troupe::bench::report_atom;
using troupe::bench::run_id_of;

struct options {
  std::string url;
  std::string pgbench;
  int runs = 64;
  int events = 200;
  int seconds = 10;
  int claims = 20000;
  int claimers = 8;
  int claim_batch = 8;
  int rounds = 3;
  int pool_size = 8;
  int pool_batch = 64;
  int active = 0;
  double spill_ms = 100;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "troupe_bench_pg_store: %s\n", what.c_str());
  std::exit(1);
}

// --- the database, outside the store ----------------------------------------------------------------

void exec_sql(const std::string& url, const std::string& sql) {
  try {
    pqxx::connection c{url};
    pqxx::nontransaction n{c};
    n.exec(sql);
  } catch (const std::exception& e) {
    fail("SQL failed: " + std::string(e.what()) + " in: " + sql);
  }
}

int64_t query_int(const std::string& url, const std::string& sql) {
  try {
    pqxx::connection c{url};
    pqxx::nontransaction n{c};
    auto r = n.exec(sql);
    return r.at(0).at(0).as<int64_t>();
  } catch (const std::exception& e) {
    fail("SQL failed: " + std::string(e.what()) + " in: " + sql);
  }
}

std::string query_text(const std::string& url, const std::string& sql) {
  try {
    pqxx::connection c{url};
    pqxx::nontransaction n{c};
    return n.exec(sql).at(0).at(0).as<std::string>();
  } catch (const std::exception& e) {
    fail("SQL failed: " + std::string(e.what()) + " in: " + sql);
  }
}

// The transactions the database has committed so far (pg_stat_database). A backend reports its counts
// when it exits and, while idle, at most a second late: `settle` waits that long first.
int64_t commits(const std::string& url, std::chrono::milliseconds settle) {
  std::this_thread::sleep_for(settle);
  return query_int(url, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()");
}

// Empty run store tables, so that every round starts alike.
void empty_run_tables(const std::string& url) { exec_sql(url, "TRUNCATE runs, run_events"); }

// --- the store ----------------------------------------------------------------------------------------

store_actor start_store(caf::actor_system& sys, const options& o) {
  io::pg_store_settings s;
  s.url = o.url;
  s.pool.size = static_cast<std::size_t>(o.pool_size);
  s.pool.batch = static_cast<std::size_t>(o.pool_batch);
  s.pool.active = static_cast<std::size_t>(o.active);
  s.pool.spill_after_seconds = o.spill_ms / 1000;
  auto spawned = io::spawn_pg_stores(sys, s);
  if (auto err = std::get_if<std::string>(&spawned))
    fail(*err);
  return std::get<io::store_ports>(spawned).runs;
}

void stop_store(caf::actor_system& sys, const store_actor& store) {
  caf::scoped_actor self{sys};
  self->send_exit(store, caf::exit_reason::user_shutdown);
  self->wait_for(store);
}

// Creates `n` queued runs through the store, at most `window` awaited at once (not timed).
void create_runs(caf::actor_system& sys, const store_actor& store, int n) {
  caf::scoped_actor self{sys};
  const int window = 512;
  int sent = 0, answered = 0;
  auto send_one = [&] {
    run_record r;
    r.run_id = run_id_of(sent++);
    r.session_id = "sess_bench";
    r.tenant_key = "bench";
    r.user_key = "bench";
    r.request = R"({"messages":[{"role":"user","content":"bench"}]})";
    self->send(store, create_run_atom::value, std::move(r));
  };
  while (sent < n && sent < window)
    send_one();
  while (answered < n) {
    self->receive([](run_record&) {},
                  [](caf::error& err) { fail("create_run failed: " + to_string(err)); });
    ++answered;
    if (sent < n)
      send_one();
  }
}

// --- pgbench --------------------------------------------------------------------------------------------

struct pgbench_result {
  double tps = 0;
  int64_t transactions = 0;
  double latency_avg_ms = -1;
};

// Runs argv, its stdout and stderr into `out`; its exit status.
int run_process(const std::vector<std::string>& args, const std::string& out) {
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    fail("cannot start " + args[0] + ": " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pgbench_result pgbench(const options& o, const std::string& script, const std::vector<std::string>& extra,
                       const fs::path& dir) {
  std::vector<std::string> args{o.pgbench, "-n", "-M", "prepared", "-f", script};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(o.url);
  auto out = (dir / "pgbench.out").string();
  int rc = run_process(args, out);
  auto text = read_all(out);
  if (rc != 0 || text.find("aborted") != std::string::npos)
    fail("pgbench failed (exit " + std::to_string(rc) + "):\n" + text);
  pgbench_result r;
  std::smatch m;
  if (std::regex_search(text, m, std::regex(R"(tps = ([0-9.]+))")))
    r.tps = std::stod(m[1]);
  if (std::regex_search(text, m, std::regex(R"(actually processed: ([0-9]+))")))
    r.transactions = std::stoll(m[1]);
  if (std::regex_search(text, m, std::regex(R"(latency average = ([0-9.]+) ms)")))
    r.latency_avg_ms = std::stod(m[1]);
  if (r.tps <= 0 || r.transactions <= 0)
    fail("pgbench printed no tps:\n" + text);
  return r;
}

// A statement of the store with its parameters (?N, or $N in PostgreSQL's spelling) as the pgbench
// variables :pN.
std::string with_pgbench_variables(std::string sql) {
  return std::regex_replace(sql, std::regex(R"([?$]([0-9]+))"), ":p$1");
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out)
    fail("cannot write " + path.string());
}

// --- appends ---------------------------------------------------------------------------------------------

struct append_round {
  double per_s = 0;
  double wall_s = 0;
  int errors = 0;
  int wrong_counts = 0;
  int64_t commits = 0; // transactions committed while the appenders ran (a few more: the store's start)
  std::vector<double> latency_ms;
};

append_round troupe_appends(caf::actor_system& sys, const options& o) {
  empty_run_tables(o.url);
  auto store = start_store(sys, o);
  create_runs(sys, store, o.runs);
  caf::scoped_actor self{sys};
  std::unordered_map<std::string, int64_t> epochs;
  self->request(store, caf::infinite, claim_atom::value,
                claim_request{"bench-appenders", 3600.0, static_cast<uint32_t>(o.runs)})
    .receive(
      [&](run_claim& c) {
        for (auto& r : c.runs)
          epochs[r.run_id] = r.lease_epoch;
      },
      [](caf::error& err) { fail("claim failed: " + to_string(err)); });
  if (static_cast<int>(epochs.size()) != o.runs)
    fail("claimed " + std::to_string(epochs.size()) + " of " + std::to_string(o.runs) + " runs");
  // The commits of the set-up are reported within a second of the workers going idle.
  auto commits_before = commits(o.url, std::chrono::milliseconds(1500));
  auto appended = troupe::bench::run_appenders(sys, store, epochs, o.runs, o.events);
  append_round out;
  out.latency_ms = std::move(appended.latency_ms);
  out.errors = appended.errors;
  out.wall_s = appended.wall_s;
  out.per_s = static_cast<double>(out.latency_ms.size()) / out.wall_s;
  stop_store(sys, store);
  out.commits = commits(o.url, std::chrono::milliseconds(300)) - commits_before;
  out.wrong_counts = static_cast<int>(
    query_int(o.url, "SELECT COUNT(*) FROM runs WHERE event_count <> " + std::to_string(o.events)));
  // What the store answered must be what the table holds.
  auto rows = query_int(o.url, "SELECT COUNT(*) FROM run_events");
  if (rows != static_cast<int64_t>(o.runs) * o.events)
    fail("run_events holds " + std::to_string(rows) + " rows, expected " + std::to_string(o.runs * o.events));
  return out;
}

// The pgbench append script: one INSERT per transaction, the run id made from the client's id (the
// length of troupe's), the sequence counted per client, the payload a bound parameter.
std::string append_script() {
  return "\\set seq :seq + 1\n"
         "INSERT INTO bench_events (run_id, sequence, type, payload)\n"
         "  VALUES ('run_bench' || lpad(:client_id::text, 24, '0'), :seq, 'tool_result', :payload);\n";
}

pgbench_result pgbench_appends(const options& o, int clients, const fs::path& dir) {
  exec_sql(o.url, "DROP TABLE IF EXISTS bench_events; CREATE TABLE bench_events (LIKE run_events INCLUDING ALL)");
  auto payload = make_event(run_id_of(0), 7).json;
  auto script = dir / "append.sql";
  write_file(script, append_script());
  auto r = pgbench(o, script.string(),
                   {"-c", std::to_string(clients), "-j", "2", "-T", std::to_string(o.seconds), "-D", "seq=0", "-D",
                    "payload=" + payload},
                   dir);
  auto rows = query_int(o.url, "SELECT COUNT(*) FROM bench_events");
  if (rows != r.transactions)
    fail("bench_events holds " + std::to_string(rows) + " rows after " + std::to_string(r.transactions) +
         " pgbench transactions");
  exec_sql(o.url, "DROP TABLE bench_events");
  return r;
}

// --- claims -----------------------------------------------------------------------------------------------

struct claimer_state {
  store_actor store;
  std::string worker;
  uint32_t max = 1;
  caf::actor report_to;
  std::vector<std::string> claimed;
  int errors = 0;
};

using claimer_pointer = caf::stateful_actor<claimer_state>*;

void claim_next(claimer_pointer self) {
  auto& st = self->state;
  self->request(st.store, caf::infinite, claim_atom::value, claim_request{st.worker, 300.0, st.max})
    .then(
      [=](run_claim& c) {
        auto& st = self->state;
        if (c.runs.empty()) {
          self->send(st.report_to, report_atom::value, std::move(st.claimed), st.errors,
                     steady::now().time_since_epoch().count());
          self->quit();
          return;
        }
        for (auto& r : c.runs)
          st.claimed.push_back(std::move(r.run_id));
        claim_next(self);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.errors++ == 0)
          std::fprintf(stderr, "[pgstore] claim by %s failed: %s\n", st.worker.c_str(), to_string(err).c_str());
        self->send(st.report_to, report_atom::value, std::move(st.claimed), st.errors,
                   steady::now().time_since_epoch().count());
        self->quit();
      });
}

caf::behavior claimer(claimer_pointer self, store_actor store, std::string worker, uint32_t max,
                      caf::actor report_to) {
  auto& st = self->state;
  st.store = std::move(store);
  st.worker = std::move(worker);
  st.max = max;
  st.report_to = std::move(report_to);
  return {[=](go_atom) { claim_next(self); }};
}

struct claim_round {
  double per_s = 0;
  double wall_s = 0;
  int64_t commits = 0;
  int errors = 0;
  int duplicates = 0;
  int missing = 0;
};

// The runs table as both sides start from: `claims` queued runs made through the store.
void fill_queue(caf::actor_system& sys, const options& o) {
  empty_run_tables(o.url);
  auto store = start_store(sys, o);
  create_runs(sys, store, o.claims);
  stop_store(sys, store);
  exec_sql(o.url, "ANALYZE runs");
}

claim_round troupe_claims(caf::actor_system& sys, const options& o, uint32_t max) {
  fill_queue(sys, o);
  auto store = start_store(sys, o);
  auto commits_before = commits(o.url, std::chrono::milliseconds(1500));
  caf::scoped_actor self{sys};
  std::vector<caf::actor> claimers;
  // Each claimer names its own worker: the pool keeps one worker's claims in order, as it would
  // for one troupe node's.
  for (int i = 0; i < o.claimers; ++i)
    claimers.push_back(sys.spawn(claimer, store, "bench-claimer-" + std::to_string(i), max, caf::actor{self}));
  claim_round out;
  std::unordered_set<std::string> seen;
  auto t0 = steady::now();
  for (auto& c : claimers)
    self->send(c, go_atom::value);
  steady::rep last_end = 0;
  for (int i = 0; i < o.claimers; ++i)
    self->receive([&](report_atom, std::vector<std::string>& ids, int errors, steady::rep end) {
      for (auto& id : ids)
        if (!seen.insert(id).second)
          ++out.duplicates;
      out.errors += errors;
      last_end = std::max(last_end, end);
    });
  out.wall_s = std::chrono::duration<double>(steady::time_point(steady::duration(last_end)) - t0).count();
  out.missing = o.claims - static_cast<int>(seen.size());
  out.per_s = static_cast<double>(seen.size()) / out.wall_s;
  stop_store(sys, store);
  out.commits = commits(o.url, std::chrono::milliseconds(300)) - commits_before;
  auto once = query_int(o.url, "SELECT COUNT(*) FROM runs WHERE status = 'running' AND attempts = 1 AND lease_epoch = 1");
  if (once != o.claims)
    fail(std::to_string(once) + " of " + std::to_string(o.claims) + " runs are running on their first attempt");
  return out;
}

// The pgbench claim script: the store's own claim statement, one per transaction. A parameter of the
// store's becomes a pgbench variable set once per run (the times are strings like the store's); the
// bench's runs have one tenant, and there is no cap.
std::string claim_script() {
  std::string claim = with_pgbench_variables(io::store_sql::claim_ready_runs);
  // claim_ready_runs binds (now, n, worker, lease_expires_at, the tenant served last, the cap).
  const std::pair<const char*, const char*> values[] = {{":p1", ":now"},  {":p2", ":n"}, {":p3", ":worker"},
                                                        {":p4", ":lease"}, {":p5", "''"}, {":p6", "0"}};
  for (auto [variable, value] : values)
    claim = std::regex_replace(claim, std::regex(std::string(variable) + "\\b"), value);
  return claim + ";\n";
}

// Claims/s: runs taken over the time pgbench spent (transactions / tps).
double pgbench_claims(caf::actor_system& sys, const options& o, uint32_t max, const fs::path& dir) {
  fill_queue(sys, o);
  auto script = dir / ("claim" + std::to_string(max) + ".sql");
  write_file(script, claim_script());
  // Enough transactions for every run; with B > 1 the last few may find nothing left.
  int per_client = (o.claims + static_cast<int>(max) * o.claimers - 1) / (static_cast<int>(max) * o.claimers);
  auto now = protocol::iso_now();
  auto lease = now; // as long as the store's: an ISO time string
  auto r = pgbench(o, script.string(),
                   {"-c", std::to_string(o.claimers), "-j", "2", "-t", std::to_string(per_client), "-D",
                    "now=" + now, "-D", "lease=" + lease, "-D", "n=" + std::to_string(max), "-D",
                    "worker=bench-claimer"},
                   dir);
  auto once = query_int(o.url, "SELECT COUNT(*) FROM runs WHERE status = 'running' AND attempts = 1 AND lease_epoch = 1");
  if (once != o.claims)
    fail("after pgbench " + std::to_string(once) + " of " + std::to_string(o.claims) +
         " runs are running on their first attempt");
  double elapsed = static_cast<double>(r.transactions) / r.tps;
  return o.claims / elapsed;
}

std::string newest_pgbench() {
  std::vector<fs::path> found;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    auto p = entry.path() / "bin" / "pgbench";
    if (fs::exists(p))
      found.push_back(p);
  }
  if (found.empty())
    return "pgbench";
  std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
    auto va = std::atoi(a.parent_path().parent_path().filename().c_str());
    auto vb = std::atoi(b.parent_path().parent_path().filename().c_str());
    return va < vb;
  });
  return found.back().string();
}

std::vector<double> ratios(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    out.push_back(b[i] > 0 ? a[i] / b[i] : 0);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  if (auto env = std::getenv("TROUPE_POSTGRES_URL"))
    o.url = env;
  CLI::App app{"the PostgreSQL run store against pgbench"};
  app.add_option("--url", o.url, "PostgreSQL URL (default: TROUPE_POSTGRES_URL)");
  app.add_option("--pgbench", o.pgbench, "pgbench (default: the newest under /usr/lib/postgresql)");
  app.add_option("--runs", o.runs, "appending runs (troupe's appenders)")->check(CLI::PositiveNumber);
  app.add_option("--events", o.events, "events appended per run")->check(CLI::PositiveNumber);
  app.add_option("--seconds", o.seconds, "pgbench seconds per append round")->check(CLI::PositiveNumber);
  app.add_option("--claims", o.claims, "queued runs to claim per round")->check(CLI::PositiveNumber);
  app.add_option("--claimers", o.claimers, "concurrent claimers")->check(CLI::PositiveNumber);
  app.add_option("--claim-batch", o.claim_batch, "runs per claim in the extra figure (1: none)")
    ->check(CLI::PositiveNumber);
  app.add_option("--rounds", o.rounds)->check(CLI::PositiveNumber);
  app.add_option("--pool-size", o.pool_size, "the store's connections")->check(CLI::PositiveNumber);
  app.add_option("--pool-batch", o.pool_batch, "messages a worker carries out per transaction")
    ->check(CLI::PositiveNumber);
  app.add_option("--active", o.active, "transactions the store runs at once (0: the cores, at least 2)")
    ->check(CLI::NonNegativeNumber);
  app.add_option("--spill-ms", o.spill_ms, "how long a message waits for a busy connection's next transaction")
    ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (o.url.empty())
    fail("no PostgreSQL URL (--url or TROUPE_POSTGRES_URL)");
  if (o.pgbench.empty())
    o.pgbench = newest_pgbench();
  // pgbench's one-run claims take exactly one run each: every client gets the same share.
  if (o.claims % o.claimers != 0)
    fail("--claims must be a multiple of --claimers");

  auto dir = fs::temp_directory_path() / ("troupe-bench-pg." + std::to_string(getpid()));
  fs::create_directories(dir);

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};

  // The store makes its schema; the settings are read once it exists.
  stop_store(sys, start_store(sys, o));
  auto synchronous_commit = query_text(o.url, "SHOW synchronous_commit");
  auto fsync = query_text(o.url, "SHOW fsync");
  auto server_version = query_text(o.url, "SHOW server_version");
  if (synchronous_commit != "on" || fsync != "on")
    fail("the server runs with synchronous_commit=" + synchronous_commit + ", fsync=" + fsync +
         ": appends would not be durable");

  std::vector<double> a_troupe, a_pool, a_runs, a_pool_lat, a_runs_lat, c_troupe, c_pg, cb_troupe, cb_pg;
  std::vector<double> a_latency;
  // Operations per committed transaction in troupe's rounds: how much group commit gathered.
  std::vector<double> a_per_commit, c_per_commit, cb_per_commit;
  int append_errors = 0, wrong_counts = 0, claim_errors = 0, duplicates = 0, missing = 0;
  for (int round = 1; round <= o.rounds; ++round) {
    // pgbench first in odd rounds, troupe first in even ones.
    auto pg_side = [&] {
      auto p = pgbench_appends(o, o.pool_size, dir);
      a_pool.push_back(p.tps);
      a_pool_lat.push_back(p.latency_avg_ms);
      auto q = pgbench_appends(o, o.runs, dir);
      a_runs.push_back(q.tps);
      a_runs_lat.push_back(q.latency_avg_ms);
    };
    auto troupe_side = [&] {
      auto a = troupe_appends(sys, o);
      a_troupe.push_back(a.per_s);
      append_errors += a.errors;
      wrong_counts += a.wrong_counts;
      a_latency.insert(a_latency.end(), a.latency_ms.begin(), a.latency_ms.end());
      a_per_commit.push_back(a.commits > 0 ? static_cast<double>(o.runs) * o.events / a.commits : 0);
      std::fprintf(stderr,
                   "[pgstore] round %d/%d appends: troupe %.0f/s (%d x %d in %.2f s, p50 %.2f ms, p99 %.2f ms, "
                   "%lld commits, %.1f appends per commit)\n",
                   round, o.rounds, a.per_s, o.runs, o.events, a.wall_s, percentile(a.latency_ms, 50),
                   percentile(a.latency_ms, 99), static_cast<long long>(a.commits), a_per_commit.back());
    };
    if (round % 2) {
      pg_side();
      troupe_side();
    } else {
      troupe_side();
      pg_side();
    }
    std::fprintf(stderr, "[pgstore] round %d/%d appends: pgbench -c%d %.0f tps (avg %.2f ms), -c%d %.0f tps (avg %.2f ms)\n",
                 round, o.rounds, o.pool_size, a_pool.back(), a_pool_lat.back(), o.runs, a_runs.back(),
                 a_runs_lat.back());

    auto claims_of = [&](uint32_t max, std::vector<double>& t, std::vector<double>& p, std::vector<double>& per_commit) {
      auto troupe_claim = [&] {
        auto c = troupe_claims(sys, o, max);
        t.push_back(c.per_s);
        per_commit.push_back(c.commits > 0 ? static_cast<double>(o.claims) / c.commits : 0);
        claim_errors += c.errors;
        duplicates += c.duplicates;
        missing += c.missing;
      };
      auto pg_claim = [&] { p.push_back(pgbench_claims(sys, o, max, dir)); };
      if (round % 2) {
        pg_claim();
        troupe_claim();
      } else {
        troupe_claim();
        pg_claim();
      }
      std::fprintf(stderr,
                   "[pgstore] round %d/%d claims of %u: troupe %.0f/s (%.1f runs per commit), pgbench %.0f/s (%d runs, "
                   "%d claimers)\n",
                   round, o.rounds, max, t.back(), per_commit.back(), p.back(), o.claims, o.claimers);
    };
    claims_of(1, c_troupe, c_pg, c_per_commit);
    if (o.claim_batch > 1)
      claims_of(static_cast<uint32_t>(o.claim_batch), cb_troupe, cb_pg, cb_per_commit);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);

  auto m = [](const std::vector<double>& v) { return median(v); };
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  auto payload = make_event(run_id_of(0), 7).json.size();
  std::printf(
    "{\"server_version\":\"%s\",\"synchronous_commit\":\"%s\",\"fsync\":\"%s\",\"pool_size\":%d,\"pool_batch\":%d,"
    "\"active_transactions\":%d,\"spill_ms\":%.0f,"
    "\"rounds\":%d,\"payload_bytes\":%zu,"
    "\"append_runs\":%d,\"append_events_per_run\":%d,\"appends_per_round\":%d,\"pgbench_seconds\":%d,"
    "\"append_troupe_per_s\":%s,\"append_pgbench_pool_tps\":%s,\"append_pgbench_runs_tps\":%s,"
    "\"append_troupe_per_s_median\":%.1f,\"append_pgbench_pool_tps_median\":%.1f,\"append_pgbench_runs_tps_median\":%.1f,"
    "\"append_ratio\":%.3f,\"append_per_round_ratio\":%s,\"append_ratio_over_runs_clients\":%.3f,"
    "\"append_troupe_latency_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f},"
    "\"append_pgbench_pool_latency_avg_ms\":%s,\"append_pgbench_runs_latency_avg_ms\":%s,"
    "\"append_troupe_per_commit\":%s,\"claim_troupe_per_commit\":%s,\"claim_batch_troupe_per_commit\":%s,"
    "\"append_errors\":%d,\"wrong_event_counts\":%d,"
    "\"claim_runs\":%d,\"claimers\":%d,"
    "\"claim_troupe_per_s\":%s,\"claim_pgbench_per_s\":%s,"
    "\"claim_troupe_per_s_median\":%.1f,\"claim_pgbench_per_s_median\":%.1f,\"claim_ratio\":%.3f,"
    "\"claim_per_round_ratio\":%s,"
    "\"claim_batch\":%d,\"claim_batch_troupe_per_s\":%s,\"claim_batch_pgbench_per_s\":%s,"
    "\"claim_batch_troupe_per_s_median\":%.1f,\"claim_batch_pgbench_per_s_median\":%.1f,\"claim_batch_ratio\":%.3f,"
    "\"claim_errors\":%d,\"claim_duplicates\":%d,\"claim_missing\":%d}\n",
    server_version.c_str(), synchronous_commit.c_str(), fsync.c_str(), o.pool_size, o.pool_batch,
    o.active > 0 ? o.active : static_cast<int>(std::max(2u, std::thread::hardware_concurrency())), o.spill_ms, o.rounds,
    payload,
    o.runs, o.events, o.runs * o.events, o.seconds, json_list(a_troupe).c_str(), json_list(a_pool).c_str(),
    json_list(a_runs).c_str(), m(a_troupe), m(a_pool), m(a_runs), ratio(m(a_troupe), m(a_pool)),
    json_list(ratios(a_troupe, a_pool), "%.3f").c_str(), ratio(m(a_troupe), m(a_runs)), percentile(a_latency, 50),
    percentile(a_latency, 99), a_latency.empty() ? -1.0 : *std::max_element(a_latency.begin(), a_latency.end()),
    json_list(a_pool_lat, "%.3f").c_str(), json_list(a_runs_lat, "%.3f").c_str(), json_list(a_per_commit).c_str(),
    json_list(c_per_commit).c_str(), json_list(cb_per_commit).c_str(), append_errors, wrong_counts,
    o.claims, o.claimers, json_list(c_troupe).c_str(), json_list(c_pg).c_str(), m(c_troupe), m(c_pg),
    ratio(m(c_troupe), m(c_pg)), json_list(ratios(c_troupe, c_pg), "%.3f").c_str(), o.claim_batch,
    json_list(cb_troupe).c_str(), json_list(cb_pg).c_str(), m(cb_troupe), m(cb_pg), ratio(m(cb_troupe), m(cb_pg)),
    claim_errors, duplicates, missing);
  bool ok = append_errors == 0 && wrong_counts == 0 && claim_errors == 0 && duplicates == 0 && missing == 0;
  if (!ok)
    std::fprintf(stderr, "troupe_bench_pg_store: checks failed (append errors %d, wrong event counts %d, claim errors "
                         "%d, duplicate claims %d, runs not claimed %d)\n",
                 append_errors, wrong_counts, claim_errors, duplicates, missing);
  return ok ? 0 : 1;
}

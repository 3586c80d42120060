// Load generator for durable background runs (AS-49..AS-55): submits `--runs` runs with
// `POST /v1/runs` over `--connections` keep-alive connections at once, waits until the store counts
// every one of them terminal (polling `GET /v1/runs?status=completed&limit=1` for total_count from
// the first POST on, and failed/cancelled once that count stalls; with a deadline), then reads every
// run's snapshot with `GET /v1/runs/{id}`. The timing figures come from the snapshots, i.e. from
// troupe's own clock: queue = started_at - created_at (POST -> running), run = completed_at -
// started_at; peak_running / peak_queued are the most runs in that state at one instant, from the
// same timestamps. One JSON object on stdout:
//
//   {"runs", "connections", "submitted", "submit_errors", "submit_error_kinds", "submit_error_sample",
//    "submit_s", "submit_per_s", "post_ms": {p50,p99,max}, "deadline_hit", "wait_s",
//    "peak_running", "peak_queued", "polls", "poll_ms", "statuses": {status: n}, "read_errors", "lost",
//    "not_completed", "retried", "wall_s", "runs_per_s", "queue_ms", "run_ms", "end_to_end_ms",
//    "server_cpu": {"over_s", "process_cpu_s", "threads": {name: {threads, cpu_s, busiest_cpu_s,
//    busiest_share}}} (with --server-pid: troupe's CPU time per thread name from the first POST to
//    the end of the wait, the busiest thread's share of that wall time; else null)}
//
// wall_s runs from the first POST (client clock) to the last completed_at (troupe's clock; both
// are this machine's system clock). runs_per_s = completed runs / wall_s. A run counts as lost when
// its POST was answered 2xx but its snapshot cannot be read; not_completed counts the runs read in
// any other status than `completed`. Single-threaded, so it leaves the second core to the server.
//
//   troupe_bench_runs --port P [--host H] [--runs N] [--connections C] [--timeout-s T]
//                     [--poll-ms MS] [--query TEXT] [--server-pid PID]
#include "bench_stats.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <rapidjson/document.h>

#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using steady = std::chrono::steady_clock;
using wall_clock = std::chrono::system_clock;

namespace {

using troupe::bench::median;
using troupe::bench::percentile;

struct options {
  std::string host = "127.0.0.1";
  int port = 0;
  int runs = 10000;
  int connections = 64;
  int timeout_s = 300;
  int poll_ms = 250;
  int server_pid = 0; // when given: the server's CPU time per thread name during the load
  std::string query = "Run in the background, please.";
};

// The JSON escaping of `s`, without the quotes: the formats below put them around it.
std::string json_escape(const std::string& s) {
  auto quoted = troupe::protocol::json::quote(s);
  return quoted.substr(1, quoted.size() - 2);
}

// GETs retried on a fresh connection because the server had closed the idle one they were sent on.
int retried_total = 0;

// One HTTP exchange to run on some connection of a pool.
struct job {
  http::verb verb = http::verb::get;
  std::string target;
  std::string body;
  bool idempotent = true; // retried once on a fresh connection when a reused one was closed
  // status 0 means a transport failure described by `error`.
  std::function<void(int status, const std::string& body, const std::string& error)> done;
};

// A fixed number of keep-alive connections that take jobs from `next()` until it has none; then
// `drained()` is called once every connection is idle.
class pool : public std::enable_shared_from_this<pool> {
public:
  pool(net::io_context& ioc, tcp::endpoint ep, std::string host, int size, int timeout_s,
       std::function<std::optional<job>()> next, std::function<void()> drained)
    : ioc_(ioc), ep_(ep), host_(std::move(host)), size_(size), timeout_s_(timeout_s), next_(std::move(next)),
      drained_(std::move(drained)) {}

  void start() {
    busy_ = size_;
    for (int i = 0; i < size_; ++i)
      std::make_shared<connection>(shared_from_this())->pull();
  }

private:
  class connection : public std::enable_shared_from_this<connection> {
  public:
    explicit connection(std::shared_ptr<pool> p) : pool_(std::move(p)), stream_(pool_->ioc_) {}

    void pull() {
      auto j = pool_->next_();
      if (!j) {
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.close();
        if (--pool_->busy_ == 0 && pool_->drained_)
          pool_->drained_();
        return;
      }
      job_ = std::move(*j);
      attempt_ = 0;
      send();
    }

  private:
    void send() {
      req_ = {};
      req_.method(job_.verb);
      req_.target(job_.target);
      req_.version(11);
      req_.set(http::field::host, pool_->host_);
      req_.keep_alive(true);
      if (job_.verb == http::verb::post) {
        req_.set(http::field::content_type, "application/json");
        req_.body() = job_.body;
      }
      req_.prepare_payload();
      stream_.expires_after(std::chrono::seconds(pool_->timeout_s_));
      if (!connected_) {
        stream_.async_connect(pool_->ep_, [self = shared_from_this()](beast::error_code ec) {
          if (ec)
            return self->fail("connect", ec);
          self->connected_ = true;
          self->reused_ = false;
          self->stream_.socket().set_option(tcp::no_delay(true), ec);
          self->write();
        });
        return;
      }
      reused_ = true;
      write();
    }

    void write() {
      http::async_write(stream_, req_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec)
          return self->fail("write", ec);
        self->read();
      });
    }

    void read() {
      parser_.emplace();
      parser_->body_limit(64 * 1024 * 1024);
      http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec)
          return self->fail("read", ec);
        auto res = self->parser_->release();
        if (!res.keep_alive())
          self->drop();
        auto done = std::move(self->job_.done);
        done(static_cast<int>(res.result_int()), res.body(), {});
        self->pull();
      });
    }

    void drop() {
      beast::error_code ec;
      stream_.socket().close(ec);
      connected_ = false;
      buffer_.consume(buffer_.size());
    }

    void fail(const char* what, beast::error_code ec) {
      bool stale = reused_ && (ec == http::error::end_of_stream || ec == net::error::eof
                               || ec == net::error::connection_reset || ec == net::error::broken_pipe);
      drop();
      if (stale && job_.idempotent && attempt_ == 0) {
        ++attempt_;
        ++retried_total;
        return send();
      }
      auto done = std::move(job_.done);
      done(0, {}, std::string(what) + ": " + (ec == beast::error::timeout ? "timeout" : ec.message()));
      pull();
    }

    std::shared_ptr<pool> pool_;
    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    http::request<http::string_body> req_;
    std::optional<http::response_parser<http::string_body>> parser_;
    job job_;
    int attempt_ = 0;
    bool connected_ = false;
    bool reused_ = false;
  };

  net::io_context& ioc_;
  tcp::endpoint ep_;
  std::string host_;
  int size_;
  int timeout_s_;
  std::function<std::optional<job>()> next_;
  std::function<void()> drained_;
  int busy_ = 0;
};

std::string stats_json(const std::vector<double>& v) {
  char buf[200];
  std::snprintf(buf, sizeof buf, R"({"p50":%.2f,"p99":%.2f,"max":%.2f,"n":%zu})", percentile(v, 50),
                percentile(v, 99), v.empty() ? -1.0 : *std::max_element(v.begin(), v.end()), v.size());
  return buf;
}

std::optional<wall_clock::time_point> timestamp(const rapidjson::Value& doc, const char* key) {
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd() || !it->value.IsString())
    return std::nullopt;
  return troupe::protocol::parse_iso_timestamp(std::string(it->value.GetString(), it->value.GetStringLength()));
}

double ms_between(wall_clock::time_point a, wall_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string string_member(const rapidjson::Value& doc, const char* key) {
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd() || !it->value.IsString())
    return {};
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

// CPU ticks (utime + stime) of each thread of `pid`, with the thread's name.
struct thread_ticks {
  std::string comm;
  long long ticks = 0;
};

std::map<int, thread_ticks> read_thread_ticks(int pid) {
  std::map<int, thread_ticks> out;
  if (pid <= 0)
    return out;
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line))
      continue;
    auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos)
      continue;
    thread_ticks t;
    t.comm = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int i = 3; rest >> field; ++i) { // field 3 is the state
      if (i == 14)
        utime = std::atoll(field.c_str());
      else if (i == 15) {
        stime = std::atoll(field.c_str());
        break;
      }
    }
    t.ticks = utime + stime;
    out[std::atoi(entry.path().filename().c_str())] = t;
  }
  return out;
}

// {"name": {"threads", "cpu_s", "busiest_cpu_s", "busiest_share"}} between two snapshots, the share
// being the busiest thread's CPU time over `wall_s` (1.0 = one core all the time); "" when no pid.
std::string thread_cpu_json(const std::map<int, thread_ticks>& before, const std::map<int, thread_ticks>& after,
                            double wall_s) {
  if (after.empty())
    return "null";
  double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  struct group {
    int threads = 0;
    double sum = 0, most = 0;
  };
  std::map<std::string, group> groups;
  double total = 0;
  for (auto& [tid, t] : after) {
    auto b = before.find(tid);
    double d = static_cast<double>(t.ticks - (b == before.end() ? 0 : b->second.ticks)) / hz;
    auto& g = groups[t.comm];
    ++g.threads;
    g.sum += d;
    g.most = std::max(g.most, d);
    total += d;
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "{\"over_s\":%.3f,\"process_cpu_s\":%.2f,\"threads\":{", wall_s, total);
  std::string out = buf;
  bool first = true;
  for (auto& [name, g] : groups) {
    std::snprintf(buf, sizeof buf, "%s\"%s\":{\"threads\":%d,\"cpu_s\":%.2f,\"busiest_cpu_s\":%.2f,\"busiest_share\":%.2f}",
                  first ? "" : ",", json_escape(name).c_str(), g.threads, g.sum, g.most, wall_s > 0 ? g.most / wall_s : 0);
    out += buf;
    first = false;
  }
  return out + "}}";
}

} // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"10,000 concurrent background runs against a running troupe"};
  app.add_option("--host", o.host);
  app.add_option("--port", o.port)->required()->check(CLI::Range(1, 65535));
  app.add_option("--runs", o.runs)->check(CLI::PositiveNumber);
  app.add_option("--connections", o.connections)->check(CLI::PositiveNumber);
  app.add_option("--timeout-s", o.timeout_s);
  app.add_option("--poll-ms", o.poll_ms)->check(CLI::PositiveNumber);
  app.add_option("--query", o.query);
  app.add_option("--server-pid", o.server_pid, "the server's CPU time per thread name during the load");
  CLI11_PARSE(app, argc, argv);

  net::io_context ioc{1};
  tcp::endpoint ep{net::ip::make_address(o.host), static_cast<uint16_t>(o.port)};
  std::string host = o.host + ":" + std::to_string(o.port);
  const std::string body = R"({"messages":[{"role":"user","content":")" + json_escape(o.query) + R"("}]})";
  const auto deadline = steady::now() + std::chrono::seconds(o.timeout_s);

  // --- state of the phases -------------------------------------------------------------------------
  std::map<std::string, int64_t> initial_counts; // terminal counts before the load (the store may hold older runs)
  std::vector<std::string> run_ids;
  std::vector<double> post_ms;
  std::map<std::string, int> submit_errors;
  std::string submit_error_sample;
  wall_clock::time_point first_post{};
  steady::time_point submit_start{}, submit_end{}, wait_end{};
  int64_t polls = 0;
  std::vector<double> poll_ms;                                   // latency of the completed-count GET
  std::vector<std::pair<wall_clock::time_point, int>> running_edges, queued_edges; // +1 / -1 per run
  bool deadline_hit = false;
  bool submitting_done = false;
  std::map<std::string, int> statuses;
  int read_errors = 0;
  std::string read_error_sample;
  std::vector<double> queue_ms, run_ms, e2e_ms;
  std::optional<wall_clock::time_point> last_completed;
  std::string fatal;
  std::map<int, thread_ticks> ticks_start, ticks_wait_end; // the server's threads, around submit + wait

  // A single GET, on its own short-lived pool.
  auto get_once = [&](std::string target, std::function<void(int, const std::string&, const std::string&)> done) {
    auto pending = std::make_shared<std::optional<job>>(job{http::verb::get, std::move(target), {}, true, std::move(done)});
    std::make_shared<pool>(ioc, ep, host, 1, 30, [pending]() {
      auto j = std::move(*pending);
      pending->reset();
      return j;
    }, nullptr)->start();
  };

  // Reads `counts[status]` = total_count for each of `list`, then calls `then`.
  using counts_t = std::map<std::string, int64_t>;
  std::function<void(std::vector<std::string>, std::shared_ptr<counts_t>, std::function<void(counts_t&)>)> count_statuses;
  count_statuses = [&](std::vector<std::string> list, std::shared_ptr<counts_t> counts,
                       std::function<void(counts_t&)> then) {
    if (list.empty())
      return then(*counts);
    auto status = list.back();
    list.pop_back();
    get_once("/v1/runs?status=" + status + "&limit=1",
             [&, list, counts, then, status](int code, const std::string& text, const std::string& err) {
               int64_t n = -1;
               if (code == 200) {
                 rapidjson::Document d;
                 d.Parse(text.c_str(), text.size());
                 if (!d.HasParseError() && d.IsObject() && d.HasMember("total_count") && d["total_count"].IsInt64())
                   n = d["total_count"].GetInt64();
               }
               if (n < 0 && fatal.empty())
                 fatal = "GET /v1/runs?status=" + status + " failed: " + (code ? std::to_string(code) + " " + text : err);
               (*counts)[status] = n;
               count_statuses(list, counts, then);
             });
  };

  // --- phase 3: every snapshot ----------------------------------------------------------------------
  auto read_all = [&] {
    auto next_index = std::make_shared<std::size_t>(0);
    auto p = std::make_shared<pool>(
      ioc, ep, host, o.connections, 60,
      [&, next_index]() -> std::optional<job> {
        if (*next_index >= run_ids.size())
          return std::nullopt;
        auto id = run_ids[(*next_index)++];
        return job{http::verb::get, "/v1/runs/" + id, {}, true,
                   [&, id](int code, const std::string& text, const std::string& err) {
                     if (code != 200) {
                       ++read_errors;
                       if (read_error_sample.empty())
                         read_error_sample = id + ": " + (code ? std::to_string(code) + " " + text.substr(0, 200) : err);
                       return;
                     }
                     rapidjson::Document d;
                     d.Parse(text.c_str(), text.size());
                     if (d.HasParseError() || !d.IsObject()) {
                       ++read_errors;
                       if (read_error_sample.empty())
                         read_error_sample = id + ": unparsable snapshot";
                       return;
                     }
                     auto status = string_member(d, "status");
                     ++statuses[status];
                     auto created = timestamp(d, "created_at");
                     auto started = timestamp(d, "started_at");
                     auto completed = timestamp(d, "completed_at");
                     if (created && started) {
                       queue_ms.push_back(ms_between(*created, *started));
                       queued_edges.push_back({*created, 1});
                       queued_edges.push_back({*started, -1});
                     }
                     if (started && completed) {
                       running_edges.push_back({*started, 1});
                       running_edges.push_back({*completed, -1});
                     }
                     if (status != "completed")
                       return;
                     if (started && completed)
                       run_ms.push_back(ms_between(*started, *completed));
                     if (created && completed)
                       e2e_ms.push_back(ms_between(*created, *completed));
                     if (completed && (!last_completed || *completed > *last_completed))
                       last_completed = completed;
                   }};
      },
      [] {});
    p->start();
  };

  // --- phase 2: poll the completed count until every submitted run is counted, or the deadline ------
  // Only `status=completed` is asked for while it moves (each list request is answered by the store's
  // one thread, between the writes being measured); failed and cancelled are counted too once it stalls.
  net::steady_timer poll_timer(ioc);
  std::function<void()> poll;
  int64_t last_completed_count = -1;
  auto finish_wait = [&](bool all) {
    deadline_hit = !all;
    wait_end = steady::now();
    ticks_wait_end = read_thread_ticks(o.server_pid);
    read_all();
  };
  auto poll_again = [&] {
    if (steady::now() >= deadline)
      return finish_wait(false);
    poll_timer.expires_after(std::chrono::milliseconds(o.poll_ms));
    poll_timer.async_wait([&](beast::error_code ec) {
      if (!ec)
        poll();
    });
  };
  poll = [&] {
    ++polls;
    auto t = steady::now();
    count_statuses({"completed"}, std::make_shared<counts_t>(), [&, t](counts_t& c) {
      poll_ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - t).count());
      if (!fatal.empty())
        return finish_wait(false);
      auto done = c["completed"] - initial_counts["completed"];
      auto target = static_cast<int64_t>(run_ids.size());
      if (submitting_done && done >= target)
        return finish_wait(true);
      bool stalled = submitting_done && c["completed"] == last_completed_count;
      last_completed_count = c["completed"];
      if (!stalled)
        return poll_again();
      count_statuses({"failed", "cancelled"}, std::make_shared<counts_t>(), [&, done, target](counts_t& f) {
        if (!fatal.empty())
          return finish_wait(false);
        auto ended = done + f["failed"] - initial_counts["failed"] + f["cancelled"] - initial_counts["cancelled"];
        if (ended >= target)
          return finish_wait(true);
        poll_again();
      });
    });
  };

  // --- phase 1: submit every run ---------------------------------------------------------------------
  auto submit = [&] {
    auto launched = std::make_shared<int>(0);
    ticks_start = read_thread_ticks(o.server_pid);
    submit_start = steady::now();
    first_post = wall_clock::now();
    auto p = std::make_shared<pool>(
      ioc, ep, host, std::min(o.connections, o.runs), o.timeout_s,
      [&, launched]() -> std::optional<job> {
        if (*launched >= o.runs)
          return std::nullopt;
        ++*launched;
        auto sent = steady::now();
        return job{http::verb::post, "/v1/runs", body, false,
                   [&, sent](int code, const std::string& text, const std::string& err) {
                     post_ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - sent).count());
                     std::string kind;
                     std::string id;
                     if (code == 0) {
                       kind = err.substr(0, err.find(':'));
                     } else if (code < 200 || code >= 300) {
                       kind = "http_" + std::to_string(code);
                     } else {
                       rapidjson::Document d;
                       d.Parse(text.c_str(), text.size());
                       if (d.HasParseError() || !d.IsObject())
                         kind = "unparsable";
                       else if ((id = string_member(d, "run_id")).empty())
                         kind = "no_run_id";
                       else if (string_member(d, "status") != "queued")
                         kind = "status_" + string_member(d, "status");
                     }
                     if (!kind.empty()) {
                       ++submit_errors[kind];
                       if (submit_error_sample.empty())
                         submit_error_sample = kind + ": " + (code ? text.substr(0, 300) : err);
                       if (id.empty())
                         return;
                     }
                     run_ids.push_back(id);
                   }};
      },
      [&] {
        submit_end = steady::now();
        submitting_done = true;
      });
    p->start();
    poll(); // from the start: the wait ends as soon as the last run does
  };

  // --- phase 0: the terminal counts before the load ----------------------------------------------------
  count_statuses({"cancelled", "failed", "completed"}, std::make_shared<counts_t>(), [&](counts_t& c) {
    initial_counts = c;
    if (!fatal.empty())
      return;
    submit();
  });

  ioc.run();

  if (!fatal.empty() && run_ids.empty()) {
    std::fprintf(stderr, "troupe_bench_runs: %s\n", fatal.c_str());
    std::printf("{\"runs\":%d,\"fatal\":\"%s\"}\n", o.runs, json_escape(fatal).c_str());
    return 1;
  }

  int submitted = static_cast<int>(run_ids.size());
  int submit_error_count = o.runs - submitted;
  for (auto& [k, n] : submit_errors)
    if (k.rfind("status_", 0) == 0)
      submit_error_count += n; // answered with an id, but not `queued`
  int completed = statuses.count("completed") ? statuses["completed"] : 0;
  int lost = read_errors;
  int not_completed = submitted - completed - lost;
  double submit_s = std::chrono::duration<double>(submit_end - submit_start).count();
  double wait_s = std::chrono::duration<double>(wait_end - submit_start).count();
  double wall_s = last_completed ? std::chrono::duration<double>(*last_completed - first_post).count() : 0;

  // The most runs queued and running at one time, from the snapshots' own timestamps.
  auto peak = [](std::vector<std::pair<wall_clock::time_point, int>>& edges) {
    std::sort(edges.begin(), edges.end()); // at equal times -1 sorts first: an end before a start
    int now = 0, most = 0;
    for (auto& [t, d] : edges)
      most = std::max(most, now += d);
    return most;
  };
  int peak_running = peak(running_edges), peak_queued = peak(queued_edges);

  std::string kinds = "{";
  for (auto& [k, n] : submit_errors)
    kinds += (kinds.size() > 1 ? "," : "") + std::string("\"") + json_escape(k) + "\":" + std::to_string(n);
  kinds += "}";
  std::string status_json = "{";
  for (auto& [k, n] : statuses)
    status_json += (status_json.size() > 1 ? "," : "") + std::string("\"") + json_escape(k) + "\":" + std::to_string(n);
  status_json += "}";

  std::printf("{\"runs\":%d,\"connections\":%d,\"submitted\":%d,\"submit_errors\":%d,\"submit_error_kinds\":%s,"
              "\"submit_error_sample\":\"%s\",\"submit_s\":%.3f,\"submit_per_s\":%.1f,\"post_ms\":%s,"
              "\"deadline_hit\":%s,\"wait_s\":%.3f,\"peak_running\":%d,\"peak_queued\":%d,\"polls\":%lld,\"poll_ms\":%s,"
              "\"statuses\":%s,\"completed\":%d,\"read_errors\":%d,\"read_error_sample\":\"%s\",\"lost\":%d,"
              "\"not_completed\":%d,\"retried\":%d,\"fatal\":\"%s\",\"wall_s\":%.3f,\"runs_per_s\":%.1f,"
              "\"queue_ms\":%s,\"run_ms\":%s,\"end_to_end_ms\":%s,\"server_cpu\":%s}\n",
              o.runs, o.connections, submitted, submit_error_count, kinds.c_str(),
              json_escape(submit_error_sample).c_str(), submit_s, submit_s > 0 ? submitted / submit_s : 0.0,
              stats_json(post_ms).c_str(), deadline_hit ? "true" : "false", wait_s,
              peak_running, peak_queued, static_cast<long long>(polls), stats_json(poll_ms).c_str(), status_json.c_str(), completed, read_errors,
              json_escape(read_error_sample).c_str(), lost, not_completed, retried_total, json_escape(fatal).c_str(),
              wall_s, wall_s > 0 ? completed / wall_s : 0.0, stats_json(queue_ms).c_str(), stats_json(run_ms).c_str(),
              stats_json(e2e_ms).c_str(), thread_cpu_json(ticks_start, ticks_wait_end, wait_s).c_str());
  bool ok = submit_error_count == 0 && lost == 0 && not_completed == 0 && !deadline_hit && fatal.empty();
  return ok ? 0 : 1;
}

// Load generator for streamed chat completions (AS-11): opens `--concurrency` connections at once,
// each carrying one `POST /v1/chat/completions` with `stream: true` and `Connection: close`, and
// starts the next request as one ends until `--requests` have run. Per request it measures, from
// just before connecting, the time to the first event frame (the first `id:` line) and the time to
// `data: [DONE]`. One JSON object on stdout:
//
//   {"concurrency", "requests", "ok", "errors", "error_kinds": {kind: count}, "error_sample",
//    "wall_s", "completions_per_s", "ttfe_ms": {"p50","p99","max"}, "total_ms": {"p50","p99","max"},
//    "frames_per_completion"}
//
// A request counts as ok when the answer is 200 text/event-stream, carries at least one event
// frame, no `event: error` frame, and ends with `[DONE]`. Single-threaded, so it leaves the
// second core to the server.
//
//   troupe_bench_chat_load --port P [--host H] [--concurrency N] [--requests M] [--model NAME]
//                          [--users distinct|shared] [--query TEXT] [--timeout-s T] [--split-write 0|1]
#include "bench_stats.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

using troupe::bench::median;
using troupe::bench::percentile;

struct options {
  std::string host = "127.0.0.1";
  int port = 0;
  int concurrency = 100;
  int requests = -1; // default: concurrency
  std::string model;
  bool distinct_users = true;
  std::string query = "Say hello and show me my workspace.";
  int timeout_s = 120;
  bool split_write = false; // head and body in two writes, as some HTTP clients send them
};

struct outcome {
  bool ok = false;
  std::string error_kind;
  std::string error_detail;
  double ttfe_ms = -1;
  double total_ms = -1;
  int frames = 0;
};

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
  }
  return out;
}

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

// One request on its own connection: connect, write, then parse the status line, the headers,
// the chunked body and the SSE lines inside it as bytes arrive.
class request : public std::enable_shared_from_this<request> {
public:
  request(net::io_context& ioc, tcp::endpoint ep, std::string wire, bool split_write, int timeout_s,
          std::function<void(outcome)> done)
    : socket_(ioc), timer_(ioc), ep_(ep), wire_(std::move(wire)), timeout_s_(timeout_s), done_(std::move(done)) {
    auto head_end = wire_.find("\r\n\r\n");
    split_at_ = split_write && head_end != std::string::npos ? head_end + 4 : wire_.size();
  }

  void start() {
    start_ = clock_type::now();
    timer_.expires_after(std::chrono::seconds(timeout_s_));
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec)
        self->fail("timeout", "no [DONE] within the timeout");
    });
    socket_.async_connect(ep_, [self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec)
        return self->fail("connect", ec.message());
      boost::system::error_code opt_ec;
      self->socket_.set_option(tcp::no_delay(true), opt_ec);
      self->write(0);
    });
  }

private:
  // Writes the request from `from`, in two parts when split: the head, then the body.
  void write(std::size_t from) {
    auto to = from < split_at_ ? split_at_ : wire_.size();
    net::async_write(socket_, net::buffer(wire_.data() + from, to - from),
                     [self = shared_from_this(), to](const boost::system::error_code& ec, std::size_t) {
                       if (ec)
                         return self->fail("write", ec.message());
                       if (to < self->wire_.size())
                         return self->write(to);
                       self->read();
                     });
  }

  void read() {
    socket_.async_read_some(net::buffer(buf_), [self = shared_from_this()](const boost::system::error_code& ec,
                                                                          std::size_t n) {
      if (self->finished_)
        return;
      if (n > 0)
        self->consume(std::string_view(self->buf_.data(), n));
      if (self->finished_)
        return;
      if (ec) {
        if (ec == net::error::eof)
          return self->end_of_stream();
        return self->fail("read", ec.message());
      }
      self->read();
    });
  }

  // Raw bytes from the socket.
  void consume(std::string_view bytes) {
    if (!headers_done_) {
      head_.append(bytes);
      auto end = head_.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (head_.size() > 64 * 1024)
          fail("protocol", "response head too large");
        return;
      }
      std::string rest = head_.substr(end + 4);
      head_.resize(end + 2);
      headers_done_ = true;
      parse_head();
      if (finished_)
        return;
      bytes = rest;
      if (!bytes.empty())
        dechunk(bytes);
      return;
    }
    dechunk(bytes);
  }

  void parse_head() {
    // "HTTP/1.1 200 OK"
    auto sp = head_.find(' ');
    status_ = sp == std::string::npos ? 0 : std::atoi(head_.c_str() + sp + 1);
    std::string lower = head_;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    chunked_ = lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
    if (status_ != 200) {
      error_status_ = true;
    } else if (lower.find("\r\ncontent-type: text/event-stream") == std::string::npos) {
      fail("not_event_stream", head_.substr(0, head_.find("\r\n")));
    }
  }

  // The body, chunked or not, into SSE text.
  void dechunk(std::string_view bytes) {
    if (!chunked_)
      return body(bytes);
    while (!bytes.empty() && !finished_) {
      if (chunk_left_ > 0) {
        auto take = std::min<std::size_t>(chunk_left_, bytes.size());
        body(bytes.substr(0, take));
        bytes.remove_prefix(take);
        chunk_left_ -= take;
        continue;
      }
      // A size line (possibly preceded by the previous chunk's CRLF).
      size_line_.push_back(bytes.front());
      bytes.remove_prefix(1);
      if (size_line_.size() >= 2 && size_line_.compare(size_line_.size() - 2, 2, "\r\n") == 0) {
        auto line = size_line_.substr(0, size_line_.size() - 2);
        size_line_.clear();
        if (line.empty())
          continue; // the CRLF that ends a chunk's data
        chunk_left_ = std::strtoull(line.c_str(), nullptr, 16);
        if (chunk_left_ == 0)
          last_chunk_ = true;
      }
    }
  }

  // SSE text: watch lines.
  void body(std::string_view text) {
    if (error_status_) {
      error_body_.append(text.substr(0, std::min<std::size_t>(text.size(), 300)));
      return;
    }
    for (char c : text) {
      if (c != '\n') {
        line_ += c;
        continue;
      }
      if (!line_.empty() && line_.back() == '\r')
        line_.pop_back();
      on_line(line_);
      line_.clear();
      if (finished_)
        return;
    }
  }

  void on_line(const std::string& line) {
    if (line.rfind("id:", 0) == 0) {
      ++frames_;
      if (ttfe_ms_ < 0)
        ttfe_ms_ = ms_since(start_);
    } else if (line == "event: error" || line == "event:error") {
      saw_error_event_ = true;
    } else if (line == "data: [DONE]" || line == "data:[DONE]") {
      total_ms_ = ms_since(start_);
      saw_done_ = true;
    } else if (saw_error_event_ && line.rfind("data:", 0) == 0 && error_event_.empty()) {
      error_event_ = line.substr(0, 300);
    }
  }

  void end_of_stream() {
    if (error_status_)
      return fail("http_" + std::to_string(status_), error_body_);
    if (!saw_done_)
      return fail("no_done", headers_done_ ? "connection closed before [DONE]" : "connection closed before a response");
    if (frames_ == 0)
      return fail("no_events", "[DONE] without any event frame");
    if (saw_error_event_)
      return fail("error_event", error_event_);
    outcome o;
    o.ok = true;
    o.ttfe_ms = ttfe_ms_;
    o.total_ms = total_ms_;
    o.frames = frames_;
    complete(std::move(o));
  }

  void fail(std::string kind, std::string detail) {
    outcome o;
    o.error_kind = std::move(kind);
    o.error_detail = std::move(detail);
    o.ttfe_ms = ttfe_ms_;
    o.frames = frames_;
    complete(std::move(o));
  }

  void complete(outcome o) {
    if (finished_)
      return;
    finished_ = true;
    timer_.cancel();
    boost::system::error_code ec;
    socket_.close(ec);
    done_(std::move(o));
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  tcp::endpoint ep_;
  std::string wire_;
  std::size_t split_at_;
  int timeout_s_;
  std::function<void(outcome)> done_;
  clock_type::time_point start_;
  std::array<char, 16 * 1024> buf_;
  std::string head_;
  bool headers_done_ = false;
  bool chunked_ = false;
  int status_ = 0;
  bool error_status_ = false;
  std::string error_body_;
  std::string size_line_;
  uint64_t chunk_left_ = 0;
  bool last_chunk_ = false;
  std::string line_;
  int frames_ = 0;
  double ttfe_ms_ = -1;
  double total_ms_ = -1;
  bool saw_done_ = false;
  bool saw_error_event_ = false;
  std::string error_event_;
  bool finished_ = false;
};

std::string request_wire(const options& o, int index) {
  std::string body = R"({"messages":[{"role":"user","content":")" + json_escape(o.query) + R"("}],"stream":true)";
  if (!o.model.empty())
    body += R"(,"model":")" + json_escape(o.model) + "\"";
  body += R"(,"user_key":")" + std::string(o.distinct_users ? "bench-user-" + std::to_string(index) : "bench-user")
          + "\"";
  body += "}";
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: " + o.host + ":" + std::to_string(o.port)
         + "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nConnection: close\r\n"
           "Content-Length: "
         + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string stats_json(const std::vector<double>& v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, R"({"p50":%.2f,"p99":%.2f,"max":%.2f})", percentile(v, 50), percentile(v, 99),
                v.empty() ? -1.0 : *std::max_element(v.begin(), v.end()));
  return buf;
}

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --port P [--host H] [--concurrency N] [--requests M] [--model NAME]\n"
               "          [--users distinct|shared] [--query TEXT] [--timeout-s T] [--split-write 0|1]\n",
               argv0);
  std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc)
      usage(argv[0]);
    std::string v = argv[++i];
    if (arg == "--host")
      o.host = v;
    else if (arg == "--port")
      o.port = std::atoi(v.c_str());
    else if (arg == "--concurrency")
      o.concurrency = std::atoi(v.c_str());
    else if (arg == "--requests")
      o.requests = std::atoi(v.c_str());
    else if (arg == "--model")
      o.model = v;
    else if (arg == "--users")
      o.distinct_users = v != "shared";
    else if (arg == "--query")
      o.query = v;
    else if (arg == "--timeout-s")
      o.timeout_s = std::atoi(v.c_str());
    else if (arg == "--split-write")
      o.split_write = v == "1" || v == "true" || v == "yes";
    else
      usage(argv[0]);
  }
  if (o.port <= 0 || o.concurrency <= 0)
    usage(argv[0]);
  if (o.requests < 0)
    o.requests = o.concurrency;

  net::io_context ioc{1};
  tcp::endpoint ep{net::ip::make_address(o.host), static_cast<uint16_t>(o.port)};
  std::vector<double> ttfe, total;
  std::vector<double> frames;
  std::map<std::string, int> error_kinds;
  std::string error_sample;
  int launched = 0, finished = 0, ok = 0;
  auto wall_start = clock_type::now();
  clock_type::time_point wall_end = wall_start;

  std::function<void()> launch;
  auto on_done = [&](outcome r) {
    ++finished;
    if (r.ok) {
      ++ok;
      ttfe.push_back(r.ttfe_ms);
      total.push_back(r.total_ms);
      frames.push_back(r.frames);
    } else {
      ++error_kinds[r.error_kind];
      if (error_sample.empty())
        error_sample = r.error_kind + ": " + r.error_detail;
    }
    if (finished == o.requests)
      wall_end = clock_type::now();
    if (launched < o.requests)
      launch();
  };
  launch = [&] {
    int index = launched++;
    std::make_shared<request>(ioc, ep, request_wire(o, index), o.split_write, o.timeout_s, on_done)->start();
  };
  for (int i = 0; i < std::min(o.concurrency, o.requests); ++i)
    launch();
  ioc.run();

  double wall_s = std::chrono::duration<double>(wall_end - wall_start).count();
  double mean_frames = frames.empty() ? 0 : [&] {
    double sum = 0;
    for (auto f : frames)
      sum += f;
    return sum / static_cast<double>(frames.size());
  }();
  std::string kinds = "{";
  for (auto& [k, n] : error_kinds)
    kinds += (kinds.size() > 1 ? "," : "") + std::string("\"") + json_escape(k) + "\":" + std::to_string(n);
  kinds += "}";
  std::printf("{\"concurrency\":%d,\"requests\":%d,\"ok\":%d,\"errors\":%d,\"error_kinds\":%s,"
              "\"error_sample\":\"%s\",\"wall_s\":%.3f,\"completions_per_s\":%.1f,\"ttfe_ms\":%s,"
              "\"total_ms\":%s,\"frames_per_completion\":%.1f}\n",
              o.concurrency, o.requests, ok, o.requests - ok, kinds.c_str(), json_escape(error_sample).c_str(),
              wall_s, wall_s > 0 ? ok / wall_s : 0.0, stats_json(ttfe).c_str(), stats_json(total).c_str(),
              mean_frames);
  return ok == o.requests ? 0 : 1;
}

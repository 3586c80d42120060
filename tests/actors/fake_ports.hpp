// Fake model and tool ports for actor tests: scripted outcomes, recorded calls, optional hangs.
#pragma once

#include "actors/tool_port.hpp"
#include "actors/model_port.hpp"
#include "protocol/responses_request.hpp"
#include "protocol/round_reply.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe::testing {

// Completes calls from its own threads, as real adapters do; a call with no scripted outcome left
// (or marked `hang`) waits until it is cancelled.
template <class Outcome, class Request>
class fake_port_base {
public:
  ~fake_port_base() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads)
      t.join();
  }

  void push(Outcome o) {
    std::lock_guard<std::mutex> lock(mu_);
    outcomes_.push_back(std::move(o));
  }

  std::vector<Request> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  int cancels() const { return cancels_.load(); }

  // Waits until `n` calls have started; false when `timeout` passed first.
  bool wait_for_requests(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return started_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  }

protected:
  struct handle : cancel_handle {
    std::function<void()> on_cancel;
    void cancel() override { on_cancel(); }
  };

  std::shared_ptr<cancel_handle> start(Request req, std::function<void(Outcome)> done, Outcome cancelled) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(std::move(req));
    started_.notify_all();
    auto fired = std::make_shared<std::atomic<bool>>(false);
    auto h = std::make_shared<handle>();
    h->on_cancel = [this, fired, done, cancelled] {
      ++cancels_;
      if (!fired->exchange(true))
        done(cancelled);
    };
    if (!outcomes_.empty()) {
      auto o = std::move(outcomes_.front());
      outcomes_.pop_front();
      threads_.emplace_back([fired, done, o = std::move(o)] {
        if (!fired->exchange(true))
          done(o);
      });
    }
    return h;
  }

  std::mutex mu_;
  std::condition_variable started_;
  std::deque<Outcome> outcomes_;
  std::vector<Request> requests_;
  std::vector<std::thread> threads_;
  std::atomic<int> cancels_{0};
};

// A whole outcome as the events of one round: the reply's, or a failure.
inline std::vector<protocol::responses::upstream_event> outcome_events(const protocol::model_outcome& o) {
  if (o.ok)
    return protocol::reply_events(o.reply);
  protocol::responses::upstream_event e;
  e.what = protocol::responses::upstream_event::kind::failure;
  e.text = o.error;
  e.http_status = o.http_status;
  e.retryable = o.retryable;
  return {e};
}

class fake_model : public model_port, public fake_port_base<protocol::model_outcome, protocol::model_request> {
public:
  static protocol::model_outcome text(std::string content) {
    protocol::model_outcome o;
    o.ok = true;
    o.reply.content = std::move(content);
    o.reply.usage = {10, 5, 15};
    return o;
  }
  static protocol::model_outcome call(std::string tool, std::string args, std::string id = "c1") {
    auto o = text("");
    o.reply.tool_calls.push_back({std::move(id), std::move(tool), std::move(args)});
    return o;
  }
  static protocol::model_outcome failure(std::string error) {
    protocol::model_outcome o;
    o.error = std::move(error);
    return o;
  }

  // A round answers with its outcome's reply as one batch of events; it records the round as the chat
  // request it renders as.
  std::shared_ptr<model_round> open(const protocol::responses::round_request& round,
                                    events_handler events) override {
    protocol::model_outcome cancelled;
    cancelled.cancelled = true;
    auto r = std::make_shared<fake_round>();
    r->call = start(protocol::responses::chat_model_request(round),
                    [events](protocol::model_outcome o) {
                      if (!o.cancelled) // nothing is delivered after cancel()
                        events(outcome_events(o));
                    },
                    cancelled);
    return r;
  }

private:
  struct fake_round : model_round {
    std::shared_ptr<cancel_handle> call;
    void cancel() override { call->cancel(); }
    void resume() override {}
  };

};

class fake_tools : public tool_port, public fake_port_base<tool_outcome, tool_invocation> {
public:
  std::vector<protocol::tool_schema> tools() const override { return {{"echo", "Echo", "{}"}}; }

  std::shared_ptr<cancel_handle> execute(tool_invocation call, completion done) override {
    return start(std::move(call), std::move(done), tool_outcome{"", true});
  }
};

} // namespace troupe::testing

// Fake model and tool ports for actor tests: scripted outcomes, recorded calls, optional hangs.
#pragma once

#include "actors/model_port.hpp"
#include "actors/tool_port.hpp"

#include <atomic>
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

protected:
  struct handle : cancel_handle {
    std::function<void()> on_cancel;
    void cancel() override { on_cancel(); }
  };

  std::shared_ptr<cancel_handle> start(Request req, std::function<void(Outcome)> done, Outcome cancelled) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(std::move(req));
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
  std::deque<Outcome> outcomes_;
  std::vector<Request> requests_;
  std::vector<std::thread> threads_;
  std::atomic<int> cancels_{0};
};

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

  std::shared_ptr<cancel_handle> infer(protocol::model_request req, completion done) override {
    protocol::model_outcome cancelled;
    cancelled.cancelled = true;
    return start(std::move(req), std::move(done), cancelled);
  }
};

class fake_tools : public tool_port, public fake_port_base<tool_outcome, tool_invocation> {
public:
  std::vector<protocol::tool_schema> tools() const override { return {{"echo", "Echo", "{}"}}; }

  std::shared_ptr<cancel_handle> execute(tool_invocation call, completion done) override {
    return start(std::move(call), std::move(done), tool_outcome{"", true});
  }
};

} // namespace troupe::testing

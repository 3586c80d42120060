#include "actors/search_port.hpp"

#include "actors/errors.hpp"
#include "actors/tool_router.hpp"
#include "protocol/responses_search.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <utility>

namespace troupe {

namespace rs = protocol::responses;

namespace {

std::string failure(const std::string& why) {
  return std::string(rs::search_failure_marker) + why;
}

// One search's completion, run once: by the answer, or by cancel() first.
struct search_handle : cancel_handle {
  tool_port::completion done;
  std::atomic<bool> completed{false};

  void complete(tool_outcome o) {
    if (!completed.exchange(true))
      done(std::move(o));
  }
  void cancel() override { complete({"", true}); }
};

// The spawned helpers take their state as arguments: CAF 0.17 binds a null empty tuple when a
// function is spawned without arguments.

// Answers a search that cannot start, after execute() returned (as the port promises).
void answer_later(caf::event_based_actor* self, std::shared_ptr<search_handle> handle, std::string text) {
  handle->complete({std::move(text), false});
  self->quit();
}

// Awaits one HTTP provider's answer so that no thread waits for it.
void await_web_search(caf::event_based_actor* self, web_port_actor web, web_request req,
                      std::shared_ptr<search_handle> handle) {
  self->request(web, caf::infinite, web_atom::value, std::move(req))
    .then(
      [self, handle](web_response& r) {
        auto why = rs::search_http_failure(r.status, r.body);
        handle->complete({why ? failure(*why) : std::move(r.body), false});
        self->quit();
      },
      [self, handle](caf::error& err) {
        handle->complete({failure("the search provider could not be reached: " + message_of(err)), false});
        self->quit();
      });
}

class search_port : public tool_port {
public:
  search_port(caf::actor_system& sys, protocol::search_provider_config provider, std::shared_ptr<tool_router> mcp,
              web_port_actor web)
    : sys_(sys), provider_(std::move(provider)), mcp_(std::move(mcp)), web_(std::move(web)) {}

  std::vector<protocol::tool_schema> tools() const override { return {}; }

  std::shared_ptr<cancel_handle> execute(tool_invocation call, completion done) override {
    auto handle = std::make_shared<search_handle>();
    handle->done = std::move(done);
    if (!provider_.mcp_server.empty())
      return execute_mcp(std::move(call), handle);
    web_request req;
    req.method = "POST";
    req.url = provider_.url;
    req.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
    if (!provider_.bearer_token.empty())
      req.headers.emplace_back("Authorization", "Bearer " + provider_.bearer_token);
    req.body = std::move(call.arguments);
    req.timeout_seconds = provider_.timeout_seconds;
    sys_.spawn(await_web_search, web_, std::move(req), handle);
    return handle;
  }

private:
  std::shared_ptr<cancel_handle> execute_mcp(tool_invocation call, const std::shared_ptr<search_handle>& handle) {
    auto name = mcp_ ? mcp_->registered_name(provider_.mcp_server, provider_.tool) : std::string();
    if (name.empty()) {
      sys_.spawn(answer_later, handle,
                 failure("the MCP server '" + provider_.mcp_server + "' offers no tool '" + provider_.tool + "'"));
      return handle;
    }
    call.name = name;
    auto server = provider_.mcp_server;
    auto inner = mcp_->execute(std::move(call), [handle, server](tool_outcome o) {
      static const std::string marker = "[MCP_ERROR] ";
      if (!o.cancelled && o.output.rfind(marker, 0) == 0)
        o.output = failure("the MCP server '" + server + "' failed: " + o.output.substr(marker.size()));
      handle->complete(std::move(o));
    });
    // Cancelling stops the MCP call too; the handle answers at once.
    struct both : cancel_handle {
      std::shared_ptr<cancel_handle> inner;
      std::shared_ptr<search_handle> outer;
      void cancel() override {
        if (inner)
          inner->cancel();
        outer->cancel();
      }
    };
    auto h = std::make_shared<both>();
    h->inner = std::move(inner);
    h->outer = handle;
    return h;
  }

  caf::actor_system& sys_;
  protocol::search_provider_config provider_;
  std::shared_ptr<tool_router> mcp_;
  web_port_actor web_;
};

} // namespace

std::shared_ptr<tool_port> make_search_port(caf::actor_system& sys, const protocol::search_provider_config& provider,
                                            std::shared_ptr<tool_router> mcp, web_port_actor web) {
  return std::make_shared<search_port>(sys, provider, std::move(mcp), std::move(web));
}

loop_call search_call(const std::shared_ptr<tool_port>& port, const rs::request& req, const rs::pending_call& p,
                      const rs::item& it, const std::string& run_id) {
  loop_call c;
  c.ref = p.output_position;
  c.port = port;
  c.invocation.run_id = run_id;
  c.invocation.call_id = it.id;
  c.invocation.name = p.tool;
  rs::search_declaration d;
  d.call = it.type;
  for (auto& declared : req.search)
    if (declared.call == it.type)
      d = declared;
  c.invocation.arguments = rs::provider_request(d, it.query);
  c.invocation.tenant_key = "default";
  c.invocation.user_key = "default";
  return c;
}

std::string search_refusal(const loop_call& call, const rs::item& it) {
  auto q = rs::query_of(it.arguments);
  if (!q.error.empty())
    return "Invalid arguments for tool '" + rs::search_function_name(it.type) + "': " + q.error;
  if (!call.port)
    return "The tool '" + rs::search_function_name(it.type) + "' has no provider on this server.";
  return {};
}

void end_search(rs::response_stream& stream, const rs::request& req, const loop_call& call, call_result result,
                double timeout_seconds) {
  auto& it = stream.output()[call.ref];
  auto kind = it.type;
  auto& text = result.outcome.output;
  std::string error;
  if (result.timed_out) {
    error = "The search timed out after " + std::to_string(static_cast<int64_t>(timeout_seconds)) + "s.";
  } else if (result.refused) {
    error = std::move(text);
  } else if (text.rfind(rs::search_failure_marker, 0) == 0) {
    error = text.substr(rs::search_failure_marker.size());
  }
  if (error.empty()) {
    std::size_t most = rs::max_search_results;
    for (auto& d : req.search)
      if (d.call == kind && kind == rs::item_kind::file_search_call)
        most = static_cast<std::size_t>(d.max_num_results);
    auto reply = rs::parse_search_reply(kind, text, most);
    if (reply.error.empty()) {
      auto query = it.query;
      auto results = rs::includes_search_results(req, kind) ? rs::results_json(kind, reply.hits) : std::string();
      stream.complete_search(call.ref, false, std::move(results), rs::numbered_results(kind, query, reply.hits));
      return;
    }
    error = std::move(reply.error);
  }
  spdlog::warn("responses: {} {} failed: {}", rs::search_function_name(kind), call.invocation.call_id, error);
  stream.complete_search(call.ref, true, {}, rs::search_error_output(error));
}

} // namespace troupe

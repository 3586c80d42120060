#include "io/agent_http.hpp"

#include "io/route_ask.hpp"
#include "protocol/auth.hpp"
#include "protocol/chat_request.hpp"
#include "protocol/identity.hpp"
#include "protocol/ids.hpp"
#include "protocol/policy.hpp"

#include <chrono>
#include <cstdlib>

namespace troupe::io {

namespace {

int64_t epoch_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::optional<std::string> environment(const std::string& name) {
  if (auto v = std::getenv(name.c_str()))
    return std::string(v);
  return std::nullopt;
}

run_spec spec_of(std::string body, protocol::chat_request chat, const protocol::identity& id,
                 std::string policy_snapshot_hash) {
  run_spec spec;
  spec.policy_snapshot_hash = std::move(policy_snapshot_hash); // AS-93: the policy this run starts under
  spec.run_id = chat.run_id.empty() ? protocol::uuid4() : chat.run_id;
  spec.user_key = id.user_key;
  spec.tenant_key = id.tenant_key;
  spec.request_body = std::move(body);
  chat.metadata = protocol::run_metadata_json(chat.metadata, id, protocol::normalize_tool_policy(chat.tool_policy).json());
  spec.request = std::move(chat);
  return spec;
}

} // namespace

http_response agent_error(errc code, std::string_view detail) {
  return agent_error(problem(code, std::string(detail)));
}

http_response agent_error(const problem& p) {
  return error_response(protocol::dialect::agent, p);
}

bool operator_allowed(const protocol::config& config, const http_request& req) {
  return !protocol::check_operator_access(config.auth, config.service.service_tokens, caller_headers(config, req));
}

protocol::header_lookup caller_headers(const protocol::config& config, const http_request& req) {
  return protocol::caller_headers(config.auth, config.service.service_tokens, req.headers, req.peer);
}

std::variant<protocol::responses_caller, problem> admit_responses_caller(const protocol::config& config,
                                                                                      const http_request& req) {
  return protocol::admit_responses_caller(config.auth, config.service.service_tokens, caller_headers(config, req),
                                          epoch_seconds(), environment);
}

http_response unauthorized() {
  return agent_error(errc::unauthorized, "FastReAct service token required");
}

std::variant<protocol::identity, http_response> identify_caller(const protocol::config& config,
                                                                const http_request& req) {
  auto resolved = protocol::resolve_identity(config.auth, config.service.service_tokens, caller_headers(config, req),
                                             "", "", epoch_seconds(), environment);
  if (auto err = std::get_if<problem>(&resolved))
    return agent_error(*err);
  return std::get<protocol::identity>(std::move(resolved));
}

std::variant<protocol::tenant_scope, http_response> control_scope(const protocol::config& config,
                                                                  const http_request& req) {
  auto caller = identify_caller(config, req);
  if (auto refused = std::get_if<http_response>(&caller))
    return std::move(*refused);
  return protocol::scope_of(std::get<protocol::identity>(caller));
}

std::optional<http_response> caller_refusal(const protocol::config& config, const http_request& req) {
  auto caller = identify_caller(config, req);
  if (auto refused = std::get_if<http_response>(&caller))
    return std::move(*refused);
  return std::nullopt;
}

void admit_caller(caf::actor_system& sys, store_actor store, const protocol::config& config, http_request& req,
                  protocol::request_kind kind, std::shared_ptr<http_exchange> ex,
                  std::function<void(run_spec spec, std::shared_ptr<http_exchange> ex)> proceed) {
  // AS-2's order: 401/500 from the head alone, before the body is parsed; 422; then 403 and 429 for the
  // user the body names, which a 400 still knows; then the 400.
  if (auto refused = caller_refusal(config, req))
    return ex->respond(std::move(*refused));
  auto parsed = protocol::parse_chat_request(req.body, kind);
  auto chat = std::get_if<protocol::chat_request>(&parsed);
  auto invalid = std::get_if<protocol::request_error>(&parsed);
  if (invalid && invalid->what.code == errc::validation_failed)
    return ex->respond(agent_error(invalid->what));
  auto resolved = protocol::resolve_identity(config.auth, config.service.service_tokens, caller_headers(config, req),
                                             chat ? chat->user_key : invalid->user_key,
                                             chat ? chat->tenant_key : invalid->tenant_key, epoch_seconds(),
                                             environment);
  if (auto err = std::get_if<problem>(&resolved))
    return ex->respond(agent_error(*err));
  auto id = std::get<protocol::identity>(resolved);
  if (auto err = protocol::check_user_allowed(config.auth, id.user_key))
    return ex->respond(agent_error(*err));
  // The body moves along (a run keeps it), never copied: a 10 MiB body costs 10 MiB once.
  auto go = [proceed, parsed = std::move(parsed), id, body = std::move(req.body),
             hash = protocol::policy_hash(config.policy)](std::shared_ptr<http_exchange> ex) mutable {
    if (auto err = std::get_if<protocol::request_error>(&parsed))
      return ex->respond(agent_error(err->what));
    proceed(spec_of(std::move(body), std::move(std::get<protocol::chat_request>(parsed)), id, hash), std::move(ex));
  };
  auto limit = config.auth.rate_limit_per_hour;
  if (limit <= 0 || !store)
    return go(std::move(ex));
  // AS-8, AS-92: the window is counted in the store, so a restart does not reset it.
  sys.spawn(
    [](caf::event_based_actor* self, std::shared_ptr<http_exchange> ex, store_actor store, std::string user,
       int64_t limit, decltype(go) go) {
      self->request(store, ask_timeout, rate_atom::value, user, limit, epoch_seconds())
        .then(
          [=](protocol::rate_limit_decision& d) mutable {
            if (d.allowed)
              return go(ex);
            auto r = agent_error(protocol::rate_limit_error(user, limit));
            r.headers.emplace_back("Retry-After", std::to_string(d.retry_after_seconds));
            ex->respond(std::move(r));
          },
          [=](caf::error& err) { ex->respond(error_response(err)); });
    },
    std::move(ex), std::move(store), id.user_key, limit, std::move(go));
}

} // namespace troupe::io

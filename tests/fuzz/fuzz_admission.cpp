// libFuzzer target for request admission end to end, per dialect: the head's edge checks, the caller's
// identity from its headers, then the body's parse and validation, as the edge and the routes run them.
// Input: byte 0 picks the dialect and auth mode; then header lines `name: value` up to a blank line;
// the rest is the body. Build: see tests/fuzz/CMakeLists.txt.
#include "protocol/chat_request.hpp"
#include "protocol/config.hpp"
#include "protocol/http_edge.hpp"
#include "protocol/identity.hpp"
#include "protocol/responses_request.hpp"
#include "protocol/workspace_commands.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

using namespace troupe::protocol;

namespace {

std::map<std::string, std::string> read_headers(std::string_view& input) {
  std::map<std::string, std::string> headers;
  while (!input.empty()) {
    auto end = input.find('\n');
    auto line = input.substr(0, end);
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
    if (line.empty())
      break;
    auto colon = line.find(':');
    std::string name(line.substr(0, colon));
    for (auto& c : name)
      c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    headers[name] = colon == std::string_view::npos ? "" : std::string(line.substr(colon + 1));
  }
  return headers;
}

std::optional<std::string> no_env(const std::string&) {
  return std::nullopt;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  auto headers = read_headers(input);
  auth_config auth;
  static const char* modes[] = {"service_token", "trusted_headers", "jwt"};
  auth.mode = modes[(data[0] >> 2) % 3];
  auth.jwt_secret = "fuzz-secret";
  auth.api_keys = {"fuzz-key"};
  std::vector<std::string> tokens{"fuzz-token"};
  edge_policy edge{"127.0.0.1", {"troupe.internal"}, {"https://console.example"}};
  check_request_head(edge, data[0] & 1 ? "POST" : "GET", headers, !input.empty(), data[0] & 2);
  auto lookup = caller_headers(auth, tokens, headers, data[0] & 0x40 ? "127.0.0.1" : "10.0.0.1");
  switch ((data[0] >> 4) % 3) {
    case 0: { // the agent service: identity from the head, then the body, then identity with its user
      resolve_identity(auth, tokens, lookup, "", "", 1'700'000'000, no_env);
      auto parsed = parse_chat_request(input);
      if (auto chat = std::get_if<chat_request>(&parsed))
        resolve_identity(auth, tokens, lookup, chat->user_key, chat->tenant_key, 1'700'000'000, no_env);
      break;
    }
    case 1: // the Responses gateway
      admit_responses_caller(auth, tokens, lookup, 1'700'000'000, no_env);
      responses::parse_request(input);
      break;
    case 2: { // workspaces
      static auto config = parse_config("", {}, no_env).value;
      static auto types = std::get<0>(reflexr::event_registry::build(config.workspaces));
      reflexr::authenticate(headers["authorization"], config.workspaces, tokens, false);
      reflexr::parse_command_frame(input, *types);
      reflexr::parse_publish_body(input, *types);
      break;
    }
  }
  return 0;
}

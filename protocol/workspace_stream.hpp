// The reflexr.v1 WebSocket's opening (workspace-stream.md §4): the hello frame, its 4400 reasons,
// and the pure resume decision.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol {

inline constexpr const char* stream_protocol = "reflexr.v1";

// WS-46.
struct hello_frame {
  std::string protocol;
  int64_t resume_after_seq = 0;
  bool from_head = false;
  std::optional<std::vector<std::string>> types; // null: every type
};

// A first frame that is not a valid hello: the 4400 close reason (WS-48).
struct hello_rejection {
  std::string reason;
};

// Parses the first client frame. Anything but a well-formed hello (not JSON, another type, an extra
// or mistyped field, a negative seq, an unqualified type) is `the first frame must be hello`; a
// valid hello for another protocol or one asking from_head with a nonzero seq is refused with its
// own reason (WS-48).
std::variant<hello_frame, hello_rejection> parse_hello(std::string_view text);

// WS-49: where replay starts, and whether the client must discard its state.
struct resume_decision {
  int64_t replay_after = 0;
  bool reset = false;
};

// The pure decision: an error kind (`unsupported_protocol`, `validation_failed`) or where to replay
// from, given the log's head.
std::variant<resume_decision, std::string> resume(const hello_frame& hello, int64_t head_seq);

} // namespace troupe::protocol

// Encoding and decoding of OpenAI chat-completions bodies, streamed and not (AS-17, AS-18).
#pragma once

#include "protocol/chat_types.hpp"

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace troupe::protocol {

// The body of `POST {base_url}/chat/completions` for `request` (AS-17). A streamed request also asks
// for usage in the last chunk (`stream_options.include_usage`).
std::string encode_chat_request(const model_request& request);

struct chat_decode_result {
  bool ok = false;
  model_reply reply;
  std::string error; // set when !ok
};

// Decodes a non-streamed `chat.completion` body. Tool-call arguments are repaired and missing ids
// minted (AS-18); an `{"error":{...}}` body or a body without choices is an error.
chat_decode_result decode_chat_response(std::string_view body);

// Assembles the `chat.completion.chunk` payloads of one streamed reply. Content deltas are
// concatenated; tool-call deltas are merged by `index` (id and name arrive once, arguments in
// pieces); usage comes from the last chunk that carries it. The assembler handles the `[DONE]`
// sentinel itself: the caller feeds every `data` payload as it is.
class chat_stream_assembler {
public:
  // Feeds one SSE data payload. Returns false when it is not a chunk (invalid JSON, or an
  // `{"error":...}` object the upstream sent mid-stream); error() then says why.
  bool feed(std::string_view data);

  // True once `[DONE]` was fed.
  bool done() const { return done_; }
  // True once at least one chunk was fed.
  bool started() const { return chunks_ > 0; }
  const std::string& error() const { return error_; }

  // The reply so far, with tool calls in index order, repaired arguments and minted ids (AS-18).
  model_reply finish() const;

private:
  struct partial_call {
    std::string id;
    std::string name;
    std::string arguments;
  };

  std::string content_;
  std::map<int64_t, partial_call> calls_;
  int64_t last_index_ = -1;
  token_usage usage_;
  std::string model_;
  std::string finish_reason_;
  std::size_t chunks_ = 0;
  bool done_ = false;
  std::string error_;
};

// AS-18: JSON object text for model-written arguments. `raw` itself when it is an object; else the
// object left after stripping ``` code fences and trailing commas before } or ]; else "{}".
std::string repair_arguments(std::string_view raw);

// AS-18: "call_" followed by 12 random lowercase hex characters, for a tool call without an id.
std::string make_tool_call_id();

} // namespace troupe::protocol

// The model ports over an OpenAI-compatible upstream, over HTTP or HTTPS: chat completions for the agent
// loop (AS-17), and Responses rounds over chat completions or /v1/responses (RS-45, RS-47).
#pragma once

#include "actors/model_port.hpp"
#include "protocol/model_round.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace troupe::io {

// Filled from the model.* configuration keys (DESIGN.md, "Shared configuration").
struct openai_chat_options {
  std::string base_url;    // model.base_url, e.g. http://127.0.0.1:11434/v1 or https://api.openai.com/v1
  std::string api_key;     // model.api_key; empty sends no Authorization header
  int timeout_seconds = 600; // model.timeout_seconds, per attempt
  int max_retries = 2;       // model.max_retries
  int retry_base_ms = 1000;  // the n-th retry waits retry_base_ms * 2^(n-1)
  bool stream = true;        // model.stream; a round streams when this and round.stream are true
  std::string protocol = "chat_completions"; // model.protocol: how Responses rounds are sent (RS-45, RS-47)
  protocol::responses::chat_options chat;   // how history becomes chat messages (RS-47)
  std::size_t max_line_bytes = std::size_t{1} << 20;  // longest SSE line accepted
  std::size_t max_body_bytes = std::size_t{16} << 20; // longest response body accepted
  int io_threads = 1;
};

// Owns its io_context and worker threads. Each open() is one POST {base_url}/chat/completions (or
// /responses), with its retries; events arrive on a worker thread, never from inside open(). The
// destructor cancels every outstanding round and joins the workers; it must not run from inside an
// events handler.
class openai_chat_client : public model_port {
public:
  explicit openai_chat_client(openai_chat_options options);
  ~openai_chat_client() override;

  openai_chat_client(const openai_chat_client&) = delete;
  openai_chat_client& operator=(const openai_chat_client&) = delete;

  std::shared_ptr<model_round> open(const protocol::responses::round_request& round,
                                    events_handler events) override;

  class impl;

private:
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::io

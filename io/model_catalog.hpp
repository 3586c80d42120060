// The model names the Responses gateway routes and lists (responses.md Appendix A, RS-2, RS-13): the
// configured lists, plus the names each model.upstreams[] entry with discover_models finds at
// GET {base_url}/models — asked at start, then every refresh interval. A failed ask keeps what that
// upstream answered before.
#pragma once

#include "protocol/config.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::io {

// An upstream that is asked for its models.
struct model_source {
  std::size_t entry = 0; // its model.upstreams[] index
  std::string base_url;
  std::string api_key;   // empty sends no Authorization header
  double timeout_seconds = 10;
};

class model_catalog {
public:
  // Owns one I/O thread when there are sources; none asks until refresh().
  model_catalog(protocol::model_config config, std::vector<model_source> sources,
                std::chrono::seconds refresh_interval = std::chrono::seconds(300));
  ~model_catalog();

  model_catalog(const model_catalog&) = delete;
  model_catalog& operator=(const model_catalog&) = delete;

  // The routing position (model.upstreams[] entries, then the default upstream) serving `model`.
  std::optional<std::size_t> route(std::string_view model) const;
  // RS-13: every routable name, in routing order, each once.
  std::vector<std::string> listed() const;

  // Asks every source now and then every refresh interval; `done` (may be empty) runs on the
  // catalog's thread once each source of this round has answered or failed (at once without sources).
  void refresh(std::function<void()> done);

  class impl;

private:
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::io

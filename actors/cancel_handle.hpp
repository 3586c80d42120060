// A handle that stops asynchronous work started through a port.
#pragma once

namespace troupe {

class cancel_handle {
public:
  virtual ~cancel_handle() = default;
  // Idempotent and thread-safe; the work's completion still runs once, marked cancelled.
  virtual void cancel() = 0;
};

} // namespace troupe

// The data directory a node owns: created on start and locked so a second process refuses it (AS-56).
#pragma once

#include <string>
#include <variant>

namespace troupe::io {

// Holds an exclusive lock on <data_dir>/troupe.lock for as long as it lives.
class data_dir_lock {
public:
  explicit data_dir_lock(int fd) : fd_(fd) {}
  data_dir_lock(data_dir_lock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  data_dir_lock& operator=(data_dir_lock&&) = delete;
  ~data_dir_lock();

private:
  int fd_;
};

// Creates `data_dir` and `workspaces_root` and takes the lock; the error says what failed and why.
std::variant<data_dir_lock, std::string> prepare_data_dir(const std::string& data_dir,
                                                          const std::string& workspaces_root);

// The whole content of a file, or an error naming it.
std::variant<std::string, std::string> read_text_file(const std::string& path);

} // namespace troupe::io

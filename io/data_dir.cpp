#include "io/data_dir.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace troupe::io {

data_dir_lock::~data_dir_lock() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::variant<data_dir_lock, std::string> prepare_data_dir(const std::string& data_dir,
                                                          const std::string& workspaces_root) {
  std::error_code ec;
  for (auto& dir : {data_dir, workspaces_root}) {
    std::filesystem::create_directories(dir, ec);
    if (ec)
      return "cannot create directory " + dir + ": " + ec.message();
  }
  auto path = data_dir + "/troupe.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return "cannot open " + path + ": " + std::strerror(errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return "store is locked by another troupe process";
  }
  return data_dir_lock(fd);
}

std::variant<std::string, std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::variant<std::string, std::string>(std::in_place_index<1>,
                                                  "cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream out;
  out << in.rdbuf();
  return std::variant<std::string, std::string>(std::in_place_index<0>, out.str());
}

} // namespace troupe::io

// The file tools (AS-29): read_file, write_file, edit_file and list_dir, each confined to the call's
// workspace.
#include "io/builtin_tool_support.hpp"

#include "io/child_process.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace troupe::io::builtin {

namespace {

// The bytes of a regular file of at most read_file_max_bytes; `shown` is the path as the model
// gave it, the only one messages name (host paths stay out of the conversation).
std::string read_small_file(const fs::path& path, const std::string& shown) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      throw tool_error("File not found: " + shown);
    throw tool_error("Cannot read " + shown + ": " + errno_text(errno));
  }
  if (S_ISDIR(st.st_mode))
    throw tool_error("Is a directory, not a file: " + shown);
  if (!S_ISREG(st.st_mode))
    throw tool_error("Not a regular file: " + shown);
  auto too_large = [&](std::uint64_t size) {
    return tool_error("File too large: " + shown + " (" + std::to_string(size) + " bytes > " +
                      std::to_string(read_file_max_bytes) + ")");
  };
  if (static_cast<std::uint64_t>(st.st_size) > read_file_max_bytes)
    throw too_large(static_cast<std::uint64_t>(st.st_size));

  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd)
    throw tool_error("Cannot read " + shown + ": " + errno_text(errno));
  std::string content;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw tool_error("Cannot read " + shown + ": " + errno_text(errno));
    }
    if (n == 0)
      break;
    content.append(buf, static_cast<std::size_t>(n));
    // The file may have grown since stat; the bound holds regardless.
    if (content.size() > read_file_max_bytes)
      throw too_large(content.size());
  }
  return content;
}

void write_whole_file(const fs::path& path, const std::string& shown, std::string_view content,
                      bool create) {
  int flags = O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0);
  unique_fd fd(::open(path.c_str(), flags, 0644));
  if (!fd) {
    if (errno == EISDIR)
      throw tool_error("Cannot write " + shown + ": it is a directory");
    throw tool_error("Cannot write " + shown + ": " + errno_text(errno));
  }
  std::size_t written = 0;
  while (written < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw tool_error("Cannot write " + shown + ": " + errno_text(errno));
    }
    written += static_cast<std::size_t>(n);
  }
  if (::close(fd.release()) != 0)
    throw tool_error("Cannot write " + shown + ": " + errno_text(errno));
}


} // namespace

std::string run_read_file(const json::value& args, const std::string& workspace) {
  std::string path = required_string(args, "read_file", "path");
  workspace_box box(workspace);
  return to_text(read_small_file(box.resolve(path), path));
}

std::string run_write_file(const json::value& args, const std::string& workspace) {
  std::string path = required_string(args, "write_file", "path");
  std::string content = required_string(args, "write_file", "content");
  workspace_box box(workspace);
  fs::path target = box.resolve(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec)
    throw tool_error("Cannot create the parent directories of " + path + ": " + ec.message());
  write_whole_file(target, path, content, true);
  return "Successfully wrote " + std::to_string(content.size()) + " bytes to " + path;
}

std::string run_edit_file(const json::value& args, const std::string& workspace) {
  std::string path = required_string(args, "edit_file", "path");
  std::string old_text = required_string(args, "edit_file", "old_text");
  std::string new_text = required_string(args, "edit_file", "new_text");
  if (old_text.empty())
    throw tool_error("edit_file: old_text must not be empty");
  workspace_box box(workspace);
  fs::path target = box.resolve(path);
  std::string content = read_small_file(target, path);

  std::size_t count = 0;
  std::size_t first = content.find(old_text);
  for (std::size_t at = first; at != std::string::npos;
       at = content.find(old_text, at + old_text.size()))
    ++count;
  if (count == 0)
    throw tool_error("old_text not found in " + path);
  if (count > 1)
    throw tool_error("old_text appears " + std::to_string(count) + " times in " + path +
                     "; provide more context");
  content.replace(first, old_text.size(), new_text);
  write_whole_file(target, path, content, false);
  return "Successfully edited " + path;
}

std::string run_list_dir(const json::value& args, const std::string& workspace) {
  std::string path = optional_string(args, "list_dir", "path").value_or(".");
  workspace_box box(workspace);
  fs::path dir = box.resolve(path);
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (st.type() == fs::file_type::not_found)
    throw tool_error("Directory not found: " + path);
  if (ec)
    throw tool_error("Cannot list " + path + ": " + ec.message());
  if (!fs::is_directory(st))
    throw tool_error("Not a directory: " + path);

  std::vector<std::pair<std::string, bool>> entries;
  fs::directory_iterator it(dir, ec);
  if (ec)
    throw tool_error("Cannot list " + path + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    bool is_dir = it->is_directory(type_ec); // follows symlinks, as `ls -F` would show them
    entries.emplace_back(it->path().filename().string(), is_dir);
  }
  if (ec)
    throw tool_error("Cannot list " + path + ": " + ec.message());
  std::sort(entries.begin(), entries.end());

  std::string out;
  for (const auto& [name, is_dir] : entries) {
    if (!out.empty())
      out += '\n';
    out += to_text(name);
    if (is_dir)
      out += '/';
  }
  return out;
}

} // namespace troupe::io::builtin

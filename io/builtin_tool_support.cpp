// The built-in tools' shared helpers: text, arguments, and the workspace a call is confined to.
#include "io/builtin_tool_support.hpp"

#include "protocol/utf8.hpp"
#include "protocol/workspace_path.hpp"

#include <cstring>
#include <deque>
#include <system_error>
#include <utility>

namespace troupe::io::builtin {

namespace {

constexpr int max_symlink_hops = 40; // as the kernel's ELOOP limit

// Resolves an absolute path the way the kernel would, following `..` and every symlink, even a
// dangling one (which weakly_canonical leaves unresolved, and which a write would follow out
// of the workspace). Components that do not exist yet are appended as they are. nullopt on a
// symlink loop.
std::optional<fs::path> resolve_physical(const fs::path& absolute) {
  std::deque<fs::path> pending(absolute.begin(), absolute.end());
  fs::path result = "/";
  int hops = 0;
  while (!pending.empty()) {
    fs::path part = std::move(pending.front());
    pending.pop_front();
    if (part.empty() || part == "." || part == "/")
      continue;
    if (part == "..") {
      // `result` holds no symlinks, so its lexical parent is its real parent.
      result = result.parent_path();
      continue;
    }
    fs::path candidate = result / part;
    std::error_code ec;
    auto st = fs::symlink_status(candidate, ec);
    if (!ec && fs::is_symlink(st)) {
      if (++hops > max_symlink_hops)
        return std::nullopt;
      fs::path target = fs::read_symlink(candidate, ec);
      if (ec)
        return std::nullopt;
      if (target.is_absolute())
        result = "/";
      pending.insert(pending.begin(), target.begin(), target.end());
      continue;
    }
    result = std::move(candidate);
  }
  return result;
}

} // namespace

std::string errno_text(int err) {
  return std::strerror(err);
}

std::string to_text(std::string_view bytes, std::size_t max_chars) {
  std::string text = protocol::utf8_repaired(bytes);
  // Repaired text is well-formed, so each byte that is no continuation byte starts a character.
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && chars++ == max_chars) {
      text.resize(i);
      break;
    }
  return text;
}

json::document parse_arguments(const std::string& text) {
  auto doc = json::parse(text);
  if (doc && doc->IsObject())
    return std::move(*doc);
  json::document empty;
  empty.SetObject();
  return empty;
}

std::string required_string(const json::value& args, const char* tool, const char* name) {
  const json::value* v = json::member(args, name);
  if (!v || !v->IsString())
    throw tool_error(std::string(tool) + ": missing required argument '" + name + "'");
  return {v->GetString(), v->GetStringLength()};
}

std::optional<std::string> optional_string(const json::value& args, const char* tool,
                                           const char* name) {
  const json::value* v = json::member(args, name);
  if (!v || v->IsNull())
    return std::nullopt;
  if (!v->IsString())
    throw tool_error(std::string(tool) + ": argument '" + name + "' must be a string");
  return std::string(v->GetString(), v->GetStringLength());
}

workspace_box::workspace_box(const std::string& workspace_dir) {
  if (workspace_dir.empty())
    throw tool_error("no user workspace for this call");
  std::error_code ec;
  fs::path dir = fs::absolute(workspace_dir, ec);
  if (ec)
    throw tool_error("cannot use user workspace: " + ec.message());
  fs::create_directories(dir, ec);
  if (ec)
    throw tool_error("cannot create user workspace: " + ec.message());
  root_ = fs::canonical(dir, ec);
  if (ec)
    throw tool_error("cannot use user workspace: " + ec.message());
}

fs::path workspace_box::resolve(const std::string& user_path) const {
  if (user_path.find('\0') != std::string::npos)
    throw tool_error("Path outside user workspace: " + to_text(user_path));
  fs::path given(user_path);
  auto resolved = resolve_physical(given.is_absolute() ? given : root_ / given);
  if (!resolved || !protocol::is_within(root_.string(), resolved->string()))
    throw tool_error("Path outside user workspace: " + user_path);
  return *resolved;
}

} // namespace troupe::io::builtin

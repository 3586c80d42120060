#include "io/prompt_files.hpp"

#include "protocol/utf8.hpp"
#include "protocol/workspace_path.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace troupe::io {

namespace {

namespace fs = std::filesystem;

// What reading a file inside a folder found.
struct confined_read {
  std::optional<std::string> text;
  std::string refusal; // why an existing entry was not read; "" when it is simply absent
};

// The first max_prompt_file_bytes of `path`, a regular file whose real path (symlinks resolved) is
// inside `root` (itself a real path).
confined_read read_confined(const fs::path& root, const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec)))
    return {};
  auto real = fs::canonical(path, ec);
  if (ec)
    return {std::nullopt, "it cannot be resolved: " + ec.message()};
  if (!protocol::is_within(root.string(), real.string()))
    return {std::nullopt, "a symlink leads out of its folder"};
  // O_NOFOLLOW: the real path has no symlink left; O_NONBLOCK: a FIFO put there never blocks the read.
  int fd = ::open(real.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return {std::nullopt, "it cannot be opened"};
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return {std::nullopt, "it is not a regular file"};
  }
  std::string text(max_prompt_file_bytes, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    auto n = ::read(fd, text.data() + got, text.size() - got);
    if (n <= 0)
      break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return {std::move(text), ""};
}

std::optional<fs::path> real_dir(const fs::path& dir) {
  std::error_code ec;
  auto real = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(real, ec))
    return std::nullopt;
  return real;
}

// The SKILL.md of each entry of `dir` (at most max_skill_folders, in name order), confined to `root`;
// `shown` names the folder in source paths.
void scan(const fs::path& root, const fs::path& dir, const std::string& shown, skill_listing& out,
          std::vector<protocol::skill>& found) {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end && names.size() < max_skill_folders; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  for (auto& name : names) {
    auto source = protocol::utf8_repaired(shown + "/" + name + "/SKILL.md"); // a file name may be any bytes
    auto read = read_confined(root, dir / name / "SKILL.md");
    if (!read.text) {
      if (!read.refusal.empty())
        out.skipped.emplace_back(source, read.refusal);
      continue;
    }
    auto parsed = protocol::parse_skill_file(*read.text, source);
    if (parsed.parsed)
      found.push_back(std::move(*parsed.parsed));
    else
      out.skipped.emplace_back(source, parsed.skip_reason);
  }
}

std::string text_of(const fs::path& root, const char* name) {
  auto read = read_confined(root, root / name);
  return read.text ? protocol::utf8_repaired(*read.text) : std::string();
}

} // namespace

skill_listing prompt_files::skills(const std::string& workspace_dir) const {
  skill_listing out;
  std::vector<protocol::skill> found;
  if (!workspace_dir.empty())
    if (auto ws = real_dir(workspace_dir))
      if (auto dir = real_dir(*ws / "skills"); dir && protocol::is_within(ws->string(), dir->string()))
        scan(*ws, *dir, "skills", out, found);
  for (auto& configured : skill_dirs_)
    if (auto dir = real_dir(configured)) {
      auto shown = configured;
      while (shown.size() > 1 && shown.back() == '/')
        shown.pop_back();
      scan(*dir, *dir, shown, out, found);
    }
  out.skills = protocol::merge_skills(std::move(found));
  return out;
}

run_prompt_files prompt_files::load(const std::string& workspace_dir) const {
  run_prompt_files out;
  if (auto ws = real_dir(workspace_dir)) {
    out.agents_md = text_of(*ws, "AGENTS.md");
    out.soul_md = text_of(*ws, "SOUL.md");
  }
  out.skills = skills(workspace_dir).skills;
  return out;
}

} // namespace troupe::io

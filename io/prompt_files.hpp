// The prompt port's adapter (actors/prompt_port.hpp) and the catalog GET /v1/skills lists: reads a
// workspace's AGENTS.md and SOUL.md and the SKILL.md files of `<workspace>/skills` and of skills.dirs
// (AS-19, AS-25). The files are the users': each read is bounded, a symlink is followed only while it
// stays inside the folder it was found in, and only regular files are read.
#pragma once

#include "actors/prompt_port.hpp"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace troupe::io {

// A file is read this far and no further; a longer SKILL.md keeps its frontmatter and the start of
// its body.
constexpr std::size_t max_prompt_file_bytes = 64 * 1024;
// The entries of one skills folder looked at, in name order.
constexpr std::size_t max_skill_folders = 256;

struct skill_listing {
  std::vector<protocol::skill> skills; // the catalog (protocol::merge_skills)
  std::vector<std::pair<std::string, std::string>> skipped; // a SKILL.md's path and why it was skipped
};

class prompt_files : public prompt_port {
public:
  explicit prompt_files(std::vector<std::string> skill_dirs) : skill_dirs_(std::move(skill_dirs)) {}

  run_prompt_files load(const std::string& workspace_dir) const override;

  // The skills a run in `workspace_dir` sees ("": the skills.dirs' only). A workspace's skill is
  // named by its path inside the workspace (`skills/<folder>/SKILL.md`), a skills.dirs' one by its
  // path as configured.
  skill_listing skills(const std::string& workspace_dir) const;

private:
  std::vector<std::string> skill_dirs_;
};

} // namespace troupe::io

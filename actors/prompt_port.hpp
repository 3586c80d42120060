// The prompt port: what a run reads from its workspace and the configured skill folders to build its
// system message (AS-19, AS-25). The adapter (io/prompt_files) reads bounded files; the run only
// decides with what it is given.
#pragma once

#include "protocol/skills.hpp"

#include <string>
#include <vector>

namespace troupe {

struct run_prompt_files {
  std::string agents_md; // the workspace's AGENTS.md, "" when it has none
  std::string soul_md;   // the workspace's SOUL.md (the persona)
  std::vector<protocol::skill> skills; // the catalog: the workspace's skills first, then skills.dirs'
};

class prompt_port {
public:
  virtual ~prompt_port() = default;
  // What the workspace at `workspace_dir` holds. Bounded reads of a few small files: it answers at
  // once, on the caller's thread.
  virtual run_prompt_files load(const std::string& workspace_dir) const = 0;
};

} // namespace troupe

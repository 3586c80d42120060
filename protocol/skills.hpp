// Skills (AS-25) and the layers of the system message (AS-19), as pure functions: a SKILL.md file's
// frontmatter read into a skill, the catalog a run sees, the skills a request selects, and the one
// system message they join. Reading the files is io/'s (io/prompt_files.hpp); every text here is
// treated as hostile: invalid UTF-8 is repaired, lists and names are bounded, nothing recurses.
#pragma once

#include "protocol/chat_types.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::protocol {

struct skill {
  std::string name; // required
  std::string description;
  std::string version;
  std::vector<std::string> tags;
  std::vector<std::string> mcp_servers;
  std::vector<std::string> recommended_tools;
  std::string body;        // the text after the frontmatter: what joins the system message
  std::string source_path; // where it was read, as listed
  int duplicate_count = 0; // other files of the same name that this one shadows
};

// The most items a frontmatter list keeps, and the longest name.
constexpr std::size_t max_skill_list_items = 64;
constexpr std::size_t max_skill_name_length = 128;

// One SKILL.md: the skill, or why the file is skipped (no frontmatter, an unclosed one, no name...).
struct skill_file {
  std::optional<skill> parsed;
  std::string skip_reason;
};

// Reads the frontmatter between a first line `---` and the next line `---`: `key: value` lines with
// scalars (plain or quoted), inline lists (`[a, b]`), block lists (`- a` lines) and block scalars
// (`|`, `>`). Unknown keys are ignored. The text may be anything: invalid UTF-8 becomes U+FFFD.
skill_file parse_skill_file(std::string_view text, std::string source_path);

// The catalog in lookup order (the workspace's skills first, then skills.dirs'): the first skill of
// a name wins, and counts the later ones it shadows.
std::vector<skill> merge_skills(std::vector<skill> found);

struct skill_selection {
  std::vector<skill> selected;
  std::vector<std::string> missing; // names asked for that no skill has, in the order asked
};

// The most skills auto-selection picks.
constexpr std::size_t max_auto_skills = 3;

// `requested` names the skills (unknown names are missing); nullopt auto-selects up to 3 skills
// whose words (the name's parts and the tags, 3 characters or more, case-insensitive) appear as
// words of the query, those with the most words first, then in catalog order.
skill_selection select_skills(const std::vector<skill>& catalog,
                              const std::optional<std::vector<std::string>>& requested, std::string_view query);

// GET /v1/skills: {"skills":[{name, description, version, source_path, duplicate_count}], "skipped":
// [{source_path, reason}]} (AS-25; `skipped` is troupe's: the files that gave no skill, and why).
std::string skills_list_json(const std::vector<skill>& skills,
                             const std::vector<std::pair<std::string, std::string>>& skipped);

// What the one system message is made of (AS-19).
struct prompt_layers {
  std::string agents_md; // the workspace's AGENTS.md, "" when it has none
  std::string soul_md;   // the persona's SOUL.md
  std::vector<tool_schema> tools;
  std::vector<skill> skills;
};

// The troupe system message: the safety policy first, which overrides every layer after it, then
// troupe's role, the workspace's AGENTS.md, the persona's SOUL.md, the tools and the skills' bodies.
std::string system_prompt(const prompt_layers& layers);

} // namespace troupe::protocol

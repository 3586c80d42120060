// SKILL.md frontmatter, the skill catalog and selection (AS-25), and the layers of the system message
// (AS-19).
#include "protocol/skills.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

namespace {

skill named(std::string name, std::vector<std::string> tags = {}, std::string body = "") {
  skill s;
  s.name = std::move(name);
  s.tags = std::move(tags);
  s.body = std::move(body);
  return s;
}

} // namespace

TEST_CASE("AS-25 a SKILL.md frontmatter gives the skill's fields and the rest is its body", "[skills]") {
  auto f = parse_skill_file("---\n"
                            "name: pdf-reports\n"
                            "description: \"Writes: PDF reports\"\n"
                            "version: 1.2\n"
                            "tags: [pdf, 'reports']\n"
                            "mcp_servers:\n"
                            "  - pska\n"
                            "  - files\n"
                            "recommended_tools: read_file, exec\n"
                            "unknown: ignored\n"
                            "---\n"
                            "\n"
                            "Use the template.\n"
                            "Cite every page.\n",
                            "skills/pdf/SKILL.md");
  REQUIRE(f.parsed);
  auto& s = *f.parsed;
  CHECK(s.name == "pdf-reports");
  CHECK(s.description == "Writes: PDF reports");
  CHECK(s.version == "1.2");
  CHECK(s.tags == std::vector<std::string>{"pdf", "reports"});
  CHECK(s.mcp_servers == std::vector<std::string>{"pska", "files"});
  CHECK(s.recommended_tools == std::vector<std::string>{"read_file", "exec"});
  CHECK(s.body == "Use the template.\nCite every page.");
  CHECK(s.source_path == "skills/pdf/SKILL.md");
}

TEST_CASE("AS-25 a block scalar description is read as text", "[skills]") {
  auto f = parse_skill_file("---\nname: a\ndescription: >\n  one\n  two\n---\nbody", "x");
  REQUIRE(f.parsed);
  CHECK(f.parsed->description == "one two");
  CHECK(f.parsed->body == "body");
}

TEST_CASE("AS-25 a file without a usable frontmatter is skipped with its reason", "[skills]") {
  CHECK(parse_skill_file("name: a\n", "x").skip_reason == "no frontmatter: the file must begin with a line '---'");
  CHECK(parse_skill_file("", "x").skip_reason == "no frontmatter: the file must begin with a line '---'");
  CHECK(parse_skill_file("---\nname: a\nbody", "x").skip_reason
        == "the frontmatter is not closed: no line '---' after its first line");
  CHECK(parse_skill_file("---\ndescription: d\n---\n", "x").skip_reason
        == "the frontmatter has no name: add a line 'name: <skill name>'");
  CHECK(parse_skill_file("---\nname: \"\"\n---\n", "x").skip_reason
        == "the frontmatter has no name: add a line 'name: <skill name>'");
  CHECK(parse_skill_file("---\nname: " + std::string(200, 'n') + "\n---\n", "x").skip_reason
        == "the name is longer than 128 bytes");
  CHECK_FALSE(parse_skill_file("---\nname: a\x01" "b\n---\n", "x").parsed);
}

TEST_CASE("AS-25 invalid UTF-8, a byte-order mark and CRLF lines are tolerated", "[skills]") {
  auto f = parse_skill_file("\xEF\xBB\xBF---\r\nname: caf\xC3\r\ntags: [x]\r\n---\r\nbody \xFF\r\n", "x");
  REQUIRE(f.parsed);
  CHECK(f.parsed->name == "caf\xEF\xBF\xBD");
  CHECK(f.parsed->body == "body \xEF\xBF\xBD");
}

TEST_CASE("AS-25 frontmatter lists keep at most 64 items", "[skills]") {
  std::string text = "---\nname: a\ntags:\n";
  for (int i = 0; i < 100; ++i)
    text += "  - t" + std::to_string(i) + "\n";
  text += "---\n";
  auto f = parse_skill_file(text, "x");
  REQUIRE(f.parsed);
  CHECK(f.parsed->tags.size() == max_skill_list_items);
}

TEST_CASE("AS-25 the first skill of a name wins and counts the ones it shadows", "[skills]") {
  auto a1 = named("a");
  a1.source_path = "workspace";
  auto a2 = named("a");
  a2.source_path = "dir1";
  auto a3 = named("a");
  auto catalog = merge_skills({a1, named("b"), a2, a3});
  REQUIRE(catalog.size() == 2);
  CHECK(catalog[0].source_path == "workspace");
  CHECK(catalog[0].duplicate_count == 2);
  CHECK(catalog[1].duplicate_count == 0);
}

TEST_CASE("AS-25 skills are selected by name and unknown names are missing", "[skills]") {
  std::vector<skill> catalog{named("alpha"), named("beta")};
  auto sel = select_skills(catalog, std::vector<std::string>{"beta", "nope", "beta"}, "alpha anything");
  REQUIRE(sel.selected.size() == 1);
  CHECK(sel.selected[0].name == "beta");
  CHECK(sel.missing == std::vector<std::string>{"nope"});
  auto none = select_skills(catalog, std::vector<std::string>{}, "alpha beta");
  CHECK(none.selected.empty());
  CHECK(none.missing.empty());
}

TEST_CASE("AS-25 null auto-selects up to three skills whose words appear in the query", "[skills]") {
  std::vector<skill> catalog{named("pdf-reports", {"documents"}), named("git_history"), named("sql-tuning", {"postgres"}),
                             named("weather"), named("report", {"pdf", "reports"}), named("db", {"sql"})};
  auto sel = select_skills(catalog, std::nullopt, "Turn the Postgres git history into PDF reports");
  std::vector<std::string> names;
  for (auto& s : sel.selected)
    names.push_back(s.name);
  // report matches pdf and reports (2), pdf-reports matches pdf and reports (2), git_history 2, sql-tuning 1.
  CHECK(names == std::vector<std::string>{"pdf-reports", "git_history", "report"});
  CHECK(sel.missing.empty());
  CHECK(select_skills(catalog, std::nullopt, "nothing to see").selected.empty());
  CHECK(select_skills({named("db", {"ui"})}, std::nullopt, "db ui").selected.empty()); // words under 3 characters
}

TEST_CASE("AS-19 the safety layer comes first and the workspace, persona, tool and skill layers follow it",
          "[skills]") {
  prompt_layers layers;
  layers.agents_md = "Always answer in French.";
  layers.soul_md = "You are Ada.";
  layers.tools = {{"list_dir", "List a directory", "{}"}};
  layers.skills = {named("pdf", {}, "Use the template.")};
  auto p = system_prompt(layers);
  CHECK(p.rfind("Safety policy (overrides everything below)", 0) == 0);
  auto agents = p.find("Always answer in French.");
  auto soul = p.find("You are Ada.");
  auto tools = p.find("- list_dir: List a directory");
  auto skill = p.find("Use the template.");
  REQUIRE(agents != std::string::npos);
  CHECK(agents < soul);
  CHECK(soul < tools);
  CHECK(tools < skill);
  CHECK(p.find("Workspace instructions (AGENTS.md):") < agents);
  CHECK(system_prompt({}).find("AGENTS.md") == std::string::npos); // an absent layer leaves no title
}

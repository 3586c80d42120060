#include "protocol/workspace_path.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

using troupe::protocol::is_within;
using troupe::protocol::sanitize_segment;
using troupe::protocol::user_workspace_dir;

TEST_CASE("a key segment keeps safe characters and turns every other character into an underscore",
          "[workspace]") {
  // AS-26
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"pska", "pska"},
      {"pska:user_primary", "pska_user_primary"},
      {"sso:alice@example.com", "sso_alice@example.com"},
      {"A-Z.a-z_0-9@x", "A-Z.a-z_0-9@x"},
      {":", "_"},
      {"a b", "a_b"},
      {"a/b", "a_b"},
      {"../etc", ".._etc"},
      {"a\\b", "a_b"},
      {std::string("a\0b", 3), "a_b"},
      {"\xC3\xA9t\xC3\xA9", "_t_"},        // é is one character, so one underscore
      {"\xE6\x97\xA5\xE6\x9C\xAC", "__"},  // two CJK characters
      {"\xF0\x9F\x98\x80", "_"},           // an emoji outside the BMP
      {"\xFF\xFE", "__"},                  // invalid bytes count one each
      {"...", "..."},
      {".hidden", ".hidden"},
  };
  for (const auto& [input, expected] : cases) {
    INFO("input: " << input);
    CHECK(sanitize_segment(input) == expected);
  }
}

TEST_CASE("an empty, dot or dot-dot segment becomes _default", "[workspace]") {
  // AS-26
  CHECK(sanitize_segment("") == "_default");
  CHECK(sanitize_segment(".") == "_default");
  CHECK(sanitize_segment("..") == "_default");
}

TEST_CASE("a user's workspace is root/tenants/T/users/U with both keys sanitized", "[workspace]") {
  // AS-26
  CHECK(user_workspace_dir("/data/workspaces", "pska", "pska:user_primary") ==
        "/data/workspaces/tenants/pska/users/pska_user_primary");
  CHECK(user_workspace_dir("/data/workspaces/", "", "anonymous") ==
        "/data/workspaces/tenants/_default/users/anonymous");
  CHECK(user_workspace_dir("/data//", "..", "..") == "/data/tenants/_default/users/_default");
  CHECK(user_workspace_dir("/", "t", "u") == "/tenants/t/users/u");
  CHECK(user_workspace_dir("rel", "t", "u") == "rel/tenants/t/users/u");
}

TEST_CASE("the same user in two tenants gets two directories", "[workspace]") {
  // AS-26
  CHECK(user_workspace_dir("/w", "acme", "bob") != user_workspace_dir("/w", "globex", "bob"));
}

TEST_CASE("a path is within a root only when the root's components are a prefix of its own",
          "[workspace]") {
  // AS-27
  struct row {
    const char* root;
    const char* path;
    bool within;
  };
  const std::vector<row> rows = {
      {"/a/b", "/a/b", true},
      {"/a/b", "/a/b/", true},
      {"/a/b/", "/a/b", true},
      {"/a/b", "/a/b/c/d.txt", true},
      {"/a/b", "/a/bc", false},
      {"/a/b", "/a/b.txt", false},
      {"/a/b", "/a", false},
      {"/a/b", "/", false},
      {"/a/b", "/a/b/..", false},
      {"/a/b", "/a/b/../c", false},
      {"/a/b", "/a/b/../b/x", true},
      {"/a/b", "/a/b/./c/..", true},
      {"/a/b", "/a/b/c/../../b", true},
      {"//a//b/", "/a/./b//c", true},
      {"/a/b/../b", "/a/b/c", true},
      {"/", "/anything/at/all", true},
      {"/", "/", true},
      {"/a/b", "/../../a/b/c", true}, // `..` at the root stays at the root
      {"/a/b", "a/b/c", false},       // relative paths are never within
      {"a/b", "/a/b/c", false},
      {"/a/b", "", false},
      {"", "/a/b", false},
  };
  for (const auto& r : rows) {
    INFO("root " << r.root << " path " << r.path);
    CHECK(is_within(r.root, r.path) == r.within);
  }
}

#include "protocol/workspace_path.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

using troupe::protocol::is_within;
using troupe::protocol::encode_segment;
using troupe::protocol::user_workspace_dir;

TEST_CASE("a key segment keeps safe characters and percent-encodes every other byte", "[workspace]") {
  // AS-26, issue 15 finding 9
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"pska", "pska"},
      {"pska:user_primary", "pska%3Auser_primary"},
      {"sso:alice@example.com", "sso%3Aalice@example.com"},
      {"A-Z.a-z_0-9@x", "A-Z.a-z_0-9@x"},
      {"a b", "a%20b"},
      {"a/b", "a%2Fb"},
      {"../etc", "%2E.%2Fetc"},
      {"a\\b", "a%5Cb"},
      {std::string("a\0b", 3), "a%00b"},
      {"100%", "100%25"},
      {"\xC3\xA9t\xC3\xA9", "%C3%A9t%C3%A9"},
      {"\xFF\xFE", "%FF%FE"},
      {".", "%2E"},
      {"..", "%2E."},
      {"...", "%2E.."},
      {".hidden", "%2Ehidden"},
      {"a.b", "a.b"},
      {"_default", "_default"},
  };
  for (const auto& [input, expected] : cases) {
    INFO("input: " << input);
    CHECK(encode_segment(input) == expected);
  }
}

TEST_CASE("different keys never share a workspace folder", "[workspace]") {
  // Issue 15 finding 9: the old folder names merged these pairs.
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"alice+x@example.com", "alice_x@example.com"},
      {"bob smith", "bob_smith"},
      {"a:b", "a_b"},
      {"%41", "A"},
      {"", "_default"},
      {"", "%none"},
      {".", "_default"},
      {"\xC3\xA9", "\xC3\xA8"},
  };
  for (const auto& [a, b] : pairs) {
    INFO(a << " vs " << b);
    CHECK(encode_segment(a) != encode_segment(b));
    CHECK(user_workspace_dir("/w", "t", a) != user_workspace_dir("/w", "t", b));
  }
  CHECK(user_workspace_dir("/w", "", "bob") != user_workspace_dir("/w", "_default", "bob"));
}

TEST_CASE("a long key's folder is bounded and still tells keys apart", "[workspace]") {
  std::string a(300, 'a');
  std::string b = a;
  b.back() = 'b';
  std::string slashes(300, '/');
  for (const auto& key : {a, b, slashes}) {
    auto segment = encode_segment(key);
    CHECK(segment.size() <= 128);
    CHECK(segment.find('/') == std::string::npos);
    CHECK(segment.find("%~") != std::string::npos);
  }
  CHECK(encode_segment(a) != encode_segment(b));
  CHECK(encode_segment(a).compare(0, 10, "aaaaaaaaaa") == 0);
  // The cut never splits an escape.
  auto cut = encode_segment(slashes);
  auto mark = cut.find("%~");
  CHECK(mark % 3 == 0);
  CHECK(encode_segment(std::string(128, 'x')) == std::string(128, 'x'));
}

TEST_CASE("a user's workspace is root/tenants/T/users/U with both keys encoded", "[workspace]") {
  // AS-26
  CHECK(user_workspace_dir("/data/workspaces", "pska", "pska:user_primary") ==
        "/data/workspaces/tenants/pska/users/pska%3Auser_primary");
  CHECK(user_workspace_dir("/data/workspaces/", "", "anonymous") ==
        "/data/workspaces/tenants/%none/users/anonymous");
  CHECK(user_workspace_dir("/data//", "..", "..") == "/data/tenants/%2E./users/%2E.");
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

// Where a user's workspace lives and whether a path stays inside it (AS-26, AS-27), as pure string functions.
#pragma once

#include <string>
#include <string_view>

namespace troupe::protocol {

// One directory name from a tenant or user key, distinct for distinct keys (AS-26, issue 15
// finding 9): [A-Za-z0-9._@-] stay as they are, every other byte (`%` included, and a leading `.`)
// becomes `%XX` in uppercase hex, and the empty key is `%none`, which no other key encodes to. So a
// segment is never `.`, `..`, hidden, or holds a `/` or NUL. An encoding over 128 characters keeps
// its first characters and ends in `%~` and the key's SHA-256, at most 128 characters in all.
std::string encode_segment(std::string_view key);

// `<workspaces_root>/tenants/<T>/users/<U>` with both keys encoded; trailing slashes of the root
// are dropped. No tenant (an empty key) is its own folder, apart from every named tenant.
std::string user_workspace_dir(std::string_view workspaces_root, std::string_view tenant_key,
                               std::string_view user_key);

// Whether `path` is `root` or below it, compared component by component after lexical
// normalization (`.`, `..`, repeated and trailing slashes), so `/a/bc` is not within `/a/b`.
// Both must be absolute; a relative one is never within. Symlinks are the caller's business:
// resolve them first (io/ does).
bool is_within(std::string_view root, std::string_view path);

} // namespace troupe::protocol

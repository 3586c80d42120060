// Where a user's workspace lives and whether a path stays inside it (AS-26, AS-27), as pure string functions.
#pragma once

#include <string>
#include <string_view>

namespace troupe::protocol {

// One directory name from a tenant or user key (AS-26): `:` and every character outside
// [A-Za-z0-9._@-] become `_` (one `_` per UTF-8 character, one per invalid byte), and an empty,
// `.` or `..` segment becomes `_default`, so a key can never name a parent or nest directories.
std::string sanitize_segment(std::string_view segment);

// `<workspaces_root>/tenants/<T>/users/<U>` with both keys sanitized; trailing slashes of the root
// are dropped.
std::string user_workspace_dir(std::string_view workspaces_root, std::string_view tenant_key,
                               std::string_view user_key);

// Whether `path` is `root` or below it, compared component by component after lexical
// normalization (`.`, `..`, repeated and trailing slashes), so `/a/bc` is not within `/a/b`.
// Both must be absolute; a relative one is never within. Symlinks are the caller's business:
// resolve them first (io/ does).
bool is_within(std::string_view root, std::string_view path);

} // namespace troupe::protocol

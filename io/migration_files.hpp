// The migration files the binary ships (migrations/<engine>/, embedded at build time by
// cmake/embed_migrations.cmake), read and checked (CJ-2).
#pragma once

#include "protocol/migrations.hpp"

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::io {

namespace embedded {
struct sql_file {
  const char* name;
  const char* text;
};
extern const sql_file sqlite_migrations[];   // ends with {nullptr, nullptr}
extern const sql_file postgres_migrations[]; // ends with {nullptr, nullptr}
} // namespace embedded

// The engine's files in version order; an error names a file that is misnamed or out of sequence.
std::variant<std::vector<protocol::migration_file>, std::string> shipped_migrations(const embedded::sql_file* files);

// Who applied a migration, as schema_migrations records it: this host's name.
std::string migration_node();

} // namespace troupe::io

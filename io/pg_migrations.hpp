// The PostgreSQL schema (CJ-2): the numbered files of migrations/postgres/, applied in order, each in
// its own transaction under the migration advisory lock, so nodes starting at once apply each file
// once; each is recorded in schema_migrations with its digest.
#pragma once

#include "io/pg_session.hpp"

#include <string>
#include <variant>
#include <vector>

namespace troupe::io::pg {

struct migration_report {
  std::vector<std::string> applied; // file names, in order (with `dry_run`: those that would be)
  int64_t version = 0;              // the schema version after it
};

// Applies the missing files (with `dry_run`, only lists them). An error is the message troupe exits 2
// with: a changed applied file, a database that needs a newer reader, or why the server refused.
std::variant<migration_report, std::string> migrate(session& db, bool dry_run = false);

} // namespace troupe::io::pg

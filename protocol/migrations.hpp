// Schema migrations (CJ-2): numbered SQL files per engine, what a database has applied, and the plan
// that says which files to apply or why this binary must not start on that database.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol {

// One migration file as the binary ships it: `NNNN_name.sql` with its SQL.
struct migration_file {
  int64_t version = 0;
  std::string name; // the file name, e.g. "0001_sessions.sql"
  std::string sql;
  std::string sha256;     // of `sql`, lowercase hex
  int64_t min_reader = 0; // `-- troupe-min-reader: <v>`: the oldest schema reader that can use the database after it
};

// Reads a file's version from its name and its min-reader line from its text; an error names the file
// and what is wrong.
std::variant<migration_file, std::string> read_migration(std::string_view file_name, std::string sql);

// A row of schema_migrations. An empty sha256 is a version applied before digests were recorded.
struct applied_migration {
  int64_t version = 0;
  std::string sha256;
  int64_t min_reader = 0;
};

struct migration_plan {
  std::vector<const migration_file*> pending; // in version order
  std::vector<int64_t> adopt;                 // applied without a digest: record the shipped one
};

// What to apply, given the shipped files (in version order, numbered 1, 2, ... without gaps) and the
// applied rows. Refused, with the message troupe exits 2 with, when an applied file differs from the
// shipped one, or an applied migration needs a newer reader than this binary (whose reader version is
// its newest file's).
std::variant<migration_plan, std::string> plan_migrations(const std::vector<migration_file>& files,
                                                          const std::vector<applied_migration>& applied);

// Checks the shipped set: versions 1..n, each once, in order. Empty when it is sound.
std::string check_migration_set(const std::vector<migration_file>& files);

} // namespace troupe::protocol

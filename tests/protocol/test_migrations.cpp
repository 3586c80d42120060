// Migration files and the plan that applies them (CJ-2, protocol/migrations.hpp).
#include "protocol/migrations.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <variant>
#include <vector>

using namespace troupe::protocol;

namespace {

migration_file file(const std::string& name, const std::string& sql) {
  auto read = read_migration(name, sql);
  REQUIRE(std::holds_alternative<migration_file>(read));
  return std::get<migration_file>(read);
}

std::vector<migration_file> three() {
  return {file("0001_a.sql", "CREATE TABLE a (x INTEGER);\n"), file("0002_b.sql", "CREATE TABLE b (x INTEGER);\n"),
          file("0003_c.sql", "-- troupe-min-reader: 3\nALTER TABLE b ADD COLUMN y TEXT;\n")};
}

std::string refusal(const std::vector<migration_file>& files, const std::vector<applied_migration>& applied) {
  auto plan = plan_migrations(files, applied);
  REQUIRE(std::holds_alternative<std::string>(plan));
  return std::get<std::string>(plan);
}

} // namespace

TEST_CASE("a migration file's version comes from its name and its min reader from its marker line", "[migrations]") {
  auto f = file("0012_add_jobs.sql", "-- jobs\n-- troupe-min-reader:  7 \r\nCREATE TABLE jobs (id TEXT);\n");
  CHECK(f.version == 12);
  CHECK(f.name == "0012_add_jobs.sql");
  CHECK(f.min_reader == 7);
  CHECK(f.sha256.size() == 64);
  CHECK(file("0001_a.sql", "SELECT 1;").min_reader == 0);
}

TEST_CASE("a misnamed migration file or a bad min-reader line is refused naming the file", "[migrations]") {
  for (auto name : {"a.sql", "0001.sql", "0001_a.txt", "x001_a.sql", "0000_a.sql", "0001_.sql"}) {
    auto read = read_migration(name, "SELECT 1;");
    REQUIRE(std::holds_alternative<std::string>(read));
    CHECK(std::get<std::string>(read).find(name) != std::string::npos);
  }
  auto read = read_migration("0001_a.sql", "-- troupe-min-reader: soon\n");
  REQUIRE(std::holds_alternative<std::string>(read));
  CHECK(std::get<std::string>(read).find("troupe-min-reader") != std::string::npos);
}

TEST_CASE("a fresh database gets every file in order, and an up-to-date one gets none", "[migrations]") {
  auto files = three();
  auto plan = std::get<migration_plan>(plan_migrations(files, {}));
  REQUIRE(plan.pending.size() == 3);
  CHECK(plan.pending[0]->version == 1);
  CHECK(plan.pending[2]->version == 3);
  std::vector<applied_migration> all;
  for (auto& f : files)
    all.push_back({f.version, f.sha256, f.min_reader});
  auto none = std::get<migration_plan>(plan_migrations(files, all));
  CHECK(none.pending.empty());
  CHECK(none.adopt.empty());
}

TEST_CASE("a version applied before digests were recorded is adopted with the shipped digest", "[migrations]") {
  auto files = three();
  auto plan = std::get<migration_plan>(plan_migrations(files, {{1, "", 0}, {2, "", 0}}));
  CHECK(plan.adopt == std::vector<int64_t>{1, 2});
  REQUIRE(plan.pending.size() == 1);
  CHECK(plan.pending[0]->version == 3);
}

TEST_CASE("an applied file that changed since is refused with the spec's message (CJ-2)", "[migrations]") {
  auto files = three();
  auto edited = file("0002_b.sql", "CREATE TABLE b (x INTEGER, z TEXT);\n");
  CHECK(refusal(files, {{1, files[0].sha256, 0}, {2, edited.sha256, 0}})
        == "migration 2 was changed after it was applied");
}

TEST_CASE("a database whose applied migration needs a newer reader is refused, naming both versions (CJ-2)",
          "[migrations]") {
  auto files = three();
  std::vector<applied_migration> applied;
  for (auto& f : files)
    applied.push_back({f.version, f.sha256, f.min_reader});
  applied.push_back({4, "ab", 4}); // written by a newer troupe
  auto why = refusal(files, applied);
  CHECK(why.find("reader 4") != std::string::npos);
  CHECK(why.find("reads schema 3") != std::string::npos);
  applied.back().min_reader = 2; // a newer file an older reader may still use
  CHECK(std::holds_alternative<migration_plan>(plan_migrations(files, applied)));
}

TEST_CASE("shipped files must be numbered 1, 2, 3... without gaps or repeats", "[migrations]") {
  CHECK(check_migration_set(three()).empty());
  auto gap = three();
  gap.erase(gap.begin() + 1);
  CHECK(check_migration_set(gap).find("expected version 2, found 0003_c.sql") != std::string::npos);
  auto repeat = three();
  repeat.push_back(file("0003_d.sql", "SELECT 1;"));
  CHECK(!check_migration_set(repeat).empty());
}

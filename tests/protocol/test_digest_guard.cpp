// The runtime guards of a PSKA digest run: which runs they watch and their budget (AS-70), the check
// of candidate writes (AS-71), the texts a refused call answers with (AS-95), metadata.tool_budget's
// validation (AS-9) and what the trace and the metrics report (AS-55, AS-59).
#include "protocol/chat_request.hpp"
#include "protocol/digest_guard.hpp"
#include "protocol/json.hpp"
#include "protocol/metrics.hpp"
#include "protocol/runs.hpp"

#include <catch2/catch.hpp>

using namespace troupe;
using namespace troupe::protocol;

namespace {

using kind = digest_verdict::kind;

const std::string write_tool(digest_write_tool);
const std::string context_tool(digest_job_context_tool);
constexpr const char* one_claim = R"({"knowledge_claims":[{"claim":"c"}]})";

std::string body_of(const request_error& err) {
  return render_error(dialect::agent, err.what).body;
}

// A run body whose metadata.tool_budget is `budget` (JSON text).
std::string run_body(const std::string& budget) {
  return R"({"messages":[{"role":"user","content":"digest"}],"metadata":{"caller":"pska_digest_worker",)"
         R"("tool_budget":)"
         + budget + "}}";
}

request_error refused_budget(const std::string& budget) {
  auto r = parse_chat_request(run_body(budget), request_kind::background_run);
  REQUIRE(std::holds_alternative<request_error>(r));
  return std::get<request_error>(r);
}

digest_guard guard_of(const std::string& metadata) {
  auto g = digest_guard::for_run(metadata);
  REQUIRE(g);
  return *g;
}

} // namespace

TEST_CASE("only a run from the digest worker or for a digest purpose is guarded", "[digest]") { // AS-70
  CHECK(digest_guard::for_run(R"({"caller":"pska_digest_worker"})"));
  CHECK(digest_guard::for_run(R"({"purpose":"digest"})"));
  CHECK(digest_guard::for_run(R"({"caller":"someone","purpose":"digest"})"));
  CHECK_FALSE(digest_guard::for_run("{}"));
  CHECK_FALSE(digest_guard::for_run(R"({"caller":"PSKA_DIGEST_WORKER","purpose":"Digest"})"));
  CHECK_FALSE(digest_guard::for_run(R"({"caller":["pska_digest_worker"],"purpose":1})"));
  CHECK_FALSE(digest_guard::for_run(R"({"tool_budget":{"x":1}})")); // a budget alone guards nothing
  CHECK_FALSE(digest_guard::for_run("not json"));
}

TEST_CASE("a guarded run may write once and read its job context once, and the second call of each is denied",
          "[digest]") { // AS-70, AS-95
  auto g = guard_of(R"({"caller":"pska_digest_worker"})");
  CHECK(g.report().tool_budget == std::map<std::string, int64_t>{{context_tool, 1}, {write_tool, 1}});
  CHECK(g.judge(context_tool, "{}").what == kind::run);
  CHECK(g.judge(write_tool, one_claim).what == kind::run);
  CHECK_FALSE(g.report().tool_budget_exceeded);

  auto second = g.judge(write_tool, one_claim);
  CHECK(second.what == kind::denied);
  CHECK(second.output == "[TOOL_BUDGET_DENIED] pska_pska_write_candidates exceeded per-run budget");
  auto again = g.judge(context_tool, "{}");
  CHECK(again.what == kind::denied);
  CHECK(again.output == "[TOOL_BUDGET_DENIED] pska_pska_job_context exceeded per-run budget");
  CHECK(g.judge("pska_pska_search", "{}").what == kind::run); // a tool the budget does not name
  CHECK(g.judge("pska_pska_search", "{}").what == kind::run);

  auto& r = g.report();
  CHECK(r.write_call_count == 1); // the calls the budget let run
  CHECK(r.job_context_call_count == 1);
  CHECK(r.tool_budget_exceeded);
}

TEST_CASE("metadata.tool_budget replaces the default for the tools it names and adds its own", "[digest]") { // AS-70
  auto g = guard_of(R"({"purpose":"digest","tool_budget":{"pska_pska_job_context":3,"pska_pska_search":0}})");
  CHECK(g.report().tool_budget
        == std::map<std::string, int64_t>{{context_tool, 3}, {write_tool, 1}, {"pska_pska_search", 0}});
  for (int i = 0; i < 3; ++i)
    CHECK(g.judge(context_tool, "{}").what == kind::run);
  CHECK(g.judge(context_tool, "{}").what == kind::denied);
  CHECK(g.judge("pska_pska_search", "{}").what == kind::denied); // a budget of 0 denies the first call
  CHECK(g.report().job_context_call_count == 3);

  // A budget the request check would refuse (a run stored before the check) leaves the default alone.
  auto stale = guard_of(R"({"purpose":"digest","tool_budget":{"pska_pska_write_candidates":-4}})");
  CHECK(stale.report().tool_budget == std::map<std::string, int64_t>{{context_tool, 1}, {write_tool, 1}});
}

TEST_CASE("a write without a non-empty candidate array is rejected without using the budget", "[digest]") { // AS-71
  auto g = guard_of(R"({"caller":"pska_digest_worker"})");
  for (auto args : {"{}", R"({"knowledge_claims":[]})", R"({"entities":{},"summaries":"s","review_items":null})",
                    R"({"job_id":"j1","source_refs":["a"]})"}) {
    INFO(args);
    auto v = g.judge(write_tool, args);
    CHECK(v.what == kind::rejected);
    CHECK(v.output.rfind("[PSKA_DIGEST_VALIDATION_ERROR] a write needs at least one non-empty candidate array", 0)
          == 0);
  }
  CHECK(g.report().write_call_count == 0);
  for (auto key : {"knowledge_claims", "entities", "memory_candidates", "review_items", "summaries"}) {
    INFO(key);
    CHECK_FALSE(digest_write_problem(std::string(R"({")") + key + R"(":[{"x":1}]})"));
  }
  CHECK(g.judge(write_tool, one_claim).what == kind::run); // the budget is still whole
  CHECK(g.report().write_call_count == 1);
}

TEST_CASE("notes or hyperedges without knowledge claims are rejected, and with claims they pass", "[digest]") { // AS-71
  CHECK(digest_write_problem(R"({"digest_notes":[{"note":"n"}]})")
        == std::optional<std::string>("digest_notes need non-empty knowledge_claims in the same write"));
  CHECK(digest_write_problem(R"({"hyperedges":[{"e":1}],"entities":[{"n":"x"}],"knowledge_claims":[]})")
        == std::optional<std::string>("hyperedges need non-empty knowledge_claims in the same write"));
  CHECK_FALSE(digest_write_problem(R"({"digest_notes":[{"note":"n"}],"hyperedges":[1],"knowledge_claims":[1]})"));
  CHECK_FALSE(digest_write_problem(R"({"digest_notes":[],"entities":[{"n":"x"}]})")); // empty notes write nothing
  CHECK(digest_validation_text("why") == "[PSKA_DIGEST_VALIDATION_ERROR] why");
}

TEST_CASE("write arguments that are not one readable JSON object are rejected, whatever their size or depth",
          "[digest][hostile]") { // AS-71
  for (std::string args : {std::string("not json"), std::string("[1,2]"), std::string("\"knowledge_claims\""),
                           std::string(R"({"knowledge_claims":[1])"), std::string()}) {
    INFO(args);
    CHECK(digest_write_problem(args));
  }
  std::string deep(100000, '[');
  auto too_deep = digest_write_problem(R"({"knowledge_claims":)" + deep);
  REQUIRE(too_deep);
  CHECK(too_deep->find("deeper than 64") != std::string::npos);
  // A repeated member would be read one way here and another way by PSKA.
  auto repeated = digest_write_problem(R"({"knowledge_claims":[1],"knowledge_claims":[]})");
  REQUIRE(repeated);
  CHECK(repeated->find("knowledge_claims") != std::string::npos);
  // The refusal quotes a repeated name only in part: it reaches the model and the events uncut.
  std::string long_name(1 << 20, 'k');
  auto long_repeat = digest_write_problem("{\"" + long_name + "\":1,\"" + long_name + "\":2}");
  REQUIRE(long_repeat);
  CHECK(long_repeat->size() <= 300);
  CHECK(digest_write_problem("{\"knowledge_claims\":[\"\xff\"]}")); // not UTF-8
  std::string huge = R"({"knowledge_claims":[)";
  for (int i = 0; i < 200000; ++i)
    huge += R"({"claim":"a claim of some length"},)";
  huge += "1]}";
  CHECK_FALSE(digest_write_problem(huge));
}

TEST_CASE("a tool_budget that is not an object of non-negative integers is a 422 naming the field",
          "[digest][request]") { // AS-9, AS-70
  auto list = refused_budget("[1]");
  CHECK(body_of(list).find(R"("loc":["body","metadata","tool_budget"],"msg":"Input should be a valid dictionary)")
        != std::string::npos);
  auto negative = refused_budget(R"({"pska_pska_write_candidates":-1})");
  CHECK(body_of(negative)
        == R"({"detail":[{"loc":["body","metadata","tool_budget","pska_pska_write_candidates"],)"
           R"("msg":"Input should be an integer from 0 to 9223372036854775807","type":"greater_than_equal"}]})");
  for (auto wrong : {R"({"t":1.5})", R"({"t":"1"})", R"({"t":true})", R"({"t":null})", R"({"t":1e300})",
                     R"({"t":18446744073709551615})", R"({"t":99999999999999999999999})"}) {
    INFO(wrong);
    auto err = refused_budget(wrong);
    CHECK(err.what.code == errc::validation_failed);
    CHECK(body_of(err).find(R"("loc":["body","metadata","tool_budget","t"])") != std::string::npos);
  }
  std::string many = "{";
  for (std::size_t i = 0; i <= max_budget_tools; ++i)
    many += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":1";
  many += "}";
  CHECK(body_of(refused_budget(many)).find("at most 256 items") != std::string::npos);

  for (auto fine : {"null", "{}", R"({"pska_pska_write_candidates":0,"x":9223372036854775807})"}) {
    INFO(fine);
    CHECK(std::holds_alternative<chat_request>(parse_chat_request(run_body(fine), request_kind::background_run)));
  }
}

TEST_CASE("a hostile tool_budget is refused by the body's own limits before anything reads it",
          "[digest][request][hostile]") { // AS-2, AS-70
  std::string deep(100000, '[');
  auto nested = parse_chat_request(run_body(R"({"t":)" + deep), request_kind::background_run);
  REQUIRE(std::holds_alternative<request_error>(nested));
  CHECK(std::get<request_error>(nested).what.code == errc::bad_request);
  CHECK(body_of(std::get<request_error>(nested)).find("deeper than 64") != std::string::npos);

  auto repeated = refused_budget(R"({"pska_pska_write_candidates":1,"pska_pska_write_candidates":50})");
  CHECK(repeated.what.code == errc::validation_failed);
  CHECK(body_of(repeated).find(R"("loc":["body","metadata","tool_budget","pska_pska_write_candidates"])")
        != std::string::npos);
}

TEST_CASE("the trace records the guard's budget and counts, and null for a run without a guard", "[digest][runs]") { // AS-55, AS-70
  run_record run;
  run.run_id = "r1";
  run.status = "completed";
  trace_facts facts;
  auto plain = json::parse(trace_json(run, facts));
  REQUIRE(plain);
  CHECK((*plain)["pska_digest_tool_budget"].IsNull());

  auto g = guard_of(R"({"caller":"pska_digest_worker"})");
  g.judge(write_tool, one_claim);
  g.judge(write_tool, one_claim);
  facts.pska_digest = g.report();
  auto guarded = json::parse(trace_json(run, facts));
  REQUIRE(guarded);
  CHECK(json::serialize((*guarded)["pska_digest_tool_budget"])
        == R"({"tool_budget":{"pska_pska_job_context":1,"pska_pska_write_candidates":1},"write_call_count":1,)"
           R"("job_context_call_count":0,"tool_budget_exceeded":true})");
  auto back = digest_budget_report_of(json::serialize((*guarded)["pska_digest_tool_budget"]));
  REQUIRE(back);
  CHECK(back->tool_budget == g.report().tool_budget);
  CHECK(back->write_call_count == 1);
  CHECK(back->tool_budget_exceeded);
  CHECK_FALSE(digest_budget_report_of("null"));
  CHECK_FALSE(digest_budget_report_of(R"({"write_call_count":1})"));
}

TEST_CASE("the metrics show the digest runs' counts and the latest runs over budget", "[digest][metrics]") { // AS-59
  store_stats s;
  s.pska_digest.run_count = 3;
  s.pska_digest.write_call_count = 2;
  s.pska_digest.job_context_call_count = 1;
  s.pska_digest.tool_budget_exceeded_count = 1;
  digest_budget_report r;
  r.tool_budget = {{write_tool, 1}};
  r.write_call_count = 1;
  r.tool_budget_exceeded = true;
  s.pska_digest.recent_budget_exceeded.push_back({"r9", "s9", "2026-01-01T00:00:00.000000+00:00", r});
  auto doc = json::parse(metrics_json(s, 0, false));
  REQUIRE(doc);
  CHECK(json::serialize((*doc)["integrations"])
        == R"({"pska_digest":{"run_count":3,"write_call_count":2,"job_context_call_count":1,)"
           R"("tool_budget_exceeded_count":1,"recent_budget_exceeded":[{"run_id":"r9","session_id":"s9",)"
           R"("completed_at":"2026-01-01T00:00:00.000000+00:00","tool_budget":{"pska_pska_write_candidates":1},)"
           R"("write_call_count":1,"job_context_call_count":0}]}})");
}

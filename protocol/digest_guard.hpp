// The runtime guards of a PSKA digest run (AS-70, AS-71, AS-95): which runs they watch, the per-run
// tool budget, the check of every candidate write, the texts a refused call answers with, and what
// the trace and the metrics report of them. Pure: the run actor asks, and renders what it is told.
#pragma once

#include "protocol/errors.hpp"
#include "protocol/json.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

// The two PSKA tools the default budget limits, as troupe names them (server `pska`, AS-62).
inline constexpr std::string_view digest_write_tool = "pska_pska_write_candidates";
inline constexpr std::string_view digest_job_context_tool = "pska_pska_job_context";

// How many tools a metadata.tool_budget may name: the budget is copied into the run's trace.
constexpr std::size_t max_budget_tools = 256;

// The issues of a metadata.tool_budget (AS-9): null or an object of tool name → an integer from 0 to
// 2^63-1, naming at most max_budget_tools tools. Each issue's loc starts body.metadata.tool_budget.
// An empty list means the value is valid.
std::vector<validation_issue> tool_budget_issues(const json::value& tool_budget);

// How much of a parse failure's message a rejected write quotes: a refusal is not cut like tool output.
constexpr std::size_t max_problem_bytes = 200;

// AS-71: why a pska_pska_write_candidates call with these arguments (JSON text, as the model wrote
// them) may not run, or nullopt when it may. It needs a non-empty candidate array, and digest_notes or
// hyperedges only together with non-empty knowledge_claims. Arguments that are not one JSON object,
// nest deeper than json::max_depth or repeat a member name (which readers elsewhere would read
// differently) are refused too.
std::optional<std::string> digest_write_problem(std::string_view arguments);

// What the trace records of a guarded run (AS-70's pska_digest_tool_budget), and what the metrics
// read back of the latest runs that went over their budget (AS-59).
struct digest_budget_report {
  std::map<std::string, int64_t> tool_budget; // in force: the default with metadata.tool_budget over it
  int64_t write_call_count = 0;               // pska_pska_write_candidates calls the budget let run
  int64_t job_context_call_count = 0;         // pska_pska_job_context calls the budget let run
  bool tool_budget_exceeded = false;          // a call was denied
};

// `key`: the report as an object, or null when there is none.
void write_digest_budget(json::writer& w, const char* key, const std::optional<digest_budget_report>& report);

// A report as write_digest_budget wrote it (JSON text); nullopt for anything else.
std::optional<digest_budget_report> digest_budget_report_of(std::string_view text);

// What the guard says of one call.
struct digest_verdict {
  enum class kind {
    run,      // it runs as any call does
    rejected, // AS-71: its tool_call is shown, it does not run, `output` is its tool_result
    denied,   // AS-70: no tool_call, a think with `output`; the model gets `output` as the tool message
  };
  kind what = kind::run;
  std::string output;
};

// The guards of one run attempt. An attempt starts the loop over from the request, and its budget
// with it: a retried digest run already carries its first attempt's `error` event, which fails the
// batch anyway (AS-72).
class digest_guard {
public:
  // The guard of a run whose metadata (JSON object text) has caller "pska_digest_worker" or purpose
  // "digest"; nullopt for any other run. metadata.tool_budget's entries replace the default's for the
  // tools they name and add tools of their own (a tool named by neither has no limit); a tool_budget
  // that tool_budget_issues refuses, which only a request stored before the check could carry, leaves
  // the default alone.
  static std::optional<digest_guard> for_run(std::string_view metadata);

  // Judges the next call of the run, in model order: a write is checked first (a rejected one uses
  // no budget), then the call is counted against its tool's budget, or denied once the budget is
  // spent. Calls the run's tool policy refused never reach the guard.
  digest_verdict judge(const std::string& tool, std::string_view arguments);

  const digest_budget_report& report() const { return report_; }

private:
  digest_budget_report report_;
  std::map<std::string, int64_t> used_;
};

// The texts a guarded call answers with (AS-70, AS-71, AS-95).
std::string budget_denied_text(std::string_view tool);
std::string digest_validation_text(std::string_view why);

} // namespace troupe::protocol

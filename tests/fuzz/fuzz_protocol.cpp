// libFuzzer target for the parsers of protocol/ that read what clients, upstreams and MCP servers
// send. The first byte picks the parser; the rest is its input. Build: see tests/fuzz/CMakeLists.txt.
#include "protocol/chat_request.hpp"
#include "protocol/cluster.hpp"
#include "protocol/config.hpp"
#include "protocol/jobs.hpp"
#include "protocol/mcp.hpp"
#include "protocol/pska_digest.hpp"
#include "protocol/query_string.hpp"
#include "protocol/responses_request.hpp"
#include "protocol/responses_search.hpp"
#include "protocol/responses_stream.hpp"
#include "protocol/upstream_readers.hpp"
#include "protocol/round_reply.hpp"
#include "protocol/run_view.hpp"
#include "protocol/skills.hpp"
#include "protocol/sse_parser.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/workspace_commands.hpp"
#include "protocol/workspace_stream.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  using namespace troupe::protocol;
  switch (data[0] % 12) {
    case 0: { // a client's body: chat, a Responses create, a conversation's metadata; a GET's include[]
      parse_chat_request(input);
      responses::parse_request(input);
      if (auto doc = json::parse(input))
        responses::conversation_metadata(*doc);
      responses::check_include_query(query_pairs(input));
      break;
    }
    case 1: {
      sse_parser parser(256);
      std::vector<sse_event> events;
      parser.feed(input.substr(0, input.size() / 2), events);
      parser.feed(input.substr(input.size() / 2), events);
      break;
    }
    case 2: {
      auto msg = parse_jsonrpc(input);
      if (msg.type == jsonrpc_message::kind::response) {
        parse_tools_list(msg.result);
        mcp_tool_result_text(msg.result);
      }
      mcp_answer_to_server_request(input);
      break;
    }
    case 3:
      parse_config(input, {}, [](const std::string&) { return std::nullopt; });
      break;
    case 4: { // an upstream's chat chunk, a whole chat answer, folded into an agent step
      responses::chat_chunk_reader reader;
      std::vector<responses::upstream_event> events;
      reader.feed(input, events);
      reader.end(events);
      auto whole = responses::chat_completion_events(input);
      events.insert(events.end(), whole.begin(), whole.end());
      // An upstream's error answer and its Retry-After (RS-43); a Responses upstream's events.
      responses::upstream_error_message(input);
      responses::retry_after_seconds(input, 1767225600);
      responses::responses_event_reader responses_reader;
      responses_reader.feed(input, events);
      responses_reader.end(events);
      reply_assembler assembler;
      for (auto& e : events)
        assembler.feed(e);
      assembler.outcome();
      break;
    }
    case 5:
      repair_arguments(input);
      break;
    case 6: { // reflexr.v1 frames and bodies: the JSON Schema validator and the declared types' schemas
      static auto types = std::get<0>(reflexr::event_registry::build(parse_config("", {}, [](const std::string&) {
                                                                        return std::nullopt;
                                                                      }).value.workspaces));
      parse_hello(input);
      reflexr::parse_command_frame(input, *types);
      reflexr::parse_publish_body(input, *types);
      break;
    }
    case 7: // what a client asks of a log, and what any database client may NOTIFY about one
      reflexr::parse_event_query(input, {"ops:deploy.finished"});
      parse_workspace_wakeup(input);
      break;
    case 8: { // the jobs API: every body, lease tokens, run_after, a follow-up run's template
      jobs::parse_enqueue(input, {});
      jobs::parse_lease(input);
      jobs::parse_heartbeat(input);
      jobs::parse_completion(input, {});
      jobs::parse_completions(input, {});
      jobs::parse_failure(input);
      jobs::append_error(input, 1, "2026-01-01T00:00:00.000000+00:00", input);
      jobs::token_epoch(input);
      parse_rfc3339(input);
      jobs::render_start_run(input, {"job_1", "t", std::string(input.substr(0, 64)), "[1]"});
      break;
    }
    case 9: { // what PSKA and troupe answer the digest worker and `troupe run`: job lists, batch pages, leases, run events
      pska::ready_jobs(input, 1e10);
      pska::named_job(input, "j1");
      pska::parse_batch_page(input);
      pska::troupe_jobs(input, {});
      if (auto doc = json::parse(input)) {
        pska::batch_judge judge(*doc);
        if (auto events = json::member(*doc, "events"); events && events->IsArray())
          for (auto& e : events->GetArray()) {
            judge.add_event(e);
            run_view::event_lines(e, {24, 2, 2}); // `troupe run` prints the same events
          }
        judge.verdict("completed");
        run_view::progress_line(*doc, 1);
      }
      break;
    }
    case 10: { // a search provider's reply (RS-27), its stored items, and the model's search arguments
      for (auto call : {responses::item_kind::web_search_call, responses::item_kind::file_search_call}) {
        auto reply = responses::parse_search_reply(call, input);
        responses::numbered_results(call, "q", reply.hits);
        responses::item it;
        it.type = call;
        it.status = "completed";
        it.results = responses::results_json(call, reply.hits);
        responses::search_history_text(it);
        if (auto stored = responses::item_from_json(input))
          responses::search_history_text(*stored);
      }
      responses::query_of(input);
      responses::search_http_failure(static_cast<int>(size % 600), input);
      break;
    }
    case 11: { // a workspace's SKILL.md: its frontmatter, then selection and the system message it joins
      auto file = parse_skill_file(input, "skills/x/SKILL.md");
      std::vector<skill> catalog;
      if (file.parsed)
        catalog.push_back(*file.parsed);
      auto chosen = select_skills(merge_skills(catalog), std::nullopt, input);
      prompt_layers layers;
      layers.skills = chosen.selected;
      system_prompt(layers);
      break;
    }
  }
  return 0;
}

// The context budget (AS-23) and what a round over it sends (AS-24, AS-95).
#include "protocol/context_window.hpp"

#include <catch2/catch.hpp>

#include <set>

using namespace troupe::protocol;

namespace {

chat_message called(std::string id) {
  auto m = text_message("assistant", "");
  m.content_null = true;
  m.tool_calls = {{id, "echo", "{}"}};
  return m;
}

chat_message answer(std::string id, std::string text = "out") {
  auto m = text_message("tool", std::move(text));
  m.tool_call_id = std::move(id);
  return m;
}

// system, the first user message, then `steps` steps of a call and its answer, each answer `size` bytes.
std::vector<chat_message> conversation(int steps, std::size_t size = 400) {
  std::vector<chat_message> out{text_message("system", "be safe"), text_message("user", "first question")};
  for (int i = 0; i < steps; ++i) {
    out.push_back(called("c" + std::to_string(i)));
    out.push_back(answer("c" + std::to_string(i), std::string(size, 'x')));
  }
  return out;
}

} // namespace

TEST_CASE("AS-23 a message is estimated at a quarter of its bytes rounded up, plus four", "[context]") {
  CHECK(estimated_tokens(text_message("user", "")) == 4);
  CHECK(estimated_tokens(text_message("user", "abcd")) == 5);
  CHECK(estimated_tokens(text_message("user", "abcde")) == 6);
  auto call = called("c1"); // "echo" + "{}": 6 bytes
  CHECK(estimated_tokens(call) == 6);
  CHECK(estimated_tokens(std::vector<chat_message>{text_message("user", "abcd"), call}) == 11);
}

TEST_CASE("AS-23 the budget is the context size less the reply's tokens, never below one", "[context]") {
  CHECK(context_budget(std::nullopt, 128000, std::nullopt, 4096) == 123904);
  CHECK(context_budget(3000, 128000, std::nullopt, 4096) == 1);
  CHECK(context_budget(7000, 128000, 1000, 4096) == 6000);
  CHECK(context_budget(std::nullopt, 128000, 28000, 4096) == 100000);
}

TEST_CASE("AS-23 a conversation within the budget goes whole", "[context]") {
  auto messages = conversation(20);
  auto fit = fit_context(messages, 1000000, 15);
  CHECK_FALSE(fit.compressed);
  CHECK(fit.messages.size() == messages.size());
  CHECK(fit.kept_message_count == messages.size());
  CHECK(fit.estimated_tokens_after == fit.estimated_tokens_before);
}

TEST_CASE("AS-23 over the budget, the system message, the first user message and the last window go",
          "[context]") {
  auto messages = conversation(20); // 42 messages
  auto fit = fit_context(messages, 1000, 15);
  REQUIRE(fit.compressed);
  CHECK(fit.original_message_count == 42);
  // The last 15 begin with an answer (index 27), so the window widens to its call (index 26).
  CHECK(fit.kept_message_count == 2 + 16);
  REQUIRE(fit.messages.size() == 18);
  CHECK(fit.messages[0].role == "system");
  CHECK(fit.messages[1].content == "first question");
  CHECK(fit.messages[2].tool_calls.at(0).id == "c12");
  CHECK(fit.messages[3].tool_call_id == "c12");
  CHECK(fit.messages.back().tool_call_id == "c19");
  CHECK(fit.estimated_tokens_before == estimated_tokens(messages));
  CHECK(fit.estimated_tokens_after == estimated_tokens(fit.messages));
  CHECK(fit.estimated_tokens_after < fit.estimated_tokens_before);
  CHECK(fit.budget_tokens == 1000);
}

TEST_CASE("AS-23 a kept answer keeps its call even when other answers of the step lie between", "[context]") {
  std::vector<chat_message> m{text_message("system", "s"), text_message("user", std::string(4000, 'q'))};
  auto step = text_message("assistant", "");
  step.tool_calls = {{"a", "echo", "{}"}, {"b", "echo", "{}"}, {"c", "echo", "{}"}};
  m.push_back(step);
  m.push_back(answer("a"));
  m.push_back(answer("b"));
  m.push_back(answer("c"));
  m.push_back(text_message("assistant", "done"));
  auto fit = fit_context(m, 10, 2); // the window is answer c and the text: c's call is three back
  REQUIRE(fit.compressed == false); // widened to everything after the user message: nothing left out
  CHECK(fit.messages.size() == m.size());
}

TEST_CASE("AS-95 no call goes upstream without its answer, and no answer without its call", "[context]") {
  std::vector<chat_message> m{text_message("system", "s"), text_message("user", "u")};
  for (int i = 0; i < 4; ++i) {
    m.push_back(text_message("user", std::string(400, 'u')));
    m.push_back(called("c" + std::to_string(i)));
    m.push_back(answer("c" + std::to_string(i)));
  }
  auto fit = fit_context(m, 10, 4);
  REQUIRE(fit.compressed);
  std::set<std::string> calls, answers;
  for (auto& x : fit.messages) {
    for (auto& c : x.tool_calls)
      calls.insert(c.id);
    if (x.role == "tool")
      answers.insert(x.tool_call_id);
  }
  CHECK(calls == answers);
  CHECK(fit.messages.size() == fit.kept_message_count);
}

TEST_CASE("AS-23 a conversation no longer than the window is sent whole even over the budget", "[context]") {
  auto messages = conversation(3, 40000);
  auto fit = fit_context(messages, 10, 15);
  CHECK_FALSE(fit.compressed);
  CHECK(fit.messages.size() == messages.size());
}

// The reflexr.v1 JSON Schema (workspace-stream.md §9): the definitions frames, commands, rules and facts
// are parsed with, and the document `troupe schema protocol` writes to schemas/reflexr.v1.json.
#pragma once

#include "protocol/json.hpp"
#include "protocol/json_schema.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol::reflexr {

// The reflexr.v1 JSON Schema document (WS-125/126/127), built once from the definitions in
// reflexr_schema.cpp.
const json::document& schema_document();

// The document as schemas/reflexr.v1.json holds it: 2-space indented JSON, $defs sorted by name, the
// members of each definition in the order it declares them, ending with "\n".
std::string schema_text();

// Validates `v` against the definition `def` (any name in $defs: "ClientFrame", "CommandFrame", "Hello",
// "Rule", …); empty when it is valid. One compiled schema of the whole document serves every call and
// thread. An unknown `def` is the single problem `unknown_definition`.
std::vector<json_schema::problem> check(const json::value& v, std::string_view def);

} // namespace troupe::protocol::reflexr

// A JSON Schema validator for the subset reflexr.v1's schema and configured event types use, with
// pydantic's wording of each problem (workspace-stream.md WS-13, WS-37).
#pragma once

#include "protocol/errors.hpp"
#include "protocol/json.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol::json_schema {

// How deep an instance may nest (objects and arrays) before validation stops with `too_deep`, so a
// hostile instance cannot exhaust the stack.
inline constexpr int max_depth = 64;

// One validation problem, worded as WS-13 / WS-37 ask (pydantic's words); loc is the path from the
// instance root, array indices as decimal strings.
using problem = validation_issue;

struct compiled;

// A compiled schema: cheap to copy (it shares the compiled document) and safe to use from several
// threads at once.
class schema {
private:
  schema(std::shared_ptr<const compiled> c, int root) : compiled_(std::move(c)), root_(root) {}
  friend std::variant<schema, std::string> compile(const json::value& s);
  friend std::optional<schema> find_def(const schema& s, std::string_view name);
  friend std::vector<problem> validate(const schema& s, const json::value& instance);
  std::shared_ptr<const compiled> compiled_;
  int root_; // the node validation starts at: the root, or one of its $defs
};

// Compiles a schema in the supported subset: type, properties, required, additionalProperties (true
// or false), enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength,
// pattern (ECMAScript, searched in the string's UTF-8 bytes), items, minItems, maxItems, $ref
// (`#/$defs/<name>`, against the root's $defs), $defs (root only), oneOf, anyOf, discriminator
// ({"propertyName"}, with oneOf), and the annotations $schema, $id, $comment, title, description,
// default, examples, format. An error names the offending keyword by its JSON pointer
// (`#/$defs/Hello/patternProperties: …`) and what is supported. A schema nesting more than max_depth
// containers, or with a chain of more than max_depth $ref/oneOf/anyOf, is refused, so neither compiling
// nor validating recurses further than max_depth × max_depth.
std::variant<schema, std::string> compile(const json::value& s);

// The schema `$defs/<name>` of the same compiled document, or nullopt when the root has no such def.
std::optional<schema> find_def(const schema& s, std::string_view name);

// Every problem of `instance`, in the order pydantic reports them (an object's properties in the
// schema's order, then its extra members in the instance's); empty when it is valid.
std::vector<problem> validate(const schema& s, const json::value& instance);

// Writes problems as a JSON array of {"type","loc","msg"}, loc elements that are all digits as integers.
void write_problems(json::writer& w, const std::vector<problem>& problems);

// `service: Field required; items.0: Input should be a valid string`: each problem's loc joined by
// '.', ": " and its msg (just the msg when loc is empty), problems joined by "; ".
std::string describe(const std::vector<problem>& problems);

} // namespace troupe::protocol::json_schema

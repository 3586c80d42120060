// The JSON Schema validator and its pydantic wording (workspace-stream.md WS-13, WS-37).
#include "protocol/json_schema.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace troupe::protocol;
using json_schema::problem;

namespace {

json::document parsed(const std::string& text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  return std::move(*doc);
}

json_schema::schema compiled(const std::string& text) {
  auto result = json_schema::compile(parsed(text));
  if (auto error = std::get_if<std::string>(&result))
    FAIL(*error);
  return std::get<json_schema::schema>(std::move(result));
}

std::string compile_error(const std::string& text) {
  auto result = json_schema::compile(parsed(text));
  REQUIRE(std::holds_alternative<std::string>(result));
  return std::get<std::string>(result);
}

// `loc: msg [type]` per problem, "; "-joined; "" when valid.
std::string problems(const std::string& schema, const std::string& instance) {
  std::string out;
  for (auto& p : json_schema::validate(compiled(schema), parsed(instance)))
    out += (out.empty() ? "" : "; ") + json_schema::describe({p}) + " [" + p.type + "]";
  return out;
}

struct validation_case {
  const char* schema;
  const char* instance;
  const char* expected;
};

void run(std::initializer_list<validation_case> cases) {
  for (auto& c : cases) {
    INFO("schema " << c.schema << ", instance " << c.instance);
    CHECK(problems(c.schema, c.instance) == c.expected);
  }
}

} // namespace

TEST_CASE("a missing required property and an extra one are named by their loc", "[json_schema]") { // WS-13
  auto closed = R"({"type":"object","properties":{"service":{"type":"string"},"n":{"type":"integer"}},
                    "required":["service"],"additionalProperties":false})";
  run({
      {closed, R"({"service":"auth"})", ""},
      {closed, R"({})", "service: Field required [missing]"},
      {closed, R"({"service":"auth","extra":1})", "extra: Extra inputs are not permitted [extra_forbidden]"},
      // Properties in the schema's order, then extra members in the instance's.
      {closed, R"({"x":1,"n":"2"})",
       "service: Field required [missing]; n: Input should be a valid integer [int_type]; "
       "x: Extra inputs are not permitted [extra_forbidden]"},
      {R"({"type":"object","required":["a"]})", R"({"b":1})", "a: Field required [missing]"},
      {R"({"type":"object","properties":{"a":{"type":"string"}}})", R"({"b":1})", ""},
  });
}

TEST_CASE("each type is refused in pydantic's words", "[json_schema]") { // WS-13
  run({
      {R"({"type":"string"})", "5", "Input should be a valid string [string_type]"},
      {R"({"type":"integer"})", "\"5\"", "Input should be a valid integer [int_type]"},
      {R"({"type":"integer"})", "1.0", "Input should be a valid integer [int_type]"},
      {R"({"type":"integer"})", "1e3", "Input should be a valid integer [int_type]"},
      {R"({"type":"integer"})", "-9223372036854775808", ""},
      {R"({"type":"integer"})", "18446744073709551615", ""},
      {R"({"type":"number"})", "\"1\"", "Input should be a valid number [float_type]"},
      {R"({"type":"number"})", "1", ""},
      {R"({"type":"number"})", "1.5", ""},
      {R"({"type":"boolean"})", "0", "Input should be a valid boolean [bool_type]"},
      {R"({"type":"object"})", "[]", "Input should be a valid dictionary [dict_type]"},
      {R"({"type":"array"})", "{}", "Input should be a valid list [list_type]"},
      {R"({"type":"null"})", "false", "Input should be None [none_required]"},
      {R"({"type":"number"})", "true", "Input should be a valid number [float_type]"},
      // A list of types is worded by its first type other than null.
      {R"({"type":["null","integer","string"]})", "[]", "Input should be a valid integer [int_type]"},
      {R"({"type":["null","integer","string"]})", "null", ""},
      {R"({"type":["string","number"]})", "2.5", ""},
      {R"({})", "[1,{}]", ""},
  });
}

TEST_CASE("enum and const list the values expected, strings single-quoted", "[json_schema]") {
  run({
      {R"({"enum":["a","b"]})", "\"c\"", "Input should be 'a' or 'b' [enum]"},
      {R"({"enum":["a","b","c"]})", "\"d\"", "Input should be 'a', 'b' or 'c' [enum]"},
      {R"({"enum":[1,"it's",null]})", "2", "Input should be 1, \"it's\" or null [enum]"},
      {R"({"enum":["a","b"]})", "\"b\"", ""},
      {R"({"const":"hello"})", "\"command\"", "Input should be 'hello' [literal_error]"},
      {R"({"const":"hello"})", "\"hello\"", ""},
      {R"({"const":{"a":[1]}})", R"({"a":[1]})", ""},
  });
}

TEST_CASE("numeric bounds name the bound, as an integer when it is one", "[json_schema]") {
  run({
      {R"({"type":"integer","minimum":0})", "-1", "Input should be greater than or equal to 0 [greater_than_equal]"},
      {R"({"type":"integer","minimum":0})", "0", ""},
      {R"({"type":"number","exclusiveMinimum":0})", "0", "Input should be greater than 0 [greater_than]"},
      {R"({"type":"number","maximum":10.0})", "10.5", "Input should be less than or equal to 10 [less_than_equal]"},
      {R"({"type":"number","exclusiveMaximum":2.5})", "2.5", "Input should be less than 2.5 [less_than]"},
      {R"({"type":"number","exclusiveMaximum":2.5})", "2.4", ""},
      {R"({"minimum":1})", "\"not a number\"", ""},
  });
}

TEST_CASE("string lengths count characters, not bytes", "[json_schema]") {
  run({
      {R"({"type":"string","minLength":1})", "\"\"", "String should have at least 1 character [string_too_short]"},
      {R"({"type":"string","minLength":3})", "\"ab\"", "String should have at least 3 characters [string_too_short]"},
      {R"({"type":"string","maxLength":3})", "\"h\u00e9\u00e9\"", ""}, // 5 bytes, 3 characters
      {R"({"type":"string","maxLength":3})", "\"h\u00e9\u00e9\u2603\"",
       "String should have at most 3 characters [string_too_long]"},
      {R"({"type":"string","maxLength":1})", "\"ab\"", "String should have at most 1 character [string_too_long]"},
  });
}

TEST_CASE("a pattern is an ECMAScript regex searched in the string", "[json_schema]") { // WS-6
  run({
      {R"({"type":"string","pattern":"^[a-z]+$"})", "\"Ab\"",
       "String should match pattern '^[a-z]+$' [string_pattern_mismatch]"},
      {R"({"type":"string","pattern":"b"})", "\"abc\"", ""},
      {R"({"type":"string","pattern":"^a|z$"})", "\"xyz\"", ""},
      {R"({"type":"string","pattern":"^(a|b)$"})", "\"ab\"",
       "String should match pattern '^(a|b)$' [string_pattern_mismatch]"},
  });
}

TEST_CASE("a pattern is searched in a long string without exhausting the stack", "[json_schema]") {
  auto s = compiled(R"({"type":"string","pattern":"^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$"})");
  std::string name(100000, 'a'); // the backtracking executor overflows an 8 MiB stack at 40000
  json::value mismatch(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
  CHECK(json_schema::validate(s, mismatch).size() == 1);
  name[100] = ':'; // ...and a long match is found as well
  json::value match(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
  CHECK(json_schema::validate(s, match).empty());
}

TEST_CASE("array items are checked with their index in loc, then the list's length", "[json_schema]") {
  auto strings = R"({"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2})";
  run({
      {strings, R"(["a",1,true])",
       "1: Input should be a valid string [string_type]; 2: Input should be a valid string [string_type]; "
       "List should have at most 2 items after validation, not 3 [too_long]"},
      {strings, "[]", "List should have at least 1 item after validation, not 0 [too_short]"},
      {R"({"type":"array","minItems":2})", "[1]",
       "List should have at least 2 items after validation, not 1 [too_short]"},
      {strings, R"(["a","b"])", ""},
  });
}

TEST_CASE("nested problems carry the whole path, through $refs", "[json_schema]") {
  auto s = R"({"$defs":{"Leaf":{"type":"object","properties":{"c":{"type":"string"}}},
                        "Name":{"type":"string"}},
               "type":"object",
               "properties":{"n":{"$ref":"#/$defs/Name"},
                             "a":{"type":"object",
                                  "properties":{"b":{"type":"array","items":{"$ref":"#/$defs/Leaf"}}}}}})";
  run({
      {s, R"({"n":"x","a":{"b":[{"c":"ok"},{"c":1}]}})", "a.b.1.c: Input should be a valid string [string_type]"},
      {s, R"({"n":1})", "n: Input should be a valid string [string_type]"},
  });
}

TEST_CASE("a discriminated oneOf checks the branch its tag names, at the same loc", "[json_schema]") { // WS-127
  auto s = R"({"$defs":{"A":{"type":"object","properties":{"type":{"const":"a"},"x":{"type":"integer"}},
                             "required":["type","x"],"additionalProperties":false},
                        "B":{"type":"object","properties":{"type":{"const":"b"}}}},
               "type":"object",
               "properties":{"item":{"oneOf":[{"$ref":"#/$defs/A"},{"$ref":"#/$defs/B"}],
                                     "discriminator":{"propertyName":"type"}}}})";
  run({
      {s, R"({"item":{"type":"a","x":1}})", ""},
      {s, R"({"item":{"type":"b","y":1}})", ""},
      {s, R"({"item":5})", "item: Input should be a valid dictionary [dict_type]"},
      {s, R"({"item":{}})", "item: Unable to extract tag using discriminator 'type' [union_tag_not_found]"},
      {s, R"({"item":{"type":"c"}})",
       "item: Input tag 'c' found using 'type' does not match any of the expected tags: 'a', 'b' [union_tag_invalid]"},
      {s, R"({"item":{"type":"a","x":"1","z":0}})",
       "item.x: Input should be a valid integer [int_type]; item.z: Extra inputs are not permitted [extra_forbidden]"},
  });
}

TEST_CASE("a plain union reports the branch that came closest", "[json_schema]") {
  auto nullable = R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a","b"]},
                               {"type":"null"}]})";
  run({
      {nullable, "null", ""},
      {nullable, R"({"a":1,"b":2})", ""},
      {nullable, R"({"b":2})", "a: Field required [missing]"},         // a tie goes to the first branch
      {nullable, R"({"a":"x"})", "Input should be None [none_required]"}, // two problems against one
      {R"({"oneOf":[{"type":"string"},{"type":"integer"}]})", "1", ""},
      {R"({"oneOf":[{"type":"number"},{"type":"integer"}]})", "1",
       "Input should match exactly one schema of oneOf, not 2 [union_multiple_matches]"},
  });
}

TEST_CASE("find_def validates against one definition of a compiled document", "[json_schema]") {
  auto s = compiled(R"({"$defs":{"Name":{"type":"string"}},"type":"object"})");
  auto name = json_schema::find_def(s, "Name");
  REQUIRE(name);
  CHECK(json_schema::validate(*name, parsed("1")).size() == 1);
  CHECK(json_schema::validate(*name, parsed("\"x\"")).empty());
  CHECK_FALSE(json_schema::find_def(s, "Other"));
}

TEST_CASE("compile refuses what it does not support, naming the keyword's pointer", "[json_schema]") {
  CHECK_THAT(compile_error(R"({"patternProperties":{}})"),
             Catch::StartsWith("#/patternProperties: unsupported keyword; "
                               "the supported keywords are type, properties"));
  CHECK_THAT(compile_error(R"({"properties":{"a/b":{"if":{}}}})"),
             Catch::StartsWith("#/properties/a~1b/if: unsupported keyword;"));
  CHECK_THAT(compile_error(R"({"pattern":"(["})"), Catch::StartsWith("#/pattern: invalid regular expression: "));
  CHECK(compile_error(R"({"pattern":"(a)\\1"})") == "#/pattern: back-references are not supported");
  CHECK(compile_error(R"({"additionalProperties":{"type":"string"}})")
        == "#/additionalProperties: only true or false is supported");
  CHECK(compile_error(R"({"type":"float"})")
        == "#/type: expected object, array, string, integer, number, boolean or null");
  CHECK(compile_error(R"({"minLength":-1})") == "#/minLength: expected a non-negative integer");
  CHECK(compile_error(R"({"$ref":"#/$defs/Missing"})") == "#/$ref: no definition 'Missing' in the root's $defs");
  CHECK(compile_error(R"({"$ref":"#/definitions/A"})")
        == "#/$ref: only references of the form #/$defs/<name> are supported");
  CHECK(compile_error(R"({"properties":{"a":{"$defs":{}}}})")
        == "#/properties/a/$defs: $defs is supported only at the root, which #/$defs/<name> refers to");
  CHECK(compile_error(R"({"discriminator":{"propertyName":"type"}})")
        == "#/discriminator: a discriminator needs oneOf beside it");
  CHECK(compile_error(R"({"oneOf":[{"type":"object"}],"discriminator":{"propertyName":"type"}})")
        == "#/oneOf/0: a branch of a discriminated oneOf needs properties.type.const, a string");
  CHECK(compile_error(R"({"$defs":{"A":{"anyOf":[{"$ref":"#/$defs/B"}]},"B":{"$ref":"#/$defs/A"}}})")
        == "#/$defs/A: a cycle of $ref, oneOf or anyOf that never descends into the instance");
  CHECK(compile_error("[]") == "#: a schema must be a JSON object");
}

TEST_CASE("annotations compile and change nothing", "[json_schema]") {
  run({{R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","$comment":"c","title":"t",
            "description":"d","default":1,"examples":[1],"format":"date-time","type":"string"})",
        "\"not a date\"", ""}});
}

TEST_CASE("validation stops at the depth bound with one problem", "[json_schema]") {
  auto s = compiled(R"({"$defs":{"L":{"type":"array","items":{"$ref":"#/$defs/L"}}},"$ref":"#/$defs/L"})");
  // json::parse refuses texts deeper than the same bound, so the deep instances are built directly.
  auto nested = [](int depth) {
    json::document doc;
    doc.SetArray();
    json::value* innermost = &doc;
    for (int i = 1; i < depth; ++i) {
      innermost->PushBack(json::value(rapidjson::kArrayType), doc.GetAllocator());
      innermost = &(*innermost)[0];
    }
    return doc;
  };
  auto found = json_schema::validate(s, nested(200));
  REQUIRE(found.size() == 1);
  CHECK(found[0].type == "too_deep");
  CHECK(found[0].msg == "Input should be nested at most 64 levels deep");
  CHECK(found[0].loc.size() == json_schema::max_depth + 1);
  // The root and 64 levels below it are checked; the 65th level is not.
  CHECK(json_schema::validate(s, nested(65)).empty());
  CHECK(json_schema::validate(s, nested(66)).size() == 1);
}

TEST_CASE("problems are described in one line and written as pydantic's error list", "[json_schema]") { // WS-37
  std::vector<problem> found{{{"service"}, "Field required", "missing"},
                             {{"items", "0"}, "Input should be a valid string", "string_type"},
                             {{}, "Input should be a valid dictionary", "dict_type"}};
  CHECK(json_schema::describe(found)
        == "service: Field required; items.0: Input should be a valid string; Input should be a valid dictionary");
  CHECK(json_schema::describe({}) == "");
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  json_schema::write_problems(w, found);
  CHECK(std::string(buf.GetString())
        == R"([{"type":"missing","loc":["service"],"msg":"Field required"},)"
           R"({"type":"string_type","loc":["items",0],"msg":"Input should be a valid string"},)"
           R"({"type":"dict_type","loc":[],"msg":"Input should be a valid dictionary"}])");
}

namespace {

// A document `depth` levels deep, built directly since json::parse refuses anything past its bound:
// `wrap` turns the innermost value into a container holding a fresh one.
template <class Wrap>
json::document built_deep(int depth, Wrap wrap) {
  json::document doc;
  doc.SetObject();
  json::value* innermost = &doc;
  for (int i = 1; i < depth; ++i)
    innermost = &wrap(*innermost, doc.GetAllocator());
  return doc;
}

json::value& nest_in_items(json::value& v, json::document::AllocatorType& a) {
  v.AddMember("items", json::value(rapidjson::kObjectType), a);
  return v["items"];
}

json::value& nest_in_array(json::value& v, json::document::AllocatorType& a) {
  v.SetArray();
  v.PushBack(json::value(rapidjson::kObjectType), a);
  return v[0];
}

} // namespace

TEST_CASE("a schema nested deeper than the bound is refused without recursing through it", "[json_schema]") {
  auto deep = built_deep(100000, nest_in_items);
  auto result = json_schema::compile(deep);
  REQUIRE(std::holds_alternative<std::string>(result));
  CHECK(std::get<std::string>(result) == "#: a schema may nest at most 64 levels deep");
  // The bound counts every container, schema or not (a const's value, an enum's members).
  CHECK(std::holds_alternative<json_schema::schema>(json_schema::compile(built_deep(json::max_depth, nest_in_items))));
  CHECK(std::holds_alternative<std::string>(json_schema::compile(built_deep(json::max_depth + 1, nest_in_items))));
}

TEST_CASE("an instance nested 100000 deep is checked without recursing through it", "[json_schema]") {
  auto deep = built_deep(100000, nest_in_array);
  // Keywords that look at a whole value (const, enum, a discriminator's tag) must not walk it.
  for (auto schema : {R"({"const":[[1]]})", R"({"enum":[[[]],"a"]})", R"({"type":"array"})", R"({})",
                      R"({"anyOf":[{"type":"array","items":{"type":"string"}},{"const":[[]]}]})"}) {
    INFO(schema);
    auto found = json_schema::validate(compiled(schema), deep);
    CHECK(found.size() <= 1);
  }
  json::document tagged;
  tagged.SetObject();
  tagged.AddMember("type", json::value(rapidjson::kArrayType), tagged.GetAllocator());
  json::value* innermost = &tagged["type"];
  for (int i = 1; i < 100000; ++i) {
    innermost->PushBack(json::value(rapidjson::kArrayType), tagged.GetAllocator());
    innermost = &(*innermost)[0];
  }
  auto s = compiled(R"({"$defs":{"A":{"type":"object","properties":{"type":{"const":"a"}}}},
                        "oneOf":[{"$ref":"#/$defs/A"}],"discriminator":{"propertyName":"type"}})");
  auto found = json_schema::validate(s, tagged);
  REQUIRE(found.size() == 1);
  CHECK(found[0].type == "union_tag_invalid");
}

TEST_CASE("a chain of $refs longer than the bound is refused without recursing along it", "[json_schema]") {
  // 100000 definitions, each a $ref to the next: shallow as a document, deep to validate.
  auto chain = [](int length) {
    json::document doc;
    doc.SetObject();
    auto& a = doc.GetAllocator();
    json::value defs(rapidjson::kObjectType);
    for (int i = 0; i < length; ++i) {
      json::value def(rapidjson::kObjectType);
      if (i + 1 < length)
        def.AddMember("$ref", json::value("#/$defs/d" + std::to_string(i + 1), a), a);
      else
        def.AddMember("type", "string", a);
      defs.AddMember(json::value("d" + std::to_string(i), a), def, a);
    }
    doc.AddMember("$defs", defs, a);
    doc.AddMember("$ref", "#/$defs/d0", a);
    return doc;
  };
  auto result = json_schema::compile(chain(100000));
  REQUIRE(std::holds_alternative<std::string>(result));
  CHECK_THAT(std::get<std::string>(result),
             Catch::EndsWith(": a chain of $ref, oneOf or anyOf may be at most 64 schemas long"));
  // The root's $ref and 63 definitions make 64 schemas; one more definition is one too many.
  auto longest = json_schema::compile(chain(63));
  REQUIRE(std::holds_alternative<json_schema::schema>(longest));
  CHECK(json_schema::describe(json_schema::validate(std::get<json_schema::schema>(longest), parsed("1")))
        == "Input should be a valid string");
  CHECK(std::holds_alternative<std::string>(json_schema::compile(chain(64))));
}

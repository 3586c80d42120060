// Small helpers over RapidJSON that the codecs share: parse, serialize, typed member access.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol::json {

using value = rapidjson::Value;
using document = rapidjson::Document;
using writer = rapidjson::Writer<rapidjson::StringBuffer>;

// How deep any JSON text troupe parses may nest. A deeper text is refused while it is read, so no
// walk over a parsed document (serializing, validating, copying) recurses further than this.
constexpr unsigned max_depth = 64;

// Parses `text`; nullopt when it is not valid JSON or nests deeper than max_depth.
std::optional<document> parse(std::string_view text);

// Why a body from outside was refused.
struct parse_failure {
  enum class reason { syntax, too_deep, invalid_utf8, repeated_member };
  reason why = reason::syntax;
  std::size_t offset = 0;          // where reading stopped (syntax, too_deep, invalid_utf8)
  std::vector<std::string> path;   // repeated_member: the members and indexes down to the object
  std::string member;              // repeated_member: the repeated name
  // One sentence for the client, naming the limit or the member.
  std::string message() const;
};

// The same as parse(), saying why a text was refused.
std::variant<document, parse_failure> parse_text(std::string_view text);

// Parses a body from outside: valid JSON, at most max_depth deep, well-formed UTF-8 in every string,
// and no object that repeats a member name (which parsers elsewhere would read differently).
std::variant<document, parse_failure> parse_body(std::string_view text);

// Compact, one-line JSON text of `v`.
std::string serialize(const value& v);

// The member `key` of `obj`, or nullptr when `obj` is not an object or lacks it.
const value* member(const value& obj, const char* key);

std::string get_string(const value& obj, const char* key, std::string fallback = "");
std::optional<int64_t> get_int(const value& obj, const char* key);
std::optional<double> get_number(const value& obj, const char* key);
std::optional<bool> get_bool(const value& obj, const char* key);

// Writes JSON text that is already serialized (e.g. stored tool arguments) into `w`.
void write_raw(writer& w, std::string_view json_text);

// Compact JSON text of `v` with every object's keys sorted (AS-93's canonical form).
std::string canonical(const value& v);

// `key` with the string, or null when it is empty (the records' "" for null).
void write_nullable(writer& w, const char* key, std::string_view v);

// `key` with an array of the strings.
void write_strings(writer& w, const char* key, const std::vector<std::string>& strings);

// `key` with an object of counts by name.
void write_counts(writer& w, const char* key, const std::map<std::string, int64_t>& counts);

// Quotes `s` as a JSON string literal.
std::string quote(std::string_view s);

// The text of a JSON object whose members `fill(writer&)` writes.
template <class F>
std::string object(F&& fill) {
  rapidjson::StringBuffer buf;
  writer w(buf);
  w.StartObject();
  fill(w);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

} // namespace troupe::protocol::json

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

namespace troupe::protocol::json {

using value = rapidjson::Value;
using document = rapidjson::Document;
using writer = rapidjson::Writer<rapidjson::StringBuffer>;

// Parses `text`; nullopt when it is not valid JSON.
std::optional<document> parse(std::string_view text);

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

#include "protocol/json.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <vector>

namespace troupe::protocol::json {

namespace {

// Hands the reader's events to a document, refusing to go deeper than max_depth. The reader runs
// iteratively (kParseIterativeFlag), so nesting costs heap, not stack, up to the refusal.
class bounded_builder {
public:
  explicit bounded_builder(document& doc) : doc_(doc) {}
  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned i) { return doc_.Uint(i); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t i) { return doc_.Uint64(i); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) { return doc_.RawNumber(s, n, copy); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool StartObject() { return enter() && doc_.StartObject(); }
  bool EndObject(rapidjson::SizeType n) { --depth_; return doc_.EndObject(n); }
  bool StartArray() { return enter() && doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { --depth_; return doc_.EndArray(n); }

  bool too_deep = false;

private:
  bool enter() {
    if (++depth_ <= max_depth)
      return true;
    too_deep = true;
    return false;
  }

  document& doc_;
  unsigned depth_ = 0;
};

template <unsigned flags>
std::variant<document, parse_failure> read(std::string_view text) {
  using reason = parse_failure::reason;
  // A NUL reads as the end of the text to RapidJSON, which would accept `{}` followed by anything.
  if (auto nul = text.find('\0'); nul != std::string_view::npos)
    return parse_failure{reason::syntax, nul, {}, {}};
  document doc;
  rapidjson::ParseResult result;
  bool too_deep = false;
  auto generate = [&](document& into) {
    bounded_builder builder(into);
    rapidjson::MemoryStream bytes(text.data(), text.size());
    rapidjson::Reader reader;
    result = reader.Parse<flags | rapidjson::kParseIterativeFlag>(bytes, builder);
    too_deep = builder.too_deep;
    return !result.IsError();
  };
  doc.Populate(generate);
  if (!result.IsError())
    return doc;
  auto at = result.Offset();
  if (too_deep)
    return parse_failure{reason::too_deep, at, {}, {}};
  // RapidJSON also reports a raw control character in a string as an encoding error.
  if (result.Code() == rapidjson::kParseErrorStringInvalidEncoding && at < text.size()
      && static_cast<unsigned char>(text[at]) >= 0x20)
    return parse_failure{reason::invalid_utf8, at, {}, {}};
  return parse_failure{reason::syntax, at, {}, {}};
}

// Finds an object under `v` that repeats a member name; `path` leads to it. The depth is bounded by
// max_depth, which the reader enforced.
bool find_repeated_member(const value& v, std::vector<std::string>& path, std::string& name) {
  if (v.IsObject()) {
    auto n = v.MemberCount();
    auto name_of = [](const value::Member& m) { return std::string_view(m.name.GetString(), m.name.GetStringLength()); };
    if (n > 1) {
      std::vector<std::string_view> names;
      names.reserve(n);
      for (auto& m : v.GetObject())
        names.push_back(name_of(m));
      std::sort(names.begin(), names.end());
      if (auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
        name = std::string(*twice);
        return true;
      }
    }
    for (auto& m : v.GetObject()) {
      path.emplace_back(name_of(m));
      if (find_repeated_member(m.value, path, name))
        return true;
      path.pop_back();
    }
  } else if (v.IsArray()) {
    std::size_t i = 0;
    for (auto& item : v.GetArray()) {
      path.push_back(std::to_string(i++));
      if (find_repeated_member(item, path, name))
        return true;
      path.pop_back();
    }
  }
  return false;
}

} // namespace

std::variant<document, parse_failure> parse_text(std::string_view text) {
  // Not kParseFullPrecisionFlag: RapidJSON's full-precision path has undefined behaviour on hostile
  // numbers (__builtin_clzll(0), negative shifts), which the fuzz target found.
  return read<rapidjson::kParseDefaultFlags>(text);
}

std::optional<document> parse(std::string_view text) {
  auto result = parse_text(text);
  if (auto doc = std::get_if<document>(&result))
    return std::move(*doc);
  return std::nullopt;
}

std::variant<document, parse_failure> parse_body(std::string_view text) {
  auto result = read<rapidjson::kParseValidateEncodingFlag>(text);
  if (auto doc = std::get_if<document>(&result)) {
    parse_failure repeated{parse_failure::reason::repeated_member, 0, {}, {}};
    if (find_repeated_member(*doc, repeated.path, repeated.member))
      return repeated;
  }
  return result;
}

std::string parse_failure::message() const {
  switch (why) {
    case reason::too_deep:
      return "JSON nests deeper than " + std::to_string(max_depth) + " levels at offset " + std::to_string(offset);
    case reason::invalid_utf8:
      return "JSON text is not valid UTF-8 at offset " + std::to_string(offset);
    case reason::repeated_member:
      return "Member name " + quote(member) + " is repeated";
    case reason::syntax:
      break;
  }
  return "invalid JSON at offset " + std::to_string(offset);
}

std::string serialize(const value& v) {
  rapidjson::StringBuffer buf;
  writer w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

const value* member(const value& obj, const char* key) {
  if (!obj.IsObject())
    return nullptr;
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

std::string get_string(const value& obj, const char* key, std::string fallback) {
  auto v = member(obj, key);
  return v && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : fallback;
}

std::optional<int64_t> get_int(const value& obj, const char* key) {
  auto v = member(obj, key);
  if (v && v->IsInt64())
    return v->GetInt64();
  return std::nullopt;
}

std::optional<double> get_number(const value& obj, const char* key) {
  auto v = member(obj, key);
  if (v && v->IsNumber())
    return v->GetDouble();
  return std::nullopt;
}

std::optional<bool> get_bool(const value& obj, const char* key) {
  auto v = member(obj, key);
  if (v && v->IsBool())
    return v->GetBool();
  return std::nullopt;
}

void write_raw(writer& w, std::string_view json_text) {
  w.RawValue(json_text.data(), json_text.size(), rapidjson::kObjectType);
}

namespace {

// Recursion over a parsed document is bounded by max_depth.
void write_canonical(writer& w, const value& v) {
  if (v.IsObject()) {
    std::vector<const value::Member*> members;
    for (auto& m : v.GetObject())
      members.push_back(&m);
    std::sort(members.begin(), members.end(), [](auto a, auto b) {
      return std::string_view(a->name.GetString(), a->name.GetStringLength())
             < std::string_view(b->name.GetString(), b->name.GetStringLength());
    });
    w.StartObject();
    for (auto m : members) {
      w.Key(m->name.GetString(), m->name.GetStringLength());
      write_canonical(w, m->value);
    }
    w.EndObject();
  } else if (v.IsArray()) {
    w.StartArray();
    for (auto& item : v.GetArray())
      write_canonical(w, item);
    w.EndArray();
  } else {
    v.Accept(w);
  }
}

} // namespace

std::string canonical(const value& v) {
  rapidjson::StringBuffer buf;
  writer w(buf);
  write_canonical(w, v);
  return std::string(buf.GetString(), buf.GetSize());
}

void write_nullable(writer& w, const char* key, std::string_view v) {
  w.Key(key);
  if (v.empty())
    w.Null();
  else
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}

void write_strings(writer& w, const char* key, const std::vector<std::string>& strings) {
  w.Key(key);
  w.StartArray();
  for (auto& s : strings)
    w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  w.EndArray();
}

void write_counts(writer& w, const char* key, const std::map<std::string, int64_t>& counts) {
  w.Key(key);
  w.StartObject();
  for (auto& [name, n] : counts) {
    w.Key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
    w.Int64(n);
  }
  w.EndObject();
}

std::string quote(std::string_view s) {
  rapidjson::StringBuffer buf;
  writer w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return std::string(buf.GetString(), buf.GetSize());
}

} // namespace troupe::protocol::json

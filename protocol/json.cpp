#include "protocol/json.hpp"

#include <rapidjson/error/en.h>

#include <algorithm>
#include <vector>

namespace troupe::protocol::json {

std::optional<document> parse(std::string_view text) {
  document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError())
    return std::nullopt;
  return doc;
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

#include "protocol/config_reader.hpp"

#include <cmath>

namespace troupe::protocol {

namespace {

std::string number_text(double x) {
  if (std::floor(x) == x && std::abs(x) < 1e15)
    return std::to_string(static_cast<int64_t>(x));
  return json::serialize(json::value(x));
}

} // namespace

std::string json_preview(const json::value& v) {
  auto text = json::serialize(v);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

config_reader config_reader::child(const char* key) {
  auto v = find(key);
  if (v && !v->IsObject()) {
    fail(key, "expected an object", *v);
    v = nullptr;
  }
  return config_reader(v, path_of(key), errors_);
}

const json::value* config_reader::find(const char* key) const {
  auto v = obj_ ? json::member(*obj_, key) : nullptr;
  return v && !v->IsNull() ? v : nullptr;
}

std::string config_reader::path_of(const char* key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void config_reader::fail(const char* key, const std::string& expected, const json::value& got) {
  errors_.push_back(path_of(key) + ": " + expected + ", got " + json_preview(got));
}

void config_reader::error(const char* key, const std::string& text) {
  errors_.push_back(path_of(key) + ": " + text);
}

bool config_reader::string(const char* key, std::string& into) {
  auto v = find(key);
  if (!v)
    return false;
  if (!v->IsString()) {
    fail(key, "expected a string", *v);
    return false;
  }
  into.assign(v->GetString(), v->GetStringLength());
  return true;
}

void config_reader::boolean(const char* key, bool& into) {
  if (auto v = find(key)) {
    if (v->IsBool())
      into = v->GetBool();
    else
      fail(key, "expected true or false", *v);
  }
}

bool config_reader::seconds(const char* key, double& into, double lo, bool lo_allowed) {
  auto v = find(key);
  if (!v)
    return false;
  if (v->IsNumber() && std::isfinite(v->GetDouble()) && (lo_allowed ? v->GetDouble() >= lo : v->GetDouble() > lo)) {
    into = v->GetDouble();
    return true;
  }
  fail(key, std::string("expected a number of seconds ") + (lo_allowed ? ">= " : "> ") + number_text(lo), *v);
  return false;
}

void config_reader::one_of(const char* key, std::string& into, std::initializer_list<const char*> allowed) {
  auto v = find(key);
  if (!v)
    return;
  std::string expected = "expected one of ";
  bool first = true;
  for (auto a : allowed) {
    if (v->IsString() && std::string_view(v->GetString(), v->GetStringLength()) == a) {
      into = a;
      return;
    }
    expected += (first ? "" : ", ") + std::string(a);
    first = false;
  }
  fail(key, expected, *v);
}

void config_reader::raw(const char* key, std::string& into, bool want_array) {
  if (auto v = find(key)) {
    if (want_array ? v->IsArray() : v->IsObject())
      into = json::serialize(*v);
    else
      fail(key, want_array ? "expected an array" : "expected an object", *v);
  }
}

void config_reader::strings(const char* key, std::vector<std::string>& into) {
  auto v = find(key);
  if (!v)
    return;
  if (!v->IsArray()) {
    fail(key, "expected an array of strings", *v);
    return;
  }
  into.clear();
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    auto& item = (*v)[i];
    if (item.IsString())
      into.emplace_back(item.GetString(), item.GetStringLength());
    else
      errors_.push_back(path_of(key) + "[" + std::to_string(i) + "]: expected a string, got " + json_preview(item));
  }
}

void config_reader::string_map(const char* key, std::map<std::string, std::string>& into) {
  auto v = find(key);
  if (!v)
    return;
  if (!v->IsObject()) {
    fail(key, "expected an object of strings", *v);
    return;
  }
  into.clear();
  for (auto& m : v->GetObject()) {
    std::string name(m.name.GetString(), m.name.GetStringLength());
    if (m.value.IsString())
      into[name].assign(m.value.GetString(), m.value.GetStringLength());
    else
      errors_.push_back(path_of(key) + "." + name + ": expected a string, got " + json_preview(m.value));
  }
}

} // namespace troupe::protocol

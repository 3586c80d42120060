#include "protocol/config_reader.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::protocol {

namespace {

std::string number_text(double x) {
  if (std::floor(x) == x && std::abs(x) < 1e15)
    return std::to_string(static_cast<int64_t>(x));
  return json::serialize(json::value(x));
}

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

} // namespace

std::string nearest_key(std::string_view key, const std::set<std::string, std::less<>>& known) {
  // A key is compared at most this long: config keys are short, and the distance is quadratic.
  constexpr std::size_t longest = 64;
  if (key.size() > longest)
    return {};
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(1, key.size() / 3) + 1;
  for (auto& k : known) {
    if (k.size() > longest)
      continue;
    auto d = edit_distance(key, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

config_keys::opened* config_keys::find(const json::value& object) {
  auto it = index_.find(&object);
  return it == index_.end() ? nullptr : &objects_[it->second];
}

void config_keys::open(const json::value& object, const std::string& path) {
  if (object.IsObject() && index_.emplace(&object, objects_.size()).second)
    objects_.push_back({&object, path, {}});
}

void config_keys::asked(const json::value& object, std::string_view key) {
  if (auto o = find(object))
    o->asked.emplace(key);
}

void config_keys::refuse_unknown(std::vector<std::string>& errors) const {
  // Suggestions cost an edit distance per known key; a document of many unknown keys gets a few.
  std::size_t suggestions_left = 100;
  for (auto& o : objects_)
    for (auto& m : o.object->GetObject()) {
      std::string_view name(m.name.GetString(), m.name.GetStringLength());
      if (o.asked.count(name))
        continue;
      auto text = (o.path.empty() ? "" : o.path + ".") + std::string(name) + ": unknown key";
      if (suggestions_left > 0) {
        --suggestions_left;
        if (auto near = nearest_key(name, o.asked); !near.empty())
          text += " (did you mean " + json::quote(near) + ")";
      }
      errors.push_back(std::move(text));
    }
}

config_reader::config_reader(const json::value* obj, std::string path, std::vector<std::string>& errors,
                             config_keys* keys)
  : obj_(obj), path_(std::move(path)), errors_(errors), keys_(keys) {
  if (keys_ && obj_)
    keys_->open(*obj_, path_);
}

config_reader config_reader::element(const json::value& object, std::string path) {
  return config_reader(&object, std::move(path), errors_, keys_);
}

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
  return config_reader(v, path_of(key), errors_, keys_);
}

const json::value* config_reader::find(const char* key) const {
  if (keys_ && obj_)
    keys_->asked(*obj_, key);
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

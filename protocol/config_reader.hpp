// Reads typed members of a JSON configuration object and records, for each bad one, an error that
// names its JSON path, what is expected and what was there (`service.port: expected ..., got "x"`).
#pragma once

#include "protocol/json.hpp"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace troupe::protocol {

// A short JSON rendering of a value for error messages.
std::string json_preview(const json::value& v);

class config_reader {
public:
  // `obj` may be null (an absent section): every read then keeps its default.
  config_reader(const json::value* obj, std::string path, std::vector<std::string>& errors)
    : obj_(obj), path_(std::move(path)), errors_(errors) {}

  // A member that must be an object, read with the path extended.
  config_reader child(const char* key);

  // The member, or nullptr when absent or null (null means "use the default").
  const json::value* find(const char* key) const;
  std::string path_of(const char* key) const;
  void fail(const char* key, const std::string& expected, const json::value& got);
  void error(const char* key, const std::string& text);
  // Where this reader records errors, for readers of nested elements (arrays of objects).
  std::vector<std::string>& errors() { return errors_; }

  // Each read keeps `into` unless the member is present and valid; the bool ones say whether it was.
  bool string(const char* key, std::string& into);
  void boolean(const char* key, bool& into);
  template <class Int>
  void integer(const char* key, Int& into, int64_t lo, int64_t hi) {
    if (auto v = find(key)) {
      if (v->IsInt64() && v->GetInt64() >= lo && v->GetInt64() <= hi)
        into = static_cast<Int>(v->GetInt64());
      else
        fail(key, "expected an integer " + std::to_string(lo) + ".." + std::to_string(hi), *v);
    }
  }
  // A finite number of seconds >= lo (or > lo when `lo_allowed` is false).
  bool seconds(const char* key, double& into, double lo, bool lo_allowed = true);
  void one_of(const char* key, std::string& into, std::initializer_list<const char*> allowed);
  // The JSON text of a member that must be an array (or an object).
  void raw(const char* key, std::string& into, bool want_array);
  void strings(const char* key, std::vector<std::string>& into);
  void string_map(const char* key, std::map<std::string, std::string>& into);

private:
  const json::value* obj_;
  std::string path_;
  std::vector<std::string>& errors_;
};

} // namespace troupe::protocol

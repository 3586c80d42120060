// Reads typed members of a JSON configuration object and records, for each bad one, an error that
// names its JSON path, what is expected and what was there (`service.port: expected ..., got "x"`).
// A key is known because a reader asks for it: `config_keys` remembers what was asked of each object
// so that every other member can be refused afterwards (`auth.moed: unknown key (did you mean "mode")`).
#pragma once

#include "protocol/json.hpp"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

// A short JSON rendering of a value for error messages.
std::string json_preview(const json::value& v);

// The objects of one configuration document that readers opened, and the keys asked of each.
class config_keys {
public:
  void open(const json::value& object, const std::string& path);
  void asked(const json::value& object, std::string_view key);
  // One error per member of an opened object that no reader asked for, naming the nearest key that
  // was asked for when one is close. Objects no reader opened (free-form values such as a schema, or
  // maps of user-chosen names) are not checked.
  void refuse_unknown(std::vector<std::string>& errors) const;

private:
  struct opened {
    const json::value* object;
    std::string path;
    std::set<std::string, std::less<>> asked;
  };
  opened* find(const json::value& object);
  std::vector<opened> objects_; // in the order opened, so errors come in reading order
  std::map<const json::value*, std::size_t> index_;
};

// The known key nearest to `key` by edit distance (a swap of neighbours counts once), or "" when
// none is close enough to be a likely typo.
std::string nearest_key(std::string_view key, const std::set<std::string, std::less<>>& known);

class config_reader {
public:
  // `obj` may be null (an absent section): every read then keeps its default. With `keys`, the object
  // and every key asked of it (and of the readers made from this one) are recorded there.
  config_reader(const json::value* obj, std::string path, std::vector<std::string>& errors,
                config_keys* keys = nullptr);

  // A member that must be an object, read with the path extended.
  config_reader child(const char* key);
  // A reader of an object found some other way (an array element, a map entry), sharing this one's
  // errors and key record.
  config_reader element(const json::value& object, std::string path);

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
  config_keys* keys_;
};

} // namespace troupe::protocol

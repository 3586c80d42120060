#include "protocol/json_schema.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>

namespace troupe::protocol::json_schema {

namespace {

enum type_bit : unsigned {
  t_object = 1,
  t_array = 2,
  t_string = 4,
  t_integer = 8,
  t_number = 16,
  t_boolean = 32,
  t_null = 64,
};

struct type_entry {
  const char* name;
  unsigned bit;
  const char* msg;
  const char* code;
};

constexpr type_entry type_table[] = {
    {"object", t_object, "Input should be a valid dictionary", "dict_type"},
    {"array", t_array, "Input should be a valid list", "list_type"},
    {"string", t_string, "Input should be a valid string", "string_type"},
    {"integer", t_integer, "Input should be a valid integer", "int_type"},
    {"number", t_number, "Input should be a valid number", "float_type"},
    {"boolean", t_boolean, "Input should be a valid boolean", "bool_type"},
    {"null", t_null, "Input should be None", "none_required"},
};

const char* const supported_keywords =
    "the supported keywords are type, properties, required, additionalProperties (true or false), enum, const, "
    "minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern, items, minItems, "
    "maxItems, $ref (#/$defs/<name>), $defs (at the root), oneOf, anyOf, discriminator (propertyName, beside "
    "oneOf) and the annotations $schema, $id, $comment, title, description, default, examples, format";

bool is_annotation(std::string_view key) {
  for (auto a : {"$schema", "$id", "$comment", "title", "description", "default", "examples", "format"})
    if (key == a)
      return true;
  return false;
}

std::string_view view(const json::value& s) {
  return {s.GetString(), s.GetStringLength()};
}

// A JSON pointer's reference token (RFC 6901): `~` and `/` escaped.
std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::optional<std::string> unescape_token(std::string_view token) {
  std::string out;
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '/')
      return std::nullopt;
    if (token[i] != '~') {
      out += token[i];
      continue;
    }
    if (i + 1 == token.size() || (token[i + 1] != '0' && token[i + 1] != '1'))
      return std::nullopt;
    out += token[++i] == '0' ? '~' : '/';
  }
  return out;
}

// Searching for `pattern` is matching `[\s\S]*(?:pattern)[\s\S]*`, so that libstdc++ can run it on its
// polynomial (Thompson) executor: linear in the subject and of constant stack, where its default
// backtracking executor recurses once per character and overflows on a long string.
std::regex search_regex(const std::string& pattern) {
  auto flags = std::regex::ECMAScript;
  std::regex plain(pattern, flags); // refuses an invalid pattern before wrapping could balance it
#ifdef __GLIBCXX__
  flags |= std::regex_constants::__polynomial;
#endif
  return std::regex("[\\s\\S]*(?:" + pattern + ")[\\s\\S]*", flags);
}

// Numbers in messages: integral ones without a fraction, others in the shortest round-trip form.
std::string format_number(double x) {
  if (std::floor(x) == x && std::fabs(x) < 1e15)
    return std::to_string(static_cast<long long>(x));
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x)
      break;
  }
  return buf;
}

// A value as pydantic quotes it in a message: strings single-quoted (double when they hold a `'`),
// anything else as JSON text.
std::string literal(const json::value& v) {
  if (!v.IsString())
    return json::serialize(v);
  auto s = view(v);
  char q = s.find('\'') == std::string_view::npos ? '\'' : '"';
  return q + std::string(s) + q;
}

// `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`.
std::string alternatives(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      out += i + 1 == items.size() ? " or " : ", ";
    out += items[i];
  }
  return out;
}

std::string plural(uint64_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::size_t code_points(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool has_type(unsigned types, const json::value& v) {
  if (v.IsObject())
    return types & t_object;
  if (v.IsArray())
    return types & t_array;
  if (v.IsString())
    return types & t_string;
  if (v.IsBool())
    return types & t_boolean;
  if (v.IsNull())
    return types & t_null;
  if (v.IsInt64() || v.IsUint64())
    return types & (t_integer | t_number);
  return types & t_number; // a double: `1.0` is no integer (pydantic strict)
}

// Whether `v` nests more than `limit` containers deep, found without recursion: compile() and a
// message quoting a value both walk it recursively, and a hostile one may be built 100000 deep.
bool nests_deeper_than(const json::value& v, int limit) {
  std::vector<std::pair<const json::value*, int>> pending{{&v, 1}};
  while (!pending.empty()) {
    auto [at, depth] = pending.back();
    pending.pop_back();
    if (!at->IsObject() && !at->IsArray())
      continue;
    if (depth > limit)
      return true;
    if (at->IsObject())
      for (auto& m : at->GetObject())
        pending.emplace_back(&m.value, depth + 1);
    else
      for (auto& item : at->GetArray())
        pending.emplace_back(&item, depth + 1);
  }
  return false;
}

} // namespace

struct compiled {
  struct property {
    std::string name;
    int schema;
    bool required;
  };

  // One schema object with its keywords resolved; children are indices into `nodes`.
  struct node {
    std::string where; // its JSON pointer, for compile errors
    unsigned types = 0; // 0: any
    const type_entry* type_error = nullptr;
    std::vector<property> properties;
    std::vector<std::string> required_only; // required names without a `properties` entry
    bool closed = false;
    const json::value* enum_values = nullptr; // into `source`
    const json::value* const_value = nullptr;
    std::optional<double> minimum, maximum, exclusive_minimum, exclusive_maximum;
    std::optional<uint64_t> min_length, max_length, min_items, max_items;
    std::string pattern;
    std::optional<std::regex> regex;
    int items = -1;
    int ref = -1;
    std::vector<int> one_of, any_of;
    std::string discriminator;
    std::vector<std::pair<std::string, int>> tags; // discriminator value → branch, in oneOf order
  };

  json::document source;
  std::vector<node> nodes;
  std::map<std::string, int, std::less<>> defs;
};

namespace {

using node = compiled::node;

// The numeric bounds and the length and size limits, each stored in its own member of a node.
constexpr std::pair<const char*, std::optional<double> node::*> bounds[] = {
    {"minimum", &node::minimum},
    {"maximum", &node::maximum},
    {"exclusiveMinimum", &node::exclusive_minimum},
    {"exclusiveMaximum", &node::exclusive_maximum},
};
constexpr std::pair<const char*, std::optional<uint64_t> node::*> limits[] = {
    {"minLength", &node::min_length},
    {"maxLength", &node::max_length},
    {"minItems", &node::min_items},
    {"maxItems", &node::max_items},
};

template <class Member, std::size_t N>
Member keyword_member(const std::pair<const char*, Member> (&table)[N], std::string_view key) {
  for (auto& [name, member] : table)
    if (key == name)
      return member;
  return nullptr;
}

class compiler {
public:
  explicit compiler(compiled& c) : c_(c) {}

  // Compiles c_.source with the root at node 0, or says what is wrong.
  std::optional<std::string> run() {
    auto& root = c_.source;
    c_.nodes.emplace_back();
    if (!root.IsObject())
      return "#: a schema must be a JSON object";
    auto defs = json::member(root, "$defs");
    if (defs) {
      if (!defs->IsObject())
        return "#/$defs: $defs must be an object of schemas";
      for (auto& d : defs->GetObject()) {
        c_.defs.emplace(std::string(view(d.name)), static_cast<int>(c_.nodes.size()));
        c_.nodes.emplace_back();
      }
      for (auto& d : defs->GetObject())
        if (!compile_into(c_.defs.find(view(d.name))->second, d.value, "#/$defs/" + pointer_token(view(d.name)), false))
          return error_;
    }
    if (!compile_into(0, root, "#", true) || !resolve_discriminators() || !refuse_cycles())
      return error_;
    return std::nullopt;
  }

private:
  bool fail(const std::string& where, const std::string& what) {
    error_ = where + ": " + what;
    return false;
  }

  int compile_child(const json::value& s, const std::string& where) {
    int index = static_cast<int>(c_.nodes.size());
    c_.nodes.emplace_back();
    return compile_into(index, s, where, false) ? index : -1;
  }

  bool compile_type(node& n, const json::value& v, const std::string& at) {
    auto add = [&](const json::value& name) {
      if (name.IsString())
        for (auto& t : type_table)
          if (view(name) == t.name) {
            n.types |= t.bit;
            if (!n.type_error || (n.type_error->bit == t_null && t.bit != t_null))
              n.type_error = &t;
            return true;
          }
      return fail(at, "expected object, array, string, integer, number, boolean or null");
    };
    if (!v.IsArray())
      return add(v);
    if (v.Empty())
      return fail(at, "a list of types must not be empty");
    for (auto& t : v.GetArray())
      if (!add(t))
        return false;
    return true;
  }

  bool compile_schemas(std::vector<int>& out, const json::value& v, const std::string& at) {
    if (!v.IsArray() || v.Empty())
      return fail(at, "expected a non-empty list of schemas");
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
      int child = compile_child(v[i], at + "/" + std::to_string(i));
      if (child < 0)
        return false;
      out.push_back(child);
    }
    return true;
  }

  bool compile_into(int index, const json::value& s, const std::string& where, bool root) {
    if (!s.IsObject())
      return fail(where, "a schema must be a JSON object");
    node n;
    n.where = where;
    std::vector<std::string> required;
    for (auto& m : s.GetObject()) {
      auto key = view(m.name);
      auto& v = m.value;
      auto at = where + "/" + pointer_token(key);
      if (is_annotation(key))
        continue;
      if (key == "$defs") {
        if (!root)
          return fail(at, "$defs is supported only at the root, which #/$defs/<name> refers to");
      } else if (key == "type") {
        if (!compile_type(n, v, at))
          return false;
      } else if (key == "properties") {
        if (!v.IsObject())
          return fail(at, "expected an object of schemas");
        for (auto& p : v.GetObject()) {
          int child = compile_child(p.value, at + "/" + pointer_token(view(p.name)));
          if (child < 0)
            return false;
          n.properties.push_back({std::string(view(p.name)), child, false});
        }
      } else if (key == "required") {
        if (!v.IsArray())
          return fail(at, "expected a list of property names");
        for (auto& r : v.GetArray()) {
          if (!r.IsString())
            return fail(at, "expected a list of property names");
          required.emplace_back(view(r));
        }
      } else if (key == "additionalProperties") {
        if (!v.IsBool())
          return fail(at, "only true or false is supported");
        n.closed = !v.GetBool();
      } else if (key == "enum") {
        if (!v.IsArray() || v.Empty())
          return fail(at, "expected a non-empty list of values");
        n.enum_values = &v;
      } else if (key == "const") {
        n.const_value = &v;
      } else if (auto bound = keyword_member(bounds, key)) {
        if (!v.IsNumber())
          return fail(at, "expected a number");
        n.*bound = v.GetDouble();
      } else if (auto limit = keyword_member(limits, key)) {
        if (!v.IsUint64())
          return fail(at, "expected a non-negative integer");
        n.*limit = v.GetUint64();
      } else if (key == "pattern") {
        if (!v.IsString())
          return fail(at, "expected a regular expression");
        n.pattern.assign(v.GetString(), v.GetStringLength());
        try {
          n.regex = search_regex(n.pattern);
        } catch (const std::regex_error& e) {
          if (e.code() == std::regex_constants::error_complexity)
            return fail(at, "back-references are not supported");
          return fail(at, std::string("invalid regular expression: ") + e.what());
        }
      } else if (key == "items") {
        n.items = compile_child(v, at);
        if (n.items < 0)
          return false;
      } else if (key == "$ref") {
        constexpr std::string_view prefix = "#/$defs/";
        std::optional<std::string> name;
        if (v.IsString() && view(v).substr(0, prefix.size()) == prefix)
          name = unescape_token(view(v).substr(prefix.size()));
        if (!name)
          return fail(at, "only references of the form #/$defs/<name> are supported");
        auto def = c_.defs.find(*name);
        if (def == c_.defs.end())
          return fail(at, "no definition '" + *name + "' in the root's $defs");
        n.ref = def->second;
      } else if (key == "oneOf" || key == "anyOf") {
        if (!compile_schemas(key == "oneOf" ? n.one_of : n.any_of, v, at))
          return false;
      } else if (key == "discriminator") {
        auto prop = json::member(v, "propertyName");
        if (!prop || !prop->IsString() || v.MemberCount() != 1)
          return fail(at, "only {\"propertyName\": <name>} is supported");
        n.discriminator.assign(prop->GetString(), prop->GetStringLength());
      } else {
        return fail(at, "unsupported keyword; " + std::string(supported_keywords));
      }
    }
    if (!n.discriminator.empty() && n.one_of.empty())
      return fail(where + "/discriminator", "a discriminator needs oneOf beside it");
    for (auto& r : required) {
      auto p = std::find_if(n.properties.begin(), n.properties.end(), [&](auto& p) { return p.name == r; });
      if (p != n.properties.end())
        p->required = true;
      else if (std::find(n.required_only.begin(), n.required_only.end(), r) == n.required_only.end())
        n.required_only.push_back(r);
    }
    c_.nodes[index] = std::move(n);
    return true;
  }

  // The string `properties.<prop>.const` of a oneOf branch, following its $refs.
  std::optional<std::string> branch_tag(int branch, const std::string& prop) const {
    for (std::size_t hops = 0; branch >= 0 && hops <= c_.nodes.size(); ++hops) {
      auto& b = c_.nodes[branch];
      for (auto& p : b.properties)
        if (p.name == prop) {
          auto c = c_.nodes[p.schema].const_value;
          if (c && c->IsString())
            return std::string(view(*c));
          return std::nullopt;
        }
      branch = b.ref;
    }
    return std::nullopt;
  }

  bool resolve_discriminators() {
    for (auto& n : c_.nodes) {
      if (n.discriminator.empty())
        continue;
      for (std::size_t i = 0; i < n.one_of.size(); ++i) {
        auto at = n.where + "/oneOf/" + std::to_string(i);
        auto tag = branch_tag(n.one_of[i], n.discriminator);
        if (!tag)
          return fail(at, "a branch of a discriminated oneOf needs properties." + n.discriminator + ".const, a string");
        for (auto& t : n.tags)
          if (t.first == *tag)
            return fail(at, "the tag '" + *tag + "' is already another branch's");
        n.tags.emplace_back(*tag, n.one_of[i]);
      }
    }
    return true;
  }

  // A $ref, oneOf or anyOf validates the same instance value, so validation recurses along them
  // without descending into the instance: a cycle of them would recurse without end, and a long chain
  // (a hostile schema's 100000 $defs each referring to the next) as deep as it is long. Both are
  // refused; the walk keeps its own stack for the same reason.
  bool refuse_cycles() {
    std::vector<char> state(c_.nodes.size(), 0); // 0 unseen, 1 on the path, 2 done
    std::vector<int> longest(c_.nodes.size(), 0); // nodes in the longest chain starting here
    for (std::size_t start = 0; start < c_.nodes.size(); ++start) {
      if (state[start] == 2)
        continue;
      std::vector<std::pair<int, std::size_t>> path{{static_cast<int>(start), 0}}; // node, next edge
      state[start] = 1;
      while (!path.empty()) {
        auto& [i, edge] = path.back();
        auto next = same_value_edges(c_.nodes[i]);
        if (edge < next.size()) {
          int k = next[edge++];
          if (state[k] == 1)
            return fail(c_.nodes[k].where, "a cycle of $ref, oneOf or anyOf that never descends into the instance");
          if (state[k] == 0) {
            state[k] = 1;
            path.emplace_back(k, 0);
          }
          continue;
        }
        int chain = 1;
        for (int k : next)
          chain = std::max(chain, longest[k] + 1);
        if (chain > max_depth)
          return fail(c_.nodes[i].where, "a chain of $ref, oneOf or anyOf may be at most " + std::to_string(max_depth)
                                             + " schemas long");
        longest[i] = chain;
        state[i] = 2;
        path.pop_back();
      }
    }
    return true;
  }

  static std::vector<int> same_value_edges(const node& n) {
    std::vector<int> next = n.one_of;
    next.insert(next.end(), n.any_of.begin(), n.any_of.end());
    if (n.ref >= 0)
      next.push_back(n.ref);
    return next;
  }

  compiled& c_;
  std::string error_;
};

// One validation pass; `loc_` is the path to the value being checked.
class validator {
public:
  explicit validator(const compiled& c) : c_(c) {}

  void check(int index, const json::value& v, int depth, std::vector<problem>& out) {
    auto& n = c_.nodes[index];
    if (n.types && !has_type(n.types, v)) {
      add(out, n.type_error->msg, n.type_error->code);
      return;
    }
    if (n.const_value && v != *n.const_value)
      add(out, "Input should be " + literal(*n.const_value), "literal_error");
    if (n.enum_values && std::none_of(n.enum_values->Begin(), n.enum_values->End(), [&](auto& e) { return e == v; })) {
      std::vector<std::string> names;
      for (auto& e : n.enum_values->GetArray())
        names.push_back(literal(e));
      add(out, "Input should be " + alternatives(names), "enum");
    }
    if (v.IsNumber())
      check_number(n, v.GetDouble(), out);
    if (v.IsString())
      check_string(n, view(v), out);
    if (v.IsArray())
      check_array(n, v, depth, out);
    if (v.IsObject())
      check_object(n, v, depth, out);
    if (n.ref >= 0)
      check(n.ref, v, depth, out);
    if (!n.one_of.empty()) {
      if (n.discriminator.empty())
        check_union(n.one_of, true, v, depth, out);
      else
        check_tagged(n, v, depth, out);
    }
    if (!n.any_of.empty())
      check_union(n.any_of, false, v, depth, out);
  }

private:
  void add(std::vector<problem>& out, std::string msg, const char* type) {
    out.push_back({loc_, std::move(msg), type});
  }

  // Checks a member or item one level down, unless that is deeper than max_depth.
  void descend(int index, const json::value& v, std::string key, int depth, std::vector<problem>& out) {
    loc_.push_back(std::move(key));
    if (depth + 1 > max_depth)
      add(out, "Input should be nested at most " + std::to_string(max_depth) + " levels deep", "too_deep");
    else
      check(index, v, depth + 1, out);
    loc_.pop_back();
  }

  void check_number(const node& n, double x, std::vector<problem>& out) {
    if (n.minimum && !(x >= *n.minimum))
      add(out, "Input should be greater than or equal to " + format_number(*n.minimum), "greater_than_equal");
    if (n.exclusive_minimum && !(x > *n.exclusive_minimum))
      add(out, "Input should be greater than " + format_number(*n.exclusive_minimum), "greater_than");
    if (n.maximum && !(x <= *n.maximum))
      add(out, "Input should be less than or equal to " + format_number(*n.maximum), "less_than_equal");
    if (n.exclusive_maximum && !(x < *n.exclusive_maximum))
      add(out, "Input should be less than " + format_number(*n.exclusive_maximum), "less_than");
  }

  void check_string(const node& n, std::string_view s, std::vector<problem>& out) {
    if (n.min_length || n.max_length) {
      auto length = code_points(s);
      if (n.min_length && length < *n.min_length)
        add(out, "String should have at least " + plural(*n.min_length, "character"), "string_too_short");
      if (n.max_length && length > *n.max_length)
        add(out, "String should have at most " + plural(*n.max_length, "character"), "string_too_long");
    }
    if (n.regex && !std::regex_match(s.begin(), s.end(), *n.regex))
      add(out, "String should match pattern '" + n.pattern + "'", "string_pattern_mismatch");
  }

  void check_array(const node& n, const json::value& v, int depth, std::vector<problem>& out) {
    if (n.items >= 0)
      for (rapidjson::SizeType i = 0; i < v.Size(); ++i)
        descend(n.items, v[i], std::to_string(i), depth, out);
    auto size = std::to_string(v.Size());
    if (n.min_items && v.Size() < *n.min_items)
      add(out, "List should have at least " + plural(*n.min_items, "item") + " after validation, not " + size,
          "too_short");
    if (n.max_items && v.Size() > *n.max_items)
      add(out, "List should have at most " + plural(*n.max_items, "item") + " after validation, not " + size,
          "too_long");
  }

  void check_object(const node& n, const json::value& v, int depth, std::vector<problem>& out) {
    for (auto& p : n.properties) {
      auto it = v.FindMember(json::value(rapidjson::StringRef(p.name.data(), p.name.size())));
      if (it != v.MemberEnd())
        descend(p.schema, it->value, p.name, depth, out);
      else if (p.required)
        missing(p.name, out);
    }
    for (auto& r : n.required_only)
      if (v.FindMember(json::value(rapidjson::StringRef(r.data(), r.size()))) == v.MemberEnd())
        missing(r, out);
    if (!n.closed)
      return;
    for (auto& m : v.GetObject()) {
      auto key = view(m.name);
      if (std::none_of(n.properties.begin(), n.properties.end(), [&](auto& p) { return p.name == key; })) {
        loc_.emplace_back(key);
        add(out, "Extra inputs are not permitted", "extra_forbidden");
        loc_.pop_back();
      }
    }
  }

  void missing(const std::string& name, std::vector<problem>& out) {
    loc_.push_back(name);
    add(out, "Field required", "missing");
    loc_.pop_back();
  }

  // The branch the discriminator names, checked at the same loc.
  void check_tagged(const node& n, const json::value& v, int depth, std::vector<problem>& out) {
    if (!v.IsObject()) {
      add(out, "Input should be a valid dictionary", "dict_type");
      return;
    }
    auto prop = "'" + n.discriminator + "'";
    auto tag = json::member(v, n.discriminator.c_str());
    if (!tag) {
      add(out, "Unable to extract tag using discriminator " + prop, "union_tag_not_found");
      return;
    }
    auto text = tag->IsString()              ? std::string(view(*tag))
                : nests_deeper_than(*tag, max_depth) ? std::string(tag->IsArray() ? "[...]" : "{...}")
                                             : json::serialize(*tag);
    for (auto& [name, branch] : n.tags)
      if (tag->IsString() && name == text) {
        check(branch, v, depth, out);
        return;
      }
    std::string expected;
    for (auto& [name, branch] : n.tags)
      expected += (expected.empty() ? "'" : ", '") + name + "'";
    add(out, "Input tag '" + text + "' found using " + prop + " does not match any of the expected tags: " + expected,
        "union_tag_invalid");
  }

  // oneOf (exactly one branch) or anyOf (at least one); when it fails, the problems of the branch
  // that came closest (fewest problems, the first of equals).
  void check_union(const std::vector<int>& branches, bool exactly_one, const json::value& v, int depth,
                   std::vector<problem>& out) {
    std::optional<std::vector<problem>> closest;
    std::size_t matches = 0;
    for (int b : branches) {
      std::vector<problem> found;
      check(b, v, depth, found);
      if (found.empty())
        ++matches;
      else if (!closest || found.size() < closest->size())
        closest = std::move(found);
    }
    if (matches == 0)
      out.insert(out.end(), closest->begin(), closest->end());
    else if (exactly_one && matches > 1)
      add(out, "Input should match exactly one schema of oneOf, not " + std::to_string(matches),
          "union_multiple_matches");
  }

  const compiled& c_;
  std::vector<std::string> loc_;
};

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 && (s == "0" || s[0] != '0')
         && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

} // namespace

std::variant<schema, std::string> compile(const json::value& s) {
  if (nests_deeper_than(s, max_depth))
    return "#: a schema may nest at most " + std::to_string(max_depth) + " levels deep";
  auto c = std::make_shared<compiled>();
  c->source.CopyFrom(s, c->source.GetAllocator());
  if (auto error = compiler(*c).run())
    return *error;
  return schema(std::move(c), 0);
}

std::optional<schema> find_def(const schema& s, std::string_view name) {
  auto& defs = s.compiled_->defs;
  auto it = defs.find(name);
  if (it == defs.end())
    return std::nullopt;
  return schema(s.compiled_, it->second);
}

std::vector<problem> validate(const schema& s, const json::value& instance) {
  std::vector<problem> out;
  validator(*s.compiled_).check(s.root_, instance, 0, out);
  return out;
}

void write_problems(json::writer& w, const std::vector<problem>& problems) {
  w.StartArray();
  for (auto& p : problems) {
    w.StartObject();
    w.Key("type");
    w.String(p.type.c_str(), static_cast<rapidjson::SizeType>(p.type.size()));
    w.Key("loc");
    w.StartArray();
    for (auto& l : p.loc) {
      if (all_digits(l))
        w.Uint64(std::stoull(l));
      else
        w.String(l.c_str(), static_cast<rapidjson::SizeType>(l.size()));
    }
    w.EndArray();
    w.Key("msg");
    w.String(p.msg.c_str(), static_cast<rapidjson::SizeType>(p.msg.size()));
    w.EndObject();
  }
  w.EndArray();
}

std::string describe(const std::vector<problem>& problems) {
  std::string out;
  for (auto& p : problems) {
    if (!out.empty())
      out += "; ";
    for (std::size_t i = 0; i < p.loc.size(); ++i)
      out += (i ? "." : "") + p.loc[i];
    if (!p.loc.empty())
      out += ": ";
    out += p.msg;
  }
  return out;
}

} // namespace troupe::protocol::json_schema

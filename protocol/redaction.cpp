#include "protocol/redaction.hpp"

#include "protocol/utf8.hpp"

#include <cctype>
#include <vector>

namespace troupe::protocol {

namespace {

constexpr std::size_t long_string = 1200;
constexpr std::size_t kept_prefix = 600;
constexpr const char* truncated_marker = "[... truncated ...]";
constexpr const char* mask = "***";

std::vector<std::string> words_of(std::string_view key) {
  std::vector<std::string> words;
  std::string current;
  auto cut = [&] {
    if (!current.empty())
      words.push_back(std::move(current));
    current.clear();
  };
  for (std::size_t i = 0; i < key.size(); ++i) {
    auto c = static_cast<unsigned char>(key[i]);
    if (c == '_' || c == '-' || c == '.') {
      cut();
      continue;
    }
    // camelCase: a capital after a lower-case letter or digit starts a word.
    if (std::isupper(c) && i > 0 && (std::islower(static_cast<unsigned char>(key[i - 1]))
                                     || std::isdigit(static_cast<unsigned char>(key[i - 1]))))
      cut();
    current += static_cast<char>(std::tolower(c));
  }
  cut();
  return words;
}

bool masked_value(std::string_view s) {
  return s.rfind("sk-", 0) == 0 || s.rfind("Bearer ", 0) == 0;
}

void redact(json::value& v, json::document::AllocatorType& a) {
  if (v.IsObject()) {
    for (auto& m : v.GetObject()) {
      if (sensitive_key(std::string_view(m.name.GetString(), m.name.GetStringLength())) && !m.value.IsNull())
        m.value.SetString(mask, a);
      else
        redact(m.value, a);
    }
  } else if (v.IsArray()) {
    for (auto& item : v.GetArray())
      redact(item, a);
  } else if (v.IsString()) {
    std::string_view s(v.GetString(), v.GetStringLength());
    if (masked_value(s)) {
      v.SetString(mask, a);
    } else if (s.size() > long_string) {
      auto cut = std::string(utf8_prefix(s, kept_prefix)) + truncated_marker;
      v.SetString(cut.c_str(), static_cast<rapidjson::SizeType>(cut.size()), a);
    }
  }
}

} // namespace

bool sensitive_key(std::string_view key) {
  auto words = words_of(key);
  for (std::size_t i = 0; i < words.size(); ++i) {
    auto& w = words[i];
    if (w == "token" || w == "pat" || w == "password" || w == "secret" || w == "authorization" || w == "apikey")
      return true;
    if (w == "api" && i + 1 < words.size() && words[i + 1] == "key")
      return true;
  }
  return false;
}

std::string redact_json(std::string_view json_text) {
  auto doc = json::parse(json_text);
  if (!doc)
    return std::string(json_text);
  redact(*doc, doc->GetAllocator());
  return json::serialize(*doc);
}

} // namespace troupe::protocol

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
// Shorter runs after `sk-` are ordinary words (`sk-learn`); real keys are far longer.
constexpr std::size_t min_sk_key_chars = 16;
constexpr std::size_t min_bearer_chars = 8;

bool alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

bool key_char(char c) {
  return alnum(c) || c == '_' || c == '-';
}

// RFC 6750's b64token characters.
bool credential_char(char c) {
  return alnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
}

std::size_t run_of(std::string_view s, std::size_t from, bool (*in_run)(char)) {
  auto end = from;
  while (end < s.size() && in_run(s[end]))
    ++end;
  return end - from;
}

bool starts_with_nocase(std::string_view s, std::size_t at, std::string_view word) {
  if (s.size() - at < word.size())
    return false;
  for (std::size_t i = 0; i < word.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[at + i])) != word[i])
      return false;
  return true;
}

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

void redact(json::value& v, json::document::AllocatorType& a, bool truncate) {
  if (v.IsObject()) {
    for (auto& m : v.GetObject()) {
      if (sensitive_key(std::string_view(m.name.GetString(), m.name.GetStringLength())) && !m.value.IsNull())
        m.value.SetString(mask, a);
      else
        redact(m.value, a, truncate);
    }
  } else if (v.IsArray()) {
    for (auto& item : v.GetArray())
      redact(item, a, truncate);
  } else if (v.IsString()) {
    std::string_view s(v.GetString(), v.GetStringLength());
    if (masked_value(s)) {
      v.SetString(mask, a);
      return;
    }
    auto text = redact_text(s);
    if (truncate && text.size() > long_string)
      text = std::string(utf8_prefix(text, kept_prefix)) + truncated_marker;
    if (text != s)
      v.SetString(text.c_str(), static_cast<rapidjson::SizeType>(text.size()), a);
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

std::string redact_text(std::string_view text) {
  std::string out;
  std::size_t copied = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i > 0 && key_char(text[i - 1]))
      continue; // only whole words
    std::size_t from = 0, to = 0; // the span that becomes the mask
    if (starts_with_nocase(text, i, "sk-")) {
      auto n = run_of(text, i + 3, key_char);
      if (n >= min_sk_key_chars) {
        from = i;
        to = i + 3 + n;
      }
    } else if (starts_with_nocase(text, i, "bearer") && i + 6 < text.size() && text[i + 6] == ' ') {
      auto at = i + 6;
      while (at < text.size() && text[at] == ' ')
        ++at;
      auto n = run_of(text, at, credential_char);
      if (n >= min_bearer_chars) {
        from = at;
        to = at + n;
      }
    }
    if (to == 0)
      continue;
    out.append(text.substr(copied, from - copied));
    out += mask;
    copied = to;
    i = to - 1;
  }
  if (copied == 0)
    return std::string(text);
  out.append(text.substr(copied));
  return out;
}

std::string redact_json(std::string_view json_text) {
  auto doc = json::parse(json_text);
  if (!doc)
    return std::string(json_text);
  redact(*doc, doc->GetAllocator(), true);
  return json::serialize(*doc);
}

std::string redact_record_json(std::string_view json_text, std::initializer_list<std::string_view> verbatim) {
  auto doc = json::parse(json_text);
  if (!doc)
    return std::string(json_text);
  if (!doc->IsObject()) {
    redact(*doc, doc->GetAllocator(), false);
    return json::serialize(*doc);
  }
  for (auto& m : doc->GetObject()) {
    std::string_view name(m.name.GetString(), m.name.GetStringLength());
    bool keep = false;
    for (auto v : verbatim)
      keep = keep || v == name;
    if (keep)
      continue;
    if (sensitive_key(name) && !m.value.IsNull())
      m.value.SetString(mask, doc->GetAllocator());
    else
      redact(m.value, doc->GetAllocator(), false);
  }
  return json::serialize(*doc);
}

} // namespace troupe::protocol

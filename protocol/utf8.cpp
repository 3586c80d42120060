#include "protocol/utf8.hpp"

namespace troupe::protocol {

std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  auto continuation = [&](std::size_t k) { return k < s.size() && (byte(k) & 0xC0) == 0x80; };
  unsigned char lead = byte(i);
  if (lead < 0x80)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    return continuation(i + 1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (!continuation(i + 1) || !continuation(i + 2))
      return 0;
    unsigned char second = byte(i + 1);
    if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F))
      return 0;
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (!continuation(i + 1) || !continuation(i + 2) || !continuation(i + 3))
      return 0;
    unsigned char second = byte(i + 1);
    if ((lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F))
      return 0;
    return 4;
  }
  return 0;
}

std::string utf8_repaired(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string_view utf8_prefix(std::string_view s, std::size_t max_bytes) {
  if (s.size() <= max_bytes)
    return s;
  auto cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut; // back off to the start of a UTF-8 sequence
  return s.substr(0, cut);
}

} // namespace troupe::protocol

// Tokens for the JWT tests: base64url without padding, and an HS256 signature over any signing input.
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::testing {

inline std::string base64url(std::string_view bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(alphabet[(acc >> bits) & 0x3F]);
    }
  }
  if (bits > 0)
    out.push_back(alphabet[(acc << (6 - bits)) & 0x3F]);
  return out;
}

// `signing_input` + "." + its HS256 signature under `key`, whatever the input holds.
inline std::string signed_with(const std::string& signing_input, const std::string& key) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(), mac, &len);
  return signing_input + "." + base64url(std::string_view(reinterpret_cast<const char*>(mac), len));
}

} // namespace troupe::testing

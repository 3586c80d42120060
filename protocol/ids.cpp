#include "protocol/ids.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace troupe::protocol {

namespace {

// Ids and secrets must not be guessable from earlier ones: every bit comes from OpenSSL's CSPRNG,
// drawn a buffer at a time per thread so an id costs no lock and rarely a call.
uint64_t next_random() {
  constexpr std::size_t buffered = 64; // words per refill
  thread_local uint64_t words[buffered];
  thread_local std::size_t left = 0;
  if (left == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(words), sizeof words) != 1)
      throw std::runtime_error("the system's random generator failed");
    left = buffered;
  }
  uint64_t out = words[--left];
  std::memset(&words[left], 0, sizeof out); // a used word does not stay in memory
  return out;
}

constexpr char hex_digits[] = "0123456789abcdef";

} // namespace

std::string random_hex(std::size_t chars) {
  std::string out;
  out.reserve(chars);
  uint64_t bits = 0;
  for (std::size_t i = 0; i < chars; ++i) {
    if (i % 16 == 0)
      bits = next_random();
    out.push_back(hex_digits[bits & 0xf]);
    bits >>= 4;
  }
  return out;
}

std::string uuid4() {
  auto h = random_hex(32);
  h[12] = '4';                                  // version
  h[16] = hex_digits[8 + (next_random() & 3)];  // variant 10xx
  return h.substr(0, 8) + '-' + h.substr(8, 4) + '-' + h.substr(12, 4) + '-' + h.substr(16, 4) + '-'
         + h.substr(20, 12);
}

std::string uuid7_id(std::string_view prefix) {
  // The milliseconds and, in rand_a, a counter within one millisecond (RFC 9562 §6.2): ids one
  // process makes sort in the order it made them, also within a millisecond. A counter that runs
  // over borrows the next millisecond.
  static std::atomic<uint64_t> last{0};
  auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count())
             << 12;
  auto prev = last.load();
  uint64_t stamp = 0;
  do
    stamp = std::max(now, prev + 1);
  while (!last.compare_exchange_weak(prev, stamp));
  auto ms = stamp >> 12;
  std::string out(prefix);
  for (int shift = 44; shift >= 0; shift -= 4) // 48 bits of milliseconds
    out.push_back(hex_digits[(ms >> shift) & 0xf]);
  auto rest = random_hex(20);
  rest[0] = '7'; // version
  for (int i = 0; i < 3; ++i)
    rest[1 + i] = hex_digits[(stamp >> (8 - 4 * i)) & 0xf];
  rest[4] = hex_digits[8 + (next_random() & 3)]; // variant 10xx
  return out + rest;
}

std::string sha256_hex(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return lower_hex(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

std::string lower_hex(std::string_view bytes) {
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    out.push_back(hex_digits[b >> 4]);
    out.push_back(hex_digits[b & 0xf]);
  }
  return out;
}

std::string hmac_sha256(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // RFC 2104 hashes a key longer than the 64-byte block first; doing it here gives the same mac and
  // keeps any key length within HMAC()'s int.
  std::string hashed_key;
  if (key.size() > 64) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
    hashed_key.assign(reinterpret_cast<const char*>(digest), sizeof digest);
    key = hashed_key;
  }
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len))
    throw std::runtime_error("HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

const char* const id_text_rule =
  "Value should have 1 to 128 printable ASCII characters other than /, without a leading or trailing space";

bool is_id_text(std::string_view s) {
  if (s.empty() || s.size() > 128 || s.front() == ' ' || s.back() == ' ')
    return false;
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e || c == '/')
      return false;
  return true;
}

const char* const name_text_rule = "Value should have 1 to 256 bytes and no control character";

bool is_name_text(std::string_view s) {
  if (s.empty() || s.size() > 256)
    return false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f)
      return false;
  return true;
}

} // namespace troupe::protocol

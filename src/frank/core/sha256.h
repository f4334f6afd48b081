#pragma once
// SHA-256 (FIPS 180-4), self-contained so the binary needs no crypto library at run time.
// Used for ids, checksums and fingerprints (design hashes, prefix cache files), not for secrecy.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace frank {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(std::string_view message);
std::string to_hex(const Sha256Digest& digest);  // 64 lowercase hex digits
inline std::string sha256_hex(std::string_view message) { return to_hex(sha256(message)); }

}  // namespace frank

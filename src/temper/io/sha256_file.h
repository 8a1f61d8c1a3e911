// SHA-256 of a file, streamed in 4 MiB chunks (OpenSSL libcrypto's EVP digest; never the whole file in memory),
// as the 64 lower-case hex digits `sha256sum` prints. Used for the checksums.sha256 of checkpoints.
#pragma once

#include <string>

namespace temper::io {

// Throws temper::Error naming the file when it cannot be opened or read.
std::string sha256_file_hex(const std::string& path);

}  // namespace temper::io

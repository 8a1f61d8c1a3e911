#include "temper/io/sha256_file.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "temper/core/error.h"

namespace temper::io {

std::string sha256_file_hex(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  TEMPER_CHECK(f != nullptr) << path << ": cannot open to checksum (" << std::strerror(errno) << ")";
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  TEMPER_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1) << path << ": SHA-256 init failed";
  std::vector<unsigned char> buf(size_t{4} << 20);
  for (;;) {
    size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
    TEMPER_CHECK(n == 0 || EVP_DigestUpdate(ctx.get(), buf.data(), n) == 1) << path << ": SHA-256 update failed";
    if (n < buf.size()) {
      TEMPER_CHECK(!std::ferror(f.get()))
          << path << ": read failed while checksumming (" << std::strerror(errno) << ")";
      break;
    }
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  TEMPER_CHECK(EVP_DigestFinal_ex(ctx.get(), md, &len) == 1 && len == 32) << path << ": SHA-256 final failed";
  static const char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned int i = 0; i < len; ++i) out[2 * i] = kHex[md[i] >> 4], out[2 * i + 1] = kHex[md[i] & 15];
  return out;
}

}  // namespace temper::io

#include "temper/flow/png.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>

#include "temper/core/error.h"

#ifdef TEMPER_WITH_ZLIB
#include <zlib.h>
#endif

namespace temper::flow {
namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> r{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      r[n] = c;
    }
    return r;
  }();
  return t;
}

void put_u32(std::string& s, uint32_t v) {
  for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
}

void chunk(std::string& out, const char* type, const std::string& body) {
  put_u32(out, static_cast<uint32_t>(body.size()));
  const std::string tb = std::string(type, 4) + body;
  out += tb;
  put_u32(out, png_crc32(reinterpret_cast<const uint8_t*>(tb.data()), tb.size()));
}

}  // namespace

uint32_t png_crc32(const uint8_t* data, size_t n, uint32_t crc) {
  const auto& t = crc_table();
  uint32_t c = crc ^ 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t adler32_of(const uint8_t* data, size_t n) {
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < n; ++i) {
    a = (a + data[i]) % 65521u;
    b = (b + a) % 65521u;
  }
  return (b << 16) | a;
}

std::string zlib_stored(const std::vector<uint8_t>& raw) {
  std::string out = {'\x78', '\x01'};  // deflate, 32 KiB window, no dictionary (header % 31 == 0)
  size_t at = 0;
  do {
    const size_t n = std::min<size_t>(65535, raw.size() - at);
    out.push_back(at + n == raw.size() ? '\x01' : '\x00');  // BFINAL, BTYPE 00 (stored)
    const uint16_t len = static_cast<uint16_t>(n), nlen = static_cast<uint16_t>(~len);
    out += {static_cast<char>(len & 0xFF), static_cast<char>(len >> 8), static_cast<char>(nlen & 0xFF),
            static_cast<char>(nlen >> 8)};
    out.append(reinterpret_cast<const char*>(raw.data() + at), n);
    at += n;
  } while (at < raw.size());
  put_u32(out, adler32_of(raw.data(), raw.size()));
  return out;
}

std::string zlib_stream(const std::vector<uint8_t>& raw) {
#ifdef TEMPER_WITH_ZLIB
  uLongf len = compressBound(static_cast<uLong>(raw.size()));
  std::string out(len, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(out.data()), &len, raw.data(), static_cast<uLong>(raw.size()), 9);
  TEMPER_CHECK(rc == Z_OK) << "PNG: zlib compress2 failed (" << rc << ")";
  out.resize(len);
  return out;
#else
  return zlib_stored(raw);
#endif
}

std::string png_encode(const Pixels& p) {
  TEMPER_CHECK(p.channels == 1 || p.channels == 3) << "PNG: " << p.channels << " channels (expected 1 or 3)";
  TEMPER_CHECK(p.width >= 1 && p.height >= 1 && static_cast<int64_t>(p.data.size()) == p.width * p.height * p.channels)
      << "PNG: " << p.data.size() << " bytes for " << p.width << " x " << p.height << " x " << p.channels;
  const size_t row = static_cast<size_t>(p.width * p.channels);
  std::vector<uint8_t> raw;
  raw.reserve((row + 1) * static_cast<size_t>(p.height));
  for (int64_t y = 0; y < p.height; ++y) {
    raw.push_back(0);  // filter type None
    raw.insert(raw.end(), p.data.begin() + static_cast<std::ptrdiff_t>(y * row),
               p.data.begin() + static_cast<std::ptrdiff_t>((y + 1) * row));
  }
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put_u32(ihdr, static_cast<uint32_t>(p.width));
  put_u32(ihdr, static_cast<uint32_t>(p.height));
  ihdr +=
      {8, static_cast<char>(p.channels == 3 ? 2 : 0), 0, 0, 0};  // depth 8, colour type, deflate, filter, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", zlib_stream(raw));
  chunk(out, "IEND", "");
  return out;
}

void png_write(const std::string& path, const Pixels& p) {
  const std::string bytes = png_encode(p);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TEMPER_CHECK(f.good()) << "PNG: cannot open " << path << " for writing";
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TEMPER_CHECK(f.good()) << "PNG: writing " << path << " failed";
}

Pixels to_pixels(const float* chw, int64_t C, int64_t H, int64_t W, float lo, float hi) {
  Pixels p{W, H, C, std::vector<uint8_t>(static_cast<size_t>(W * H * C))};
  const float k = 255.0f / (hi - lo);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const float v = std::clamp((chw[(c * H + y) * W + x] - lo) * k, 0.0f, 255.0f);
        p.data[static_cast<size_t>((y * W + x) * C + c)] = static_cast<uint8_t>(std::lround(v));
      }
  return p;
}

Pixels image_grid(const float* images, int64_t n, int64_t C, int64_t S, int64_t cols, int64_t pad, uint8_t background,
                  float lo, float hi) {
  TEMPER_CHECK(n >= 1 && cols >= 1 && pad >= 0) << "image grid: " << n << " images in rows of " << cols << ", pad "
                                                << pad << " (expected n >= 1, cols >= 1, pad >= 0)";
  const int64_t rows = (n + cols - 1) / cols, cell = S + pad;
  Pixels g{cols * cell + pad, rows * cell + pad, C, {}};
  g.data.assign(static_cast<size_t>(g.width * g.height * C), background);
  for (int64_t i = 0; i < n; ++i) {
    const Pixels one = to_pixels(images + i * C * S * S, C, S, S, lo, hi);
    const int64_t x0 = pad + (i % cols) * cell, y0 = pad + (i / cols) * cell;
    for (int64_t y = 0; y < S; ++y)
      std::copy_n(one.data.begin() + static_cast<std::ptrdiff_t>(y * S * C), S * C,
                  g.data.begin() + static_cast<std::ptrdiff_t>(((y0 + y) * g.width + x0) * C));
  }
  return g;
}

}  // namespace temper::flow

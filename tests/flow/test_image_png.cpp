// The PNG writer and the image grid (src/temper/flow/png.h): CRC-32 and Adler-32 on known values, a
// written file's chunks (signature, IHDR, every CRC) and its pixels read back through the zlib stream
// (stored blocks parsed here; zlib's uncompress where the build has zlib), the grid's layout.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "temper/core/error.h"
#include "temper/flow/png.h"

#ifdef TEMPER_WITH_ZLIB
#include <zlib.h>
#endif

using namespace temper;
using namespace temper::flow;

namespace {

uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint32_t(uint8_t(s[at + 3]));
}

// The bytes of a zlib stream of stored blocks, its Adler-32 checked.
std::vector<uint8_t> read_stored(const std::string& z, size_t raw_size) {
  std::vector<uint8_t> out(raw_size);
  EXPECT_EQ((uint8_t(z[0]) * 256 + uint8_t(z[1])) % 31, 0);
  size_t at = 2, o = 0;
  for (bool last = false; !last && o <= raw_size;) {
    last = z[at] & 1;
    const size_t len = uint8_t(z[at + 1]) | (uint8_t(z[at + 2]) << 8);
    EXPECT_EQ(len ^ 0xFFFF, size_t(uint8_t(z[at + 3]) | (uint8_t(z[at + 4]) << 8)));
    if (o + len > raw_size) break;
    std::memcpy(out.data() + o, z.data() + at + 5, len);
    at += 5 + len, o += len;
  }
  EXPECT_EQ(o, raw_size);
  EXPECT_EQ(be32(z, at), adler32_of(out.data(), out.size()));
  return out;
}

// The raw scanlines of the zlib stream png_encode wrote.
std::vector<uint8_t> inflate_stream(const std::string& z, size_t raw_size) {
#ifdef TEMPER_WITH_ZLIB
  std::vector<uint8_t> out(raw_size);
  uLongf len = static_cast<uLongf>(raw_size);
  EXPECT_EQ(uncompress(out.data(), &len, reinterpret_cast<const Bytef*>(z.data()), static_cast<uLong>(z.size())), Z_OK);
  EXPECT_EQ(len, raw_size);
  return out;
#else
  return read_stored(z, raw_size);
#endif
}

}  // namespace

TEST(ImagePng, ChecksumsOfKnownStrings) {
  const std::string iend = "IEND", wiki = "Wikipedia";
  EXPECT_EQ(png_crc32(reinterpret_cast<const uint8_t*>(iend.data()), 4), 0xAE426082u);  // every PNG's last CRC
  EXPECT_EQ(adler32_of(reinterpret_cast<const uint8_t*>(wiki.data()), wiki.size()), 0x11E60398u);
}

TEST(ImagePng, ChunksAndPixelsReadBack) {
  Pixels p{3, 2, 3, {}};
  for (int i = 0; i < 18; ++i) p.data.push_back(static_cast<uint8_t>(i * 13));
  const std::string f = png_encode(p);
  ASSERT_EQ(f.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  size_t at = 8;
  std::string idat;
  std::vector<std::string> types;
  while (at < f.size()) {
    const uint32_t len = be32(f, at);
    const std::string type = f.substr(at + 4, 4), body = f.substr(at + 8, len);
    EXPECT_EQ(be32(f, at + 8 + len), png_crc32(reinterpret_cast<const uint8_t*>(f.data() + at + 4), len + 4)) << type;
    if (type == "IHDR") {
      EXPECT_EQ(be32(body, 0), 3u);
      EXPECT_EQ(be32(body, 4), 2u);
      EXPECT_EQ(body[8], 8);  // bit depth
      EXPECT_EQ(body[9], 2);  // RGB
    }
    if (type == "IDAT") idat += body;
    types.push_back(type);
    at += 12 + len;
  }
  EXPECT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  const auto raw = inflate_stream(idat, 2 * (1 + 9));
  for (int y = 0; y < 2; ++y) {
    EXPECT_EQ(raw[y * 10], 0);  // filter None
    for (int i = 0; i < 9; ++i) EXPECT_EQ(raw[y * 10 + 1 + i], p.data[y * 9 + i]);
  }
  // more than one stored block's worth of pixels (the fallback splits at 65535 bytes) also reads back
  Pixels big{200, 120, 3, std::vector<uint8_t>(200 * 120 * 3)};
  for (size_t i = 0; i < big.data.size(); ++i) big.data[i] = static_cast<uint8_t>((i * 7) % 251);
  const std::string fb = png_encode(big);
  const uint32_t len = be32(fb, 33);  // the IDAT after the signature (8) and IHDR (25)
  const auto rb = inflate_stream(fb.substr(41, len), 120 * (1 + 600));
  EXPECT_EQ(rb[601 * 119 + 1 + 599], big.data[600 * 119 + 599]);
  // the stored-block stream (the writer without zlib) splits at 65535 bytes and reads back
  std::vector<uint8_t> blob(70000);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(i % 253);
  const std::string st = zlib_stored(blob);
  EXPECT_EQ(st.size(), 2 + 2 * 5 + blob.size() + 4);
  EXPECT_EQ(read_stored(st, blob.size()), blob);
}

TEST(ImagePng, GridPlacesImagesInRows) {
  // 5 grey 2x2 images, value k/4 * 2 - 1 for image k, rows of 3, 1 px gaps of 200
  std::vector<float> imgs;
  for (int k = 0; k < 5; ++k)
    for (int i = 0; i < 4; ++i) imgs.push_back(k / 4.0f * 2 - 1);
  const Pixels g = image_grid(imgs.data(), 5, 1, 2, 3, 1, 200);
  EXPECT_EQ(g.width, 3 * 3 + 1);
  EXPECT_EQ(g.height, 2 * 3 + 1);
  auto at = [&](int x, int y) { return g.data[y * g.width + x]; };
  EXPECT_EQ(at(0, 0), 200);
  EXPECT_EQ(at(1, 1), 0);    // image 0 at (1, 1) .. (2, 2)
  EXPECT_EQ(at(4, 2), 64);   // image 1 at (4, 1): 0.25 -> 63.75 -> 64
  EXPECT_EQ(at(2, 5), 191);  // image 3: row 1, column 0: 0.75 -> 191.25
  EXPECT_EQ(at(5, 4), 255);  // image 4: row 1, column 1
  EXPECT_EQ(at(7, 4), 200);  // no sixth image
  EXPECT_THROW(image_grid(imgs.data(), 0, 1, 2, 3), Error);
  EXPECT_THROW(png_encode(Pixels{2, 2, 2, std::vector<uint8_t>(8)}), Error);
}

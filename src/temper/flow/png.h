// PNG output for sample images (issue 38: `temper flow sample --out grid.png`, report.html): 8-bit grey or
// RGB, no interlace, filter 0 on every scanline, the zlib stream from zlib's compress2 where the build found
// zlib (TEMPER_WITH_ZLIB), else stored (uncompressed) deflate blocks, which every PNG reader accepts. CRC-32
// and Adler-32 are computed here (PNG spec, ISO/IEC 15948). And the grid: images side by side in rows with a
// gap, the caller choosing the order (one row per class). Leaves out: reading PNGs, 16-bit, palettes, alpha.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::flow {

struct Pixels {
  int64_t width = 0, height = 0, channels = 0;  // channels 1 or 3
  std::vector<uint8_t> data;                    // [height, width, channels]
};

// An image [C, H, W] of floats in [lo, hi] -> 0..255 (clamped, rounded), interleaved.
Pixels to_pixels(const float* chw, int64_t C, int64_t H, int64_t W, float lo = -1.f, float hi = 1.f);

// n images [n, C, S, S] in rows of `cols`, `pad` pixels of `background` (0..255) around and between them.
Pixels image_grid(const float* images, int64_t n, int64_t C, int64_t S, int64_t cols, int64_t pad = 1,
                  uint8_t background = 255, float lo = -1.f, float hi = 1.f);

uint32_t png_crc32(const uint8_t* data, size_t n, uint32_t crc = 0);  // crc continues a previous value
uint32_t adler32_of(const uint8_t* data, size_t n);
std::string zlib_stream(const std::vector<uint8_t>& raw);  // zlib format (RFC 1950): compress2, else zlib_stored
std::string zlib_stored(const std::vector<uint8_t>& raw);  // zlib format with stored deflate blocks (<= 65535 bytes)
std::string png_encode(const Pixels& p);                   // the file's bytes
void png_write(const std::string& path, const Pixels& p);  // throws naming the path

}  // namespace temper::flow

#include "temper/core/rng.h"

#include <cmath>

#include "temper/core/thread_pool.h"

namespace temper {

std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t stream, uint64_t block) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0, p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

uint32_t Rng::next_u32() {
  uint64_t i = offset_++;
  return philox4x32(seed_, stream_, i >> 2)[i & 3];
}

float Rng::uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }

double Rng::uniform_f64() {
  uint64_t hi = next_u32() >> 5, lo = next_u32() >> 6;
  return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) * (1.0 / 9007199254740992.0);
}

namespace {
inline float box_muller(uint32_t a, uint32_t b) {
  float u1 = (static_cast<float>(a >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  float u2 = static_cast<float>(b >> 8) * (1.0f / 16777216.0f);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
}
}  // namespace

float Rng::normal() {
  uint32_t a = next_u32(), b = next_u32();
  return box_muller(a, b);
}

void rng_fill_normal(uint64_t seed, uint64_t stream, std::span<float> out, float mean, float std) {
  // Element i uses the two u32 of half-block i: block i/2, lanes 2*(i%2), 2*(i%2)+1.
  parallel_for(static_cast<int64_t>(out.size()), 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      auto r = philox4x32(seed, stream, static_cast<uint64_t>(i) >> 1);
      int l = static_cast<int>(i & 1) * 2;
      out[i] = mean + std * box_muller(r[l], r[l + 1]);
    }
  });
}

void rng_fill_uniform(uint64_t seed, uint64_t stream, std::span<float> out, float lo, float hi) {
  parallel_for(static_cast<int64_t>(out.size()), 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint32_t u = philox4x32(seed, stream, static_cast<uint64_t>(i) >> 2)[i & 3];
      out[i] = lo + (hi - lo) * (static_cast<float>(u >> 8) * (1.0f / 16777216.0f));
    }
  });
}

}  // namespace temper

// Counter-based RNG: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// the generator PyTorch/JAX use on GPUs. A value is a pure function of (seed, stream, index), so
// a sequence's numbers do not depend on thread count, batch composition or call order.
// Streams: one per sequence / parameter / rank; Rng is a cursor over one stream.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace temper {

// One Philox4x32-10 block: 4 random u32 for counter (stream, block) under key = seed.
std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t stream, uint64_t block);

// Cursor over one stream; state is (seed, stream, offset) and can be saved and restored exactly.
class Rng {
 public:
  Rng(uint64_t seed = 0, uint64_t stream = 0, uint64_t offset = 0) : seed_(seed), stream_(stream), offset_(offset) {}
  uint32_t next_u32();
  float uniform();            // [0, 1), 24 random bits
  double uniform_f64();       // [0, 1), 53 random bits
  float normal();             // N(0, 1), Box-Muller on two uniforms
  uint64_t offset() const { return offset_; }
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  uint64_t seed_, stream_, offset_;
};

// Element i gets normal/uniform number i of the stream, whatever the thread count (parallel inside).
void rng_fill_normal(uint64_t seed, uint64_t stream, std::span<float> out, float mean = 0.f, float std = 1.f);
void rng_fill_uniform(uint64_t seed, uint64_t stream, std::span<float> out, float lo = 0.f, float hi = 1.f);

// A seed derived from two numbers (splitmix64's finaliser of a pair): per-step and per-group seeds.
inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x7F4A7C159E3779B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace temper

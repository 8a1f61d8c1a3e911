// A stand-in for libFuzzer's main() in ordinary (g++) builds: replays every file of the seed corpus
// and then `runs` deterministic mutations of them (byte flips, truncations, insertions, splices,
// with a Philox stream), calling the same LLVMFuzzerTestOneInput. `make test` runs this as the
// smoke test; the coverage-guided libFuzzer build of the same harnesses runs under `ctest -L slow`.
//   fuzz_<name> CORPUS_DIR [runs] [seed]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "temper/core/rng.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [runs] [seed]\n", argv[0]);
    return 2;
  }
  int64_t runs = argc > 2 ? std::atoll(argv[2]) : 2000;
  uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  std::vector<std::vector<uint8_t>> corpus;
  for (auto& e : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream f(e.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (corpus.empty()) corpus.push_back({});
  for (auto& c : corpus) LLVMFuzzerTestOneInput(c.data(), c.size());
  temper::Rng rng(seed, 0);
  for (int64_t i = 0; i < runs; ++i) {
    std::vector<uint8_t> x = corpus[rng.next_u32() % corpus.size()];
    int edits = 1 + static_cast<int>(rng.next_u32() % 8);
    for (int k = 0; k < edits; ++k) {
      uint32_t op = rng.next_u32() % 5;
      size_t n = x.size();
      if (op == 0 && n) x[rng.next_u32() % n] ^= static_cast<uint8_t>(1u << (rng.next_u32() % 8));
      if (op == 1 && n) x[rng.next_u32() % n] = static_cast<uint8_t>(rng.next_u32());
      if (op == 2 && n) x.resize(rng.next_u32() % n);
      if (op == 3) x.insert(x.begin() + (n ? rng.next_u32() % n : 0), static_cast<uint8_t>(rng.next_u32()));
      if (op == 4 && n >= 8) {  // overwrite a little-endian u64 with an extreme value
        size_t at = rng.next_u32() % (n - 7);
        uint64_t v = (rng.next_u32() & 1) ? ~0ull >> (rng.next_u32() % 64) : rng.next_u32();
        for (int b = 0; b < 8; ++b) x[at + b] = static_cast<uint8_t>(v >> (8 * b));
      }
    }
    LLVMFuzzerTestOneInput(x.data(), x.size());
  }
  std::printf("fuzz smoke: %zu corpus files + %lld mutations, no crash\n", corpus.size(), static_cast<long long>(runs));
  return 0;
}

// The rollout engine's decode attention (kernels::paged_attention_fwd) for one decode step of every layer: n sequences
// of ctx keys each, their blocks scattered over a pool of `layers` layers (as the engine's cache is: the step's K/V
// come from memory, not the caches), one query row per sequence. Prints ms per step, the K/V bytes it reads and their
// rate; against `temper bench roofline`'s read bandwidth that is the kernel's share of its memory bound.
// Run: build/bench/paged_attention [--threads N] [--reps R] [--seqs 64 --ctx 272 --layers 30 --H 9 --Hkv 3 --D 64]
// [--dtype bf16|f32] [--block 16] [--huge 0|1] [--touch 0|1|2|3 [--ahead 4] [--work N]] (the default: SmolLM2-135M
// decoding 64 sequences of a 256-token prompt; --block: positions a KV block; --huge 1: the pool on transparent huge
// pages as KvPool asks, 0: on 4 KiB pages; --touch: no attention, see below). Results go to docs/PERFORMANCE.md.
#include "temper/kernels/paged_attention.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "best_of.h"
#include "temper/core/cpu_features.h"
#include "temper/core/dtype.h"
#include "temper/core/memory_info.h"
#include "temper/core/rng.h"
#include "temper/core/tensor.h"
#include "temper/core/thread_pool.h"
#include "temper/model/kv_pool.h"

using namespace temper;
using temper::bench::best_of;

int main(int argc, char** argv) {
  int threads = 2, reps = 10;
  int64_t seqs = 64, ctx = 272, layers = 30, H = 9, Hkv = 3, D = 64;
  std::string dtype = "bf16";
  bool huge = true;
  int64_t touch = 0, work = 0, ahead = 4;
  int64_t bs = kKvBlockSize;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (k == "--threads")
      threads = static_cast<int>(v);
    else if (k == "--reps")
      reps = static_cast<int>(v);
    else if (k == "--seqs")
      seqs = v;
    else if (k == "--ctx")
      ctx = v;
    else if (k == "--layers")
      layers = v;
    else if (k == "--H")
      H = v;
    else if (k == "--Hkv")
      Hkv = v;
    else if (k == "--D")
      D = v;
    else if (k == "--dtype")
      dtype = argv[i + 1];
    else if (k == "--huge")
      huge = v != 0;
    else if (k == "--block")
      bs = v;
    else if (k == "--touch")
      touch = v;
    else if (k == "--work")
      work = v;
    else if (k == "--ahead")
      ahead = v;
    else {
      std::fprintf(stderr, "paged_attention: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (dtype != "bf16" && dtype != "f32") {
    std::fprintf(stderr, "paged_attention: --dtype %s (expected bf16 or f32)\n", dtype.c_str());
    return 2;
  }
  set_num_threads(threads);
  const bool bf16 = dtype == "bf16";
  const int64_t row = Hkv * D, per_seq = (ctx + bs - 1) / bs, blocks = seqs * per_seq;
  const int64_t layer_elems = blocks * bs * row;
  Rng r(1, 0);
  // The pools as the engine's KvPool holds them: fresh mappings (Tensor), advised before their first write (--huge).
  const int64_t esize = bf16 ? 2 : 4;
  Tensor kt = Tensor::empty({layers * layer_elems}, bf16 ? DType::bf16 : DType::f32),
         vt = Tensor::empty({layers * layer_elems}, bf16 ? DType::bf16 : DType::f32);
  if (huge) advise_huge_pages(kt.raw(), kt.nbytes()), advise_huge_pages(vt.raw(), vt.nbytes());
  uint16_t* k16 = bf16 ? static_cast<uint16_t*>(kt.raw()) : nullptr;
  uint16_t* v16 = bf16 ? static_cast<uint16_t*>(vt.raw()) : nullptr;
  float* k32 = bf16 ? nullptr : static_cast<float*>(kt.raw());
  float* v32 = bf16 ? nullptr : static_cast<float*>(vt.raw());
  for (int64_t i = 0; i < layers * layer_elems; ++i) {
    if (bf16) {
      k16[i] = f32_to_bf16(r.normal());
      v16[i] = f32_to_bf16(r.normal());
    } else {
      k32[i] = r.normal();
      v32[i] = r.normal();
    }
  }
  // Each sequence's blocks drawn from a shuffled pool (the engine hands blocks out as sequences come and go).
  std::vector<int32_t> ids(static_cast<size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  for (int64_t i = blocks - 1; i > 0; --i) std::swap(ids[static_cast<size_t>(i)], ids[r.next_u32() % (i + 1)]);
  std::vector<const int32_t*> tables(static_cast<size_t>(seqs));
  for (int64_t s = 0; s < seqs; ++s) tables[static_cast<size_t>(s)] = ids.data() + s * per_seq;
  std::vector<int64_t> lens(static_cast<size_t>(seqs), ctx);
  std::vector<float> q(static_cast<size_t>(seqs * H * D)), o(q.size());
  for (float& x : q) x = r.normal();
  auto step = [&] {
    for (int64_t l = 0; l < layers; ++l) {
      kernels::PagedAttnArgs a;
      a.n = seqs;
      a.H = H;
      a.Hkv = Hkv;
      a.D = D;
      a.q = q.data();
      a.q_stride = H * D;
      a.o = o.data();
      a.o_stride = H * D;
      a.block_tables = tables.data();
      a.kv_len = lens.data();
      a.block_size = bs;
      if (bf16) {
        a.k_pool16 = k16 + l * layer_elems;
        a.v_pool16 = v16 + l * layer_elems;
      } else {
        a.k_pool = k32 + l * layer_elems;
        a.v_pool = v32 + l * layer_elems;
      }
      kernels::paged_attention_fwd(a);
    }
  };
  // --touch: no attention, every K/V line the step reads loaded once in the kernel's order (a block's K rows, then its
  // V rows; a contiguous run of sequences per thread): what this layout lets the cores read, the ceiling of any kernel
  // over it. 2 and 3: each block's lines prefetched --ahead blocks before (into L2, into L1); --work N: a dependent
  // chain of N multiply-adds per block, the compute a kernel would overlap with the reads.
  std::vector<float> sink(static_cast<size_t>(seqs));
  auto touch_step = [&] {
    const int64_t lines = bs * row * esize / 64;
    for (int64_t l = 0; l < layers; ++l) {
      const char* kb = static_cast<const char*>(kt.raw());
      const char* vb = static_cast<const char*>(vt.raw());
      kb += l * layer_elems * esize;
      vb += l * layer_elems * esize;
      auto touch_seq = [&](int64_t i) {
        int32_t x = 0;
        float w = 1.0f;
        for (int64_t b = 0; b < per_seq; ++b) {
          const int64_t at = tables[static_cast<size_t>(i)][b] * bs * row * esize;
          if (touch >= 2 && b + ahead < per_seq) {
            const int64_t pa = tables[static_cast<size_t>(i)][b + ahead] * bs * row * esize;
            for (int64_t j = 0; j < lines; ++j) {
              if (touch == 3) {  // into L1
                __builtin_prefetch(kb + pa + 64 * j, 0, 3);
                __builtin_prefetch(vb + pa + 64 * j, 0, 3);
              } else {  // into L2, as the kernel asks
                __builtin_prefetch(kb + pa + 64 * j, 0, 2);
                __builtin_prefetch(vb + pa + 64 * j, 0, 2);
              }
            }
          }
          for (int64_t j = 0; j < lines; ++j) x += *reinterpret_cast<const int32_t*>(kb + at + 64 * j);
          for (int64_t j = 0; j < lines; ++j) x += *reinterpret_cast<const int32_t*>(vb + at + 64 * j);
          for (int64_t k = 0; k < work; ++k) {  // a dependent chain: compute per block
            w = w * 0.999f + 0.001f;
            asm volatile("" : "+x"(w));
          }
        }
        sink[static_cast<size_t>(i)] += static_cast<float>(x) + w;
      };
      // Each thread reads a contiguous run of sequences, as the kernel deals them (kernels/paged_attention.cpp).
      parallel_for(seqs, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) touch_seq(i);
      });
    }
  };
  const double s = touch ? best_of(reps, touch_step) : best_of(reps, step);
  const std::string kernel = "paged_attention_fwd " + std::string(isa_name(cpu_isa()));
  const double bytes = 2.0 * static_cast<double>(layers * seqs * ctx * row) * (bf16 ? 2 : 4);
  std::printf(
      "{\"bench\": \"paged_attention\", \"dtype\": \"%s\", \"threads\": %d, \"seqs\": %lld, \"ctx\": %lld, "
      "\"layers\": %lld, \"H\": %lld, \"Hkv\": %lld, \"D\": %lld, \"block\": %lld, \"kernel\": \"%s\", "
      "\"ms_per_step\": %.3f, "
      "\"kv_mb\": %.1f, \"kv_gb_s\": %.2f}\n",
      dtype.c_str(), threads, static_cast<long long>(seqs), static_cast<long long>(ctx), static_cast<long long>(layers),
      static_cast<long long>(H), static_cast<long long>(Hkv), static_cast<long long>(D), static_cast<long long>(bs),
      touch ? "touch" : kernel.c_str(), 1e3 * s, bytes / 1e6, bytes / s / 1e9);
  return 0;
}

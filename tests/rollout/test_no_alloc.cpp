// The decode loop does not allocate after warm-up: this binary interposes malloc and friends
// (glibc lets an executable define them; the real ones are __libc_*), and a hook counts every heap
// allocation of any thread (ours, oneDNN's, OpenMP's) between consecutive decode steps. f32 decode
// runs on our own small-M GEMM, bf16 decode on our bf16 kernel where the ISA is AVX-512 (elsewhere on
// oneDNN's primitives, whose execute() allocates its argument map: not covered there).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <malloc.h>

#include "common/models.h"
#include "temper/core/cpu_features.h"
#include "temper/core/thread_pool.h"
#include "temper/rollout/engine.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<int64_t> g_allocs{0};
}

extern "C" {
void* malloc(size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, size_t a, size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;  // ENOMEM
}
}

using namespace temper;
using namespace temper::rollout;

namespace {
struct CountPerStep : RolloutHook {
  std::vector<int64_t> at_step;  // allocation count at the end of each step (reserved: no allocation here)
  CountPerStep() { at_step.reserve(1024); }
  HookDecision after_token(const RolloutRequest&, const Completion&) override { return {}; }
  void after_step(int64_t) override { at_step.push_back(g_allocs.load()); }
};

void decode_allocations(kernels::Precision prec, int64_t threads) {
  set_num_threads(static_cast<int>(threads));
  ModelConfig cfg = test::small_config(Arch::qwen3, 128);
  Transformer model(cfg);
  model.init_random(3, 0.3f);
  model.set_precision(prec);
  KvPool pool(cfg, 8, 256, kv_dtype(prec));  // bf16: the bf16 cache
  RolloutEngine eng(model, pool);
  std::vector<RolloutRequest> reqs(2);
  for (size_t r = 0; r < reqs.size(); ++r) {
    reqs[r].prompt = {1, 2, 3, int32_t(4 + r), 5, 6, 7};
    reqs[r].group_size = 6;
    reqs[r].max_new = 40;
    reqs[r].seed = r;
    reqs[r].sampler.top_p = 0.9f;  // the sorting path
    reqs[r].sampler.repetition_penalty = 1.1f;
  }
  CountPerStep hook;
  auto out = eng.run(reqs, &hook);
  ASSERT_EQ(hook.at_step.size(), 40u);
  const size_t warm = 3;
  int64_t after_warm = hook.at_step.back() - hook.at_step[warm - 1];
  for (size_t s = warm; s < hook.at_step.size(); ++s)
    EXPECT_EQ(hook.at_step[s] - hook.at_step[s - 1], 0) << "step " << s << " allocated";
  EXPECT_EQ(after_warm, 0) << "allocations in " << hook.at_step.size() - warm << " decode steps after warm-up";
  set_num_threads(default_num_threads());
}
}  // namespace

TEST(RolloutNoAlloc, DecodeStepsAfterWarmUpDoNotAllocateF32) { decode_allocations(kernels::Precision::f32, 2); }
TEST(RolloutNoAlloc, DecodeStepsAfterWarmUpDoNotAllocateBf16) {
  if (cpu_isa() != Isa::avx512) GTEST_SKIP() << "bf16 decode runs on oneDNN without AVX-512";
  decode_allocations(kernels::Precision::bf16, 2);
}
TEST(RolloutNoAlloc, TheCounterSeesAllocations) {
  int64_t before = g_allocs.load();
  void* p = std::malloc(100);
  auto* v = new std::vector<int>(1000);
  EXPECT_GE(g_allocs.load() - before, 2);
  delete v;
  std::free(p);
}

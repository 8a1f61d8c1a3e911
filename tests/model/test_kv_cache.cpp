// Generation over the KV cache gives the same logits as the full forward at every position:
// prefill a prompt, then one token at a time, for Llama, Qwen2 and Qwen3 shapes, past one
// 64-query attention tile.
#include <gtest/gtest.h>

#include "common/models.h"
#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/model/transformer.h"

using namespace temper;
using namespace temper::test;

TEST(KvCache, IncrementalLogitsEqualFullForward) {
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
    ModelConfig c = small_config(arch, 128);
    Transformer m(c);
    m.init_random(3, 0.2f);
    const int64_t T = 75, P = 30, V = c.vocab_size;
    std::vector<int32_t> ids(T);
    Rng r(4, 0);
    for (auto& t : ids) t = static_cast<int32_t>(r.next_u32() % V);
    std::vector<float> full(T * V);
    m.forward_logits(ids.data(), 1, T, full.data());
    KvCache cache;
    cache.reset(c, 100);
    std::vector<float> step(V);
    m.forward_cached(ids.data(), P, cache, step.data());
    EXPECT_EQ(cache.len, P);
    std::vector<double> want(full.begin() + (P - 1) * V, full.begin() + P * V);
    EXPECT_TRUE(all_close(step, want, tolerance(Kind::reduction, T * c.hidden_size))) << arch_name(arch) << " prefill";
    for (int64_t t = P; t < T; ++t) {
      m.forward_cached(ids.data() + t, 1, cache, step.data());
      std::vector<double> w(full.begin() + t * V, full.begin() + (t + 1) * V);
      ASSERT_TRUE(all_close(step, w, tolerance(Kind::reduction, T * c.hidden_size))) << arch_name(arch) << " t=" << t;
    }
    EXPECT_THROW(m.forward_cached(ids.data(), 26, cache, step.data()), Error);  // 75 + 26 > 100
  }
}

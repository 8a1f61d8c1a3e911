// The rollout KV cache: block accounting, prefix sharing by fork, copy on write of a shared partial
// block, truncate/release, exhaustion; and paged attention over the block tables equals dense
// attention on the gathered K/V (fp64 reference), on every ISA.
#include <gtest/gtest.h>

#include <cmath>

#include "common/models.h"
#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/kernels/paged_attention.h"
#include "temper/rollout/kv_pool.h"

using namespace temper;
using namespace temper::rollout;
using namespace temper::test;

namespace {

ModelConfig one_layer() {
  ModelConfig c = small_config(Arch::llama);
  c.num_layers = 1;
  return c;  // Hkv = 2, D = 16: row 32
}

void append(KvPool& pool, SeqKv& s, int64_t n, uint64_t seed) {
  auto k = random_vec(n * pool.row(), seed), v = random_vec(n * pool.row(), seed + 1000);
  pool.reserve(s, n);
  pool.write(0, s, n, k.data(), v.data(), pool.row());
  pool.advance(s, n);
}

}  // namespace

TEST(KvPool, ForkSharesBlocksAndCopiesOnWrite) {
  ModelConfig c = one_layer();
  KvPool pool(c, 4, 16);
  SeqKv a;
  append(pool, a, 10, 1);  // blocks: 3 (4 + 4 + 2)
  EXPECT_EQ(a.blocks.size(), 3u);
  EXPECT_EQ(pool.free_blocks(), 13);
  std::vector<float> a9(pool.k_at(0, a, 9), pool.k_at(0, a, 9) + pool.row());
  SeqKv f = pool.fork(a, 10);  // shares all 3, the last one partial
  EXPECT_EQ(pool.refcount(a.blocks[2]), 2);
  EXPECT_EQ(pool.free_blocks(), 13);
  append(pool, f, 3, 50);  // writes into the shared partial block: copy on write, +1 block for position 12
  EXPECT_NE(f.blocks[2], a.blocks[2]);
  EXPECT_EQ(f.blocks[0], a.blocks[0]);
  EXPECT_EQ(pool.refcount(a.blocks[2]), 1);
  EXPECT_EQ(std::vector<float>(pool.k_at(0, f, 9), pool.k_at(0, f, 9) + pool.row()), a9);  // copied prefix
  append(pool, a, 1, 77);  // a writes position 10 in its own block now
  EXPECT_NE(pool.k_at(0, a, 10)[0], pool.k_at(0, f, 10)[0]);
  EXPECT_EQ(pool.free_blocks(), 16 - 3 - 2);
  pool.truncate(f, 5);  // keeps 2 blocks (shared), drops the copied and the new one
  EXPECT_EQ(f.blocks.size(), 2u);
  EXPECT_EQ(pool.free_blocks(), 16 - 3);
  pool.release(f);
  pool.release(a);
  EXPECT_EQ(pool.free_blocks(), 16);
}

TEST(KvPool, ExhaustionIsAnErrorAndChangesNothing) {
  KvPool pool(one_layer(), 4, 3);
  SeqKv a;
  append(pool, a, 9, 3);
  SeqKv before = a;
  EXPECT_THROW(pool.reserve(a, 4), Error);  // needs a 4th block
  EXPECT_EQ(a.blocks, before.blocks);
  EXPECT_EQ(pool.free_blocks(), 0);
  EXPECT_EQ(KvPool::blocks_for_budget(one_layer(), 4, 2 * 4 * 32 * 4 * 10), 10);
}

TEST(PagedAttention, EqualsDenseAttentionOnGatheredKvEveryIsa) {
  ModelConfig c = one_layer();
  const int64_t H = c.num_heads, Hkv = c.num_kv_heads, D = c.head_dim, row = Hkv * D;
  KvPool pool(c, 4, 32);
  SeqKv a, b;
  append(pool, a, 13, 11);
  b = pool.fork(a, 6);  // shares a prefix, then diverges
  append(pool, b, 9, 12);
  // Rows: a at lengths 1, 7, 13 (decode-like) and b at 15 — queries of different sequences batched.
  std::vector<const SeqKv*> seqs = {&a, &a, &a, &b};
  std::vector<int64_t> lens = {1, 7, 13, 15};
  const int64_t n = 4;
  auto q = random_vec(n * H * D, 21);
  std::vector<const int32_t*> tables;
  for (auto* s : seqs) tables.push_back(s->blocks.data());
  for_each_isa([&](Isa) {
    std::vector<float> o(n * H * D, 5.f);
    kernels::PagedAttnArgs args;
    args.n = n; args.H = H; args.Hkv = Hkv; args.D = D;
    args.q = q.data(); args.q_stride = H * D; args.o = o.data(); args.o_stride = H * D;
    args.block_tables = tables.data(); args.kv_len = lens.data();
    args.k_pool = pool.k_block(0, 0); args.v_pool = pool.v_block(0, 0); args.block_size = 4;
    kernels::paged_attention_fwd(args);
    std::vector<double> want(n * H * D);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < H; ++h) {
        int64_t g = h / (H / Hkv);
        std::vector<double> s(lens[i]);
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j < lens[i]; ++j) {
          const float* k = pool.k_at(0, *seqs[i], j) + g * D;
          double d = 0;
          for (int64_t e = 0; e < D; ++e) d += double(q[i * H * D + h * D + e]) * k[e];
          s[j] = d / std::sqrt(double(D));
          m = std::max(m, s[j]);
        }
        for (auto& x : s) z += (x = std::exp(x - m));
        for (int64_t e = 0; e < D; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < lens[i]; ++j) acc += s[j] / z * pool.v_at(0, *seqs[i], j)[g * D + e];
          want[i * H * D + h * D + e] = acc;
        }
      }
    EXPECT_TRUE(all_close(o, want, tolerance(Kind::reduction, 15 * D)));
  });
  (void)row;
}

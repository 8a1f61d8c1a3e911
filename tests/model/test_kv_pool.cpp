// The rollout KV cache: block accounting, prefix sharing by fork, copy on write of a shared partial
// block, truncate/release, exhaustion; and paged attention over the block tables equals dense
// attention on the gathered K/V (fp64 reference), on every ISA.
#include <gtest/gtest.h>

#include <cmath>

#include "common/huge_pages.h"
#include "common/models.h"
#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/kernels/paged_attention.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"

using namespace temper;

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

// Paged attention of n query rows (H heads of D, packed) over a pool's layer 0 (f32 or bf16 rows).
kernels::PagedAttnArgs attn_args(const KvPool& pool, int64_t n, int64_t H, int64_t D, const float* q, float* o,
                                 const int32_t* const* tables, const int64_t* lens) {
  kernels::PagedAttnArgs args;
  args.n = n;
  args.H = H;
  args.Hkv = pool.row() / D;
  args.D = D;
  args.q = q;
  args.q_stride = H * D;
  args.o = o;
  args.o_stride = H * D;
  args.block_tables = tables;
  args.kv_len = lens;
  pool.point(args, 0);
  return args;
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

TEST(KvPool, Bf16RowsHoldTheRoundedValuesInHalfTheBytes) {
  ModelConfig c = one_layer();
  KvPool pool(c, 4, 16, DType::bf16);
  EXPECT_EQ(pool.dtype(), DType::bf16);
  SeqKv a;
  auto k = random_vec(10 * pool.row(), 1), v = random_vec(10 * pool.row(), 1001);
  pool.reserve(a, 10);
  pool.write(0, a, 10, k.data(), v.data(), pool.row());
  pool.advance(a, 10);
  for (int64_t p = 0; p < 10; ++p)
    for (int64_t e = 0; e < pool.row(); ++e) {
      ASSERT_EQ(pool.k_value(0, a, p, e), bf16_to_f32(f32_to_bf16(k[p * pool.row() + e])));
      ASSERT_EQ(pool.v_value(0, a, p, e), bf16_to_f32(f32_to_bf16(v[p * pool.row() + e])));
    }
  EXPECT_NE(pool.k_value(0, a, 3, 1), k[3 * pool.row() + 1]);  // really rounded
  SeqKv f = pool.fork(a, 10);
  append(pool, f, 2, 50);  // copy on write of the shared partial block, in bf16
  EXPECT_NE(f.blocks[2], a.blocks[2]);
  for (int64_t p = 8; p < 10; ++p)
    for (int64_t e = 0; e < pool.row(); ++e) ASSERT_EQ(pool.k_value(0, f, p, e), pool.k_value(0, a, p, e));
  EXPECT_THROW(pool.k_block(0, 0), Error);  // f32 rows asked of a bf16 pool
  EXPECT_EQ(KvPool::blocks_for_budget(c, 4, 2 * 4 * 32 * 2 * 10, DType::bf16), 10);
  EXPECT_EQ(KvPool::blocks_for_budget(c, 4, 2 * 4 * 32 * 2 * 10), 5);
}

// Head dims on and off the vector width (the AVX-512 path takes D % 16 == 0; 48 and 80 leave 3 and 1
// vectors after the 64-dim passes), blocks shorter and longer than the 16 keys scored at a time, GQA
// groups of 2, 3 and 6 query heads per KV head (P.V takes up to 4 heads per pass).
TEST(PagedAttention, EqualsDenseAttentionOnGatheredKvEveryIsa) {
  for (auto [head_dim, block, heads] : {std::tuple<int64_t, int64_t, int64_t>{16, 4, 4},
                                        {40, 4, 4},
                                        {16, 32, 4},
                                        {64, 32, 4},
                                        {48, 16, 6},
                                        {80, 16, 12},
                                        {32, 8, 12}}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " block " + std::to_string(block) + " heads " +
                 std::to_string(heads));
    ModelConfig c = one_layer();
    c.head_dim = head_dim;
    c.num_heads = heads;
    const int64_t H = c.num_heads, Hkv = c.num_kv_heads, D = c.head_dim, row = Hkv * D;
    KvPool pool(c, block, 128 / block);
    SeqKv a, b;
    append(pool, a, 13, 11);
    b = pool.fork(a, 6);  // shares a prefix, then diverges
    append(pool, b, 29, 12);
    // Rows: a at lengths 1, 7, 13 (decode-like) and b at 35 — queries of different sequences batched.
    std::vector<const SeqKv*> seqs = {&a, &a, &a, &b};
    std::vector<int64_t> lens = {1, 7, 13, 35};
    const int64_t n = 4;
    auto q = random_vec(n * H * D, 21);
    std::vector<const int32_t*> tables;
    for (auto* s : seqs) tables.push_back(s->blocks.data());
    for_each_isa([&](Isa) {
      std::vector<float> o(n * H * D, 5.f);
      kernels::PagedAttnArgs args = attn_args(pool, n, H, D, q.data(), o.data(), tables.data(), lens.data());
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
      EXPECT_TRUE(all_close(o, want, tolerance(Kind::reduction, 35 * D)));
    });
    (void)row;
  }
}

namespace {
std::vector<float> full_logits(Transformer& m, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * m.config().vocab_size);
  m.forward_logits(ids.data(), 1, static_cast<int64_t>(ids.size()), out.data());
  return out;
}
}  // namespace

TEST(PagedForward, BatchedPrefillAndDecodeEqualTheFullForwardPerSequence) {
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
    ModelConfig c = small_config(arch, 128);
    Transformer m(c);
    m.init_random(5, 0.2f);
    const int64_t V = c.vocab_size, steps = 6;
    KvPool pool(c, 8, 64);
    // Three prompts of different lengths, prefilled together in one step (ragged batch).
    std::vector<std::vector<int32_t>> seq = {{3, 9, 27, 81, 1}, {7}, {11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47}};
    std::vector<SeqKv> kv(seq.size());
    Rng r(9, 0);
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int32_t> tok, pos;
      std::vector<const int32_t*> tables;
      std::vector<int64_t> out_rows;
      std::vector<int64_t> first(seq.size());
      for (size_t q = 0; q < seq.size(); ++q) {  // step 0: whole prompts; later: one new token each
        int64_t from = s == 0 ? 0 : kv[q].len, to = static_cast<int64_t>(seq[q].size());
        pool.reserve(kv[q], to - from);
        first[q] = static_cast<int64_t>(tok.size());
        for (int64_t p = from; p < to; ++p) {
          tok.push_back(seq[q][p]);
          pos.push_back(static_cast<int32_t>(p));
        }
        out_rows.push_back(static_cast<int64_t>(tok.size()) - 1);
      }
      for (size_t q = 0; q < seq.size(); ++q)
        for (int64_t i = first[q]; i < (q + 1 < seq.size() ? first[q + 1] : static_cast<int64_t>(tok.size())); ++i)
          tables.push_back(kv[q].blocks.data());
      std::vector<float> logits(out_rows.size() * V);
      PagedStep st;
      st.n = static_cast<int64_t>(tok.size());
      st.tokens = tok.data();
      st.pos = pos.data();
      st.tables = tables.data();
      st.out_rows = out_rows.data();
      st.n_out = static_cast<int64_t>(out_rows.size());
      st.logits = logits.data();
      m.forward_paged(st, pool);
      for (size_t q = 0; q < seq.size(); ++q) {
        pool.advance(kv[q], static_cast<int64_t>(seq[q].size()) - kv[q].len);
        auto full = full_logits(m, seq[q]);
        std::vector<double> want(full.end() - V, full.end());
        std::vector<float> got(logits.begin() + q * V, logits.begin() + (q + 1) * V);
        ASSERT_TRUE(all_close(got, want, tolerance(Kind::reduction, 64 * c.hidden_size)))
            << arch_name(arch) << " step " << s << " sequence " << q;
        seq[q].push_back(static_cast<int32_t>(r.next_u32() % V));  // next token (any: the check is per step)
      }
    }
    for (auto& s : kv) pool.release(s);
    EXPECT_EQ(pool.free_blocks(), 64);
  }
}

TEST(PagedForward, ForkedGroupMembersShareThePromptAndMatchIndependentSequences) {
  ModelConfig c = small_config(Arch::qwen3, 128);
  Transformer m(c);
  m.init_random(6, 0.2f);
  const int64_t V = c.vocab_size;
  KvPool pool(c, 4, 64);
  std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10};  // 1.5 blocks: the fork shares a partial block
  SeqKv root;
  pool.reserve(root, 6);
  std::vector<int32_t> pos = {0, 1, 2, 3, 4, 5};
  std::vector<const int32_t*> tables(6, root.blocks.data());
  int64_t last = 5;
  std::vector<float> logits(V);
  PagedStep st{6, prompt.data(), pos.data(), tables.data(), &last, 1, logits.data()};
  m.forward_paged(st, pool);
  pool.advance(root, 6);
  int before = static_cast<int>(pool.free_blocks());
  SeqKv a = pool.fork(root, 6), b = pool.fork(root, 6);
  EXPECT_EQ(pool.free_blocks(), before);  // one prefill, shared blocks
  // Each member appends a different token; copy on write splits the shared partial block.
  std::vector<int32_t> ta = {42}, tb = {43};
  for (auto [s, t] : {std::pair<SeqKv*, std::vector<int32_t>*>{&a, &ta}, {&b, &tb}}) {
    pool.reserve(*s, 1);
    int32_t p = 6;
    const int32_t* tab = s->blocks.data();
    int64_t row0 = 0;
    PagedStep d{1, t->data(), &p, &tab, &row0, 1, logits.data()};
    m.forward_paged(d, pool);
    pool.advance(*s, 1);
    std::vector<int32_t> full = prompt;
    full.push_back((*t)[0]);
    auto f = full_logits(m, full);
    std::vector<double> want(f.end() - V, f.end());
    EXPECT_TRUE(all_close(logits, want, tolerance(Kind::reduction, 64 * c.hidden_size)));
  }
  EXPECT_NE(a.blocks[1], b.blocks[1]);
  EXPECT_EQ(a.blocks[0], b.blocks[0]);
}

// A prompt prefilled as a run (PagedStep::prompt_runs: the training forward's tiles) and decoded a token at a time,
// then recomputed in one step behind another sequence's decode row with only its prompt marked (an evicted
// sequence's recompute): the last logits equal the decode step's bit for bit, f32 and bf16. The prompt spans two of
// the tiles' 64-row blocks; the prefill's logits are the full forward's.
TEST(PagedForward, ARecomputedSequenceMarksOnlyItsPromptAndGetsItsDecodeBitsBack) {
  for (auto prec : {kernels::Precision::f32, kernels::Precision::bf16}) {
    ModelConfig c = small_config(Arch::qwen3, 128);
    Transformer m(c);
    m.init_random(8, 0.2f);
    m.set_precision(prec);
    const int64_t V = c.vocab_size, P = 70, gen = 6;
    KvPool pool(c, 8, 64, prec == kernels::Precision::bf16 ? DType::bf16 : DType::f32);
    Rng r(3, 0);
    std::vector<int32_t> seq;
    for (int64_t i = 0; i < P + gen; ++i) seq.push_back(static_cast<int32_t>(r.next_u32() % V));
    std::vector<float> logits(V), decoded(V);
    SeqKv kv;
    auto step = [&](SeqKv& s, int64_t from, int64_t to, const kernels::AttnSegment* run, std::vector<int32_t> lead) {
      // rows: `lead` rows of another sequence (its first token), then s's positions from..to-1
      SeqKv other;
      pool.reserve(other, 1);
      pool.reserve(s, to - from);
      std::vector<int32_t> tok, pos;
      std::vector<const int32_t*> tables;
      for (int32_t t : lead) tok.push_back(t), pos.push_back(0), tables.push_back(other.blocks.data());
      for (int64_t p = from; p < to; ++p)
        tok.push_back(seq[p]), pos.push_back(static_cast<int32_t>(p)), tables.push_back(s.blocks.data());
      int64_t last = static_cast<int64_t>(tok.size()) - 1;
      kernels::AttnSegment shifted{};
      if (run) shifted = {run->start + static_cast<int64_t>(lead.size()), run->len, 0, 0};
      PagedStep st{static_cast<int64_t>(tok.size()), tok.data(), pos.data(), tables.data(), &last, 1, logits.data()};
      st.prompt_runs = run ? &shifted : nullptr;
      st.n_prompt_runs = run ? 1 : 0;
      m.forward_paged(st, pool);
      pool.advance(s, to - from);
      pool.release(other);
    };
    const kernels::AttnSegment prompt{0, P, 0, 0};
    step(kv, 0, P, &prompt, {});
    auto full = full_logits(m, std::vector<int32_t>(seq.begin(), seq.begin() + P));
    EXPECT_TRUE(all_close(logits, std::vector<double>(full.end() - V, full.end()),
                          tolerance(Kind::reduction, 64 * c.hidden_size)));
    for (int64_t p = P; p < P + gen; ++p) step(kv, p, p + 1, nullptr, {});
    decoded = logits;
    pool.release(kv);
    SeqKv again;
    step(again, 0, P + gen, &prompt, {4});
    EXPECT_EQ(logits, decoded) << (prec == kernels::Precision::bf16 ? "bf16" : "f32");
    pool.release(again);
    EXPECT_EQ(pool.free_blocks(), 64);
  }
}

// The pool's K and V rows sit on transparent huge pages once written, where the system's THP mode takes advice
// (decode attention reads blocks scattered over the pool; docs/PERFORMANCE.md); where the mode is `never`, skipped.
TEST(KvPool, RowsAreOnHugePagesWhereTheSystemAllows) {
  const std::string mode = thp_mode();
  if (mode.empty() || mode.find("[never]") != std::string::npos) GTEST_SKIP() << "THP mode: '" << mode << "'";
  const ModelConfig c = one_layer();
  KvPool pool(c, 16, 2048);  // 2048 blocks x 16 rows x 32 floats: 4 MiB of K, 4 of V
  SeqKv s;
  append(pool, s, 2048 * 16, 3);
  EXPECT_GT(anon_huge_kb(pool.k_block(0, 0)), 0) << "THP mode '" << mode << "'";
  EXPECT_GT(anon_huge_kb(pool.v_block(0, 0)), 0) << "THP mode '" << mode << "'";
  pool.release(s);
}

// A bf16 cache: every ISA's output equals, bit for bit, the f32 kernel over an f32 pool holding the
// same rounded rows (the widening is exact; the arithmetic is the same).
TEST(PagedAttention, Bf16CacheEqualsTheF32KernelOnTheRoundedRowsBitwiseEveryIsa) {
  for (auto [head_dim, block] : {std::pair<int64_t, int64_t>{16, 4}, {40, 4}, {64, 32}}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " block " + std::to_string(block));
    ModelConfig c = one_layer();
    c.head_dim = head_dim;
    const int64_t H = c.num_heads, Hkv = c.num_kv_heads, D = c.head_dim, row = Hkv * D;
    KvPool p16(c, block, 128 / block, DType::bf16), p32(c, block, 128 / block);
    SeqKv a16, a32;
    for (int64_t n : {13, 22}) {
      auto k = random_vec(n * row, 7 + n), v = random_vec(n * row, 70 + n);
      std::vector<float> kr(k.size()), vr(v.size());
      for (size_t i = 0; i < k.size(); ++i) {
        kr[i] = bf16_to_f32(f32_to_bf16(k[i]));
        vr[i] = bf16_to_f32(f32_to_bf16(v[i]));
      }
      p16.reserve(a16, n);
      p16.write(0, a16, n, k.data(), v.data(), row);
      p16.advance(a16, n);
      p32.reserve(a32, n);
      p32.write(0, a32, n, kr.data(), vr.data(), row);
      p32.advance(a32, n);
    }
    ASSERT_EQ(a16.blocks, a32.blocks);
    std::vector<int64_t> lens = {1, 13, 35};
    const int64_t n = 3;
    auto q = random_vec(n * H * D, 21);
    std::vector<const int32_t*> tables(n, a16.blocks.data());
    for_each_isa([&](Isa) {
      std::vector<float> o16(n * H * D, 5.f), o32(n * H * D, 6.f);
      kernels::paged_attention_fwd(attn_args(p32, n, H, D, q.data(), o32.data(), tables.data(), lens.data()));
      kernels::paged_attention_fwd(attn_args(p16, n, H, D, q.data(), o16.data(), tables.data(), lens.data()));
      EXPECT_EQ(o16, o32);
    });
  }
}

// Data-parallel training under MPI (run by ctest as `mpirun -np 2 --oversubscribe test_dist_mpi`):
// the collectives, then the claim of docs/ARCHITECTURE.md: N ranks with global batch B train the same
// weights as one process with batch B. Each rank runs the data-parallel trainer on MPI_COMM_WORLD
// and, beside it, a one-process trainer on the same problems; after 3 steps the two sets of weights
// agree to float summation order (tolerance below), and the ranks agree with each other bitwise.
// Every check is an EXPECT (an ASSERT would leave the other rank waiting in a collective).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "rl/letter_task.h"
#include "temper/core/memory_info.h"
#include "temper/core/thread_pool.h"
#include "temper/dist/communicator.h"
#include "temper/model/optimizer.h"
#include "temper/model/train_step.h"
#include "temper/rl/methods/stare.h"
#include "temper/rl/rl_trainer.h"

using namespace temper;
using namespace temper::rl;
using namespace temper::test;

namespace {

dist::Communicator& comm() { return dist::world(); }

// Largest |a - b| relative to the largest |a|.
double rel_diff(const float* a, const float* b, int64_t n) {
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(a[i])));
  }
  return worst / std::max(scale, 1e-30);
}

// The ranks hold bitwise-equal buffers: rank 0's copy is broadcast and compared.
bool same_on_all_ranks(const float* p, int64_t n) {
  std::vector<float> root(p, p + n);
  comm().broadcast(root.data(), n, 0);
  double differs = std::memcmp(root.data(), p, size_t(n) * sizeof(float)) != 0 ? 1 : 0;
  comm().allreduce_max(&differs, 1);
  return differs == 0;
}

}  // namespace

TEST(DistMpi, RunsOnTwoRanks) {
  EXPECT_STREQ(comm().backend(), "mpi");
  EXPECT_EQ(comm().size(), 2);
  EXPECT_EQ(comm().local_size(), 2);
}

TEST(DistMpi, Collectives) {
  const int r = comm().rank(), n = comm().size();
  std::vector<float> f = {1.f + r, 10.f * r, -2.f};
  comm().allreduce_sum(f.data(), 3);
  EXPECT_EQ(f, (std::vector<float>{float(n + n * (n - 1) / 2), 10.f * float(n * (n - 1) / 2), -2.f * n}));
  double d[2] = {0.5 * r, double(r)};
  comm().allreduce_sum(d, 2);
  EXPECT_DOUBLE_EQ(d[0], 0.5 * n * (n - 1) / 2);
  double m[2] = {double(r), -double(r)};
  comm().allreduce_max(m, 2);
  EXPECT_EQ(m[0], n - 1);
  EXPECT_EQ(m[1], 0);
  std::vector<float> b(5, float(r + 7));
  comm().broadcast(b.data(), 5, n - 1);
  EXPECT_EQ(b, std::vector<float>(5, float(n - 1 + 7)));
  std::string s = r == 0 ? std::string("from rank 0\0with a zero", 23) : "";
  comm().broadcast(s, 0);
  EXPECT_EQ(s, std::string("from rank 0\0with a zero", 23));
  std::vector<std::string> all = comm().allgather(std::string(size_t(r) * 3, char('a' + r)));  // rank 0 sends nothing
  ASSERT_EQ(all.size(), size_t(n));
  for (int k = 0; k < n; ++k) EXPECT_EQ(all[size_t(k)], std::string(size_t(k) * 3, char('a' + k)));
  // A buffer larger than one all-reduce bucket (64 MiB): 20M floats.
  std::vector<float> big(20'000'000, 1.f);
  big.back() = float(r);
  comm().allreduce_sum(big.data(), int64_t(big.size()));
  EXPECT_EQ(big[0], float(n));
  EXPECT_EQ(big[big.size() / 2], float(n));
  EXPECT_EQ(big.back(), float(n * (n - 1) / 2));
  comm().barrier();
}

// What ranks must hold alike but build on their own (a held base) is compared by digests: every rank learns which
// ranks differ from rank 0, none when all agree.
TEST(DistMpi, RanksUnlikeRootNamesEveryDifferingRank) {
  const int r = comm().rank(), n = comm().size();
  EXPECT_TRUE(dist::ranks_unlike_root(comm(), "same").empty());
  std::vector<int> odd;
  for (int k = 1; k < n; k += 2) odd.push_back(k);
  EXPECT_EQ(dist::ranks_unlike_root(comm(), r % 2 ? "odd" : "even"), odd);
}

// ZeRO-1's collectives over a buffer of two buckets and a bit (the second bucket split unevenly): every rank's
// pieces cover the buffer once; reduce-scatter sums this rank's pieces; all-gather and gather assemble them.
TEST(DistMpi, ShardedCollectives) {
  const int r = comm().rank(), n = comm().size();
  const int64_t N = 2 * dist::Communicator::kShardBucket + 7;
  int64_t mine = 0;
  for (const auto& [off, len] : comm().pieces(N)) mine += len;
  EXPECT_NEAR(static_cast<double>(mine), static_cast<double>(N) / n, 3.0);  // about 1/N of the buffer
  std::vector<float> g(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) g[static_cast<size_t>(i)] = float(r + 1) * float(i % 1000);
  comm().reduce_scatter_sum(g.data(), N);
  std::vector<float> packed;
  for (const auto& [off, len] : comm().pieces(N))
    for (int64_t i = off; i < off + len; ++i) {
      EXPECT_EQ(g[static_cast<size_t>(i)], float(n * (n + 1) / 2) * float(i % 1000)) << i;
      packed.push_back(-float(i));
    }
  std::vector<float> full(r == 0 ? static_cast<size_t>(N) : 0, 1.f);
  comm().gather_pieces(packed.data(), r == 0 ? full.data() : nullptr, N, 0);
  if (r == 0) {
    for (int64_t i = 0; i < N; i += 9973) EXPECT_EQ(full[static_cast<size_t>(i)], -float(i)) << i;
  }
  std::vector<float> w(static_cast<size_t>(N), 0.f);
  for (const auto& [off, len] : comm().pieces(N))
    for (int64_t i = off; i < off + len; ++i) w[static_cast<size_t>(i)] = float(i % 777);
  comm().allgather_pieces(w.data(), N);
  for (int64_t i = 0; i < N; i += 4099) EXPECT_EQ(w[static_cast<size_t>(i)], float(i % 777)) << i;
  EXPECT_EQ(w.back(), float((N - 1) % 777));
}

// The RL step: GRPO with the KL term and its reference model, two mini-batches of micro-batches (rows
// of mixed lengths), dynamic sampling, and STARE (batch-wide entropy quantiles and a controller).
TEST(DistMpi, RlStepsEqualOneProcessWithTheSameGlobalBatch) {
  set_num_threads(1);
  RlConfig c = config();
  c.prompts_per_step = 6;
  c.group_size = 4;
  c.max_new = 8;
  c.mini_batches = 2;
  c.micro_batch = 3;
  c.loss.kl_coef = 0.05;
  c.dynamic_sampling = true;
  StareConfig sc;
  sc.control = StareControl::band;
  auto run = [&](dist::Communicator* cm, std::vector<Metrics>& ms, int64_t micro = 3) {
    auto s = std::make_unique<RlSetup>();
    c.micro_batch = micro;
    s->task->uniform_ = true;  // every third problem scores 1 for every sample: dropped, more drawn
    Transformer reference(s->cfg);
    std::copy(s->model.params(), s->model.params() + s->model.flat_size(), reference.params());
    reference.params_updated();
    Stare stare(sc);
    RlTrainer t(s->model, s->task, codec(), c, s->safe, {&stare}, &reference);
    t.set_communicator(cm);
    for (int i = 0; i < 3; ++i) ms.push_back(t.step());
    return s;
  };
  std::vector<Metrics> dp, one;
  auto a = run(&comm(), dp);
  auto b = run(nullptr, one);
  std::vector<Metrics> regrouped;
  auto g = run(nullptr, regrouped, 4);  // one process, micro-batches of 4 rows: the same sums in another order
  const int64_t n = a->model.flat_size();
  std::printf("regrouped %.3g\n", rel_diff(b->model.params(), g->model.params(), n));
  // Tolerance 5e-5 of the largest weight. The runs sample the same tokens but differ in float
  // rounding twice: the rollout engine's batch holds 12 rows per rank instead of 24, so the recorded
  // log-probs differ by up to 1e-6 (ulps of values ~-4); and gradients are summed in another order
  // (each rank its rows, then MPI the ranks; micro-batches group other rows). AdamW divides each
  // element's step by sqrt(v), so elements whose gradient nearly cancels carry the rounding into the
  // weights at the size of a step (lr 3e-3). Measured (2 cores, this test): 8.9e-6; regrouping the
  // micro-batches of one process (1, 2, 4, 6, 12 rows instead of 3) alone gives 6e-7 to 2.5e-6; the
  // three steps move the weights by 1.8e-2 of the largest.
  double d = rel_diff(b->model.params(), a->model.params(), n);
  std::printf("rank %d: weights after 3 steps, data-parallel vs one process: max relative difference %.3g\n", comm().rank(), d);
  EXPECT_LT(d, 5e-5);
  const double moved = rel_diff(a->model.params(), RlSetup().model.params(), n);
  std::printf("rank %d: the 3 steps moved the weights by %.3g of the largest\n", comm().rank(), moved);
  EXPECT_GT(moved, 1e-3) << "the steps changed the weights";
  EXPECT_TRUE(same_on_all_ranks(a->model.params(), n)) << "every rank applies the same update";
  for (size_t i = 0; i < dp.size(); ++i)
    for (const char* k : {"reward_mean", "accuracy", "sequences", "prompts_drawn", "groups_dropped", "train_tokens", "updates",
                          "response_len_mean"}) {
      EXPECT_EQ(value(dp[i], k), value(one[i], k)) << k << " at step " << i;
    }
  for (size_t i = 0; i < dp.size(); ++i)
    for (const char* k : {"loss", "kl", "grad_norm", "entropy", "clip_frac", "ratio_mean", "stare_w", "stare_entropy"})
      EXPECT_NEAR(value(dp[i], k), value(one[i], k), 1e-5 * (1 + std::fabs(value(one[i], k)))) << k << " at step " << i;
  EXPECT_GT(value(one[1], "groups_dropped"), 0) << "dynamic sampling dropped uniform groups";
  set_num_threads(default_num_threads());
}

// The SFT step: the batch split in contiguous blocks, the loss normalised by the whole batch.
TEST(DistMpi, SftStepsEqualOneProcess) {
  set_num_threads(1);
  const int64_t B = 7, T = 12;  // an odd batch: the ranks' blocks differ in size
  std::vector<int32_t> tokens(size_t(B * T));
  std::vector<float> mask(size_t(B * (T - 1)));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + 3) % 50);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i % 5) ? 1.f : 0.f;
  TrainConfig tc;
  tc.lr.peak = 1e-3;
  tc.micro_batch = 2;
  std::vector<double> loss[2];
  std::unique_ptr<RlSetup> s[2];
  for (int k = 0; k < 2; ++k) {
    s[k] = std::make_unique<RlSetup>();
    Trainer tr(s[k]->model, tc);
    if (k == 0) tr.optimizer().set_communicator(&comm());
    for (int i = 0; i < 3; ++i) loss[k].push_back(tr.step(tokens.data(), mask.data(), B, T).loss);
  }
  const int64_t n = s[0]->model.flat_size();
  EXPECT_LT(rel_diff(s[1]->model.params(), s[0]->model.params(), n), 1e-5);
  EXPECT_TRUE(same_on_all_ranks(s[0]->model.params(), n));
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(loss[0][size_t(i)], loss[1][size_t(i)], 1e-6 * loss[1][size_t(i)]);
  set_num_threads(default_num_threads());
}

// ---- ZeRO-2 (Optimizer::set_sharded(true, true)): the gradients sharded as the backward finishes each range ----

namespace {

// The SFT batch of SftStepsEqualOneProcess with B rows: each rank trains its block (dist::shard) in micro-batches.
struct SftBatch {
  int64_t B, T = 12;
  std::vector<int32_t> tokens;
  std::vector<float> mask;
  explicit SftBatch(int64_t b) : B(b), tokens(size_t(b * 12)), mask(size_t(b * 11)) {
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + 3) % 50);
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i % 5) ? 1.f : 0.f;
  }
};

enum class Sharding { none, zero1, zero2 };

// 3 SFT steps on a fresh RlSetup model: one process (Sharding::none, comm null) or data-parallel over comm().
std::unique_ptr<RlSetup> sft_run(const SftBatch& b, int64_t micro_batch, Sharding sh, bool recompute = false,
                                 std::vector<float>* full_m = nullptr) {
  auto s = std::make_unique<RlSetup>();
  s->model.set_recompute(recompute);
  TrainConfig tc;
  tc.lr.peak = 1e-3;
  tc.micro_batch = micro_batch;
  Trainer tr(s->model, tc);
  if (sh != Sharding::none) {
    tr.optimizer().set_communicator(&comm());
    tr.optimizer().set_sharded(true, sh == Sharding::zero2);
  }
  for (int i = 0; i < 3; ++i) tr.step(b.tokens.data(), b.mask.data(), b.B, b.T);
  if (full_m && tr.optimizer().sharded()) {
    tr.optimizer().gather_moments(0);
    const float* m = tr.optimizer().full_m();
    if (comm().rank() == 0) full_m->assign(m, m + s->model.flat_size());
  }
  return s;
}

// The whole pages of [p, p + n) resident in memory now (mincore).
int64_t resident_pages(const float* p, int64_t n) {
  const PageSpan s = whole_pages_in(p, size_t(n) * sizeof(float));
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> v(size_t((s.end - s.begin) / page));
  if (v.empty() || mincore(s.begin, size_t(s.end - s.begin), v.data()) != 0) return -1;
  int64_t r = 0;
  for (unsigned char c : v) r += c & 1;
  return r;
}

}  // namespace

// One micro-batch a rank: the same sums in the same order as ZeRO-1 (each range reduce-scattered once, the norm and
// AdamW over the same pieces), so the weights and the gathered moments are bitwise ZeRO-1's; with recompute too.
TEST(DistMpi, ShardedGradientsEqualZero1Bitwise) {
  set_num_threads(1);
  const SftBatch b(6);
  std::vector<float> m1, m2;
  auto z1 = sft_run(b, 0, Sharding::zero1, false, &m1);
  auto z2 = sft_run(b, 0, Sharding::zero2, false, &m2);
  auto z2r = sft_run(b, 0, Sharding::zero2, true);
  const int64_t n = z1->model.flat_size();
  EXPECT_EQ(std::memcmp(z1->model.params(), z2->model.params(), size_t(n) * sizeof(float)), 0)
      << "ZeRO-2 vs ZeRO-1: max relative difference " << rel_diff(z1->model.params(), z2->model.params(), n);
  EXPECT_EQ(std::memcmp(z1->model.params(), z2r->model.params(), size_t(n) * sizeof(float)), 0)
      << "ZeRO-2 with recompute vs ZeRO-1: max relative difference "
      << rel_diff(z1->model.params(), z2r->model.params(), n);
  if (comm().rank() == 0) {
    ASSERT_EQ(m1.size(), size_t(n));
    ASSERT_EQ(m2.size(), size_t(n));
    EXPECT_EQ(std::memcmp(m1.data(), m2.data(), size_t(n) * sizeof(float)), 0) << "the gathered first moments";
  }
  EXPECT_GT(rel_diff(z2->model.params(), RlSetup().model.params(), n), 1e-4) << "the steps changed the weights";
  EXPECT_TRUE(same_on_all_ranks(z2->model.params(), n));
  set_num_threads(default_num_threads());
}

// Micro-batches: 5 rows in blocks of 2 and 3, micro-batches of 2, so rank 0 runs one backward an update and rank 1
// two (rank 0 joins the second's reductions with zeros). Each backward's gradients are summed over ranks and added
// into the shard: another order than one process or ZeRO-1 (which sum a rank's micro-batches first), within the
// data-parallel tolerance of SftStepsEqualOneProcess (measured: 1.2e-7, ZeRO-1 1.6e-7). Dropping a micro-batch's share
// (copying into the shard instead of adding) moves the weights by 6e-3: this test fails then.
TEST(DistMpi, ShardedGradientsAddMicroBatches) {
  set_num_threads(1);
  const SftBatch b(5);
  auto one = sft_run(b, 2, Sharding::none);
  auto z1 = sft_run(b, 2, Sharding::zero1);
  auto z2 = sft_run(b, 2, Sharding::zero2);
  const int64_t n = one->model.flat_size();
  const double d = rel_diff(one->model.params(), z2->model.params(), n);
  std::printf("rank %d: ZeRO-2 with 2 micro-batches vs one process: %.3g (ZeRO-1 %.3g)\n", comm().rank(), d,
              rel_diff(one->model.params(), z1->model.params(), n));
  EXPECT_LT(d, 1e-5);
  EXPECT_LT(rel_diff(z1->model.params(), z2->model.params(), n), 1e-5);
  EXPECT_TRUE(same_on_all_ranks(z2->model.params(), n));
  set_num_threads(default_num_threads());
}

// The gradient buffer really is sharded: after an update's backward a ZeRO-2 rank holds none of the flat gradient
// buffer's whole pages (each range's were given back once reduced) and a shard of about half the gradient; a ZeRO-1
// rank holds every page until the step. The model is the test model with 4 layers of C = 256 (~1 MiB a layer).
TEST(DistMpi, ShardedGradientsGiveThePagesBack) {
  set_num_threads(1);
  ModelConfig c = test::small_config(Arch::llama, 64);
  c.hidden_size = 256, c.intermediate_size = 512, c.num_layers = 4, c.head_dim = 32, c.num_heads = 8;
  c.num_kv_heads = 4;
  std::vector<int32_t> tok(2 * 16), tgt(2 * 16, -1);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = int32_t((i * 5 + 1) % 100);
  for (size_t i = 0; i + 1 < tok.size(); ++i) tgt[i] = tok[i + 1];
  std::vector<float> mask(tok.size(), 1.f), lp(tok.size()), ent(tok.size());
  int64_t pages[2] = {0, 0}, total = 0;
  for (int zero2 = 0; zero2 < 2; ++zero2) {
    RlSetup s(c, 5);
    Optimizer opt(s.model, OptimizerConfig{});
    opt.set_communicator(&comm());
    opt.set_sharded(true, zero2 == 1);
    opt.zero_grad();
    MaskedCrossEntropy loss(mask.data(), double(tok.size()));
    s.model.forward_backward(tok.data(), tgt.data(), 2, 16, loss, lp.data(), ent.data());
    const int64_t n = s.model.flat_size();
    const PageSpan whole = whole_pages_in(s.model.grads(), size_t(n) * sizeof(float));
    total = (whole.end - whole.begin) / sysconf(_SC_PAGESIZE);
    pages[zero2] = resident_pages(s.model.grads(), n);
    EXPECT_NEAR(double(opt.size()), double(n) / comm().size(), 64.0) << "moments: this rank's pieces";
    const OptimizerStep st = opt.step();
    EXPECT_GT(st.grad_norm, 0);
    EXPECT_TRUE(same_on_all_ranks(s.model.params(), n));
    if (zero2) {
      EXPECT_LE(resident_pages(s.model.grads(), n), int64_t(s.model.layout().ranges().size()) + 1);
    }
  }
  std::printf("rank %d: the gradient buffer's %lld whole pages: resident after the backward ZeRO-1 %lld, ZeRO-2 %lld\n",
              comm().rank(), static_cast<long long>(total), static_cast<long long>(pages[0]),
              static_cast<long long>(pages[1]));
  ASSERT_GT(total, 1000);
  EXPECT_GE(pages[0], total - 1) << "ZeRO-1 holds the whole gradient";
  EXPECT_LE(pages[1], 8) << "ZeRO-2: the ranges' pages given back (their partial edge pages may stay)";
  set_num_threads(default_num_threads());
}

// A backward outside an update (after step(), before the next zero_grad) would open a reduction round that ranks
// without one never join: it is refused on the rank that runs it, before any collective. A skipped update (non-finite
// loss) closes the update too.
TEST(DistMpi, ShardedGradientsRefuseABackwardOutsideAnUpdate) {
  set_num_threads(1);
  RlSetup s;
  Optimizer opt(s.model, OptimizerConfig{});
  opt.set_communicator(&comm());
  opt.set_sharded(true, true);
  std::vector<int32_t> tok(12), tgt(12, -1);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = int32_t((i * 7 + 3) % 50);
  for (size_t i = 0; i + 1 < tok.size(); ++i) tgt[i] = tok[i + 1];
  std::vector<float> mask(tok.size(), 1.f), lp(tok.size()), ent(tok.size());
  MaskedCrossEntropy loss(mask.data(), double(tok.size()));
  auto backward = [&] { s.model.forward_backward(tok.data(), tgt.data(), 1, 12, loss, lp.data(), ent.data()); };
  opt.zero_grad();
  backward();
  opt.step();
  EXPECT_THROW(backward(), Error) << "after step(): outside an update";
  opt.zero_grad();
  backward();
  opt.gradients_done();
  opt.skip();
  EXPECT_THROW(backward(), Error) << "after skip(): outside an update";
  set_num_threads(default_num_threads());
}

// Harness entries for the fused classifier (log-prob, entropy, gradient; chunked) and AdamW/clipping.
#include <cmath>

#include "common/log_softmax_ref.h"
#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/core/error.h"
#include "temper/kernels/adamw.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/ref/adamw_ref.h"
#include "temper/kernels/ref/classifier_ref.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

namespace {
struct FixedCoefs : ClassifierLoss {
  const std::vector<float>* g_lp;
  const std::vector<float>* g_ent;
  void coefs(int64_t n, float, float, float* a, float* b) const override {
    *a = (*g_lp)[n];
    *b = (*g_ent)[n];
  }
};
}  // namespace

TEST(OpClassifier, FusedMatchesReferenceEveryIsaAndChunking) {
  int64_t N = 23, C = 24, V = 301;
  auto h = random_vec(N * C, 61), w = random_vec(V * C, 62, 0.5f);
  auto g_lp = random_vec(N, 63), g_ent = random_vec(N, 64, 0.3f);
  std::vector<int32_t> tgt(N);
  for (int64_t n = 0; n < N; ++n) tgt[n] = n == 5 ? -1 : int32_t((n * 97) % V);
  auto hd = to_f64(h), wd = to_f64(w), glpd = to_f64(g_lp), gentd = to_f64(g_ent);
  std::vector<double> lp_ref(N), H_ref(N), dh_ref(N * C, 0.0), dw_ref(V * C, 0.0);
  ref::classifier(hd.data(), wd.data(), tgt.data(), N, C, V, lp_ref.data(), H_ref.data(), glpd.data(), gentd.data(),
                  dh_ref.data(), dw_ref.data());
  auto loss = [&] {
    std::vector<double> lp(N), H(N);
    ref::classifier<double>(hd.data(), wd.data(), tgt.data(), N, C, V, lp.data(), H.data(), nullptr, nullptr, nullptr,
                            nullptr);
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += glpd[n] * lp[n] + gentd[n] * H[n];
    return s;
  };
  EXPECT_TRUE(fd_check(hd, dh_ref, loss));
  EXPECT_TRUE(fd_check(wd, dw_ref, loss));
  FixedCoefs coefs;
  coefs.g_lp = &g_lp;
  coefs.g_ent = &g_ent;
  for_each_isa([&](Isa) {
    for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{7}}) {
      SCOPED_TRACE("chunk_rows=" + std::to_string(chunk));
      std::vector<float> lp(N), H(N), dh(N * C, 3.f), dw(V * C, 0.5f);  // dh overwritten, dw accumulated
      ClassifierArgs a;
      a.h = h.data(); a.w = w.data(); a.targets = tgt.data(); a.N = N; a.C = C; a.V = V;
      a.logprob = lp.data(); a.entropy = H.data(); a.loss = &coefs; a.dh = dh.data(); a.dw = dw.data();
      a.chunk_rows = chunk;
      classifier_fused(a);
      for (auto& x : dw) x -= 0.5f;
      EXPECT_TRUE(all_close(lp, lp_ref, tolerance(Kind::reduction, V)));
      EXPECT_TRUE(all_close(H, H_ref, tolerance(Kind::reduction, V)));
      EXPECT_TRUE(all_close(dh, dh_ref, tolerance(Kind::reduction, V)));
      EXPECT_TRUE(all_close(dw, dw_ref, tolerance(Kind::reduction, N)));
    }
  });
}

namespace {
// Runs the fused classifier with `loss` on every ISA, whole and in chunks of 4 rows, and compares dh, dw and
// what the loss observed per row (written by it into `observed`) with the double-precision references.
void expect_fused_matches(const std::vector<float>& h, const std::vector<float>& w, const std::vector<int32_t>& tgt, int64_t N,
                          int64_t C, int64_t V, const ClassifierLoss& loss, std::vector<float>& observed,
                          const std::vector<double>& dh_ref, const std::vector<double>& dw_ref, const std::vector<double>& observed_ref) {
  for_each_isa([&](Isa) {
    for (int64_t chunk : {int64_t{0}, int64_t{4}}) {
      SCOPED_TRACE("chunk_rows=" + std::to_string(chunk));
      std::vector<float> lp(N), H(N), dh(N * C), dw(V * C, 0.f);
      observed.assign(static_cast<size_t>(N), 0.f);
      ClassifierArgs a;
      a.h = h.data(); a.w = w.data(); a.targets = tgt.data(); a.N = N; a.C = C; a.V = V;
      a.logprob = lp.data(); a.entropy = H.data(); a.loss = &loss; a.dh = dh.data(); a.dw = dw.data();
      a.chunk_rows = chunk;
      classifier_fused(a);
      EXPECT_TRUE(all_close(dh, dh_ref, tolerance(Kind::reduction, V)));
      EXPECT_TRUE(all_close(dw, dw_ref, tolerance(Kind::reduction, N)));
      EXPECT_TRUE(all_close(observed, observed_ref, tolerance(Kind::reduction, V)));
    }
  });
}

// Fixed coefficients plus a soft target (K ids per row, rows with n % 4 == 3 have none).
struct SoftCoefs : FixedCoefs {
  int64_t K = 0;
  const std::vector<int32_t>* ids;
  const std::vector<float>* q;
  const std::vector<float>* coef;
  mutable std::vector<float> ce;
  bool soft_target(int64_t n, SoftTarget* st) const override {
    if (n % 4 == 3) return false;
    st->K = K, st->ids = ids->data() + n * K, st->probs = q->data() + n * K, st->coef = (*coef)[static_cast<size_t>(n)];
    return true;
  }
  void soft_observed(int64_t n, float x) const override { ce[static_cast<size_t>(n)] = x; }
};
}  // namespace

TEST(OpClassifier, SoftTargetsAddForwardKlCrossEntropyWithFiniteDifferenceGradients) {
  int64_t N = 13, C = 16, V = 97, K = 5;
  auto h = random_vec(N * C, 71), w = random_vec(V * C, 72, 0.5f);
  auto g_lp = random_vec(N, 73), g_ent = random_vec(N, 74, 0.3f), coef = random_vec(N, 75);
  std::vector<int32_t> tgt(N), ids(N * K);
  std::vector<float> q(N * K);
  for (int64_t n = 0; n < N; ++n) {
    tgt[n] = n == 2 ? -1 : int32_t((n * 31) % V);
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) ids[n * K + k] = int32_t((n * 7 + k * 13) % V), q[n * K + k] = 1.f + float(k), sum += 1.f + float(k);
    for (int64_t k = 0; k < K; ++k) q[n * K + k] *= 0.9f / sum;  // a top-K keeps 90% of the mass
  }
  auto hd = to_f64(h), wd = to_f64(w), glpd = to_f64(g_lp), gentd = to_f64(g_ent);
  // Reference in double: the target/entropy part from ref::classifier, the soft part by hand.
  auto logits = [&](const std::vector<double>& hh, const std::vector<double>& ww, int64_t n, std::vector<double>& lp) {
    log_softmax_row(hh, ww, n, C, V, lp);
  };
  auto loss = [&] {
    std::vector<double> lp(N), H(N), row;
    ref::classifier<double>(hd.data(), wd.data(), tgt.data(), N, C, V, lp.data(), H.data(), nullptr, nullptr, nullptr, nullptr);
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      s += glpd[n] * lp[n] + gentd[n] * H[n];
      if (n % 4 == 3) continue;
      logits(hd, wd, n, row);
      for (int64_t k = 0; k < K; ++k) s -= double(coef[n]) * double(q[n * K + k]) * row[ids[n * K + k]];
    }
    return s;
  };
  std::vector<double> lp_ref(N), H_ref(N), dh_ref(N * C, 0.0), dw_ref(V * C, 0.0), ce_ref(N, 0.0), row;
  ref::classifier(hd.data(), wd.data(), tgt.data(), N, C, V, lp_ref.data(), H_ref.data(), glpd.data(), gentd.data(),
                  dh_ref.data(), dw_ref.data());
  for (int64_t n = 0; n < N; ++n) {
    if (n % 4 == 3) continue;
    logits(hd, wd, n, row);
    std::vector<double> dz(V);
    double mass = 0;
    for (int64_t k = 0; k < K; ++k) mass += q[n * K + k], ce_ref[n] -= double(q[n * K + k]) * row[ids[n * K + k]];
    for (int64_t v = 0; v < V; ++v) dz[v] = double(coef[n]) * mass * std::exp(row[v]);
    for (int64_t k = 0; k < K; ++k) dz[ids[n * K + k]] -= double(coef[n]) * q[n * K + k];
    for (int64_t v = 0; v < V; ++v)
      for (int64_t c = 0; c < C; ++c) dh_ref[n * C + c] += dz[v] * wd[v * C + c], dw_ref[v * C + c] += dz[v] * hd[n * C + c];
  }
  EXPECT_TRUE(fd_check(hd, dh_ref, loss));
  EXPECT_TRUE(fd_check(wd, dw_ref, loss));
  SoftCoefs coefs;
  coefs.g_lp = &g_lp, coefs.g_ent = &g_ent, coefs.K = K, coefs.ids = &ids, coefs.q = &q, coefs.coef = &coef;
  expect_fused_matches(h, w, tgt, N, C, V, coefs, coefs.ce, dh_ref, dw_ref, ce_ref);
}

namespace {
// Fixed coefficients plus a reverse-KL target on every row but n % 3 == 1.
struct ReverseCoefs : FixedCoefs {
  const std::vector<float>* logq;
  const std::vector<float>* coef;
  int64_t V = 0;
  mutable std::vector<float> kl;
  bool reverse_kl_target(int64_t n, ReverseKlTarget* r) const override {
    if (n % 3 == 1) return false;
    r->logq = logq->data() + n * V, r->coef = (*coef)[static_cast<size_t>(n)];
    return true;
  }
  void reverse_kl_observed(int64_t n, float x) const override { kl[static_cast<size_t>(n)] = x; }
};
}  // namespace

TEST(OpClassifier, ReverseKlTargetsWithFiniteDifferenceGradients) {
  int64_t N = 11, C = 16, V = 61;
  auto h = random_vec(N * C, 81), w = random_vec(V * C, 82, 0.5f);
  auto g_lp = random_vec(N, 83), g_ent = random_vec(N, 84, 0.3f), coef = random_vec(N, 85);
  auto raw = random_vec(N * V, 86, 2.f);
  std::vector<int32_t> tgt(N);
  std::vector<float> logq(N * V);
  for (int64_t n = 0; n < N; ++n) {
    tgt[n] = n == 4 ? -1 : int32_t((n * 17) % V);
    double m = -1e30, se = 0;
    for (int64_t v = 0; v < V; ++v) m = std::max(m, double(raw[n * V + v]));
    for (int64_t v = 0; v < V; ++v) se += std::exp(double(raw[n * V + v]) - m);
    for (int64_t v = 0; v < V; ++v) logq[n * V + v] = float(double(raw[n * V + v]) - m - std::log(se));
  }
  auto hd = to_f64(h), wd = to_f64(w), glpd = to_f64(g_lp), gentd = to_f64(g_ent);
  auto logp_row = [&](const std::vector<double>& hh, const std::vector<double>& ww, int64_t n, std::vector<double>& lp) {
    log_softmax_row(hh, ww, n, C, V, lp);
  };
  auto loss = [&] {
    std::vector<double> lp(N), H(N), row;
    ref::classifier<double>(hd.data(), wd.data(), tgt.data(), N, C, V, lp.data(), H.data(), nullptr, nullptr, nullptr, nullptr);
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      s += glpd[n] * lp[n] + gentd[n] * H[n];
      if (n % 3 == 1) continue;
      logp_row(hd, wd, n, row);
      for (int64_t v = 0; v < V; ++v) s += double(coef[n]) * std::exp(row[v]) * (row[v] - double(logq[n * V + v]));
    }
    return s;
  };
  std::vector<double> lp_ref(N), H_ref(N), dh_ref(N * C, 0.0), dw_ref(V * C, 0.0), kl_ref(N, 0.0), row;
  ref::classifier(hd.data(), wd.data(), tgt.data(), N, C, V, lp_ref.data(), H_ref.data(), glpd.data(), gentd.data(),
                  dh_ref.data(), dw_ref.data());
  for (int64_t n = 0; n < N; ++n) {
    if (n % 3 == 1) continue;
    logp_row(hd, wd, n, row);
    for (int64_t v = 0; v < V; ++v) kl_ref[n] += std::exp(row[v]) * (row[v] - double(logq[n * V + v]));
    for (int64_t v = 0; v < V; ++v) {
      const double dz = double(coef[n]) * std::exp(row[v]) * (row[v] - double(logq[n * V + v]) - kl_ref[n]);
      for (int64_t c = 0; c < C; ++c) dh_ref[n * C + c] += dz * wd[v * C + c], dw_ref[v * C + c] += dz * hd[n * C + c];
    }
  }
  EXPECT_TRUE(fd_check(hd, dh_ref, loss));
  EXPECT_TRUE(fd_check(wd, dw_ref, loss));
  ReverseCoefs coefs;
  coefs.g_lp = &g_lp, coefs.g_ent = &g_ent, coefs.logq = &logq, coefs.coef = &coef, coefs.V = V;
  expect_fused_matches(h, w, tgt, N, C, V, coefs, coefs.kl, dh_ref, dw_ref, kl_ref);
}

TEST(OpClassifier, Bf16WithPreRoundedWeights) {
  int64_t N = 40, C = 32, V = 500;
  auto h = random_vec(N * C, 67), w = random_vec(V * C, 68, 0.3f), g_lp = random_vec(N, 69), g_ent = random_vec(N, 70);
  std::vector<int32_t> tgt(N);
  for (int64_t n = 0; n < N; ++n) tgt[n] = int32_t((n * 31) % V);
  std::vector<double> lp_ref(N), H_ref(N), dh_ref(N * C, 0.0), dw_ref(V * C, 0.0);
  auto hd = to_f64(h), wd = to_f64(w), glpd = to_f64(g_lp), gentd = to_f64(g_ent);
  ref::classifier(hd.data(), wd.data(), tgt.data(), N, C, V, lp_ref.data(), H_ref.data(), glpd.data(), gentd.data(),
                  dh_ref.data(), dw_ref.data());
  std::vector<uint16_t> w16(V * C);
  convert_to_bf16(w.data(), w16.data(), V * C);
  FixedCoefs coefs;
  coefs.g_lp = &g_lp;
  coefs.g_ent = &g_ent;
  for (const uint16_t* pre : {static_cast<const uint16_t*>(nullptr), static_cast<const uint16_t*>(w16.data())}) {
    std::vector<float> lp(N), H(N), dh(N * C), dw(V * C, 0.f);
    ClassifierArgs a;
    a.h = h.data(); a.w = w.data(); a.w_bf16 = pre; a.targets = tgt.data(); a.N = N; a.C = C; a.V = V;
    a.logprob = lp.data(); a.entropy = H.data(); a.loss = &coefs; a.dh = dh.data(); a.dw = dw.data();
    a.precision = Precision::bf16;
    a.chunk_rows = 16;
    classifier_fused(a);
    EXPECT_TRUE(all_close(lp, lp_ref, tolerance(Kind::bf16, C)));
    EXPECT_TRUE(all_close(H, H_ref, tolerance(Kind::bf16, C)));
    EXPECT_TRUE(all_close(dh, dh_ref, tolerance(Kind::bf16, V)));
    // dW = dZ^T h rounds both operands (dZ is computed in f32 then rounded): products carry up to
    // twice the single-rounding error the bf16 row of the table assumes.
    EXPECT_TRUE(all_close(dw, dw_ref, tolerance(Kind::bf16, N, 2.0)));
  }
}

TEST(OpClassifier, ForwardOnlyAndTargetOutOfRange) {
  int64_t N = 3, C = 4, V = 5;
  auto h = random_vec(N * C, 65), w = random_vec(V * C, 66);
  std::vector<int32_t> tgt = {0, 4, 2};
  std::vector<float> lp(N), H(N);
  ClassifierArgs a;
  a.h = h.data(); a.w = w.data(); a.targets = tgt.data(); a.N = N; a.C = C; a.V = V;
  a.logprob = lp.data(); a.entropy = H.data();
  classifier_fused(a);
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_LT(lp[n], 0.f);
    EXPECT_GT(H[n], 0.f);
    EXPECT_LE(H[n], std::log(float(V)) + 1e-5f);
  }
  tgt[1] = 5;
  EXPECT_THROW(classifier_fused(a), temper::Error);
}

// Gemma-2's final-logit soft-capping: z = tanh(z / cap) * cap before the log-softmax, the gradient chained
// through it. Logits here have std ~2.4 against cap 3, so the cap bends most of them.
TEST(OpClassifier, SoftcapMatchesReferenceWithFiniteDifferenceGradients) {
  int64_t N = 13, C = 24, V = 301;
  const float cap = 3.f;
  auto h = random_vec(N * C, 161), w = random_vec(V * C, 162, 0.5f);
  auto g_lp = random_vec(N, 163), g_ent = random_vec(N, 164, 0.3f);
  std::vector<int32_t> tgt(N);
  for (int64_t n = 0; n < N; ++n) tgt[n] = n == 4 ? -1 : int32_t((n * 89) % V);
  auto hd = to_f64(h), wd = to_f64(w), glpd = to_f64(g_lp), gentd = to_f64(g_ent);
  std::vector<double> lp_ref(N), H_ref(N), dh_ref(N * C, 0.0), dw_ref(V * C, 0.0);
  ref::classifier(hd.data(), wd.data(), tgt.data(), N, C, V, lp_ref.data(), H_ref.data(), glpd.data(), gentd.data(),
                  dh_ref.data(), dw_ref.data(), double(cap));
  auto loss = [&] {
    std::vector<double> lp(N), H(N);
    ref::classifier<double>(hd.data(), wd.data(), tgt.data(), N, C, V, lp.data(), H.data(), nullptr, nullptr, nullptr,
                            nullptr, double(cap));
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += glpd[n] * lp[n] + gentd[n] * H[n];
    return s;
  };
  EXPECT_TRUE(fd_check(hd, dh_ref, loss));
  EXPECT_TRUE(fd_check(wd, dw_ref, loss));
  {  // the cap changes the values: without it the reference differs by far more than the tolerance
    std::vector<double> lp0(N), H0(N);
    ref::classifier<double>(hd.data(), wd.data(), tgt.data(), N, C, V, lp0.data(), H0.data(), nullptr, nullptr, nullptr,
                            nullptr);
    EXPECT_FALSE(all_close(lp0, lp_ref, 1e-2));
  }
  FixedCoefs coefs;
  coefs.g_lp = &g_lp;
  coefs.g_ent = &g_ent;
  for_each_isa([&](Isa) {
    for (int64_t chunk : {int64_t{0}, int64_t{5}}) {
      SCOPED_TRACE("chunk_rows=" + std::to_string(chunk));
      std::vector<float> lp(N), H(N), dh(N * C), dw(V * C, 0.f);
      ClassifierArgs a;
      a.h = h.data();
      a.w = w.data();
      a.targets = tgt.data();
      a.N = N;
      a.C = C;
      a.V = V;
      a.logprob = lp.data();
      a.entropy = H.data();
      a.loss = &coefs;
      a.dh = dh.data();
      a.dw = dw.data();
      a.chunk_rows = chunk;
      a.softcap = cap;
      classifier_fused(a);
      EXPECT_TRUE(all_close(lp, lp_ref, tolerance(Kind::reduction, V)));
      EXPECT_TRUE(all_close(H, H_ref, tolerance(Kind::reduction, V)));
      EXPECT_TRUE(all_close(dh, dh_ref, tolerance(Kind::reduction, V)));
      EXPECT_TRUE(all_close(dw, dw_ref, tolerance(Kind::reduction, N)));
    }
  });
  ClassifierArgs bad;
  std::vector<float> lp(N), H(N);
  bad.h = h.data();
  bad.w = w.data();
  bad.N = N;
  bad.C = C;
  bad.V = V;
  bad.logprob = lp.data();
  bad.entropy = H.data();
  bad.softcap = -1.f;
  EXPECT_THROW(classifier_fused(bad), temper::Error);
}

// The rollout caps its logits rows with softcap_rows and takes logit_row_stats: the same bits as the
// fused classifier's log-probs and entropies (V = 301: rows straddle the kernel's 16-wide blocks).
TEST(OpClassifier, SoftcapRowsGiveTheClassifiersStatisticsBitForBit) {
  int64_t N = 9, C = 24, V = 301;
  const float cap = 2.5f;
  auto h = random_vec(N * C, 171), w = random_vec(V * C, 172, 0.5f);
  std::vector<int32_t> tgt(N);
  for (int64_t n = 0; n < N; ++n) tgt[n] = int32_t((n * 53) % V);
  for_each_isa([&](Isa) {
    std::vector<float> lp(N), H(N);
    ClassifierArgs a;
    a.h = h.data();
    a.w = w.data();
    a.targets = tgt.data();
    a.N = N;
    a.C = C;
    a.V = V;
    a.logprob = lp.data();
    a.entropy = H.data();
    a.softcap = cap;
    classifier_fused(a);
    std::vector<float> z(N * V);
    gemm(false, true, N, V, C, h.data(), C, w.data(), C, 0.f, z.data(), V, Precision::f32);
    auto per_row = z;
    softcap_rows(z.data(), N * V, cap);  // the whole batch at once
    for (int64_t n = 0; n < N; ++n) softcap_rows(per_row.data() + n * V, V, cap);
    EXPECT_EQ(z, per_row);
    for (int64_t n = 0; n < N; ++n) {
      float lpr, Hr;
      logit_row_stats(z.data() + n * V, V, tgt[n], &lpr, &Hr);
      EXPECT_EQ(lpr, lp[n]) << "row " << n;
      EXPECT_EQ(Hr, H[n]) << "row " << n;
    }
    for (float v : z) ASSERT_LT(std::fabs(v), cap);
    std::vector<float> one = {30.f, -1e4f, 0.f, 1.f};  // saturates at +-cap; tanh(1/2.5) * 2.5
    softcap_rows(one.data(), 4, cap);
    EXPECT_EQ(one[0], cap);
    EXPECT_EQ(one[1], -cap);
    EXPECT_EQ(one[2], 0.f);
    EXPECT_NEAR(one[3], std::tanh(1.0 / 2.5) * 2.5, 3e-7);
    auto same = z;
    softcap_rows(same.data(), N * V, 0.f);  // 0: off
    EXPECT_EQ(same, z);
  });
}

TEST(OpAdamW, MatchesTorchFormulaEveryIsa) {
  int64_t n = 1037;
  auto p0 = random_vec(n, 71), g1 = random_vec(n, 72), g2 = random_vec(n, 73, 0.1f);
  AdamWConfig c{0.9f, 0.95f, 1e-8f, 0.1f};
  const float lr = 1e-2f;
  std::vector<double> pr = to_f64(p0), mr(n, 0.0), vr(n, 0.0);
  auto g1d = to_f64(g1), g2d = to_f64(g2);
  ref::adamw_step<double>(pr.data(), g1d.data(), mr.data(), vr.data(), n, 1e-2, 0.9, 0.95, 1e-8, 0.1, 1);
  ref::adamw_step<double>(pr.data(), g2d.data(), mr.data(), vr.data(), n, 1e-2, 0.9, 0.95, 1e-8, 0.1, 2);
  for_each_isa([&](Isa) {
    auto p = p0;
    std::vector<float> m(n, 0.f), v(n, 0.f);
    adamw_step(p.data(), g1.data(), m.data(), v.data(), n, c, lr, 1);
    adamw_step(p.data(), g2.data(), m.data(), v.data(), n, c, lr, 2);
    EXPECT_TRUE(all_close(p, pr, tolerance(Kind::elementwise, 1, 4.0)));
    EXPECT_TRUE(all_close(m, mr, tolerance(Kind::elementwise, 1, 4.0)));
    EXPECT_TRUE(all_close(v, vr, tolerance(Kind::elementwise, 1, 4.0)));
  });
}

TEST(OpAdamW, GradNormClipping) {
  int64_t n = 200003;
  auto g = random_vec(n, 81);
  double ref_norm = 0;
  for (float x : g) ref_norm += double(x) * x;
  ref_norm = std::sqrt(ref_norm);
  for_each_isa([&](Isa) {
    auto gg = g;
    double norm = clip_grad_norm(gg.data(), n, 1.0);
    EXPECT_NEAR(norm, ref_norm, 1e-6 * ref_norm);
    EXPECT_NEAR(grad_norm(gg.data(), n), 1.0, 1e-5);
    auto g2 = g;
    clip_grad_norm(g2.data(), n, 1e9);  // no clipping above the norm
    EXPECT_EQ(g2, g);
  });
}

// RCSD's reverse KL at a real model's vocabulary (SmolLM2's V = 49,152) on a tiny hidden size (C = 4): the fused
// classifier's reverse-KL target gives each row's KL(p || q) and its gradient coef * p (log p - log q - KL) through the
// logits to h and W as the fp64 reference does, the reference's gradient agrees with central finite differences of
// the KL (every h coordinate; the W rows with the largest gradients and a spread of the others), on every ISA and
// with one row per chunk (the classifier holds a chunk of rows' [V] logits at a time).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/log_softmax_ref.h"
#include "common/op_harness.h"
#include "common/tolerance.h"
#include "temper/kernels/classifier.h"

using namespace temper;
using namespace temper::kernels;
using namespace temper::test;

namespace {

constexpr int64_t N = 3, C = 4, V = 49152;

struct ReverseOnly : ClassifierLoss {  // no policy-gradient or entropy term: the reverse KL alone
  const std::vector<float>* logq = nullptr;
  std::vector<float> coef;
  mutable std::vector<float> kl = std::vector<float>(N, 0.f);
  void coefs(int64_t, float, float, float* g_lp, float* g_ent) const override { *g_lp = 0.f, *g_ent = 0.f; }
  bool reverse_kl_target(int64_t n, ReverseKlTarget* r) const override {
    r->logq = logq->data() + n * V, r->coef = coef[static_cast<size_t>(n)];
    return true;
  }
  void reverse_kl_observed(int64_t n, float x) const override { kl[static_cast<size_t>(n)] = x; }
};

}  // namespace

TEST(RcsdLargeVocab, ReverseKlAndItsGradientAtV49152MatchTheReferenceAndFiniteDifferences) {
  // Student logits h W^T with a peaked spread (std ~ 4); the teacher is the same head on perturbed states.
  const std::vector<float> h = random_vec(N * C, 301, 2.f), w = random_vec(V * C, 302);
  const std::vector<float> noise = random_vec(N * C, 303, 0.7f);
  std::vector<float> logq(static_cast<size_t>(N * V));
  {
    std::vector<double> ht = to_f64(h), wd = to_f64(w), row;
    for (size_t i = 0; i < ht.size(); ++i) ht[i] += noise[i];
    for (int64_t n = 0; n < N; ++n) {
      log_softmax_row(ht, wd, n, C, V, row);
      for (int64_t v = 0; v < V; ++v)
        logq[static_cast<size_t>(n * V + v)] = static_cast<float>(row[static_cast<size_t>(v)]);
    }
  }
  const std::vector<float> coef = {1.f, 0.5f, 2.f};
  std::vector<double> hd = to_f64(h), wd = to_f64(w);
  auto loss = [&] {  // sum_n coef_n KL(p_n || q_n) in fp64
    std::vector<double> row;
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      log_softmax_row(hd, wd, n, C, V, row);
      for (int64_t v = 0; v < V; ++v)
        s += coef[static_cast<size_t>(n)] * std::exp(row[static_cast<size_t>(v)]) *
             (row[static_cast<size_t>(v)] - logq[static_cast<size_t>(n * V + v)]);
    }
    return s;
  };
  // The fp64 reference: KL per row, dz = coef p (log p - log q - KL), dh = dz W, dW = dz^T h.
  std::vector<double> kl_ref(N, 0.0), dh_ref(N * C, 0.0), dw_ref(V * C, 0.0), row;
  for (int64_t n = 0; n < N; ++n) {
    log_softmax_row(hd, wd, n, C, V, row);
    for (int64_t v = 0; v < V; ++v)
      kl_ref[static_cast<size_t>(n)] +=
          std::exp(row[static_cast<size_t>(v)]) * (row[static_cast<size_t>(v)] - logq[static_cast<size_t>(n * V + v)]);
    for (int64_t v = 0; v < V; ++v) {
      const double dz =
          coef[static_cast<size_t>(n)] * std::exp(row[static_cast<size_t>(v)]) *
          (row[static_cast<size_t>(v)] - logq[static_cast<size_t>(n * V + v)] - kl_ref[static_cast<size_t>(n)]);
      for (int64_t c = 0; c < C; ++c) {
        dh_ref[static_cast<size_t>(n * C + c)] += dz * wd[static_cast<size_t>(v * C + c)];
        dw_ref[static_cast<size_t>(v * C + c)] += dz * hd[static_cast<size_t>(n * C + c)];
      }
    }
  }
  for (double k : kl_ref) EXPECT_GT(k, 0.05) << "a teacher apart from the student";
  // Finite differences of the reference: every h coordinate, the 8 W rows with the largest gradient, 24 spread ones.
  EXPECT_TRUE(fd_check(hd, dh_ref, loss, static_cast<int>(N * C), 1e-5, 1e-6));
  std::vector<int64_t> rows(static_cast<size_t>(V));
  std::iota(rows.begin(), rows.end(), 0);
  auto row_norm = [&](int64_t v) {
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::fabs(dw_ref[static_cast<size_t>(v * C + c)]);
    return s;
  };
  std::partial_sort(rows.begin(), rows.begin() + 8, rows.end(),
                    [&](int64_t a, int64_t b) { return row_norm(a) > row_norm(b); });
  double gmax = 0;
  for (double g : dw_ref) gmax = std::max(gmax, std::fabs(g));
  for (int64_t k = 0; k < 8; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(rows[static_cast<size_t>(k)] * C + c);
      const double saved = wd[i];
      wd[i] = saved + 1e-5;
      const double lp = loss();
      wd[i] = saved - 1e-5;
      const double lm = loss();
      wd[i] = saved;
      const double fd = (lp - lm) / 2e-5;
      EXPECT_LT(std::fabs(fd - dw_ref[i]) / (std::fabs(fd) + 1e-2 * gmax), 1e-6)
          << "W[" << rows[static_cast<size_t>(k)] << ", " << c << "]";
    }
  EXPECT_TRUE(fd_check(wd, dw_ref, loss, 24, 1e-5, 1e-5));  // small gradients: the fp64 loss's rounding shows at 1e-6
  // The fused classifier on every ISA and two row chunkings: KL, dh and dW as the reference.
  ReverseOnly l;
  l.logq = &logq, l.coef = coef;
  for_each_isa([&](Isa) {
    for (int64_t chunk : {int64_t{0}, int64_t{1}}) {
      SCOPED_TRACE("chunk_rows=" + std::to_string(chunk));
      std::vector<int32_t> tgt = {5, -1, 49151};
      std::vector<float> lp(N), H(N), dh(N * C), dw(V * C, 0.f);
      ClassifierArgs a;
      a.h = h.data(), a.w = w.data(), a.targets = tgt.data(), a.N = N, a.C = C, a.V = V;
      a.logprob = lp.data(), a.entropy = H.data(), a.loss = &l, a.dh = dh.data(), a.dw = dw.data();
      a.chunk_rows = chunk;
      classifier_fused(a);
      EXPECT_TRUE(all_close(l.kl.data(), kl_ref.data(), N, tolerance(Kind::reduction, V)));
      EXPECT_TRUE(all_close(dh.data(), dh_ref.data(), N * C, tolerance(Kind::reduction, V)));
      // dW's rows carry dz = coef p (log p - log q - KL): KL and the log-softmax are reductions over V.
      EXPECT_TRUE(all_close(dw.data(), dw_ref.data(), V * C, tolerance(Kind::reduction, V)));
    }
  });
}

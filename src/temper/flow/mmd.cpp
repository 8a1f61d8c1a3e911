#include "temper/flow/mmd.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/kernels/matmul.h"

namespace temper::flow {

std::vector<float> pairwise_sq_dists(const float* a, int64_t n, const float* b, int64_t m, int64_t dim) {
  std::vector<float> d(static_cast<size_t>(n * m), 0.f);
  if (n == 0 || m == 0) return d;
  kernels::gemm(false, true, n, m, dim, a, dim, b, dim, 0.f, d.data(), m);  // a b^T
  std::vector<double> na(static_cast<size_t>(n)), nb(static_cast<size_t>(m));
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < dim; ++j) s += static_cast<double>(a[i * dim + j]) * a[i * dim + j];
    na[static_cast<size_t>(i)] = s;
  }
  for (int64_t i = 0; i < m; ++i) {
    double s = 0;
    for (int64_t j = 0; j < dim; ++j) s += static_cast<double>(b[i * dim + j]) * b[i * dim + j];
    nb[static_cast<size_t>(i)] = s;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      const double v = na[static_cast<size_t>(i)] + nb[static_cast<size_t>(j)] - 2.0 * d[i * m + j];
      d[i * m + j] = static_cast<float>(std::max(v, 0.0));
    }
  return d;
}

MmdResult mmd_rbf(const float* a, int64_t n, const float* b, int64_t m, int64_t dim, double bandwidth) {
  TEMPER_CHECK(n >= 2 && m >= 2) << "mmd: needs at least 2 rows in each set (got " << n << " and " << m << ")";
  const std::vector<float> daa = pairwise_sq_dists(a, n, a, n, dim), dbb = pairwise_sq_dists(b, m, b, m, dim),
                           dab = pairwise_sq_dists(a, n, b, m, dim);
  MmdResult r;
  r.bandwidth = bandwidth;
  if (bandwidth <= 0) {  // the median heuristic over the pooled pairs (off-diagonal)
    std::vector<float> all;
    all.reserve(static_cast<size_t>(n * (n - 1) / 2 + m * (m - 1) / 2 + n * m));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) all.push_back(daa[i * n + j]);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = i + 1; j < m; ++j) all.push_back(dbb[i * m + j]);
    all.insert(all.end(), dab.begin(), dab.end());
    auto mid = all.begin() + static_cast<std::ptrdiff_t>(all.size() / 2);
    std::nth_element(all.begin(), mid, all.end());
    r.bandwidth = std::sqrt(std::max(static_cast<double>(*mid), 1e-12));
  }
  const double g = 1.0 / (2 * r.bandwidth * r.bandwidth);
  auto mean_k = [&](const std::vector<float>& d, int64_t rows, int64_t cols, bool skip_diag) {
    double s = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (!skip_diag || i != j) s += std::exp(-g * d[i * cols + j]);
    return s / static_cast<double>(skip_diag ? rows * (rows - 1) : rows * cols);
  };
  r.mmd2 = mean_k(daa, n, n, true) + mean_k(dbb, m, m, true) - 2 * mean_k(dab, n, m, false);
  return r;
}

namespace {
// The k-th smallest distance from each row of `a` to the other rows of `a` (the row itself left out).
std::vector<float> kth_radius(const float* a, int64_t n, int64_t dim, int64_t k) {
  const std::vector<float> d = pairwise_sq_dists(a, n, a, n, dim);
  std::vector<float> out(static_cast<size_t>(n)), row;
  for (int64_t i = 0; i < n; ++i) {
    row.clear();
    for (int64_t j = 0; j < n; ++j)
      if (j != i) row.push_back(d[i * n + j]);
    std::nth_element(row.begin(), row.begin() + (k - 1), row.end());
    out[static_cast<size_t>(i)] = row[static_cast<size_t>(k - 1)];
  }
  return out;
}

// Fraction of rows of q inside some ball of p (centre p_i, squared radius r_i).
double covered(const float* p, const std::vector<float>& r, int64_t n, const float* q, int64_t m, int64_t dim) {
  const std::vector<float> d = pairwise_sq_dists(q, m, p, n, dim);
  int64_t hits = 0;
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < n; ++i)
      if (d[j * n + i] <= r[static_cast<size_t>(i)]) {
        ++hits;
        break;
      }
  return static_cast<double>(hits) / static_cast<double>(m);
}
}  // namespace

PrecisionRecall precision_recall(const float* real, int64_t n, const float* gen, int64_t m, int64_t dim, int64_t k) {
  TEMPER_CHECK(k >= 1 && n > k && m > k) << "precision/recall: needs more than k = " << k << " rows in each set (got "
                                         << n << " real, " << m << " generated)";
  PrecisionRecall pr;
  pr.precision = covered(real, kth_radius(real, n, dim, k), n, gen, m, dim);
  pr.recall = covered(gen, kth_radius(gen, m, dim, k), m, real, n, dim);
  return pr;
}

}  // namespace temper::flow

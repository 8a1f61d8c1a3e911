#include "temper/flow/linalg.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "temper/core/error.h"

namespace temper::flow {

namespace {
double off_diagonal_norm(const std::vector<double>& a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) s += a[i * n + j] * a[i * n + j];
  return std::sqrt(2 * s);
}

// One Jacobi rotation zeroing a[p, q] (and a[q, p]); v accumulates the rotations.
void rotate(std::vector<double>& a, std::vector<double>& v, int64_t n, int64_t p, int64_t q) {
  const double apq = a[p * n + q];
  if (apq == 0) return;
  const double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
  const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
  const double c = 1 / std::sqrt(t * t + 1), s = t * c;
  for (int64_t k = 0; k < n; ++k) {  // columns p, q
    const double akp = a[k * n + p], akq = a[k * n + q];
    a[k * n + p] = c * akp - s * akq;
    a[k * n + q] = s * akp + c * akq;
  }
  for (int64_t k = 0; k < n; ++k) {  // rows p, q
    const double apk = a[p * n + k], aqk = a[q * n + k];
    a[p * n + k] = c * apk - s * aqk;
    a[q * n + k] = s * apk + c * aqk;
  }
  a[p * n + q] = a[q * n + p] = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double vkp = v[k * n + p], vkq = v[k * n + q];
    v[k * n + p] = c * vkp - s * vkq;
    v[k * n + q] = s * vkp + c * vkq;
  }
}
}  // namespace

SymEigen sym_eigen(const std::vector<double>& a_in, int64_t n) {
  TEMPER_CHECK(n >= 0 && static_cast<int64_t>(a_in.size()) == n * n)
      << "sym_eigen: " << a_in.size() << " values for a " << n << " x " << n << " matrix";
  std::vector<double> a(a_in);
  for (int64_t i = 0; i < n; ++i)  // symmetrise from the upper triangle
    for (int64_t j = i + 1; j < n; ++j) a[j * n + i] = a[i * n + j];
  std::vector<double> v(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  double scale = 0;
  for (double x : a) scale = std::max(scale, std::abs(x));
  for (int sweep = 0; sweep < 100 && off_diagonal_norm(a, n) > 1e-15 * scale * static_cast<double>(n); ++sweep)
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) rotate(a, v, n, p, q);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return a[x * n + x] < a[y * n + y]; });
  SymEigen e;
  e.values.resize(static_cast<size_t>(n));
  e.vectors.resize(static_cast<size_t>(n * n));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t src = order[static_cast<size_t>(j)];
    e.values[static_cast<size_t>(j)] = a[src * n + src];
    for (int64_t i = 0; i < n; ++i) e.vectors[i * n + j] = v[i * n + src];
  }
  return e;
}

std::vector<double> sym_sqrt(const std::vector<double>& a, int64_t n) {
  const SymEigen e = sym_eigen(a, n);
  std::vector<double> out(static_cast<size_t>(n * n), 0.0);
  for (int64_t k = 0; k < n; ++k) {
    const double r = std::sqrt(std::max(e.values[static_cast<size_t>(k)], 0.0));
    if (r == 0) continue;
    for (int64_t i = 0; i < n; ++i) {
      const double vik = r * e.vectors[i * n + k];
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += vik * e.vectors[j * n + k];
    }
  }
  return out;
}

std::vector<double> cholesky_solve(std::vector<double> a, std::vector<double> b, int64_t n, const char* what) {
  TEMPER_CHECK(static_cast<int64_t>(a.size()) == n * n && static_cast<int64_t>(b.size()) == n)
      << what << ": cholesky_solve of " << a.size() << " and " << b.size() << " values for n = " << n;
  for (int64_t j = 0; j < n; ++j) {  // a = L L^T in the lower triangle
    double d = a[j * n + j];
    for (int64_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    TEMPER_CHECK(d > 0) << what << ": the matrix is not positive definite (pivot " << j << " is " << d << ")";
    const double l = std::sqrt(d);
    a[j * n + j] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (int64_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / l;
    }
  }
  for (int64_t i = 0; i < n; ++i) {  // L y = b
    double s = b[static_cast<size_t>(i)];
    for (int64_t k = 0; k < i; ++k) s -= a[i * n + k] * b[static_cast<size_t>(k)];
    b[static_cast<size_t>(i)] = s / a[i * n + i];
  }
  for (int64_t i = n - 1; i >= 0; --i) {  // L^T x = y
    double s = b[static_cast<size_t>(i)];
    for (int64_t k = i + 1; k < n; ++k) s -= a[k * n + i] * b[static_cast<size_t>(k)];
    b[static_cast<size_t>(i)] = s / a[i * n + i];
  }
  return b;
}

}  // namespace temper::flow

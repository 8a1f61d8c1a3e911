#include "temper/flow/linalg.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "temper/core/error.h"

namespace temper::flow {

namespace {
// Householder reduction of symmetric v [n, n] to tridiagonal form: d the diagonal, e the subdiagonal (e[0] = 0),
// v the accumulated orthogonal transformation. JAMA's tred2 (public domain; EISPACK's tred2).
void tred2(std::vector<double>& V, std::vector<double>& d, std::vector<double>& e, int64_t n) {
  auto v = [&](int64_t i, int64_t j) -> double& { return V[static_cast<size_t>(i * n + j)]; };
  for (int64_t j = 0; j < n; ++j) d[static_cast<size_t>(j)] = v(n - 1, j);
  for (int64_t i = n - 1; i > 0; --i) {
    double scale = 0, h = 0;
    for (int64_t k = 0; k < i; ++k) scale += std::abs(d[static_cast<size_t>(k)]);
    if (scale == 0) {
      e[static_cast<size_t>(i)] = d[static_cast<size_t>(i - 1)];
      for (int64_t j = 0; j < i; ++j) {
        d[static_cast<size_t>(j)] = v(i - 1, j);
        v(i, j) = v(j, i) = 0;
      }
    } else {
      for (int64_t k = 0; k < i; ++k) {
        d[static_cast<size_t>(k)] /= scale;
        h += d[static_cast<size_t>(k)] * d[static_cast<size_t>(k)];
      }
      double f = d[static_cast<size_t>(i - 1)], g = std::sqrt(h);
      if (f > 0) g = -g;
      e[static_cast<size_t>(i)] = scale * g;
      h -= f * g;
      d[static_cast<size_t>(i - 1)] = f - g;
      for (int64_t j = 0; j < i; ++j) e[static_cast<size_t>(j)] = 0;
      for (int64_t j = 0; j < i; ++j) {
        f = d[static_cast<size_t>(j)];
        v(j, i) = f;
        g = e[static_cast<size_t>(j)] + v(j, j) * f;
        for (int64_t k = j + 1; k <= i - 1; ++k) {
          g += v(k, j) * d[static_cast<size_t>(k)];
          e[static_cast<size_t>(k)] += v(k, j) * f;
        }
        e[static_cast<size_t>(j)] = g;
      }
      f = 0;
      for (int64_t j = 0; j < i; ++j) {
        e[static_cast<size_t>(j)] /= h;
        f += e[static_cast<size_t>(j)] * d[static_cast<size_t>(j)];
      }
      const double hh = f / (h + h);
      for (int64_t j = 0; j < i; ++j) e[static_cast<size_t>(j)] -= hh * d[static_cast<size_t>(j)];
      for (int64_t j = 0; j < i; ++j) {
        f = d[static_cast<size_t>(j)];
        g = e[static_cast<size_t>(j)];
        for (int64_t k = j; k <= i - 1; ++k) v(k, j) -= (f * e[static_cast<size_t>(k)] + g * d[static_cast<size_t>(k)]);
        d[static_cast<size_t>(j)] = v(i - 1, j);
        v(i, j) = 0;
      }
    }
    d[static_cast<size_t>(i)] = h;
  }
  for (int64_t i = 0; i < n - 1; ++i) {  // accumulate the transformations
    v(n - 1, i) = v(i, i);
    v(i, i) = 1;
    const double h = d[static_cast<size_t>(i + 1)];
    if (h != 0) {
      for (int64_t k = 0; k <= i; ++k) d[static_cast<size_t>(k)] = v(k, i + 1) / h;
      for (int64_t j = 0; j <= i; ++j) {
        double g = 0;
        for (int64_t k = 0; k <= i; ++k) g += v(k, i + 1) * v(k, j);
        for (int64_t k = 0; k <= i; ++k) v(k, j) -= g * d[static_cast<size_t>(k)];
      }
    }
    for (int64_t k = 0; k <= i; ++k) v(k, i + 1) = 0;
  }
  for (int64_t j = 0; j < n; ++j) {
    d[static_cast<size_t>(j)] = v(n - 1, j);
    v(n - 1, j) = 0;
  }
  v(n - 1, n - 1) = 1;
  e[0] = 0;
}

// Implicit QL on the tridiagonal (d, e), accumulating into V. JAMA's tql2 (EISPACK's tql2).
void tql2(std::vector<double>& V, std::vector<double>& d, std::vector<double>& e, int64_t n) {
  auto v = [&](int64_t i, int64_t j) -> double& { return V[static_cast<size_t>(i * n + j)]; };
  for (int64_t i = 1; i < n; ++i) e[static_cast<size_t>(i - 1)] = e[static_cast<size_t>(i)];
  e[static_cast<size_t>(n - 1)] = 0;
  double f = 0, tst1 = 0;
  const double eps = std::ldexp(1.0, -52);
  for (int64_t l = 0; l < n; ++l) {
    tst1 = std::max(tst1, std::abs(d[static_cast<size_t>(l)]) + std::abs(e[static_cast<size_t>(l)]));
    int64_t m = l;
    while (m < n && std::abs(e[static_cast<size_t>(m)]) > eps * tst1) ++m;
    if (m > l) {
      for (int iter = 0; iter < 200; ++iter) {
        double g = d[static_cast<size_t>(l)];
        double p = (d[static_cast<size_t>(l + 1)] - g) / (2 * e[static_cast<size_t>(l)]);
        double r = std::hypot(p, 1.0);
        if (p < 0) r = -r;
        d[static_cast<size_t>(l)] = e[static_cast<size_t>(l)] / (p + r);
        d[static_cast<size_t>(l + 1)] = e[static_cast<size_t>(l)] * (p + r);
        const double dl1 = d[static_cast<size_t>(l + 1)];
        double h = g - d[static_cast<size_t>(l)];
        for (int64_t i = l + 2; i < n; ++i) d[static_cast<size_t>(i)] -= h;
        f += h;
        p = d[static_cast<size_t>(m)];
        double c = 1, c2 = 1, c3 = 1, s = 0, s2 = 0;
        const double el1 = e[static_cast<size_t>(l + 1)];
        for (int64_t i = m - 1; i >= l; --i) {
          c3 = c2;
          c2 = c;
          s2 = s;
          g = c * e[static_cast<size_t>(i)];
          h = c * p;
          r = std::hypot(p, e[static_cast<size_t>(i)]);
          e[static_cast<size_t>(i + 1)] = s * r;
          s = e[static_cast<size_t>(i)] / r;
          c = p / r;
          p = c * d[static_cast<size_t>(i)] - s * g;
          d[static_cast<size_t>(i + 1)] = h + s * (c * g + s * d[static_cast<size_t>(i)]);
          for (int64_t k = 0; k < n; ++k) {
            h = v(k, i + 1);
            v(k, i + 1) = s * v(k, i) + c * h;
            v(k, i) = c * v(k, i) - s * h;
          }
        }
        p = -s * s2 * c3 * el1 * e[static_cast<size_t>(l)] / dl1;
        e[static_cast<size_t>(l)] = s * p;
        d[static_cast<size_t>(l)] = c * p;
        if (!(std::abs(e[static_cast<size_t>(l)]) > eps * tst1)) break;
      }
    }
    d[static_cast<size_t>(l)] += f;
    e[static_cast<size_t>(l)] = 0;
  }
}
}  // namespace

SymEigen sym_eigen(const std::vector<double>& a, int64_t n) {
  TEMPER_CHECK(n >= 0 && static_cast<int64_t>(a.size()) == n * n)
      << "sym_eigen: " << a.size() << " values for a " << n << " x " << n << " matrix";
  SymEigen e;
  if (n == 0) return e;
  std::vector<double> v(a), d(static_cast<size_t>(n)), sub(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)  // symmetric from the upper triangle
    for (int64_t j = i + 1; j < n; ++j) v[static_cast<size_t>(j * n + i)] = v[static_cast<size_t>(i * n + j)];
  tred2(v, d, sub, n);
  tql2(v, d, sub, n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return d[static_cast<size_t>(x)] < d[static_cast<size_t>(y)]; });
  e.values.resize(static_cast<size_t>(n));
  e.vectors.resize(static_cast<size_t>(n * n));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t src = order[static_cast<size_t>(j)];
    e.values[static_cast<size_t>(j)] = d[static_cast<size_t>(src)];
    for (int64_t i = 0; i < n; ++i) e.vectors[static_cast<size_t>(i * n + j)] = v[static_cast<size_t>(i * n + src)];
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

// Small dense symmetric linear algebra in double (row-major n x n), for the metrics and the discriminator:
// the eigen-decomposition by Householder tridiagonalisation and implicit QL (EISPACK's tred2/tql2 as JAMA
// writes them; O(n^3), n up to a few hundred), the PSD square root built on it, and a Cholesky solve.
// Not for large or non-symmetric matrices.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::flow {

struct SymEigen {
  std::vector<double> values;   // [n], ascending
  std::vector<double> vectors;  // [n, n]: column j (vectors[i * n + j], i = 0..n-1) belongs to values[j]
};

// a: symmetric [n, n] (only symmetric input is meaningful; the upper triangle is trusted).
SymEigen sym_eigen(const std::vector<double>& a, int64_t n);

// The PSD square root V diag(sqrt(max(lambda, 0))) V^T of symmetric a [n, n].
std::vector<double> sym_sqrt(const std::vector<double>& a, int64_t n);

// Solves a x = b for symmetric positive definite a [n, n]; throws naming `what` when a is not.
std::vector<double> cholesky_solve(std::vector<double> a, std::vector<double> b, int64_t n, const char* what);

}  // namespace temper::flow

// Kernel two-sample distances between feature sets: MMD^2 with an RBF kernel (Gretton et al. 2012, the
// unbiased U-statistic; it can be slightly negative when the sets agree) and the k-NN precision and
// recall of Kynkaanniemi et al. 2019 (a generated row is "precise" when it lies inside some real row's
// k-th-neighbour ball; recall swaps the roles). Squared distances come from one f32 GEMM per block.
#pragma once

#include <cstdint>
#include <vector>

namespace temper::flow {

// d[i, j] = |a_i - b_j|^2 for a [n, dim], b [m, dim]: [n, m].
std::vector<float> pairwise_sq_dists(const float* a, int64_t n, const float* b, int64_t m, int64_t dim);

// bandwidth h of k(x, y) = exp(-|x - y|^2 / (2 h^2)); h <= 0: the median pairwise distance of the pooled rows.
struct MmdResult {
  double mmd2 = 0, bandwidth = 0;
};
MmdResult mmd_rbf(const float* a, int64_t n, const float* b, int64_t m, int64_t dim, double bandwidth = 0);

struct PrecisionRecall {
  double precision = 0, recall = 0;
};
PrecisionRecall precision_recall(const float* real, int64_t n, const float* gen, int64_t m, int64_t dim, int64_t k = 3);

}  // namespace temper::flow

// Hypervolume (the Lebesgue measure of the region a set of return vectors dominates, above a reference point;
// every objective maximised): PQL's set evaluation and the runs' quality metric. Exact: a sweep in 2-D, and
// slicing along the last objective down to that sweep for 3-D and any D (HSO, While et al. 2006: exponential in
// D, fine for the tens of points these sets hold). Points not strictly above the reference in every objective
// add nothing. Leaves out: WFG/HBDA-class algorithms for large sets.
#pragma once

#include <span>
#include <vector>

namespace temper::tabular {

// pts: [n, D] row-major; ref: [D]. D >= 1.
double hypervolume(std::span<const double> pts, int D, std::span<const double> ref);
double hypervolume(std::span<const float> pts, int D, std::span<const double> ref);

// By inclusion-exclusion over every subset (2^n terms): the slow, obviously correct reference for tests (n <= 16).
double hypervolume_inclusion_exclusion(std::span<const double> pts, int D, std::span<const double> ref);

}  // namespace temper::tabular

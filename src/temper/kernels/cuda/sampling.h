// Choosing tokens on the device for untruncated samplers (temperature only, or greedy): per row the
// tempered softmax is inverted at a uniform u drawn on the host from the sequence's own Rng stream
// (the same draw, in the same vocabulary order, as rollout::Sampler's no-truncation path), so a
// sequence's tokens do not depend on its batch. The same pass gives the policy statistics the
// trainer needs: log-prob of the chosen token and full-vocabulary entropy at temperature 1.
// Leaves out: top-k / top-p / min-p / penalties (the engine copies those rows' logits to the host).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace temper::cuda {

struct SampleRowsArgs {
  const float* logits = nullptr;  // [B, ld]
  int64_t B = 0, V = 0, ld = 0;
  const float* temperature = nullptr;  // [B]; <= 0: greedy (first argmax)
  const double* u = nullptr;           // [B] uniforms in [0, 1)
  const int32_t* forced = nullptr;     // [B] optional: >= 0 takes that token (sample log-prob = policy's)
  int32_t* token = nullptr;            // [B] out; -1 for a row without a finite logit (statistics NaN)
  float* sample_logprob = nullptr;     // [B] out: under the tempered distribution (0 for greedy)
  float* policy_logprob = nullptr;     // [B] out: temperature 1
  float* entropy = nullptr;            // [B] out: temperature 1, full vocabulary
  void* workspace = nullptr;           // device scratch of sample_rows_workspace_bytes(B, V)
  size_t workspace_bytes = 0;
};
// Bytes of device scratch sample_rows needs for B rows of V logits (per-chunk statistics).
size_t sample_rows_workspace_bytes(int64_t B, int64_t V);
// Three launches (chunk maxima, chunk sums, the choice per row); deterministic; graph-capturable.
void sample_rows(const SampleRowsArgs& a, cudaStream_t s);

}  // namespace temper::cuda

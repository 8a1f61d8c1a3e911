// The layout of every control network (policies, the value net, the context encoder and its reward decoder, the
// adaptor): in, the hidden widths, out, with nn::MlpSpec's default activations (tanh between, identity out).
#pragma once

#include <cstdint>
#include <vector>

#include "temper/nn/mlp.h"

namespace temper::control {

inline nn::MlpSpec mlp_spec(int64_t in, const std::vector<int64_t>& hidden, int64_t out) {
  nn::MlpSpec s;
  s.sizes.push_back(in);
  s.sizes.insert(s.sizes.end(), hidden.begin(), hidden.end());
  s.sizes.push_back(out);
  return s;
}

}  // namespace temper::control

// Where each DiT tensor lives in the one flat parameter vector, with torch's state_dict names and shapes
// (tools/ref/make_dit_golden.py's module tree, facebookresearch/DiT's names): a weight [out, in] row-major
// then its bias, per module in registration order. The position embedding is fixed (not a parameter).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temper/flow/dit_config.h"

namespace temper::flow {

struct DitLinearAt {  // offsets of a linear layer's W [out, in] and b [out]
  int64_t w = 0, b = 0, in = 0, out = 0;
};

struct DitBlockAt {
  DitLinearAt qkv, proj, fc1, fc2, ada;  // ada: adaLN_modulation.1, [6 * hidden, hidden]
};

struct DitLayout {
  explicit DitLayout(const DitConfig& c);
  DitLinearAt patch;    // x_embedder.proj: the convolution's weight [hidden, C, p, p] as [hidden, C*p*p]
  DitLinearAt t1, t2;   // t_embedder.mlp.0, t_embedder.mlp.2
  int64_t y_table = 0;  // y_embedder.embedding_table [classes + 1, hidden]
  std::vector<DitBlockAt> blocks;
  DitLinearAt final_linear, final_ada;  // final_layer.linear, final_layer.adaLN_modulation.1
  int64_t total = 0;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;  // in layout order
  std::vector<int64_t> offsets;                                      // of each entry of shapes

 private:
  int64_t add(const std::string& name, std::vector<int64_t> shape);
  DitLinearAt linear(const std::string& name, int64_t in, int64_t out);
};

}  // namespace temper::flow

#include "temper/flow/dit_layout.h"

namespace temper::flow {

int64_t DitLayout::add(const std::string& name, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int64_t at = total;
  shapes.emplace_back(name, std::move(shape));
  offsets.push_back(at);
  total += n;
  return at;
}

DitLinearAt DitLayout::linear(const std::string& name, int64_t in, int64_t out) {
  DitLinearAt l;
  l.in = in, l.out = out;
  l.w = add(name + ".weight", {out, in});
  l.b = add(name + ".bias", {out});
  return l;
}

DitLayout::DitLayout(const DitConfig& c) {
  const int64_t C = c.hidden;
  patch.in = c.patch_dim(), patch.out = C;
  patch.w = add("x_embedder.proj.weight", {C, c.channels, c.patch, c.patch});
  patch.b = add("x_embedder.proj.bias", {C});
  t1 = linear("t_embedder.mlp.0", c.freq_dim, C);
  t2 = linear("t_embedder.mlp.2", C, C);
  y_table = add("y_embedder.embedding_table.weight", {c.classes + 1, C});
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    DitBlockAt b;
    b.qkv = linear(p + "attn.qkv", C, 3 * C);
    b.proj = linear(p + "attn.proj", C, C);
    b.fc1 = linear(p + "mlp.fc1", C, c.ffn());
    b.fc2 = linear(p + "mlp.fc2", c.ffn(), C);
    b.ada = linear(p + "adaLN_modulation.1", C, 6 * C);
    blocks.push_back(b);
  }
  final_linear = linear("final_layer.linear", C, c.patch_dim());
  final_ada = linear("final_layer.adaLN_modulation.1", C, 2 * C);
}

}  // namespace temper::flow

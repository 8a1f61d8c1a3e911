#include "temper/model/lora.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <span>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/kernels/matmul.h"
#include "temper/model/block_products.h"
#include "temper/model/transformer.h"

namespace temper {

namespace {

struct TargetInfo {
  LoraTarget t;
  std::string_view name, module;
  LoraGroup group;
};

constexpr TargetInfo kTargets[kLoraTargetCount] = {
    {LoraTarget::q, "q", "self_attn.q_proj", LoraGroup::qkv},
    {LoraTarget::k, "k", "self_attn.k_proj", LoraGroup::qkv},
    {LoraTarget::v, "v", "self_attn.v_proj", LoraGroup::qkv},
    {LoraTarget::o, "o", "self_attn.o_proj", LoraGroup::o},
    {LoraTarget::gate, "gate", "mlp.gate_proj", LoraGroup::gate_up},
    {LoraTarget::up, "up", "mlp.up_proj", LoraGroup::gate_up},
    {LoraTarget::down, "down", "mlp.down_proj", LoraGroup::down},
};

const TargetInfo& info(LoraTarget t) {
  return kTargets[static_cast<int>(t)];
}

}  // namespace

std::string_view lora_target_name(LoraTarget t) {
  return info(t).name;
}
std::string_view lora_target_module(LoraTarget t) {
  return info(t).module;
}

bool lora_target_from_name(std::string_view name, LoraTarget* out) {
  for (const TargetInfo& i : kTargets) {
    std::string_view leaf = i.module.substr(i.module.find('.') + 1);  // "q_proj"
    if (name == i.name || name == leaf) {
      *out = i.t;
      return true;
    }
  }
  return false;
}

std::string_view lora_base_name(LoraBase b) {
  return enum_name(kLoraBaseNames, b);
}

bool lora_base_from_name(std::string_view name, LoraBase* out) {
  std::optional<LoraBase> b = enum_from_name(kLoraBaseNames, name);
  if (b) *out = *b;
  return b.has_value();
}

void LoraConfig::validate(const std::string& where) const {
  TEMPER_CHECK(rank >= 1 && rank <= 4096) << where << ": rank must be in [1, 4096], got " << rank;
  TEMPER_CHECK(std::isfinite(alpha) && alpha > 0) << where << ": alpha must be finite and > 0, got " << alpha;
  TEMPER_CHECK(dropout == 0) << where << ": dropout " << dropout
                             << " is not supported (only 0 so far: adapters train without dropout)";
  TEMPER_CHECK(!targets.empty()) << where << ": targets is empty (name some of q, k, v, o, gate, up, down)";
  for (size_t i = 0; i < targets.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      TEMPER_CHECK(targets[i] != targets[j])
          << where << ": target '" << lora_target_name(targets[i]) << "' is listed twice";
}

double LoraConfig::scale() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

bool LoraConfig::has(LoraTarget t) const {
  for (LoraTarget x : targets)
    if (x == t) return true;
  return false;
}

LoraAdapters::LoraAdapters(const ModelConfig& model, const LoraConfig& cfg) : model_(model), cfg_(cfg) {
  cfg_.validate();
  scale_ = static_cast<float>(cfg_.scale());
  const int64_t C = model_.hidden_size, D = model_.head_dim, Hq = model_.num_heads * D, Hk = model_.num_kv_heads * D,
                F = model_.intermediate_size, r = cfg_.rank;
  // (in, out, row0) of each target; the group's input width is its targets' `in`.
  auto shape = [&](LoraTarget t, int64_t* in, int64_t* out, int64_t* row0) {
    switch (t) {
      case LoraTarget::q:
        *in = C, *out = Hq, *row0 = 0;
        break;
      case LoraTarget::k:
        *in = C, *out = Hk, *row0 = Hq;
        break;
      case LoraTarget::v:
        *in = C, *out = Hk, *row0 = Hq + Hk;
        break;
      case LoraTarget::o:
        *in = Hq, *out = C, *row0 = 0;
        break;
      case LoraTarget::gate:
        *in = C, *out = F, *row0 = 0;
        break;
      case LoraTarget::up:
        *in = C, *out = F, *row0 = F;
        break;
      case LoraTarget::down:
        *in = F, *out = C, *row0 = 0;
        break;
    }
  };
  // Per layer and group: the stacked A of its targets, then each target's B.
  groups_.resize(static_cast<size_t>(model_.num_layers * kLoraGroupCount));
  for (int64_t l = 0; l < model_.num_layers; ++l)
    for (int g = 0; g < kLoraGroupCount; ++g) {
      LoraGroupSlots& s = groups_[static_cast<size_t>(l * kLoraGroupCount + g)];
      for (const TargetInfo& i : kTargets) {
        if (static_cast<int>(i.group) != g || !cfg_.has(i.t)) continue;
        LoraProduct p;
        p.target = i.t;
        shape(i.t, &p.in, &p.out, &p.row0);
        s.in = p.in;
        s.products.push_back(p);
      }
      if (s.products.empty()) continue;
      s.a = total_;
      for (LoraProduct& p : s.products) {
        p.a = total_;
        total_ += r * p.in;
      }
      for (LoraProduct& p : s.products) {
        p.b = total_;
        total_ += p.out * r;
      }
      total_ = (total_ + 15) / 16 * 16;  // 64-byte aligned groups
    }
  params_ = Tensor::zeros({total_});
  grads_ = Tensor::zeros({total_});
}

void LoraAdapters::init(uint64_t seed) {
  float* P = params();
  for (int64_t l = 0; l < model_.num_layers; ++l)
    for (int g = 0; g < kLoraGroupCount; ++g)
      for (const LoraProduct& p : groups_[static_cast<size_t>(l * kLoraGroupCount + g)].products) {
        // kaiming_uniform_(a = sqrt(5)) on [r, in]: gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / in) = 1 / sqrt(in).
        const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.in)));
        const uint64_t stream = static_cast<uint64_t>(l * kLoraTargetCount + static_cast<int>(p.target));
        rng_fill_uniform(seed, stream, std::span<float>(P + p.a, static_cast<size_t>(cfg_.rank * p.in)), -bound, bound);
        std::fill(P + p.b, P + p.b + p.out * cfg_.rank, 0.f);
      }
}

const LoraGroupSlots& LoraAdapters::group(int64_t layer, LoraGroup g) const {
  TEMPER_CHECK(layer >= 0 && layer < model_.num_layers)
      << "lora: layer " << layer << " outside [0, " << model_.num_layers << ")";
  return groups_[static_cast<size_t>(layer * kLoraGroupCount + static_cast<int>(g))];
}

const LoraProduct* LoraAdapters::find(int64_t layer, LoraTarget t) const {
  for (const LoraProduct& p : group(layer, info(t).group).products)
    if (p.target == t) return &p;
  return nullptr;
}

const LoraProduct& LoraAdapters::at(int64_t layer, LoraTarget t) const {
  const LoraProduct* p = find(layer, t);
  TEMPER_CHECK(p) << "lora: layer " << layer << " has no adapter on '" << lora_target_name(t) << "'";
  return *p;
}

Tensor LoraAdapters::a(int64_t layer, LoraTarget t) const {
  const LoraProduct& p = at(layer, t);
  return Tensor::wrap(const_cast<float*>(params()) + p.a, {cfg_.rank, p.in}, DType::f32);
}
Tensor LoraAdapters::b(int64_t layer, LoraTarget t) const {
  const LoraProduct& p = at(layer, t);
  return Tensor::wrap(const_cast<float*>(params()) + p.b, {p.out, cfg_.rank}, DType::f32);
}
Tensor LoraAdapters::grad_a(int64_t layer, LoraTarget t) const {
  const LoraProduct& p = at(layer, t);
  return Tensor::wrap(const_cast<float*>(grads()) + p.a, {cfg_.rank, p.in}, DType::f32);
}
Tensor LoraAdapters::grad_b(int64_t layer, LoraTarget t) const {
  const LoraProduct& p = at(layer, t);
  return Tensor::wrap(const_cast<float*>(grads()) + p.b, {p.out, cfg_.rank}, DType::f32);
}

// u = scale * x A_stack^T [N, n r] (one product for the group), then y_t += u_t B_t^T per target.
void LoraAdapters::forward(int64_t layer, LoraGroup g, const float* x, int64_t N, float* y, int64_t ldy,
                           float* ws) const {
  const LoraGroupSlots& s = group(layer, g);
  if (s.products.empty() || N == 0) return;
  const int64_t r = cfg_.rank, nr = static_cast<int64_t>(s.products.size()) * r;
  const float* P = params();
  float* u = ws;
  kernels::gemm(false, true, N, nr, s.in, x, s.in, P + s.a, s.in, 0.f, u, nr);
  for (int64_t i = 0; i < N * nr; ++i) u[i] *= scale_;
  for (size_t j = 0; j < s.products.size(); ++j) {
    const LoraProduct& p = s.products[j];
    kernels::gemm(false, true, N, p.out, r, u + static_cast<int64_t>(j) * r, nr, P + p.b, r, 1.f, y + p.row0, ldy);
  }
}

void LoraAdapters::backward(int64_t layer, LoraGroup g, const float* x, const float* dy, int64_t ldy, int64_t N,
                            float* dx, float* ws) {
  const LoraGroupSlots& s = group(layer, g);
  if (s.products.empty() || N == 0) return;
  const int64_t r = cfg_.rank, nr = static_cast<int64_t>(s.products.size()) * r;
  const float* P = params();
  float* G = grads();
  float *u = ws, *du = ws + N * nr;
  kernels::gemm(false, true, N, nr, s.in, x, s.in, P + s.a, s.in, 0.f, u, nr);  // recomputed: r is small
  for (int64_t i = 0; i < N * nr; ++i) u[i] *= scale_;
  for (size_t j = 0; j < s.products.size(); ++j) {
    const LoraProduct& p = s.products[j];
    const int64_t c = static_cast<int64_t>(j) * r;
    kernels::gemm(true, false, p.out, r, N, dy + p.row0, ldy, u + c, nr, 1.f, G + p.b, r);    // dB += dy^T u
    kernels::gemm(false, false, N, r, p.out, dy + p.row0, ldy, P + p.b, r, 0.f, du + c, nr);  // du = dy B
  }
  for (int64_t i = 0; i < N * nr; ++i) du[i] *= scale_;
  kernels::gemm(true, false, nr, s.in, N, du, nr, x, s.in, 1.f, G + s.a, s.in);    // dA += du^T x (stacked)
  kernels::gemm(false, false, N, s.in, nr, du, nr, P + s.a, s.in, 1.f, dx, s.in);  // dx += du A
}

void LoraAdapters::merge_into(Transformer& model) const {
  const ModelConfig& m = model.config();
  TEMPER_CHECK(m.num_layers == model_.num_layers && m.hidden_size == model_.hidden_size &&
               m.num_heads == model_.num_heads && m.num_kv_heads == model_.num_kv_heads &&
               m.head_dim == model_.head_dim && m.intermediate_size == model_.intermediate_size)
      << "lora merge: the adapters were made for another model shape";
  TEMPER_CHECK(!model.held_base())
      << "lora merge: the model holds its base as bf16/int4/nf4 (no f32 weights to merge into); "
         "merge into an f32 model holding the base's dequantised values "
         "(FrozenBase::dequantize_into)";
  float* W = model.params();
  const int64_t r = cfg_.rank;
  std::vector<float> sb;
  for (int64_t l = 0; l < model_.num_layers; ++l) {
    const LayerOffsets& o = model.layout().layers[static_cast<size_t>(l)];
    const std::array<int64_t, 4> base = block_product_offsets(o);  // the groups' order (lora.h: qkv, o, gate_up, down)
    for (int g = 0; g < kLoraGroupCount; ++g)
      for (const LoraProduct& p : groups_[static_cast<size_t>(l * kLoraGroupCount + g)].products) {
        sb.assign(params() + p.b, params() + p.b + p.out * r);
        for (float& v : sb) v *= scale_;
        // W[row0 + i, :] += (scale B)[i, :] A
        kernels::gemm(false, false, p.out, p.in, r, sb.data(), r, params() + p.a, p.in, 1.f,
                      W + base[g] + p.row0 * p.in, p.in);
      }
  }
  model.params_updated();
}

}  // namespace temper

// The decoder on a CUDA device; see cuda_transformer.h. Mirrors model/transformer.cpp layer by
// layer (the same residual order, the same GEMM orientations), with bf16 GEMM inputs.
#include "temper/model/cuda_transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/kernels/cuda/attention.h"
#include "temper/kernels/cuda/gemv.h"
#include "temper/kernels/cuda/ops.h"
#include "temper/kernels/cuda/sampling.h"
#include "temper/kernels/rope.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"

namespace temper {

// A layer's activations for N rows except x_in and lse (training keeps one set per layer, decoding one).
void CudaTransformer::carve_layer(Carver& c, Acts& a, int64_t N) const {
  const int64_t C = cfg_.hidden_size, Hq = cfg_.num_heads * cfg_.head_dim, QKV = cfg_.qkv_dim(),
                F = cfg_.intermediate_size;
  a.rstd1 = c.take<float>(N);
  a.qkv_pre = cfg_.qk_norm ? c.take<float>(N * QKV) : nullptr;
  a.q_rstd = cfg_.qk_norm ? c.take<float>(N * cfg_.num_heads) : nullptr;
  a.k_rstd = cfg_.qk_norm ? c.take<float>(N * cfg_.num_kv_heads) : nullptr;
  a.qkv = c.take<float>(N * QKV);
  a.o = c.take<float>(N * Hq);
  a.x_mid = c.take<float>(N * C);
  a.rstd2 = c.take<float>(N);
  a.gu = c.take<float>(N * 2 * F);
  a.xn1 = c.take<uint16_t>(N * C);
  a.o16 = c.take<uint16_t>(N * Hq);
  a.xn2 = c.take<uint16_t>(N * C);
  a.h16 = c.take<uint16_t>(N * F);
  a.ao = cfg_.sandwich_norm ? c.take<float>(N * C) : nullptr;
  a.rstd3 = cfg_.sandwich_norm ? c.take<float>(N) : nullptr;
  a.mo = cfg_.sandwich_norm ? c.take<float>(N * C) : nullptr;
  a.rstd4 = cfg_.sandwich_norm ? c.take<float>(N) : nullptr;
}

namespace {

void d2d(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  TEMPER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
}

}  // namespace

CudaTransformer::CudaTransformer(const ModelConfig& cfg, int device)
    : cfg_(cfg), layout_((cfg.validate(), cfg)), device_(device) {  // validated before anything is sized from it
  TEMPER_CHECK(cuda::available()) << "--device cuda: no CUDA device is visible (driver or GPU missing)";
  TEMPER_CHECK(device >= 0 && device < cuda::device_count())
      << "--device cuda:" << device << ": only " << cuda::device_count() << " CUDA device(s) visible";
  TEMPER_CUDA_CHECK(cudaSetDevice(device));
  TEMPER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  blas_ = std::make_unique<cuda::Blas>(stream_);
  if (const char* e = std::getenv("TEMPER_CUDA_GEMV"); e && *e) gemv_rows_ = std::atoi(e);  // A/B runs
  const size_t n = static_cast<size_t>(layout_.total());
  params_.resize(n);
  grads_.resize(n);
  m_.resize(n);
  v_.resize(n);
  params16_.resize(n);
  TEMPER_CUDA_CHECK(cudaMemsetAsync(params_.data(), 0, params_.bytes(), stream_));
  TEMPER_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
  TEMPER_CUDA_CHECK(cudaMemsetAsync(m_.data(), 0, m_.bytes(), stream_));
  TEMPER_CUDA_CHECK(cudaMemsetAsync(v_.data(), 0, v_.bytes(), stream_));
  TEMPER_CUDA_CHECK(cudaMemsetAsync(params16_.data(), 0, params16_.bytes(), stream_));
  norm_ws_.resize(static_cast<size_t>(cuda::grad_norm_workspace(layout_.total())));
  norm_out_.resize(1);
  const int64_t P = cfg_.max_position_embeddings, D = cfg_.head_dim;
  upload_rope(rope_, kernels::rope_table(P, D, cfg_.rope_theta, cfg_.rope_scaling));
  if (cfg_.rope_scaling.type == kernels::RopeScaling::Type::longrope) {
    kernels::RopeScaling long_factors = cfg_.rope_scaling;
    long_factors.use_long = true;
    upload_rope(rope_long_, kernels::rope_table(P, D, cfg_.rope_theta, long_factors));
  }
  if (cfg_.rope_local_theta > 0) upload_rope(rope_local_, kernels::rope_table(P, D, cfg_.rope_local_theta));
  if (cfg_.norm_offset) {  // every "*norm.weight", merged into runs where they sit next to each other
    std::vector<std::pair<int64_t, int64_t>> norms;  // (offset, numel)
    for (const ParamEntry& e : layout_.entries())
      if (e.name.size() > 11 && e.name.compare(e.name.size() - 11, 11, "norm.weight") == 0)
        norms.push_back({e.offset, e.numel()});
    std::sort(norms.begin(), norms.end());
    int64_t eff = 0;
    for (const auto& [off, n] : norms) {
      if (!norm_runs_.empty() && norm_runs_.back().param + norm_runs_.back().n == off)
        norm_runs_.back().n += n;
      else
        norm_runs_.push_back({off, eff, n});
      eff += n;
    }
    norm_eff_.resize(static_cast<size_t>(eff));
  }
  synchronize();
}

void CudaTransformer::upload_rope(DeviceRope& to, const kernels::RopeTable& t) {
  to.cos.resize(t.cos.size());
  to.sin.resize(t.sin.size());
  cuda::copy_to_device(to.cos.data(), t.cos.data(), t.cos.size() * sizeof(float), stream_);
  cuda::copy_to_device(to.sin.data(), t.sin.data(), t.sin.size() * sizeof(float), stream_);
  synchronize();  // the table is the caller's temporary
}

const CudaTransformer::DeviceRope& CudaTransformer::rope_for(int64_t l) const {
  if (cfg_.rope_local_theta > 0 && cfg_.slides(l)) return rope_local_;
  return use_long_rope_ ? rope_long_ : rope_;
}

void CudaTransformer::select_rope(int64_t max_pos) {  // as Transformer::select_rope: plan()'s length once planned
  use_long_rope_ = cfg_.rope_scaling.type == kernels::RopeScaling::Type::longrope &&
                   (rope_context_ > 0 ? rope_context_ : max_pos) > cfg_.rope_scaling.original_max_position;
}

kernels::AttnOpts CudaTransformer::attn_opts(int64_t l) const {
  kernels::AttnOpts o;
  if (cfg_.query_pre_attn_scalar > 0) o.scale = cfg_.attn_scale();
  o.softcap = static_cast<float>(cfg_.attn_softcap);
  o.window = cfg_.slides(l) ? cfg_.sliding_window : 0;
  return o;
}

const float* CudaTransformer::nw(int64_t offset) const {
  if (!cfg_.norm_offset) return params_.data() + offset;
  for (const NormRun& r : norm_runs_)
    if (offset >= r.param && offset < r.param + r.n) return norm_eff_.data() + r.eff + (offset - r.param);
  TEMPER_CHECK(false) << "CudaTransformer: no norm weight at parameter offset " << offset;
  return nullptr;
}

// Gemma's RMSNorm scales by (1 + w) (HF: output * (1.0 + weight.float())): the sums in f32 on the device, after
// every change of the weights; the gradient w.r.t. w is that w.r.t. 1 + w, accumulated at w's offset.
void CudaTransformer::refresh_norm_weights() {
  for (const NormRun& r : norm_runs_)
    cuda::add_scalar(params_.data() + r.param, 1.f, norm_eff_.data() + r.eff, r.n, stream_);
}

void CudaTransformer::embed(const int32_t* tokens, int64_t N, float* x) {
  const int64_t C = cfg_.hidden_size;
  cuda::embedding_fwd(params_.data() + layout_.embed, tokens, x, N, cfg_.vocab_size, C, nullptr, stream_);
  // HF Gemma: embeddings * tensor(hidden_size ** 0.5), the factor rounded to f32 as on the CPU.
  if (cfg_.embed_scale) cuda::scale(x, static_cast<float>(std::sqrt(static_cast<double>(C))), N * C, stream_);
}

// The lookup's gradient into the embedding rows: times the embedding scale; the padding_idx row gets none.
void CudaTransformer::embed_backward(const int32_t* tokens, int64_t N, float* dx) {
  const int64_t C = cfg_.hidden_size;
  if (cfg_.embed_scale || cfg_.pad_token_id >= 0) {
    const float s = cfg_.embed_scale ? static_cast<float>(std::sqrt(static_cast<double>(C))) : 1.f;
    cuda::embedding_grad_prep(dx, tokens, N, C, s, static_cast<int32_t>(cfg_.pad_token_id), stream_);
  }
  cuda::embedding_bwd(dx, tokens, grads_.data() + layout_.embed, N, C, stream_);
}

void CudaTransformer::act_fwd(const float* gu, uint16_t* h, int64_t N) {
  if (cfg_.act == Activation::gelu_tanh)
    cuda::geglu_fwd(gu, h, N, cfg_.intermediate_size, stream_);
  else
    cuda::swiglu_fwd(gu, h, N, cfg_.intermediate_size, stream_);
}

void CudaTransformer::act_bwd(const float* gu, const float* dh, float* dgu, int64_t N) {
  if (cfg_.act == Activation::gelu_tanh)
    cuda::geglu_bwd(gu, dh, dgu, N, cfg_.intermediate_size, stream_);
  else
    cuda::swiglu_bwd(gu, dh, dgu, N, cfg_.intermediate_size, stream_);
}

CudaTransformer::~CudaTransformer() {
  clear_graphs();
  blas_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaTransformer::synchronize() const { cuda::synchronize(stream_); }

size_t CudaTransformer::state_bytes() const {
  return params_.bytes() + grads_.bytes() + m_.bytes() + v_.bytes() + params16_.bytes();
}

void CudaTransformer::set_precision(kernels::Precision p) {
  static bool said = false;
  if (p == kernels::Precision::f32 && !said) {
    std::fprintf(stderr, "temper: note: the CUDA model computes in bf16 with fp32 master weights (model.precision = "
                         "\"f32\" applies to passes on the CPU)\n");
    said = true;
  }
}

void CudaTransformer::set_params(const float* host) {
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  cuda::copy_to_device(params_.data(), host, params_.bytes(), stream_);
  cuda::f32_to_bf16(params_.data(), params16_.data(), layout_.total(), stream_);
  refresh_norm_weights();
  synchronize();
}
void CudaTransformer::get_params(float* host) const {
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  cuda::copy_to_host(host, params_.data(), params_.bytes(), stream_);
}
void CudaTransformer::get_grads(float* host) const {
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  cuda::copy_to_host(host, grads_.data(), grads_.bytes(), stream_);
}
void CudaTransformer::get_moments(float* m, float* v) const {
  cuda::copy_to_host(m, m_.data(), m_.bytes(), stream_);
  cuda::copy_to_host(v, v_.data(), v_.bytes(), stream_);
}
void CudaTransformer::set_moments(const float* m, const float* v) {
  cuda::copy_to_device(m_.data(), m, m_.bytes(), stream_);
  cuda::copy_to_device(v_.data(), v, v_.bytes(), stream_);
  synchronize();
}
size_t CudaTransformer::memory_bytes() const {
  return state_bytes() + arena_bytes_ + kv_bytes_ + dec_arena_.bytes() + dec_logits_.bytes();
}
std::string CudaTransformer::describe() const {
  const cuda::DeviceInfo d = cuda::device_info(device_);
  char buf[256];
  std::snprintf(buf, sizeof(buf), "cuda:%d %s (sm_%d%d, %.1f GiB)", device_, d.name.c_str(), d.sm_major, d.sm_minor,
                static_cast<double>(d.total_bytes) / (1 << 30));
  return buf;
}
void CudaTransformer::zero_grad() {
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  TEMPER_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
}

void CudaTransformer::plan(int64_t max_tokens, int64_t max_seq) {
  TEMPER_CHECK(max_tokens > 0 && max_seq > 0 && max_seq <= cfg_.max_position_embeddings)
      << "CudaTransformer::plan: max_tokens " << max_tokens << ", max_seq " << max_seq << " (positions up to "
      << cfg_.max_position_embeddings << ")";
  rope_context_ = max_seq;
  if (max_tokens <= max_tokens_ && max_seq <= max_seq_) return;
  max_tokens = std::max(max_tokens, max_tokens_);
  max_seq = std::max(max_seq, max_seq_);
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  const int64_t N = max_tokens, C = cfg_.hidden_size, H = cfg_.num_heads, Hq = H * cfg_.head_dim,
                QKV = cfg_.qkv_dim(), F = cfg_.intermediate_size, L = cfg_.num_layers, V = cfg_.vocab_size;
  const int64_t widest = std::max({C, 2 * F, QKV, Hq});
  auto carve = [&](Carver& c) {
    saved_.assign(static_cast<size_t>(L), Acts{});
    for (auto& a : saved_) {
      a.x_in = c.take<float>(N * C);
      if (recompute_) continue;  // the rest is scratch_'s, rebuilt per layer
      a.lse = c.take<float>(N * H);
      carve_layer(c, a, N);
    }
    scratch_ = Acts{};
    x_tmp_ = nullptr;
    if (recompute_) {
      scratch_.lse = c.take<float>(N * H);
      carve_layer(c, scratch_, N);
      x_tmp_ = c.take<float>(N * C);
    }
    x_final_ = c.take<float>(N * C);
    xf_ = c.take<float>(N * C);
    rstd_f_ = c.take<float>(N);
    dx_ = c.take<float>(N * C);
    dxn_ = c.take<float>(N * C);
    dh_ = c.take<float>(N * F);
    dgu_ = c.take<float>(N * 2 * F);
    do_ = c.take<float>(N * Hq);
    dqkv_ = c.take<float>(N * QKV);
    delta_ = c.take<float>(N * H);
    dkv_ws_ = H == cfg_.num_kv_heads ? nullptr : c.take<float>(2 * N * Hq);  // per-head dK/dV partials
    lp_ = c.take<float>(N);
    ent_ = c.take<float>(N);
    xf16_ = c.take<uint16_t>(N * C);
    d16_ = c.take<uint16_t>(N * widest);
    tokens_ = c.take<int32_t>(N);
    targets_ = c.take<int32_t>(N);
    pos_ = c.take<int32_t>(N);
    colsum_ = c.take<float>(cuda::column_workspace(N, std::max(C, QKV)));
  };
  Carver measure;
  carve(measure);
  arena_.resize(measure.off);
  arena_bytes_ = measure.off;
  Carver real{arena_.data()};
  carve(real);
  const int64_t chunk = std::clamp<int64_t>((int64_t{256} << 20) / (4 * V), 1, N);  // 256 MiB of logits
  cls_ws_ = std::make_unique<cuda::ClassifierWorkspace>(chunk, V);
  max_tokens_ = max_tokens;
  max_seq_ = max_seq;
  size_t free_b = 0, total_b = 0;
  TEMPER_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  TEMPER_LOG(info) << "cuda:" << device_ << " memory plan: weights, gradients, AdamW state "
                   << static_cast<double>(state_bytes()) / (1 << 30) << " GiB; activations for " << max_tokens
                   << " tokens (sequences up to " << max_seq << ") " << static_cast<double>(arena_bytes_) / (1 << 30)
                   << " GiB + classifier " << static_cast<double>(chunk * V * 4) / (1 << 30) << " GiB; KV cache "
                   << static_cast<double>(kv_bytes_) / (1 << 30) << " GiB; free " << static_cast<double>(free_b) / (1 << 30)
                   << " of " << static_cast<double>(total_b) / (1 << 30) << " GiB";
}

void CudaTransformer::linear(int64_t N, int64_t out, int64_t in, const uint16_t* x, int64_t w, float beta, float* y,
                             const float* bias, const float* addend) {
  linear_w(N, out, in, x, w16(w), beta, y, bias, addend);
}

void CudaTransformer::linear_w(int64_t N, int64_t out, int64_t in, const uint16_t* x, const uint16_t* W, float beta,
                               float* y, const float* bias, const float* addend) {
  if (N <= gemv_rows_ && cuda::gemv_fits(N, in, x, W))  // decode-sized: a warp per output column
    return cuda::gemv_bf16(N, out, in, x, W, bias, beta, addend, y, stream_);
  cuda::GemmArgs g = cuda::gemm_args(false, true, N, out, in, x, in, W, in, beta, y, out);
  g.bias = bias;
  g.C_in = addend;
  blas_->gemm(g);
}

void CudaTransformer::prepare(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  TEMPER_CHECK(B > 0 && T > 0) << "CudaTransformer: empty batch " << B << " x " << T;
  if (B * T > max_tokens_ || T > max_seq_) plan(B * T, T);  // grows, as the CPU model does
  const int64_t N = B * T;
  for (int64_t n = 0; n < N; ++n)  // the device kernels cannot throw: check ids here, as the CPU model does
    TEMPER_CHECK(tokens[n] >= 0 && tokens[n] < cfg_.vocab_size && (!targets || targets[n] < cfg_.vocab_size))
        << "CudaTransformer: token " << tokens[n] << " (target " << (targets ? targets[n] : -1) << ") at row " << n
        << " outside the vocabulary of " << cfg_.vocab_size;
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  std::vector<int32_t> pos(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) pos[static_cast<size_t>(n)] = static_cast<int32_t>(n % T);
  cuda::copy_to_device(tokens_, tokens, sizeof(int32_t) * N, stream_);
  if (targets) cuda::copy_to_device(targets_, targets, sizeof(int32_t) * N, stream_);
  cuda::copy_to_device(pos_, pos.data(), sizeof(int32_t) * N, stream_);
  synchronize();  // pos is a stack vector
  select_rope(T);
}

void CudaTransformer::block_linear(int64_t N, int64_t out, int64_t in, const uint16_t* x, int64_t w,
                                   const cuda::Int4DeviceWeights* w4, float beta, float* y, const float* bias,
                                   const float* addend) {
  if (w4) {  // the int4 product adds an addend, never y itself (every residual here names its addend)
    TEMPER_CHECK(beta == 0.f || addend) << "CudaTransformer: the drafter's linear accumulates into y without an addend";
    return cuda::int4_gemm_bf16(N, x, in, *w4, y, out, bias, beta != 0.f ? addend : nullptr, stream_);
  }
  linear(N, out, in, x, w, beta, y, bias, addend);
}

// a.qkv = [q | k | v] of norm(x_in) Wqkv^T (+ bias), q and k through their per-head norms (Qwen3, Gemma-3).
void CudaTransformer::qkv_forward(int64_t l, const Acts& a, int64_t N) {
  const LayerOffsets& o = layout_.layers[static_cast<size_t>(l)];
  const int64_t C = cfg_.hidden_size, D = cfg_.head_dim, H = cfg_.num_heads, Hkv = cfg_.num_kv_heads, Hq = H * D,
                Hk = Hkv * D, QKV = cfg_.qkv_dim();
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  cudaStream_t s = stream_;
  const DraftLayer* d4 = drafting_ ? &draft_[static_cast<size_t>(l)] : nullptr;
  cuda::rmsnorm_fwd(a.x_in, nw(o.attn_norm), a.xn1, a.rstd1, N, C, eps, s);
  float* qkv_out = cfg_.qk_norm ? a.qkv_pre : a.qkv;
  block_linear(N, QKV, C, a.xn1, o.w_qkv, d4 ? d4->qkv.get() : nullptr, 0.f, qkv_out,
               cfg_.qkv_bias ? params_.data() + o.b_qkv : nullptr, nullptr);
  if (!cfg_.qk_norm) return;
  cuda::rmsnorm_heads_fwd(a.qkv_pre, nw(o.q_norm), a.qkv, a.q_rstd, N, H, D, QKV, eps, s);
  cuda::rmsnorm_heads_fwd(a.qkv_pre + Hq, nw(o.k_norm), a.qkv + Hq, a.k_rstd, N, Hkv, D, QKV, eps, s);
  TEMPER_CUDA_CHECK(cudaMemcpy2DAsync(a.qkv + Hq + Hk, sizeof(float) * QKV, a.qkv_pre + Hq + Hk, sizeof(float) * QKV,
                                      sizeof(float) * Hk, static_cast<size_t>(N), cudaMemcpyDeviceToDevice, s));
}

// Rotary on q and k (the layer's table), K and V rounded to bf16 as the CPU model's bf16 precision, then the
// attention with the layer's options into a.o16 (paged: one fused pass that also writes K/V to the cache).
void CudaTransformer::attention_forward(int64_t l, const Acts& a, int64_t B, int64_t T, bool paged, int64_t N) {
  const int64_t D = cfg_.head_dim, H = cfg_.num_heads, Hkv = cfg_.num_kv_heads, Hq = H * D, Hk = Hkv * D,
                QKV = cfg_.qkv_dim();
  cudaStream_t s = stream_;
  const DeviceRope& rope = rope_for(l);
  const kernels::AttnOpts opt = attn_opts(l);
  if (!paged) {
    cuda::rope_fwd(a.qkv, pos_, rope.cos.data(), rope.sin.data(), N, H, D, QKV, s);
    cuda::rope_fwd(a.qkv + Hq, pos_, rope.cos.data(), rope.sin.data(), N, Hkv, D, QKV, s);
    cuda::round_bf16_rows(a.qkv + Hq, N, 2 * Hk, QKV, s);
    kernels::AttnShape sh{B, T, H, Hkv, D, QKV, QKV, Hq, opt};
    cuda::attention_fwd(sh, a.qkv, a.qkv + Hq, a.qkv + Hq + Hk, a.o, a.lse, s);
    cuda::f32_to_bf16(a.o, a.o16, N * Hq, s);
    return;
  }
  const int64_t layer_floats = num_blocks_ * block_size_ * Hk;
  float* kp = k_pool_.data() + l * layer_floats;
  float* vp = v_pool_.data() + l * layer_floats;
  cuda::rope_kv_write(a.qkv, QKV, dec_.pos.data(), rope.cos.data(), rope.sin.data(), N, H, Hkv, D, dec_.tables.data(),
                      dec_.table_stride, block_size_, kp, vp, s);
  cuda::PagedAttnDeviceArgs pa;
  pa.n = N;
  pa.H = H;
  pa.Hkv = Hkv;
  pa.D = D;
  pa.q = a.qkv;
  pa.q_stride = QKV;
  pa.o16 = a.o16;  // straight to the o projection's bf16 input
  pa.o_stride = Hq;
  pa.block_tables = dec_.tables.data();
  pa.table_stride = dec_.table_stride;
  pa.kv_len = dec_.kv_len.data();
  pa.k_pool = kp;
  pa.v_pool = vp;
  pa.block_size = block_size_;
  pa.max_len = dec_.table_stride * block_size_;
  pa.workspace = attn_ws_.data();
  pa.workspace_floats = static_cast<int64_t>(attn_ws_.size());
  pa.opt = opt;
  cuda::paged_attention_fwd(pa, s);
}

// x_out = x_mid + [post-norm] act(norm(x_mid) Wgu^T) Wd^T.
void CudaTransformer::mlp_forward(int64_t l, const Acts& a, float* x_out, int64_t N) {
  const LayerOffsets& o = layout_.layers[static_cast<size_t>(l)];
  const int64_t C = cfg_.hidden_size, F = cfg_.intermediate_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const DraftLayer* d4 = drafting_ ? &draft_[static_cast<size_t>(l)] : nullptr;
  cuda::rmsnorm_fwd(a.x_mid, nw(o.mlp_norm), a.xn2, a.rstd2, N, C, eps, stream_);
  block_linear(N, 2 * F, C, a.xn2, o.w_gu, d4 ? d4->gu.get() : nullptr, 0.f, a.gu, nullptr, nullptr);
  act_fwd(a.gu, a.h16, N);
  const cuda::Int4DeviceWeights* down4 = d4 ? d4->down.get() : nullptr;
  if (!cfg_.sandwich_norm) return block_linear(N, C, F, a.h16, o.w_down, down4, 1.f, x_out, nullptr, a.x_mid);
  block_linear(N, C, F, a.h16, o.w_down, down4, 0.f, a.mo, nullptr, nullptr);
  cuda::rmsnorm_residual_fwd(a.mo, nw(o.mlp_post_norm), a.x_mid, x_out, a.rstd4, N, C, eps, stream_);
}

// x_mid = x_in + [post-norm] attn(rope(qk-norm(norm(x_in) Wqkv^T))) Wo^T, then the MLP block into x_out.
void CudaTransformer::layer_forward(int64_t l, const Acts& a, float* x_out, int64_t B, int64_t T, bool paged,
                                    int64_t n) {
  const LayerOffsets& o = layout_.layers[static_cast<size_t>(l)];
  const int64_t N = paged ? n : B * T, C = cfg_.hidden_size, Hq = cfg_.num_heads * cfg_.head_dim;
  // The drafter's pass (paged only): the block linears on its int4 copy, the rest as the policy's.
  TEMPER_CHECK(paged || !drafting_) << "CudaTransformer: the drafter runs paged passes only";
  const cuda::Int4DeviceWeights* o4 = drafting_ ? draft_[static_cast<size_t>(l)].o.get() : nullptr;
  qkv_forward(l, a, N);
  attention_forward(l, a, B, T, paged, N);
  if (cfg_.sandwich_norm) {
    block_linear(N, C, Hq, a.o16, o.w_o, o4, 0.f, a.ao, nullptr, nullptr);
    cuda::rmsnorm_residual_fwd(a.ao, nw(o.attn_post_norm), a.x_in, a.x_mid, a.rstd3, N, C,
                               static_cast<float>(cfg_.rms_norm_eps), stream_);
  } else {
    block_linear(N, C, Hq, a.o16, o.w_o, o4, 1.f, a.x_mid, nullptr, a.x_in);  // x_mid = x_in + o W_o^T
  }
  mlp_forward(l, a, x_out, N);
}

// dX[N, in] = dY16[N, out] W16[out, in], dY16 in d16_.
void CudaTransformer::grad_input(int64_t N, int64_t out, int64_t in, int64_t w, float* dX) {
  blas_->gemm(cuda::gemm_args(false, false, N, in, out, d16_, out, w16(w), in, 0.f, dX, in));
}

// dW[out, in] += dY16[N, out]^T X16[N, in], dY16 in d16_.
void CudaTransformer::grad_weight(int64_t N, int64_t out, int64_t in, const uint16_t* X, int64_t w) {
  blas_->gemm(cuda::gemm_args(true, false, out, in, N, d16_, out, X, in, 1.f, grads_.data() + w, in));
}

// MLP block backward: dx is the gradient at the layer's output on entry, at x_mid on return.
void CudaTransformer::mlp_backward(int64_t l, const Acts& a, float* dx, int64_t N) {
  const LayerOffsets& o = layout_.layers[static_cast<size_t>(l)];
  float* G = grads_.data();
  const int64_t C = cfg_.hidden_size, F = cfg_.intermediate_size;
  cudaStream_t s = stream_;
  const float* dmo = dx;  // the gradient at the down projection's output
  if (cfg_.sandwich_norm) {
    cuda::rmsnorm_bwd(dx, a.mo, nw(o.mlp_post_norm), a.rstd4, dxn_, G + o.mlp_post_norm, N, C, false, colsum_, s);
    dmo = dxn_;
  }
  cuda::f32_to_bf16(dmo, d16_, N * C, s);
  grad_input(N, C, F, o.w_down, dh_);
  grad_weight(N, C, F, a.h16, o.w_down);
  act_bwd(a.gu, dh_, dgu_, N);
  cuda::f32_to_bf16(dgu_, d16_, N * 2 * F, s);
  grad_weight(N, 2 * F, C, a.xn2, o.w_gu);
  grad_input(N, 2 * F, C, o.w_gu, dxn_);
  cuda::rmsnorm_bwd(dxn_, a.x_mid, nw(o.mlp_norm), a.rstd2, dx, G + o.mlp_norm, N, C, true, colsum_, s);
}

// Attention block backward: dx at x_mid on entry, at x_in on return.
void CudaTransformer::attention_backward(int64_t l, const Acts& a, float* dx, int64_t B, int64_t T) {
  const LayerOffsets& o = layout_.layers[static_cast<size_t>(l)];
  float* G = grads_.data();
  const int64_t N = B * T, C = cfg_.hidden_size, D = cfg_.head_dim, H = cfg_.num_heads, Hkv = cfg_.num_kv_heads,
                Hq = H * D, Hk = Hkv * D, QKV = cfg_.qkv_dim();
  cudaStream_t s = stream_;
  const float* dao = dx;  // the gradient at the o projection's output
  if (cfg_.sandwich_norm) {
    cuda::rmsnorm_bwd(dx, a.ao, nw(o.attn_post_norm), a.rstd3, dxn_, G + o.attn_post_norm, N, C, false, colsum_, s);
    dao = dxn_;
  }
  cuda::f32_to_bf16(dao, d16_, N * C, s);
  grad_input(N, C, Hq, o.w_o, do_);
  grad_weight(N, C, Hq, a.o16, o.w_o);
  kernels::AttnShape sh{B, T, H, Hkv, D, QKV, QKV, Hq, attn_opts(l)};
  cuda::attention_bwd(sh, a.qkv, a.qkv + Hq, a.qkv + Hq + Hk, a.o, a.lse, do_, dqkv_, dqkv_ + Hq, dqkv_ + Hq + Hk,
                      delta_, s, dkv_ws_);
  const DeviceRope& rope = rope_for(l);
  cuda::rope_bwd(dqkv_, pos_, rope.cos.data(), rope.sin.data(), N, H, D, QKV, s);
  cuda::rope_bwd(dqkv_ + Hq, pos_, rope.cos.data(), rope.sin.data(), N, Hkv, D, QKV, s);
  if (cfg_.qk_norm) {  // in place: dqkv_'s q and k become the gradients at the norms' inputs
    cuda::rmsnorm_heads_bwd(dqkv_, a.qkv_pre, nw(o.q_norm), a.q_rstd, dqkv_, G + o.q_norm, N, H, D, QKV, colsum_, s);
    cuda::rmsnorm_heads_bwd(dqkv_ + Hq, a.qkv_pre + Hq, nw(o.k_norm), a.k_rstd, dqkv_ + Hq, G + o.k_norm, N, Hkv, D,
                            QKV, colsum_, s);
  }
  if (cfg_.qkv_bias) cuda::column_sum_add(dqkv_, N, QKV, QKV, G + o.b_qkv, colsum_, s);
  cuda::f32_to_bf16(dqkv_, d16_, N * QKV, s);
  grad_weight(N, QKV, C, a.xn1, o.w_qkv);
  grad_input(N, QKV, C, o.w_qkv, dxn_);
  cuda::rmsnorm_bwd(dxn_, a.x_in, nw(o.attn_norm), a.rstd1, dx, G + o.attn_norm, N, C, true, colsum_, s);
}

void CudaTransformer::layer_backward(int64_t l, const Acts& a, float* dx, int64_t B, int64_t T) {
  mlp_backward(l, a, dx, B * T);
  attention_backward(l, a, dx, B, T);
}

void CudaTransformer::set_recompute(bool on) {
  if (on == recompute_) return;
  recompute_ = on;
  if (max_tokens_ == 0) return;
  const int64_t tokens = max_tokens_, seq = max_seq_;
  max_tokens_ = max_seq_ = 0;  // plan() only grows: carve the arena anew for the same shapes
  plan(tokens, seq);
}

const CudaTransformer::Acts& CudaTransformer::acts_for(int64_t l) {
  if (!recompute_) return saved_[static_cast<size_t>(l)];
  scratch_view_ = scratch_;
  scratch_view_.x_in = saved_[static_cast<size_t>(l)].x_in;
  return scratch_view_;
}

void CudaTransformer::trunk_forward(int64_t B, int64_t T) {
  const int64_t N = B * T, C = cfg_.hidden_size, L = cfg_.num_layers;
  embed(tokens_, N, saved_[0].x_in);
  for (int64_t l = 0; l < L; ++l) {
    float* x_out = l + 1 == L ? x_final_ : saved_[static_cast<size_t>(l + 1)].x_in;
    layer_forward(l, acts_for(l), x_out, B, T, false, 0);
  }
  cuda::rmsnorm_fwd(x_final_, nw(layout_.final_norm), xf_, rstd_f_, N, C, static_cast<float>(cfg_.rms_norm_eps),
                    stream_);
  cuda::f32_to_bf16(xf_, xf16_, N * C, stream_);
}

// The LM head over the final normed hidden states (xf_, xf16_) of N rows.
cuda::ClassifierDeviceArgs CudaTransformer::classifier_args(bool with_targets, int64_t N) {
  cuda::ClassifierDeviceArgs ca;
  ca.h = xf_;
  ca.w = params_.data() + layout_.lm_head;
  ca.h_bf16 = xf16_;
  ca.w_bf16 = w16(layout_.lm_head);
  ca.targets = with_targets ? targets_ : nullptr;
  ca.N = N;
  ca.C = cfg_.hidden_size;
  ca.V = cfg_.vocab_size;
  ca.logprob = lp_;
  ca.entropy = ent_;
  ca.softcap = static_cast<float>(cfg_.final_softcap);
  return ca;
}

void CudaTransformer::forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                       const kernels::ClassifierLoss& loss, float* logprob, float* entropy) {
  prepare(tokens, targets, B, T);
  const int64_t N = B * T, C = cfg_.hidden_size;
  trunk_forward(B, T);
  cuda::ClassifierDeviceArgs ca = classifier_args(targets != nullptr, N);
  ca.loss = &loss;
  ca.dh = dxn_;
  ca.dw = grads_.data() + layout_.lm_head;
  cuda::classifier_fused(*blas_, *cls_ws_, ca);
  cuda::rmsnorm_bwd(dxn_, x_final_, nw(layout_.final_norm), rstd_f_, dx_, grads_.data() + layout_.final_norm, N, C,
                    false, colsum_, stream_);
  for (int64_t l = cfg_.num_layers - 1; l >= 0; --l) {
    const Acts& a = acts_for(l);
    if (recompute_) layer_forward(l, a, x_tmp_, B, T, false, 0);  // the layer's activations again, from its input
    layer_backward(l, a, dx_, B, T);
  }
  embed_backward(tokens_, N, dx_);
  if (logprob) cuda::copy_to_host(logprob, lp_, sizeof(float) * N, stream_);
  if (entropy) cuda::copy_to_host(entropy, ent_, sizeof(float) * N, stream_);
  synchronize();
}

void CudaTransformer::forward_logprobs(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                       float* logprob, float* entropy) {
  prepare(tokens, targets, B, T);
  const int64_t N = B * T;
  trunk_forward(B, T);
  cuda::ClassifierDeviceArgs ca = classifier_args(targets != nullptr, N);
  cuda::classifier_fused(*blas_, *cls_ws_, ca);
  if (logprob) cuda::copy_to_host(logprob, lp_, sizeof(float) * N, stream_);
  if (entropy) cuda::copy_to_host(entropy, ent_, sizeof(float) * N, stream_);
  synchronize();
}

double CudaTransformer::adamw_step(const kernels::AdamWConfig& c, float lr, int64_t step, double max_grad_norm) {
  const int64_t n = layout_.total();
  cuda::grad_sumsq(grads_.data(), n, norm_ws_.data(), norm_out_.data(), stream_);
  double sumsq = 0;
  cuda::copy_to_host(&sumsq, norm_out_.data(), sizeof(double), stream_);
  const double norm = std::sqrt(sumsq);
  if (!std::isfinite(norm)) return norm;  // the caller skips and counts the step, as on the CPU
  // Clipping is a factor inside the AdamW pass (the gradients stay as they are).
  float grad_scale = 1.f;
  if (max_grad_norm > 0) {
    const double coef = max_grad_norm / (norm + 1e-6);
    if (coef < 1.0) grad_scale = static_cast<float>(coef);
  }
  cuda::adamw_step(params_.data(), grads_.data(), m_.data(), v_.data(), n, lr, c.beta1, c.beta2, c.eps, c.weight_decay,
                   step, params16_.data(), stream_, grad_scale);
  refresh_norm_weights();
  return norm;
}

void CudaTransformer::ensure_pool(int64_t num_blocks, int64_t block_size) {
  TEMPER_CHECK(num_blocks > 0 && block_size > 0) << "KV pool: blocks " << num_blocks << ", block size " << block_size;
  if (num_blocks == num_blocks_ && block_size == block_size_) return;
  const int64_t Hk = cfg_.num_kv_heads * cfg_.head_dim, L = cfg_.num_layers;
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  k_pool_.resize(static_cast<size_t>(L * num_blocks * block_size * Hk));
  v_pool_.resize(k_pool_.size());
  kv_bytes_ = k_pool_.bytes() + v_pool_.bytes();
  ensure_attn_ws();
  TEMPER_LOG(info) << "cuda:" << device_ << " KV cache: " << num_blocks << " blocks of " << block_size << " positions, "
                   << static_cast<double>(kv_bytes_) / (1 << 30) << " GiB";
  clear_graphs();  // they captured the old pool's addresses
}

void CudaTransformer::clear_graphs() {
  for (auto& [n, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
}

void CudaTransformer::ensure_rows(int64_t max_rows, int64_t table_capacity) {
  TEMPER_CHECK(max_rows > 0 && table_capacity > 0) << "decode rows " << max_rows << ", table entries " << table_capacity;
  if (max_rows <= dec_.rows && table_capacity <= dec_.table_capacity) return;
  const int64_t R = std::max(max_rows, dec_.rows), S = std::max(table_capacity, dec_.table_capacity);
  const int64_t C = cfg_.hidden_size;
  dec_.rows = R;
  dec_.table_capacity = S;
  dec_.tokens.resize(R);
  dec_.pos.resize(R);
  dec_.kv_len.resize(R);
  dec_.tables.resize(static_cast<size_t>(R * S));
  dec_.drawn.resize(R);
  dec_.forced.resize(R);
  dec_.out_rows.resize(R);
  dec_.temperature.resize(R);
  dec_.sample_logprob.resize(R);
  dec_.policy_logprob.resize(R);
  dec_.entropy.resize(R);
  dec_.u.resize(R);
  auto carve = [&](Carver& c) {
    dec_x_ = c.take<float>(R * C);
    dec_x2_ = c.take<float>(R * C);
    dec_acts_.lse = nullptr;  // paged attention saves none
    carve_layer(c, dec_acts_, R);
    dec_xf16_ = c.take<uint16_t>(R * C);
    dec_gather16_ = c.take<uint16_t>(R * C);
  };
  Carver measure;
  carve(measure);
  dec_arena_.resize(measure.off);
  Carver real{dec_arena_.data()};
  carve(real);
  ensure_attn_ws();
  clear_graphs();  // they captured the old buffers' addresses
}

// The paged attention's split partials for every decode row at the longest table the rows can hold.
void CudaTransformer::ensure_attn_ws() {
  if (dec_.rows == 0 || block_size_ == 0) return;  // sized once both the rows and the pool exist
  const int64_t want = cuda::paged_attention_workspace_floats(dec_.rows, cfg_.num_heads, cfg_.head_dim,
                                                              dec_.table_capacity * block_size_);
  if (static_cast<int64_t>(attn_ws_.size()) >= want) return;
  attn_ws_.resize(static_cast<size_t>(want));
  clear_graphs();
}

void CudaTransformer::ensure_logits(int64_t n_out) {
  const size_t want = static_cast<size_t>(n_out * cfg_.vocab_size);
  if (dec_logits_.size() >= want) return;
  dec_logits_.resize(want);
  dec_.sample_ws.resize(cuda::sample_rows_workspace_bytes(n_out, cfg_.vocab_size));
  clear_graphs();
}

void CudaTransformer::set_table_stride(int64_t stride) {
  if (stride == dec_.table_stride) return;
  dec_.table_stride = stride;
  clear_graphs();  // they captured the old layout
}

void CudaTransformer::plan_decode(int64_t max_rows, int64_t num_blocks, int64_t block_size, int64_t table_stride) {
  ensure_pool(num_blocks, block_size);
  ensure_rows(max_rows, table_stride);
  set_table_stride(table_stride);
  ensure_logits(max_rows);
  mirrored_pool_ = nullptr;
}

void CudaTransformer::rows_forward(int64_t n) {
  const int64_t L = cfg_.num_layers;
  embed(dec_.tokens.data(), n, dec_x_);
  float *cur = dec_x_, *next = dec_x2_;
  for (int64_t l = 0; l < L; ++l) {
    Acts a = dec_acts_;
    a.x_in = cur;
    layer_forward(l, a, next, 1, n, true, n);
    std::swap(cur, next);
  }
  last_hidden_ = cur;
}

void CudaTransformer::forward_paged(const PagedStep& st, KvPool& pool) {
  paged_logits(st, pool);
  if (st.n_out > 0)
    cuda::copy_to_host(st.logits, dec_logits_.data(), sizeof(float) * st.n_out * cfg_.vocab_size, stream_);
  synchronize();  // the staging vectors are reused by the next step
}

void CudaTransformer::forward_paged_choose(const PagedStep& st, KvPool& pool, DeviceChoice* choices) {
  paged_logits(st, pool);
  const int64_t n = st.n_out;
  if (n == 0) return synchronize();
  h_temp_.resize(static_cast<size_t>(n));
  h_u_.resize(static_cast<size_t>(n));
  h_forced_.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    const DeviceChoice& c = choices[r];
    h_temp_[static_cast<size_t>(r)] = c.greedy ? 0.f : c.temperature;  // <= 0: greedy (cuda/sampling.h)
    h_u_[static_cast<size_t>(r)] = c.u;
    TEMPER_CHECK(c.forced < cfg_.vocab_size) << "forward_paged_choose: row " << r << " forces token " << c.forced
                                             << " outside the vocabulary of " << cfg_.vocab_size;
    h_forced_[static_cast<size_t>(r)] = c.forced;
  }
  cuda::copy_to_device(dec_.temperature.data(), h_temp_.data(), sizeof(float) * n, stream_);
  cuda::copy_to_device(dec_.u.data(), h_u_.data(), sizeof(double) * n, stream_);
  cuda::copy_to_device(dec_.forced.data(), h_forced_.data(), sizeof(int32_t) * n, stream_);
  cuda::SampleRowsArgs sa = sample_args(n);
  sa.forced = dec_.forced.data();
  cuda::sample_rows(sa, stream_);
  h_drawn_.resize(static_cast<size_t>(n));
  h_lp_.resize(static_cast<size_t>(n));
  h_plp_.resize(static_cast<size_t>(n));
  h_ent_.resize(static_cast<size_t>(n));
  cuda::copy_to_host(h_drawn_.data(), dec_.drawn.data(), sizeof(int32_t) * n, stream_);
  cuda::copy_to_host(h_lp_.data(), dec_.sample_logprob.data(), sizeof(float) * n, stream_);
  cuda::copy_to_host(h_plp_.data(), dec_.policy_logprob.data(), sizeof(float) * n, stream_);
  cuda::copy_to_host(h_ent_.data(), dec_.entropy.data(), sizeof(float) * n, stream_);
  for (int64_t r = 0; r < n; ++r) {
    DeviceChoice& c = choices[r];
    c.token = h_drawn_[static_cast<size_t>(r)];
    TEMPER_CHECK(c.token >= 0) << "forward_paged_choose: row " << r << " has no finite logit";
    c.sample_logprob = c.greedy && c.forced < 0 ? 0.f : h_lp_[static_cast<size_t>(r)];
    c.policy_logprob = h_plp_[static_cast<size_t>(r)];
    c.entropy = h_ent_[static_cast<size_t>(r)];
  }
}

void CudaTransformer::paged_logits(const PagedStep& st, KvPool& pool) {
  TEMPER_CHECK(st.n > 0 && st.tokens && st.pos && st.tables) << "forward_paged: empty step";
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  const int64_t n = st.n, bs = pool.block_size(), Hk = cfg_.num_kv_heads * cfg_.head_dim, L = cfg_.num_layers,
                C = cfg_.hidden_size, V = cfg_.vocab_size;
  if (mirrored_pool_ != &pool || num_blocks_ != pool.num_blocks() || block_size_ != bs) {
    ensure_pool(pool.num_blocks(), bs);  // a new pool: its sequences start empty
    mirrored_pool_ = &pool;
  }
  const size_t block_bytes = sizeof(float) * static_cast<size_t>(bs * Hk);
  for (const auto& [from, to] : pool.block_copies())  // the host pool's copy-on-write, replayed here
    for (int64_t l = 0; l < L; ++l) {
      const int64_t base = l * num_blocks_;
      d2d(k_pool_.data() + (base + to) * bs * Hk, k_pool_.data() + (base + from) * bs * Hk, block_bytes, stream_);
      d2d(v_pool_.data() + (base + to) * bs * Hk, v_pool_.data() + (base + from) * bs * Hk, block_bytes, stream_);
    }
  pool.clear_block_copies();
  pool.set_mirrored();
  int64_t stride = 1, max_len = 0;
  for (int64_t i = 0; i < n; ++i) {
    TEMPER_CHECK(st.pos[i] >= 0 && st.pos[i] < cfg_.max_position_embeddings)
        << "forward_paged: position " << st.pos[i] << " outside [0, " << cfg_.max_position_embeddings << ")";
    TEMPER_CHECK(st.tokens[i] >= 0 && st.tokens[i] < V) << "forward_paged: token " << st.tokens[i] << " outside [0, " << V << ")";
    stride = std::max<int64_t>(stride, st.pos[i] / bs + 1);
    max_len = std::max<int64_t>(max_len, st.pos[i] + 1);
  }
  select_rope(max_len);
  TEMPER_CHECK(st.n_out >= 0 && st.n_out <= n) << "forward_paged: " << st.n_out << " output rows of " << n;
  // Room for tables as wide as the context allows (no reallocation as sequences grow); this step's
  // layout only as wide as its longest sequence needs (what is built and copied each step).
  ensure_rows(n, std::max(stride, (cfg_.max_position_embeddings + bs - 1) / bs));
  set_table_stride(stride);
  ensure_logits(st.n_out);
  const int64_t S = dec_.table_stride;
  h_tokens_.assign(st.tokens, st.tokens + n);
  h_pos_.assign(st.pos, st.pos + n);
  h_len_.resize(static_cast<size_t>(n));
  h_tables_.assign(static_cast<size_t>(n * S), 0);
  for (int64_t i = 0; i < n; ++i) {
    h_len_[static_cast<size_t>(i)] = st.pos[i] + 1;
    for (int64_t j = 0; j <= st.pos[i] / bs; ++j) h_tables_[static_cast<size_t>(i * S + j)] = st.tables[i][j];
  }
  h_out_.assign(st.out_rows, st.out_rows + st.n_out);
  for (int64_t r = 0; r < st.n_out; ++r)
    TEMPER_CHECK(st.out_rows[r] >= 0 && st.out_rows[r] < n) << "forward_paged: output row " << st.out_rows[r];
  cuda::copy_to_device(dec_.tokens.data(), h_tokens_.data(), sizeof(int32_t) * n, stream_);
  cuda::copy_to_device(dec_.pos.data(), h_pos_.data(), sizeof(int32_t) * n, stream_);
  cuda::copy_to_device(dec_.kv_len.data(), h_len_.data(), sizeof(int32_t) * n, stream_);
  cuda::copy_to_device(dec_.tables.data(), h_tables_.data(), sizeof(int32_t) * h_tables_.size(), stream_);
  if (st.n_out > 0) cuda::copy_to_device(dec_.out_rows.data(), h_out_.data(), sizeof(int64_t) * st.n_out, stream_);
  rows_forward(n);
  if (st.n_out > 0) {
    cuda::rmsnorm_fwd(last_hidden_, nw(layout_.final_norm), dec_xf16_, dec_acts_.rstd1, n, C,
                      static_cast<float>(cfg_.rms_norm_eps), stream_);
    cuda::gather_rows(dec_xf16_, C, dec_.out_rows.data(), st.n_out, C, dec_gather16_, stream_);
    if (drafting_)
      draft_head_logits(st.n_out);
    else
      linear(st.n_out, V, C, dec_gather16_, layout_.lm_head, 0.f, dec_logits_.data());
    if (!drafting_)
      cuda::softcap_rows(dec_logits_.data(), st.n_out * V, static_cast<float>(cfg_.final_softcap), stream_);
  }
}

void CudaTransformer::upload_drafter(const Int4Drafter& d) {
  const std::vector<Int4Layer>& layers = d.layers();
  TEMPER_CHECK(static_cast<int64_t>(layers.size()) == cfg_.num_layers)
      << "forward_paged: the drafter was built for another model (" << layers.size() << " layers, this one "
      << cfg_.num_layers << ")";
  if (d.copy_id() == draft_id_) return;
  draft_id_ = 0;  // until this upload completes (a failed one leaves no copy marked as here)
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  draft_.resize(layers.size());
  auto put = [](std::unique_ptr<cuda::Int4DeviceWeights>& to, const kernels::Int4Weights& w) {
    if (to)
      to->upload(w);
    else
      to = std::make_unique<cuda::Int4DeviceWeights>(w);
  };
  for (size_t l = 0; l < layers.size(); ++l) {
    put(draft_[l].qkv, layers[l].qkv);
    put(draft_[l].o, layers[l].o);
    put(draft_[l].gu, layers[l].gu);
    put(draft_[l].down, layers[l].down);
  }
  if (const kernels::Int4Weights* head = d.head_int4())
    put(draft_head_, *head);
  else
    draft_head_.reset();
  // A vocabulary subset: its tokens, and with a bf16 head the drafter's own rows of it (row-major: the drafter made
  // them for a device that does not read the packed layout).
  const std::vector<int32_t>& ids = d.vocab_ids();
  const int64_t C = cfg_.hidden_size, N = static_cast<int64_t>(ids.size());
  draft_vocab_ = 0;
  if (N > 0) {
    TEMPER_CHECK(N <= cfg_.vocab_size && ids.front() >= 0 && ids.back() < cfg_.vocab_size)
        << "forward_paged: the drafter's vocabulary subset does not fit this model's vocabulary of " << cfg_.vocab_size;
    if (draft_ids_.size() < static_cast<size_t>(N)) draft_ids_.resize(static_cast<size_t>(N));
    cuda::copy_to_device(draft_ids_.data(), ids.data(), sizeof(int32_t) * static_cast<size_t>(N), stream_);
    if (!draft_head_) {
      TEMPER_CHECK(d.head_bf16() && !d.head_bf16_packed())
          << "forward_paged: the drafter's subset head is not in the row-major bf16 layout this device reads "
             "(refresh the drafter with this model)";
      if (draft_head16_.size() < static_cast<size_t>(N * C)) draft_head16_.resize(static_cast<size_t>(N * C));
      cuda::copy_to_device(draft_head16_.data(), d.head_bf16(), sizeof(uint16_t) * static_cast<size_t>(N * C), stream_);
    }
    synchronize();  // the host vectors belong to the drafter's copy, which a refresh may reuse
  }
  draft_vocab_ = N;
  draft_id_ = d.copy_id();
}

void CudaTransformer::draft_head_logits(int64_t n_out) {
  const int64_t C = cfg_.hidden_size, V = cfg_.vocab_size, N = draft_vocab_;
  float* z = dec_logits_.data();
  if (N > 0) {  // the subset's logits first, then scattered into whole rows
    if (draft_logits_.size() < static_cast<size_t>(n_out * N)) draft_logits_.resize(static_cast<size_t>(n_out * N));
    z = draft_logits_.data();
  }
  const int64_t ld = N > 0 ? N : V;
  if (draft_head_)
    cuda::int4_gemm_bf16(n_out, dec_gather16_, C, *draft_head_, z, ld, nullptr, nullptr, stream_);
  else if (N > 0)
    linear_w(n_out, N, C, dec_gather16_, draft_head16_.data(), 0.f, z);
  else
    linear(n_out, V, C, dec_gather16_, layout_.lm_head, 0.f, z);
  cuda::softcap_rows(z, n_out * ld, static_cast<float>(cfg_.final_softcap), stream_);  // before the -inf fill
  if (N > 0)
    cuda::scatter_columns(z, n_out, N, draft_ids_.data(), V, -std::numeric_limits<float>::infinity(),
                          dec_logits_.data(), stream_);
}

void CudaTransformer::forward_paged_draft(const PagedStep& st, KvPool& pool, const Int4Drafter& drafter) {
  upload_drafter(drafter);
  drafting_ = true;
  try {
    forward_paged(st, pool);
  } catch (...) {
    drafting_ = false;
    throw;
  }
  drafting_ = false;
}

double CudaTransformer::optimizer_step(dist::Communicator* comm, const kernels::AdamWConfig& c, float lr, int64_t step,
                                       double max_grad_norm) {
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  const int64_t n = layout_.total();
  if (comm && comm->size() > 1) {
    synchronize();
    if (std::string(comm->backend()) == "nccl") {
      comm->allreduce_sum(grads_.data(), n);  // NCCL reduces device memory in place
    } else {  // MPI: through the host
      h_grads_.resize(static_cast<size_t>(n));
      get_grads(h_grads_.data());
      comm->allreduce_sum(h_grads_.data(), n);
      cuda::copy_to_device(grads_.data(), h_grads_.data(), grads_.bytes(), stream_);
      synchronize();
    }
  }
  return adamw_step(c, lr, step, max_grad_norm);
}

// Sampling rows [0, n) of dec_logits_ with the decode buffers' temperatures and uniforms, into their outputs.
cuda::SampleRowsArgs CudaTransformer::sample_args(int64_t n) const {
  cuda::SampleRowsArgs sa;
  sa.logits = dec_logits_.data();
  sa.B = n;
  sa.V = cfg_.vocab_size;
  sa.ld = cfg_.vocab_size;
  sa.temperature = dec_.temperature.data();
  sa.u = dec_.u.data();
  sa.token = dec_.drawn.data();
  sa.sample_logprob = dec_.sample_logprob.data();
  sa.policy_logprob = dec_.policy_logprob.data();
  sa.entropy = dec_.entropy.data();
  sa.workspace = dec_.sample_ws.data();
  sa.workspace_bytes = dec_.sample_ws.size();
  return sa;
}

void CudaTransformer::decode_forward(int64_t n) {
  const int64_t C = cfg_.hidden_size, V = cfg_.vocab_size;
  rows_forward(n);
  cuda::rmsnorm_fwd(last_hidden_, nw(layout_.final_norm), dec_xf16_, dec_acts_.rstd1, n, C,
                    static_cast<float>(cfg_.rms_norm_eps), stream_);
  linear(n, V, C, dec_xf16_, layout_.lm_head, 0.f, dec_logits_.data());
  cuda::softcap_rows(dec_logits_.data(), n * V, static_cast<float>(cfg_.final_softcap), stream_);
  cuda::sample_rows(sample_args(n), stream_);
  cuda::decode_advance(dec_.drawn.data(), dec_.tokens.data(), dec_.pos.data(), dec_.kv_len.data(), n, stream_);
}

void CudaTransformer::decode_step(int64_t n, bool use_graph) {
  TEMPER_CHECK(n > 0 && n <= dec_.rows) << "decode_step: " << n << " rows, planned " << dec_.rows
                                        << " (call plan_decode first)";
  TEMPER_CHECK(cfg_.rope_scaling.type != kernels::RopeScaling::Type::longrope)
      << "decode_step: longrope (Phi-3) picks its RoPE table from the longest position, which stays on the device "
         "here; use forward_paged or forward_paged_choose";
  TEMPER_CUDA_CHECK(cudaSetDevice(device_));
  ensure_logits(n);  // paged_logits may have grown the rows past the logits buffer (this clears stale graphs)
  if (!use_graph) {
    decode_forward(n);
    return;
  }
  Graph& g = graphs_[n];
  if (g.exec) {
    TEMPER_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    return;
  }
  if (g.runs++ == 0) {  // eager first: GEMM plans and kernel attributes are made outside the capture
    decode_forward(n);
    return;
  }
  cudaGraph_t graph = nullptr;
  TEMPER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  decode_forward(n);
  TEMPER_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  TEMPER_CUDA_CHECK(cudaGraphInstantiate(&g.exec, graph, 0));
  cudaGraphDestroy(graph);
  TEMPER_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
}

}  // namespace temper

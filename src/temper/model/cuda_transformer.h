// The decoder on one CUDA device: the device twin of model/transformer.h, for every family the CPU model runs
// (Llama, Qwen2, Qwen3, Mistral, Gemma-2/3, Phi-3; ModelConfig), with the same formulas. fp32 master
// weights, gradients and AdamW moments (flat buffers laid out by ParamLayout, as on the CPU) with a
// bf16 compute copy refreshed by the optimizer; GEMMs in bf16 on tensor cores with fp32
// accumulation (cuBLASLt). Rollouts on a paged KV cache on the device, and the speculative drafter's pass.
// Per-layer recomputation (set_recompute) as the CPU model's: each layer's input kept, the rest recomputed in the
// backward. Leaves out (clear errors): longrope (Phi-3) in decode_step, whose positions stay on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "temper/kernels/adamw.h"
#include "temper/kernels/attention.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/cuda/classifier.h"
#include "temper/kernels/cuda/gemm.h"
#include "temper/kernels/cuda/int4_matmul.h"
#include "temper/kernels/cuda/runtime.h"
#include "temper/kernels/cuda/sampling.h"
#include "temper/kernels/rope.h"
#include "temper/model/config.h"
#include "temper/model/device_model.h"
#include "temper/model/param_layout.h"

namespace temper {

// Device buffers of a decode batch: the engine (or the benchmark) fills tokens/pos/kv_len/tables
// and the per-row temperature and uniforms; a step writes the drawn tokens and their statistics.
struct CudaDecodeBuffers {
  int64_t rows = 0, table_capacity = 0;  // allocated rows and table entries per row
  int64_t table_stride = 0;               // entries per row in the current layout (<= table_capacity)
  cuda::DeviceBuffer<int32_t> tokens, pos, kv_len, tables, drawn, forced;
  cuda::DeviceBuffer<int64_t> out_rows;
  cuda::DeviceBuffer<float> temperature, sample_logprob, policy_logprob, entropy;
  cuda::DeviceBuffer<double> u;
  cuda::DeviceBuffer<uint8_t> sample_ws;  // cuda::sample_rows's scratch for the rows that have logits
};

// Carves typed arrays out of one allocation, 256-byte aligned; with a null base it only measures.
struct Carver {
  uint8_t* base = nullptr;
  size_t off = 0;
  template <class T>
  T* take(int64_t n) {
    off = (off + 255) / 256 * 256;
    T* p = base ? reinterpret_cast<T*>(base + off) : nullptr;
    off += static_cast<size_t>(n) * sizeof(T);
    return p;
  }
};

// Activations saved for backward in one device arena planned once (GEMM inputs kept in bf16, the rest
// in f32); the loss through the fused classifier and the host-side ClassifierLoss every RL method
// implements. Rollouts: a paged KV cache on the device, decode steps that sample on the device and
// advance themselves, capturable as one CUDA graph per batch size.
// The speculative drafter's pass (forward_paged_draft): its int4 block linears on the device (cuda/int4_matmul.h),
// norms, embeddings and the LM head this model's (its bf16 compute copy; an int4 head when the drafter has one). A
// drafter over a vocabulary subset brings its own head rows (bf16 or int4, uploaded with its weights); their logits
// are scattered into whole rows, -inf outside the subset, as on the CPU.
class CudaTransformer final : public DeviceModel {
 public:
  explicit CudaTransformer(const ModelConfig& cfg, int device = 0);
  ~CudaTransformer();
  CudaTransformer(const CudaTransformer&) = delete;
  CudaTransformer& operator=(const CudaTransformer&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  cudaStream_t stream() const { return stream_; }
  void synchronize() const;

  // Parameters as the CPU model's flat f32 buffer (layout().total() floats).
  std::string describe() const override;
  void set_params(const float* host) override;
  void get_params(float* host) const override;
  void get_grads(float* host) const override;
  void get_moments(float* m, float* v) const override;
  void set_moments(const float* m, const float* v) override;
  void zero_grad() override;
  size_t state_bytes() const;  // params, grads, moments, bf16 copy
  size_t memory_bytes() const override;

  // Training: reserve activations for batches of up to max_tokens = B*T tokens, T <= max_seq (grows
  // only; the passes grow it too).
  void plan(int64_t max_tokens, int64_t max_seq) override;
  void set_precision(kernels::Precision p) override;
  // Recomputation: the arena keeps each layer's input and one layer's activations (re-planned now if planned).
  void set_recompute(bool on) override;
  bool recompute() const { return recompute_; }
  size_t activation_bytes() const { return arena_bytes_; }
  // As Transformer::forward_backward / forward_logprobs; tokens, targets, logprob, entropy are host arrays.
  void forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                        const kernels::ClassifierLoss& loss, float* logprob, float* entropy) override;
  void forward_logprobs(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float* logprob,
                        float* entropy) override;
  // AdamW over the whole flat buffer with global-norm clipping (max_grad_norm <= 0: none); refreshes
  // the bf16 copy. Returns the gradient norm before clipping (non-finite: nothing applied).
  double adamw_step(const kernels::AdamWConfig& c, float lr, int64_t step, double max_grad_norm);
  double optimizer_step(dist::Communicator* comm, const kernels::AdamWConfig& c, float lr, int64_t step,
                        double max_grad_norm) override;
  // The rollout engine's step (DeviceModel): the host pool's block tables, K/V in device blocks of the
  // same ids; logits of the output rows copied to step.logits.
  void forward_paged(const PagedStep& step, KvPool& pool) override;
  // The same step with each output row's token chosen here (cuda/sampling.h): only the choices come back.
  bool can_choose() const override { return true; }
  void forward_paged_choose(const PagedStep& step, KvPool& pool, DeviceChoice* choices) override;
  // The drafter's step: its 4-bit weights uploaded when its copy in use changed (Int4Drafter::copy_id), then the
  // paged forward with them; logits to step.logits.
  void forward_paged_draft(const PagedStep& step, KvPool& pool, const Int4Drafter& drafter) override;
  bool reads_draft_head_bf16() const override { return false; }  // the bf16 head is this model's compute copy

  // Rollouts: a KV pool of num_blocks blocks of block_size positions per layer, and buffers for up
  // to max_rows decode rows with block tables of table_stride entries.
  void plan_decode(int64_t max_rows, int64_t num_blocks, int64_t block_size, int64_t table_stride);
  void ensure_pool(int64_t num_blocks, int64_t block_size);  // (re)allocates the KV pool when the shape changes
  void ensure_rows(int64_t max_rows, int64_t table_capacity);  // grows the decode row buffers
  size_t kv_bytes() const { return kv_bytes_; }
  CudaDecodeBuffers& decode_buffers() { return dec_; }
  // One decode step over rows [0, n) of decode_buffers(): forward, sampling, advance. With
  // use_graph, the first call for a given n runs eagerly, the second captures, later ones replay.
  void decode_step(int64_t n, bool use_graph);

 private:
  // qkv_pre/q_rstd/k_rstd: the q/k norms' input and rstd (qk_norm); ao/mo: the attention's and MLP's outputs
  // before their sandwich norms, rstd3/rstd4 those norms' (sandwich_norm). Null where the config has none.
  struct Acts {
    float *x_in, *rstd1, *qkv_pre, *q_rstd, *k_rstd, *qkv, *o, *lse, *x_mid, *rstd2, *gu, *ao, *rstd3, *mo, *rstd4;
    uint16_t *xn1, *o16, *xn2, *h16;
  };
  void layer_forward(int64_t l, const Acts& a, float* x_out, int64_t B, int64_t T, bool paged, int64_t n);
  void layer_backward(int64_t l, const Acts& a, float* dx, int64_t B, int64_t T);
  // The layer's pieces (N rows; paged: over the decode buffers' tables and the KV pool).
  void qkv_forward(int64_t l, const Acts& a, int64_t N);  // norm, projection (+ bias), q/k norms: a.qkv
  void attention_forward(int64_t l, const Acts& a, int64_t B, int64_t T, bool paged, int64_t N);  // -> a.o16
  void mlp_forward(int64_t l, const Acts& a, float* x_out, int64_t N);
  void mlp_backward(int64_t l, const Acts& a, float* dx, int64_t N);
  void attention_backward(int64_t l, const Acts& a, float* dx, int64_t B, int64_t T);
  void grad_input(int64_t N, int64_t out, int64_t in, int64_t w, float* dX);           // dX = dY16 W (dY16 in d16_)
  void grad_weight(int64_t N, int64_t out, int64_t in, const uint16_t* X, int64_t w);  // dW += dY16^T X
  // y = x W^T (+ bias) (+ beta * addend) on the policy's weight at offset w, or the drafter's int4 copy in its pass.
  void block_linear(int64_t N, int64_t out, int64_t in, const uint16_t* x, int64_t w, const cuda::Int4DeviceWeights* w4,
                    float beta, float* y, const float* bias, const float* addend);
  void act_fwd(const float* gu, uint16_t* h, int64_t N);  // SwiGLU or GeGLU (cfg_.act)
  void act_bwd(const float* gu, const float* dh, float* dgu, int64_t N);
  kernels::AttnOpts attn_opts(int64_t l) const;  // the layer's scale, soft-cap and window (as the CPU model's)
  struct DeviceRope {                            // a kernels::RopeTable's cos and sin [max_pos, D/2] on the device
    cuda::DeviceBuffer<float> cos, sin;
  };
  void upload_rope(DeviceRope& to, const kernels::RopeTable& t);
  const DeviceRope& rope_for(int64_t l) const;  // Gemma-3's local table on sliding layers; longrope's pick
  void select_rope(int64_t max_pos);            // longrope: the long factors past original_max_position (as HF)
  // The RMSNorm weight at a parameter offset as the kernels take it: w, or the device's (1 + w) (norm_offset).
  const float* nw(int64_t offset) const;
  void refresh_norm_weights();                             // after the weights change (set_params, the optimizer)
  void embed(const int32_t* tokens, int64_t N, float* x);  // the lookup (times sqrt(C) with embed_scale)
  void embed_backward(const int32_t* tokens, int64_t N, float* dx);  // consumes dx
  void trunk_forward(int64_t B, int64_t T);
  void prepare(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // y = x W^T (+ bias) (+ beta * addend; the addend is y itself when null).
  void linear(int64_t N, int64_t out, int64_t in, const uint16_t* x, int64_t w, float beta, float* y,
              const float* bias = nullptr, const float* addend = nullptr);
  // The same with bf16 weights W [out, in] outside the parameters.
  void linear_w(int64_t N, int64_t out, int64_t in, const uint16_t* x, const uint16_t* W, float beta, float* y,
                const float* bias = nullptr, const float* addend = nullptr);
  void decode_forward(int64_t n);
  cuda::SampleRowsArgs sample_args(int64_t n) const;
  cuda::ClassifierDeviceArgs classifier_args(bool with_targets, int64_t N);
  void clear_graphs();
  void set_table_stride(int64_t stride);
  void carve_layer(Carver& c, Acts& a, int64_t N) const;
  const Acts& acts_for(int64_t l);  // layer l's activations: saved_[l], or (recomputing) scratch_ with its input
  void rows_forward(int64_t n);  // embedding and every layer over decode rows [0, n); returns the stream in dec_x_ or dec_x2_
  float* last_hidden_ = nullptr;
  const uint16_t* w16(int64_t offset) const { return params16_.data() + offset; }

  ModelConfig cfg_;
  ParamLayout layout_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::Blas> blas_;
  cuda::DeviceBuffer<float> params_, grads_, m_, v_;
  DeviceRope rope_;             // every layer's (Gemma-3: the global layers'; longrope: the short factors)
  DeviceRope rope_long_;        // longrope: the long factors
  DeviceRope rope_local_;       // Gemma-3: the sliding layers' (rope_local_theta, unscaled)
  bool use_long_rope_ = false;  // this pass's positions reach past original_max_position (longrope)
  int64_t rope_context_ = 0;    // plan()'s longest sequence (0: per pass), as the CPU model
  struct NormRun {              // norm_offset: contiguous norm weights at param offset `param`, at `eff` in norm_eff_
    int64_t param, eff, n;
  };
  std::vector<NormRun> norm_runs_;
  cuda::DeviceBuffer<float> norm_eff_;  // norm_offset: every norm's (1 + w), refreshed with the weights
  cuda::DeviceBuffer<uint16_t> params16_;
  cuda::DeviceBuffer<double> norm_ws_, norm_out_;
  // training arena
  cuda::DeviceBuffer<uint8_t> arena_;
  size_t arena_bytes_ = 0;
  int64_t max_tokens_ = 0, max_seq_ = 0;
  std::vector<Acts> saved_;  // per layer (only x_in when recomputing)
  bool recompute_ = false;
  Acts scratch_{};          // recomputing: the one layer's activations, rebuilt per layer in the backward
  Acts scratch_view_{};     // acts_for's answer: scratch_ with a layer's input
  float* x_tmp_ = nullptr;  // recomputing: the recomputed layer's output (discarded)
  float *x_final_ = nullptr, *xf_ = nullptr, *rstd_f_ = nullptr, *dx_ = nullptr, *dxn_ = nullptr, *dh_ = nullptr,
        *dgu_ = nullptr, *do_ = nullptr, *dqkv_ = nullptr, *delta_ = nullptr, *lp_ = nullptr, *ent_ = nullptr;
  uint16_t *xf16_ = nullptr, *d16_ = nullptr;
  float* colsum_ = nullptr;  // column reductions (norm-weight and bias gradients)
  float* dkv_ws_ = nullptr;  // attention backward's per-query-head dK/dV partials (grouped-query models)
  int32_t *tokens_ = nullptr, *targets_ = nullptr, *pos_ = nullptr;
  std::unique_ptr<cuda::ClassifierWorkspace> cls_ws_;
  // decode
  CudaDecodeBuffers dec_;
  cuda::DeviceBuffer<float> k_pool_, v_pool_;
  cuda::DeviceBuffer<float> attn_ws_;  // paged attention's split partials
  void ensure_attn_ws();
  int64_t num_blocks_ = 0, block_size_ = 0;
  size_t kv_bytes_ = 0;
  cuda::DeviceBuffer<uint8_t> dec_arena_;
  Acts dec_acts_{};
  float *dec_x_ = nullptr, *dec_x2_ = nullptr;
  cuda::DeviceBuffer<float> dec_logits_;  // [rows with logits wanted, V]
  void ensure_logits(int64_t n_out);
  uint16_t *dec_xf16_ = nullptr, *dec_gather16_ = nullptr;
  const KvPool* mirrored_pool_ = nullptr;
  std::vector<int32_t> h_tokens_, h_pos_, h_len_, h_tables_;  // staging for forward_paged (reused)
  std::vector<int64_t> h_out_;
  std::vector<float> h_temp_, h_lp_, h_plp_, h_ent_;
  std::vector<double> h_u_;
  std::vector<int32_t> h_forced_, h_drawn_;
  void paged_logits(const PagedStep& step, KvPool& pool);  // forward_paged up to dec_logits_ (not copied back)
  mutable std::vector<float> h_grads_;
  struct Graph {
    int runs = 0;
    cudaGraphExec_t exec = nullptr;
  };
  std::map<int64_t, Graph> graphs_;
  // The drafter's weights here (forward_paged_draft): per layer qkv, o, gate/up, down; the int4 head if any.
  struct DraftLayer {
    std::unique_ptr<cuda::Int4DeviceWeights> qkv, o, gu, down;
  };
  std::vector<DraftLayer> draft_;
  std::unique_ptr<cuda::Int4DeviceWeights> draft_head_;
  // A vocabulary subset (the drafter's vocab_ids): its tokens, its bf16 head rows [N, C] (with a bf16 head) and the
  // subset's logits before the scatter [rows, N]. draft_vocab_ = 0: the whole vocabulary.
  int64_t draft_vocab_ = 0;
  cuda::DeviceBuffer<int32_t> draft_ids_;
  cuda::DeviceBuffer<uint16_t> draft_head16_;
  cuda::DeviceBuffer<float> draft_logits_;
  void draft_head_logits(int64_t n_out);  // the drafter's LM head over dec_gather16_'s rows, into dec_logits_
  uint64_t draft_id_ = 0;  // the copy uploaded (0: none)
  bool drafting_ = false;  // the paged forward in progress is the drafter's
  void upload_drafter(const Int4Drafter& d);
  // Products of at most this many rows on gemv_bf16 instead of cuBLASLt (TEMPER_CUDA_GEMV=N, 0..8; 0: never).
  // 2 by measurement on an H200 (docs/CUDA.md): 8% faster decode steps at 1 row, level at 2, slower from 4.
  int64_t gemv_rows_ = 2;
};

}  // namespace temper

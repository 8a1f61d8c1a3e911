// The memory plan (memory_plan.h): each item counted as the code that allocates it sizes it.
#include "temper/app/memory_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_model.h"
#include "temper/io/hf_config.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/int4_matmul.h"
#include "temper/model/block_products.h"
#include "temper/model/device_model.h"
#include "temper/model/frozen_base.h"
#include "temper/model/kv_pool.h"
#include "temper/model/param_layout.h"
#include "temper/model/transformer.h"

#ifdef TEMPER_WITH_CUDA
#include "temper/kernels/cuda/runtime.h"
#endif

namespace temper::app {
namespace fs = std::filesystem;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The process beside its buffers: the binary, oneDNN and its JIT kernels, thread stacks (peak RSS of `temper info`:
// 17 MB; of `temper bench train --shape tiny --batch 1 --seq 8`, whose buffers take under 2 MB: 24.4 MB).
constexpr double kHostRuntime = 24 * kMiB;
// A rank's MPI runtime (OpenMPI's libraries, shared-memory transport): `mpirun -np 2 temper bench train --shape
// quickstart --batch 4 --seq 32` peaks at 49.8 MB a rank against 38.3 MB for one process of the same rows.
constexpr double kMpiRuntime = 11.5 * kMiB;
// A CUDA context with cuBLAS(Lt)'s workspaces and the kernels' modules (nvidia-smi on an H100: ~500-600 MiB).
constexpr double kCudaRuntime = 640 * kMiB;

enum class Dev { cpu, mirror, cuda };

Dev device_kind(const std::string& d) {
  if (d == "cpu") return Dev::cpu;
  if (d == "mirror") return Dev::mirror;
  TEMPER_CHECK(d == "cuda" || d.rfind("cuda:", 0) == 0)
      << "memory plan: device '" << d << "' is not cpu, mirror, cuda or cuda:N";
  return Dev::cuda;
}

size_t round64(double floats) {
  return (static_cast<size_t>(floats) * sizeof(float) + 63) / 64 * 64;
}

// A held base's product scratch: the largest panel FrozenBase dequantises (frozen_base.cpp, panel_rows).
double panel_bytes(const ModelConfig& c) {
  int64_t most = 0;
  for (auto [N, K] : block_products(c))
    most = std::max(most, std::min(N, std::max<int64_t>(16, FrozenBase::kPanelFloats / K)) * K);
  return 4.0 * static_cast<double>(most);
}

// LoRA's trainable parameters: rank x (in + out) for each of the seven products of every layer.
int64_t lora_params(const ModelConfig& c, int64_t r) {
  const int64_t C = c.hidden_size, Hq = c.num_heads * c.head_dim, Hk = c.num_kv_heads * c.head_dim,
                F = c.intermediate_size;
  const int64_t per_layer = (C + Hq) + 2 * (C + Hk) + (Hq + C) + 2 * (C + F) + (F + C);
  return c.num_layers * r * per_layer;
}

// The self-drafter's bytes (Int4Drafter::bytes() for each of its lag + 1 copies): the block products in int4 (4 bits,
// an f32 scale and a u8 zero per group, rows padded to 32 inputs and, in the cols16 layout, to 16 outputs) and its
// head: bf16 in the packed layout, int4 in groups of Int4Drafter::kHeadGroup, or the policy's own (f32: none).
double drafter_bytes(const ModelConfig& c, const MemorySettings& s) {
  auto int4 = [](int64_t N, int64_t K, int64_t group) {
    const double Kp = static_cast<double>((K + 31) / 32 * 32), rows = static_cast<double>((N + 15) / 16 * 16);
    return rows * (Kp / 2 + Kp / static_cast<double>(kernels::int4_group_for(K, group)) * 5);
  };
  double copy = 0;
  for (auto [N, K] : block_products(c)) copy += int4(N, K, s.draft_group);
  copy *= static_cast<double>(c.num_layers);
  const int64_t rows = s.draft_vocab > 0 ? std::min(s.draft_vocab, c.vocab_size) : c.vocab_size;
  if (s.draft_head == DraftHead::int4) copy += int4(rows, c.hidden_size, Int4Drafter::kHeadGroup);
  if (s.draft_head == DraftHead::bf16) copy += 2.0 * static_cast<double>(kernels::packed_size(rows, c.hidden_size));
  return static_cast<double>(s.draft_lag + 1) * copy;
}

// Elements of the forward weights' packed copies (Transformer::forward_weights: qkv, o, gate/up, down, LM head).
int64_t packed_elems(const ModelConfig& c) {
  int64_t per_layer = 0;
  for (auto [N, K] : block_products(c)) per_layer += kernels::packed_size(N, K);
  return c.num_layers * per_layer + kernels::packed_size(c.vocab_size, c.hidden_size);
}

// CudaTransformer::plan's arena (carve and carve_layer, cuda_transformer.cpp) and its classifier workspace. With
// recompute (not on the device yet) as the CPU does it: each layer's input kept, one layer's values rebuilt.
double cuda_activation_bytes(const ModelConfig& c, int64_t N, bool recompute) {
  const int64_t C = c.hidden_size, H = c.num_heads, Hq = H * c.head_dim, QKV = c.qkv_dim(), F = c.intermediate_size,
                V = c.vocab_size;
  const int64_t widest = std::max({C, 2 * F, QKV, Hq});
  size_t off = 0;
  auto take = [&](int64_t n, size_t elem) {
    off = (off + 255) / 256 * 256;
    off += static_cast<size_t>(n) * elem;
  };
  auto layer = [&] {
    take(N * C, 4), take(N * H, 4), take(N, 4);
    if (c.qk_norm) take(N * QKV, 4), take(N * H, 4), take(N * c.num_kv_heads, 4);
    take(N * QKV, 4), take(N * Hq, 4), take(N * C, 4), take(N, 4), take(N * 2 * F, 4);
    take(N * C, 2), take(N * Hq, 2), take(N * C, 2), take(N * F, 2);
    if (c.sandwich_norm) take(N * C, 4), take(N, 4), take(N * C, 4), take(N, 4);
  };
  for (int64_t l = 0; l < c.num_layers; ++l) recompute ? take(N * C, 4) : layer();
  if (recompute) layer();
  for (int64_t n : {N * C, N * C, N, N * C, N * C, N * F, N * 2 * F, N * Hq, N * QKV, N * H}) take(n, 4);
  if (H != c.num_kv_heads) take(2 * N * Hq, 4);
  take(N, 4), take(N, 4), take(N * C, 2), take(N * widest, 2), take(N, 4), take(N, 4), take(N, 4);
  take(((N + 127) / 128) * std::max(C, QKV), 4);  // cuda::column_workspace (chunks of kColumnChunk = 128 rows)
  const int64_t chunk = std::clamp<int64_t>((int64_t{256} << 20) / (4 * V), 1, N);  // ClassifierWorkspace
  return static_cast<double>(off) + static_cast<double>(chunk) * static_cast<double>(V + 3) * 4;
}

// A forward-only pass's share of the CPU arena (the reference's log-probs): no per-layer saved values.
double forward_activation_bytes(const ModelConfig& c, int64_t N, int64_t seq) {
  return static_cast<double>(Transformer::activation_bytes_for(c, N, seq, true)) -
         static_cast<double>(c.num_layers) * static_cast<double>(round64(static_cast<double>(N * c.hidden_size)));
}

// Bytes of the KV pool a budget of mb MiB holds (whole blocks, KvPool::blocks_for_budget), or of enough blocks for
// `seqs` sequences of `seq` tokens when mb is 0; elem_bytes its rows' (a device's are f32: host blocks x 4).
double kv_bytes(const ModelConfig& c, int64_t mb, int64_t seqs, int64_t seq, double host_elem, double elem) {
  const double per_block = 2.0 * static_cast<double>(c.num_layers * kKvBlockSize * c.num_kv_heads * c.head_dim);
  double blocks = 0;
  if (mb > 0)
    blocks = std::floor(static_cast<double>(mb) * kMiB / (per_block * host_elem));
  else
    blocks = static_cast<double>(seqs) * std::ceil(static_cast<double>(seq) / kKvBlockSize);
  return blocks * per_block * elem;
}

}  // namespace

ModelConfig read_model_config(const std::string& path) {
  TEMPER_CHECK(fs::exists(path)) << path << ": no such file or directory";
  if (fs::is_regular_file(path) && is_gguf_path(path)) return io::gguf_model_config(io::GgufFile::open(path));
  TEMPER_CHECK(fs::is_directory(path) || path.size() < 5 || path.substr(path.size() - 5) == ".json")
      << path << ": not a model temper can describe (a Hugging Face directory, config.json or .gguf)";
  return io::read_hf_config(fs::is_directory(path) ? path + "/config.json" : path);
}

double MemoryPlan::device_bytes() const {
  double b = 0;
  for (const MemoryItem& i : items)
    if (!on_device || !i.host) b += i.bytes;
  return b;
}

double MemoryPlan::host_bytes() const {
  double b = 0;
  for (const MemoryItem& i : items)
    if (!on_device || i.host) b += i.bytes;
  return b;
}

namespace {

void check_settings(const ModelConfig& cfg, const MemorySettings& s) {
  TEMPER_CHECK(s.micro_batch > 0) << "memory plan: micro-batch must be > 0 sequences, got " << s.micro_batch;
  TEMPER_CHECK(s.seq > 0 && s.seq <= cfg.max_position_embeddings)
      << "memory plan: sequence length must be 1.." << cfg.max_position_embeddings
      << " (the model's max_position_embeddings), got " << s.seq;
  TEMPER_CHECK(s.ranks > 0 && s.local_ranks > 0) << "memory plan: ranks must be > 0, got " << s.ranks;
  TEMPER_CHECK(s.lora_rank >= 0) << "memory plan: LoRA rank must be >= 0, got " << s.lora_rank;
  TEMPER_CHECK(!s.qlora || s.lora_rank > 0) << "memory plan: QLoRA needs a LoRA rank (--lora R)";
  TEMPER_CHECK(s.qlora_format == LoraBase::int4 || s.qlora_format == LoraBase::nf4)
      << "memory plan: QLoRA's base is int4 or nf4, not " << lora_base_name(s.qlora_format);
  TEMPER_CHECK(s.max_new >= 0 && s.max_new < s.seq)
      << "memory plan: max_new (" << s.max_new << ") must be below the sequence length (" << s.seq << ")";
  TEMPER_CHECK(s.max_new == 0 || (s.prompts > 0 && s.group > 0 && s.max_seqs > 0 && s.kv_memory_mb >= 0))
      << "memory plan: rollouts need prompts, group and max_seqs > 0 and kv_memory_mb >= 0";
}

// The plan's items, one named step per part of the run; the derived facts each step reads, computed once.
class PlanBuilder {
 public:
  PlanBuilder(const ModelConfig& cfg, const MemorySettings& s)
      : cfg_(cfg), s_(s), layout_(cfg), dev_(device_kind(s.device)) {
    p_.on_device = dev_ == Dev::cuda;
    for (const ParamEntry& e : layout_.entries()) p_.params += e.numel();
    flat_ = static_cast<double>(layout_.total());
    bf16_ = s.precision == kernels::Precision::bf16, lora_ = s.lora_rank > 0, rollouts_ = s.max_new > 0;
    N_ = s.micro_batch * s.seq;
    p_.tokens = N_;
    p_.trainable = !lora_ ? p_.params : s.lora_trainable > 0 ? s.lora_trainable : lora_params(cfg, s.lora_rank);
    trainable_ = lora_ ? static_cast<double>(p_.trainable) : flat_;
    full_base_ = !lora_ || (s.lora_full_base && !s.qlora);             // the model's own buffers, whole
    dev_host_ = dev_ != Dev::cuda;                                     // where the model's own buffers live
    held_ = lora_ && !full_base_ && s.lora_held && dev_ != Dev::cuda;  // as Transformer::hold_base holds it
    zero2_ = s.shard_gradients && s.shard_optimizer && s.ranks > 1 && !lora_;
    linear_ = static_cast<double>(FrozenBase::params_for(cfg)), rest_ = flat_ - linear_;
  }

  MemoryPlan build() {
    weights();
    for (const auto& item : p_.items) weights_bytes_ += item.bytes;  // the policy as loaded: each explorer process's
    training_state();
    activations();
    rollouts();
    evaluation();
    reference();
    teacher();
    process();
    return p_;
  }

 private:
  void add(std::string name, double bytes, std::string note, bool host) {
    if (bytes > 0) p_.items.push_back({std::move(name), bytes, std::move(note), host});
  }
  double packed_bytes(const ModelConfig& c, double elem) const {
    return s_.packed ? elem * static_cast<double>(packed_elems(c)) : 0;
  }
  // The CPU's copies derived from the f32 weights, which the policy (weights()) and the explorer's snapshot
  // (explorer_snapshot()) each hold: bf16, the row-major and packed copies; f32, the packed copy, only when something
  // decodes. Of the whole model, or of a held base's rest (its LM head packed; the block products are FrozenBase's).
  double model_copy_bytes(bool decodes) const {
    return bf16_ ? 2 * flat_ + packed_bytes(cfg_, 2) : decodes ? packed_bytes(cfg_, 4) : 0;
  }
  double rest_copy_bytes(bool decodes) const {
    const double head = static_cast<double>(kernels::packed_size(cfg_.vocab_size, cfg_.hidden_size));
    return bf16_ ? 2 * rest_ + (s_.packed ? 2 * head : 0) : decodes && s_.packed ? 4 * head : 0;
  }

  // The model's weights: the f32 master and the precision's copies, a frozen base as LoRA holds it, the adapters.
  void weights() {
    const bool decodes = rollouts_ || s_.evaluation;
    if (full_base_) {
      add("weights (f32 master)", 4 * flat_, "4 B x " + std::to_string(layout_.total()) + " (padded)", dev_host_);
      if (dev_ == Dev::cuda)
        add("weights (bf16 copy)", 2 * flat_, "the device's bf16 GEMM operand", false);
      else if (bf16_)
        add("weights (bf16 copies)", model_copy_bytes(decodes),
            s_.packed ? "row-major (backward) + packed (forward)" : "row-major", true);
      else
        add("weights (f32 packed)", model_copy_bytes(decodes), "the decode's products", true);
    }
    char note[256];
    if (lora_ && !full_base_) {
      const LoraBase format = held_format();
      std::snprintf(note, sizeof note, "frozen: block products %s, %s",
                    format == LoraBase::nf4    ? "nf4 (4 bits, an f32 absmax per 64 inputs)"
                    : format == LoraBase::int4 ? "int4 (4 bits, an f32 scale and u8 zero per 128 inputs)"
                                               : "bf16",
                    held_ ? "dequantised by panels" : "embeddings and norms bf16");
      add(s_.qlora ? "base weights (QLoRA)" : "base weights (LoRA)",
          FrozenBase::bytes_for(cfg_, format) + (held_ ? 0 : 2 * rest_), note, dev_host_);
    }
    if (held_) {  // the rest as the f32 model keeps it; the block products' pages given back
      add("weights (f32, the rest)", 4 * rest_, "embeddings, LM head, norms, biases", true);
      if (bf16_)
        add("weights (bf16 copies)", rest_copy_bytes(decodes), "of the rest (the LM head packed)", true);
      else
        add("weights (f32 packed)", rest_copy_bytes(decodes), "the LM head's, for decoding", true);
      add("base panels", panel_bytes(cfg_), "a product's dequantised rows", true);
    }
    if (lora_) {
      std::snprintf(note, sizeof note, "rank %lld: %lld params, f32", static_cast<long long>(s_.lora_rank),
                    static_cast<long long>(p_.trainable));
      add("adapters", 4 * trainable_, note, dev_host_);
    }
    if (dev_ == Dev::mirror && !lora_)
      add("mirror device's copy", 16 * flat_, "the mirror's params, grads and moments", true);
  }

  // Gradients and AdamW moments (ZeRO-1: a rank's share of the moments; ZeRO-2: of the gradients too).
  void training_state() {
    const double shards = s_.shard_optimizer ? static_cast<double>(s_.ranks) : 1.0;
    if (zero2_)
      add("gradients", std::ceil(4 * flat_ / shards) + 4 * live_ranges(),
          "f32: 1/ranks (ZeRO-2) + the backward's ranges", dev_host_);
    else
      add("gradients", 4 * trainable_, lora_ ? "the adapters'" : "f32", dev_host_);
    // Under adapters the base forms no gradient (Transformer::base_frozen): its buffer's pages are never touched.
    char note[256];
    std::snprintf(note, sizeof note, "f32 m and v%s",
                  s_.shard_optimizer && s_.ranks > 1 ? ", 1/ranks each (ZeRO-1)" : "");
    add("AdamW moments", std::ceil(8 * trainable_ / shards), note, dev_host_);
  }

  // ZeRO-2: the flat gradient buffer's floats resident at once during a backward (Transformer::GradSink: a range's
  // pages are given back once it is reduced). The final norm's range (with an untied LM head) goes first, then each
  // layer's; a tied embedding's is written by the LM head first and reduced last, so it stays beside them.
  double live_ranges() const {
    const auto r = layout_.ranges();
    double layer = 0;
    for (size_t i = 1; i + 1 < r.size(); ++i) layer = std::max(layer, static_cast<double>(r[i].second));
    const double embed = static_cast<double>(r.front().second), tail = static_cast<double>(r.back().second);
    return cfg_.tie_word_embeddings ? embed + std::max(layer, tail) : std::max({embed, layer, tail});
  }

  // Activations of one micro-batch (the arena the step plans), and the adapters' scratch.
  void activations() {
    double act = 0;
    if (dev_ == Dev::cuda) {
      act = cuda_activation_bytes(cfg_, N_, s_.recompute);
    } else {
      const int64_t Nt = std::max(N_, s_.seq);
      act = static_cast<double>(Transformer::activation_bytes_for(cfg_, Nt, s_.seq, s_.recompute));
      if (!s_.recompute && !s_.evaluation && !rollouts_ && !s_.reference && !s_.teacher) {
        // Training alone never writes the scratch layer and x_tmp (lazily zeroed pages: no memory until written).
        const double x = static_cast<double>(round64(static_cast<double>(Nt * cfg_.hidden_size)));
        act -= (act - static_cast<double>(Transformer::activation_bytes_for(cfg_, Nt, s_.seq, true))) /
                   static_cast<double>(cfg_.num_layers) +
               2 * x;
      }
      if (dev_ == Dev::mirror) act *= 2;
    }
    if (lora_) act += 4.0 * 2 * static_cast<double>(N_) * 3 * static_cast<double>(s_.lora_rank);
    char note[256];
    std::snprintf(note, sizeof note, "%lld x %lld tokens%s", static_cast<long long>(s_.micro_batch),
                  static_cast<long long>(s_.seq), s_.recompute ? ", recompute" : "");
    add("activations", act, note, dev_host_);
  }

  // Rollouts: the KV cache, the sampler's logits, the activations kept for the update.
  void rollouts() {
    if (!rollouts_) return;
    const int64_t seqs = std::min(s_.max_seqs, s_.prompts * s_.group);
    const double host_elem = bf16_ ? 2 : 4, elem = dev_ == Dev::cuda ? 4 : host_elem;
    char note[256];
    std::snprintf(note, sizeof note, s_.kv_memory_mb > 0 ? "kv_memory_mb %lld" : "%lld sequences of %lld tokens",
                  static_cast<long long>(s_.kv_memory_mb > 0 ? s_.kv_memory_mb : seqs), static_cast<long long>(s_.seq));
    add("KV cache", kv_bytes(cfg_, s_.kv_memory_mb, seqs, s_.seq, host_elem, elem), note, dev_host_);
    add("rollout logits", 4.0 * static_cast<double>(s_.max_seqs * cfg_.vocab_size), "max_seqs x vocabulary, f32",
        dev_host_);
    if (s_.draft)
      add("drafter (int4)", drafter_bytes(cfg_, s_),
          "rl.speculative: " + std::to_string(s_.draft_lag + 1) + " int4 cop" + (s_.draft_lag ? "ies" : "y") +
              ", head " + std::string(enum_name(kDraftHeadNames, s_.draft_head)),
          dev_host_);
    if (s_.explorer_processes > 0) {  // rl/async_processes.h: N programs, each the policy as loaded and its engine
      const double version = 4 * trainable_, kv = kv_bytes(cfg_, s_.kv_memory_mb, seqs, s_.seq, host_elem, elem);
      const double logits = 4.0 * static_cast<double>(s_.max_seqs * cfg_.vocab_size);
      add("versions for the explorers", 2 * version,
          lora_ ? "rl.async: the adapters sent to the explorer processes, this version and the last"
                : "rl.async: the weights sent to them, this version and the last",
          true);
      add("explorer processes",
          static_cast<double>(s_.explorer_processes) * (weights_bytes_ + kv + logits + 2 * version),
          std::to_string(s_.explorer_processes) + " x (the policy as loaded, KV cache, logits, a version received)",
          true);
    } else if (s_.async) {  // rl/async_explorer.h: a Transformer of the previous version (its decode copy), its engine
      add("explorer snapshot", explorer_snapshot(),
          lora_ ? "rl.async: the previous version's adapters, its copies of the shared frozen base"
                : "rl.async: the previous version's weights",
          true);
      add("KV cache (explorer)", kv_bytes(cfg_, s_.kv_memory_mb, seqs, s_.seq, host_elem, elem), "rl.async", dev_host_);
      add("rollout logits (explorer)", 4.0 * static_cast<double>(s_.max_seqs * cfg_.vocab_size), "rl.async", dev_host_);
    }
    if (dev_ != Dev::cpu || !s_.reuse_activations || s_.recompute || lora_) return;
    const int64_t C = cfg_.hidden_size, QKV = cfg_.qkv_dim(), H = cfg_.num_heads;
    int64_t w = C + 1 + QKV + H * cfg_.head_dim + C + 1 + 2 * cfg_.intermediate_size + H;  // each_act_field
    if (cfg_.qk_norm) w += QKV + H + cfg_.num_kv_heads;
    if (cfg_.sandwich_norm) w += 2 * C + 2;
    const double slot = 4.0 * static_cast<double>(cfg_.num_layers * w + C);
    const double need = std::ceil(static_cast<double>(s_.prompts) / static_cast<double>(s_.ranks)) *
                        static_cast<double>((s_.seq - s_.max_new) + s_.group * s_.max_new) * slot;
    const double budget = s_.reuse_activations_mb > 0 ? static_cast<double>(s_.reuse_activations_mb) * kMiB
                                                      : static_cast<double>(usable_memory_bytes()) / 4 / s_.local_ranks;
    add("kept activations", std::min(need, std::floor(budget / slot) * slot),
        "the rollout's, for the update (rl.reuse_activations)", true);
  }

  // The explorer's snapshot: a second copy of the weights with its bf16 / packed copies (it decodes); under LoRA it
  // shares the policy's frozen base (f32 buffer and held products: Transformer::share_weights) and holds a copy of
  // the adapters, its own copies derived from the base (the copies weights() counts) and, for a held base, its
  // thread's panel.
  double explorer_snapshot() const {
    if (!lora_) return 4 * flat_ + model_copy_bytes(true);
    double b = 4 * trainable_;
    if (full_base_) b += model_copy_bytes(true);
    if (held_) b += rest_copy_bytes(true) + panel_bytes(cfg_);
    return b;
  }

  // Held-out evaluation's engine (rl::evaluate: its own KV pool while the rollouts' stays).
  void evaluation() {
    if (!s_.evaluation || s_.eval_kv_memory_mb <= 0) return;
    const double host_elem = bf16_ ? 2 : 4, elem = dev_ == Dev::cuda ? 4 : host_elem;
    double kv = kv_bytes(cfg_, s_.eval_kv_memory_mb, 0, s_.seq, host_elem, elem);
    if (s_.eval_seqs > 0)
      kv = std::min(kv, kv_bytes(cfg_, 0, s_.eval_seqs, s_.eval_seq > 0 ? s_.eval_seq : s_.seq, host_elem, elem));
    add("KV cache (evaluation)", kv,
        "eval.kv_memory_mb " + std::to_string(s_.eval_kv_memory_mb) +
            (s_.eval_seqs > 0 ? ", " + std::to_string(s_.eval_seqs) + " sequences written" : std::string()),
        dev_host_);
  }

  // The KL reference: a frozen copy of the policy (LoRA: the base without adapters, no copy).
  void reference() {
    if (!s_.reference || lora_) return;
    if (dev_ == Dev::cuda) {
      add("KL reference", 18 * flat_ + cuda_activation_bytes(cfg_, N_, false),
          "a second device model: weights, bf16 copy, gradients and moments, activations", false);
      add("KL reference (host)", 4 * flat_, "its f32 weights", true);
      return;
    }
    add("KL reference",
        4 * flat_ + (bf16_ ? 2 * flat_ + packed_bytes(cfg_, 2) : 0) +
            forward_activation_bytes(cfg_, std::max(N_, s_.seq), s_.seq),
        "its weights and a forward's activations", true);
  }

  // A [teacher] model: weights, packed decode copy, KV cache.
  void teacher() {
    if (!s_.teacher) return;
    const ModelConfig& t = *s_.teacher;
    const double tflat = static_cast<double>(ParamLayout(t).total());
    const double packed = dev_ != Dev::cuda ? packed_bytes(t, 4) : 0;
    const int64_t tmb = s_.teacher_kv_mb > 0 ? s_.teacher_kv_mb : s_.kv_memory_mb;
    const double kv = kv_bytes(t, tmb, std::min(s_.max_seqs, s_.prompts * s_.group), s_.seq, 4, 4);
    add("teacher", 4 * tflat + packed + kv, "its f32 weights, packed decode copy and KV cache", true);
  }

  // The process itself, a held base's load peak, the device's runtime.
  void process() {
    add("runtime", kHostRuntime, "binary, libraries, threads", true);
    if (s_.ranks > 1) add("MPI runtime", kMpiRuntime, "a rank's libraries and buffers", true);
    if (held_) {  // the products are held as they load (Transformer::plan_held_base): the load's peak is bounded
      double steady = 0;
      for (const MemoryItem& i : p_.items) steady += i.bytes;
      p_.load_bytes = load_peak();
      add("loading (transient)", p_.load_bytes - steady,
          "the held base, the f32 rest and one product's f32 values and file bytes, over what the steps hold", true);
    }
    if (dev_ == Dev::cuda) {
      add("runtime (device)", kCudaRuntime, "CUDA context, cuBLAS workspaces", false);
      if (!lora_) add("host copies", 12 * flat_, "f32 weights, AdamW moments pulled for checkpoints", true);
    }
  }

  LoraBase held_format() const {  // the block products' format under the adapters (not f32)
    return s_.qlora ? s_.qlora_format : LoraBase::bf16;
  }

  // A held base's load (io::load_hf_weights, load_gguf_weights, init_random: the tensors in layout order), followed
  // tensor by tensor: the runtime, the f32 rest written so far, the products held so far, the f32 values of the
  // product being written (its pages go back once its last tensor is written and it is held), and the tensor being
  // copied's bytes in the file (given back once copied; 4 B a value at most). The peak over the load.
  double load_peak() const {
    const double held = FrozenBase::bytes_for(cfg_, held_format()) / linear_;  // a value
    const auto shapes = block_products(cfg_);
    std::vector<std::pair<int64_t, int64_t>> products;  // [begin, end) in the flat layout
    for (const LayerOffsets& o : layout_.layers) {
      const std::array<int64_t, 4> at = block_product_offsets(o);
      for (size_t i = 0; i < shapes.size(); ++i)
        products.emplace_back(at[i], at[i] + shapes[i].first * shapes[i].second);
    }
    std::sort(products.begin(), products.end());
    double rest = 0, held_values = 0, peak = 0;
    int64_t product_written = 0;  // of the product being written
    for (const ParamEntry& e : layout_.entries()) {
      const double n = static_cast<double>(e.numel()), file = 4 * n;
      auto p = std::upper_bound(products.begin(), products.end(), std::pair{e.offset, INT64_MAX});
      const bool in_product = p != products.begin() && e.offset < std::prev(p)->second;
      if (!in_product) {
        rest += n;
        peak = std::max(peak, 4 * rest + held * held_values + file);
        continue;
      }
      const int64_t size = std::prev(p)->second - std::prev(p)->first;
      product_written += e.numel();
      const bool done = product_written == size;  // held now: its bytes beside its f32 values until they go
      peak = std::max(peak, 4 * rest + held * (held_values + (done ? static_cast<double>(size) : 0)) +
                                4 * static_cast<double>(product_written) + file);
      if (done) held_values += static_cast<double>(size), product_written = 0;
    }
    return kHostRuntime + peak;
  }

  const ModelConfig& cfg_;
  const MemorySettings& s_;
  const ParamLayout layout_;
  const Dev dev_;
  MemoryPlan p_;
  double flat_ = 0, trainable_ = 0, linear_ = 0, rest_ = 0;
  double weights_bytes_ = 0;  // weights()'s lines: what an explorer process holds of the policy
  bool bf16_ = false, lora_ = false, rollouts_ = false, full_base_ = false, dev_host_ = true, held_ = false;
  bool zero2_ = false;
  int64_t N_ = 0;
};

}  // namespace

MemoryPlan plan_memory(const ModelConfig& cfg, const MemorySettings& s) {
  check_settings(cfg, s);
  return PlanBuilder(cfg, s).build();
}

int64_t largest_micro_batch(const ModelConfig& cfg, MemorySettings s, double budget_bytes) {
  auto fits = [&](int64_t b) {
    s.micro_batch = b;
    return plan_memory(cfg, s).device_bytes() <= budget_bytes;
  };
  if (budget_bytes <= 0 || !fits(1)) return 0;
  int64_t lo = 1, hi = 2;
  while (hi < (int64_t{1} << 24) && fits(hi)) lo = hi, hi *= 2;
  if (hi >= (int64_t{1} << 24)) return lo;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

double device_memory_bytes(const std::string& device) {
  const Dev d = device_kind(device);
  if (d != Dev::cuda) return static_cast<double>(usable_memory_bytes());
#ifdef TEMPER_WITH_CUDA
  const int idx = device == "cuda" ? 0 : std::atoi(device.c_str() + 5);
  if (idx >= 0 && idx < cuda_devices()) return static_cast<double>(cuda::device_info(idx).total_bytes);
#endif
  return 0;
}

std::vector<std::string> memory_fit_suggestions(const ModelConfig& cfg, const MemorySettings& s, double budget) {
  std::vector<std::string> out;
  if (plan_memory(cfg, s).device_bytes() <= budget) return out;
  double best = budget;  // a later, more invasive change is listed only when it needs less than the earlier ones
  auto line = [&](const MemorySettings& t, const std::string& what) {
    const double total = plan_memory(cfg, t).device_bytes();
    if (total > budget) return false;
    if (out.empty() || total < best) out.push_back(what + ": " + format_bytes(total));
    best = std::min(best, total);
    return true;
  };
  auto step = [&](MemorySettings t, const std::string& what) {
    if (line(t, what)) return;
    const int64_t mb = largest_micro_batch(cfg, t, budget);  // the change fits with fewer sequences
    if (mb > 0) {
      t.micro_batch = mb;
      line(t, what + " and micro-batches of " + std::to_string(mb));
    }
  };
  if (const int64_t mb = largest_micro_batch(cfg, s, budget); mb > 0) {
    MemorySettings t = s;
    t.micro_batch = mb;
    line(t, "micro-batches of " + std::to_string(mb) + " sequences (sft.micro_batch, rl.micro_batch)");
  }
  if (!s.recompute) {
    MemorySettings t = s;
    t.recompute = true;
    step(t, "recompute (model.recompute = true)");
  }
  if (s.precision != kernels::Precision::bf16 && s.lora_rank == 0) {
    MemorySettings t = s;
    t.precision = kernels::Precision::bf16;
    t.recompute = true;
    step(t, "bf16 (model.precision = \"bf16\") with recompute");
  }
  if (s.ranks > 1 && !s.shard_optimizer && s.lora_rank == 0) {
    MemorySettings t = s;
    t.shard_optimizer = true;
    step(t, "run.shard_optimizer = true (ZeRO-1 over " + std::to_string(s.ranks) + " ranks)");
  }
  if (s.ranks > 1 && !s.shard_gradients && s.lora_rank == 0 && s.device == "cpu") {
    MemorySettings t = s;
    t.shard_optimizer = t.shard_gradients = true;
    step(t, "run.shard_gradients = true (ZeRO-2 over " + std::to_string(s.ranks) + " ranks: moments and gradients)");
  }
  if (s.lora_rank == 0) {  // what temper train's [lora] runs today: the f32 base kept, only adapters stepped
    MemorySettings t = s;
    t.lora_rank = 16;
    t.lora_full_base = true;
    t.recompute = true;
    step(t,
         "LoRA rank 16 on every product ([lora] rank = 16, targets = \"q, k, v, o, gate, up, down\") with recompute");
    t.lora_full_base = false;
    t.lora_held = s.device == "cpu";  // what temper train holds there (a device: the design figures)
    t.qlora = true;
    step(t, "QLoRA: the same on an int4 base ([lora] base = \"int4\")");
  }
  return out;
}

std::string format_bytes(double bytes) {
  char b[64];
  if (bytes >= 1024.0 * kMiB)
    std::snprintf(b, sizeof b, "%.2f GiB", bytes / (1024.0 * kMiB));
  else
    std::snprintf(b, sizeof b, "%.1f MiB", bytes / kMiB);
  return b;
}

std::string format_memory_plan(const MemoryPlan& p, const MemorySettings& s, double budget) {
  std::string out;
  char b[512];
  std::snprintf(b, sizeof b, "memory plan per rank (%s, %s%s, micro-batches of %lld x %lld tokens, %lld rank%s%s%s):\n",
                s.device.c_str(), std::string(kernels::precision_name(s.precision)).c_str(),
                s.recompute ? ", recompute" : "", static_cast<long long>(s.micro_batch), static_cast<long long>(s.seq),
                static_cast<long long>(s.ranks), s.ranks == 1 ? "" : "s", s.max_new > 0 ? ", rollouts" : "",
                s.lora_rank > 0 ? (s.qlora ? ", QLoRA" : ", LoRA") : "");
  out += b;
  for (const MemoryItem& i : p.items) {
    std::snprintf(b, sizeof b, "  %-24s %12s  %s%s\n", i.name.c_str(), format_bytes(i.bytes).c_str(),
                  p.on_device ? (i.host ? "[host] " : "[device] ") : "", i.note.c_str());
    out += b;
  }
  const double total = p.device_bytes();
  if (p.on_device) {
    std::snprintf(b, sizeof b, "  %-24s %12s  (and %s of host memory)\n", "total on the device",
                  format_bytes(total).c_str(), format_bytes(p.host_bytes()).c_str());
  } else {
    std::snprintf(b, sizeof b, "  %-24s %12s\n", "total", format_bytes(total).c_str());
  }
  out += b;
  if (budget > 0) {
    std::snprintf(b, sizeof b, "  %s %s of %s%s\n",
                  total <= budget ? "fits:" : "does not fit:", format_bytes(total).c_str(),
                  format_bytes(budget).c_str(),
                  total <= budget ? "" : (" (over by " + format_bytes(total - budget) + ")").c_str());
    out += b;
  }
  return out;
}

}  // namespace temper::app

// The memory plan (memory_plan.h): each item counted as the code that allocates it sizes it.
#include "temper/app/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/io/gguf_file.h"
#include "temper/io/gguf_model.h"
#include "temper/io/hf_config.h"
#include "temper/kernels/classifier.h"
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
  const int64_t C = c.hidden_size, Hq = c.num_heads * c.head_dim, F = c.intermediate_size;
  int64_t most = 0;
  for (auto [N, K] : {std::pair{c.qkv_dim(), C}, std::pair{C, Hq}, std::pair{2 * F, C}, std::pair{C, F}})
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

// Elements of the forward weights' packed copies (Transformer::forward_weights: qkv, o, gate/up, down, LM head).
int64_t packed_elems(const ModelConfig& c) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, Hq = c.num_heads * c.head_dim;
  int64_t n = 0;
  for (int64_t l = 0; l < c.num_layers; ++l)
    n += kernels::packed_size(c.qkv_dim(), C) + kernels::packed_size(C, Hq) + kernels::packed_size(2 * F, C) +
         kernels::packed_size(C, F);
  return n + kernels::packed_size(c.vocab_size, C);
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

MemoryPlan plan_memory(const ModelConfig& cfg, const MemorySettings& s) {
  const Dev dev = device_kind(s.device);
  TEMPER_CHECK(s.micro_batch > 0) << "memory plan: micro-batch must be > 0 sequences, got " << s.micro_batch;
  TEMPER_CHECK(s.seq > 0 && s.seq <= cfg.max_position_embeddings)
      << "memory plan: sequence length must be 1.." << cfg.max_position_embeddings
      << " (the model's max_position_embeddings), got " << s.seq;
  TEMPER_CHECK(s.ranks > 0 && s.local_ranks > 0) << "memory plan: ranks must be > 0, got " << s.ranks;
  TEMPER_CHECK(s.lora_rank >= 0) << "memory plan: LoRA rank must be >= 0, got " << s.lora_rank;
  TEMPER_CHECK(!s.qlora || s.lora_rank > 0) << "memory plan: QLoRA needs a LoRA rank (--lora R)";
  TEMPER_CHECK(s.max_new >= 0 && s.max_new < s.seq)
      << "memory plan: max_new (" << s.max_new << ") must be below the sequence length (" << s.seq << ")";
  TEMPER_CHECK(s.max_new == 0 || (s.prompts > 0 && s.group > 0 && s.max_seqs > 0 && s.kv_memory_mb >= 0))
      << "memory plan: rollouts need prompts, group and max_seqs > 0 and kv_memory_mb >= 0";
  const ParamLayout layout(cfg);
  MemoryPlan p;
  p.on_device = dev == Dev::cuda;
  for (const ParamEntry& e : layout.entries()) p.params += e.numel();
  const double flat = static_cast<double>(layout.total());
  const bool bf16 = s.precision == kernels::Precision::bf16, lora = s.lora_rank > 0, rollouts = s.max_new > 0;
  const int64_t N = s.micro_batch * s.seq;
  p.tokens = N;
  p.trainable = !lora ? p.params : s.lora_trainable > 0 ? s.lora_trainable : lora_params(cfg, s.lora_rank);
  const double trainable = lora ? static_cast<double>(p.trainable) : flat;
  const bool full_base = !lora || (s.lora_full_base && !s.qlora);  // the model's own buffers, whole
  const double shards = s.shard_optimizer ? static_cast<double>(s.ranks) : 1.0;
  const bool dev_host = dev != Dev::cuda;  // where the model's own buffers live
  auto add = [&](std::string name, double bytes, std::string note, bool host) {
    if (bytes > 0) p.items.push_back({std::move(name), bytes, std::move(note), host});
  };
  char note[256];

  // Weights.
  if (full_base) {
    add("weights (f32 master)", 4 * flat, "4 B x " + std::to_string(layout.total()) + " (padded)", dev_host);
    if (dev == Dev::cuda)
      add("weights (bf16 copy)", 2 * flat, "the device's bf16 GEMM operand", false);
    else if (bf16)
      add("weights (bf16 copies)", 2 * flat + (s.packed ? 2.0 * static_cast<double>(packed_elems(cfg)) : 0),
          s.packed ? "row-major (backward) + packed (forward)" : "row-major", true);
    if (dev != Dev::cuda && !bf16 && (rollouts || s.evaluation) && s.packed)
      add("weights (f32 packed)", 4.0 * static_cast<double>(packed_elems(cfg)), "the decode's products", true);
  }
  const bool held = lora && !full_base && s.lora_held && dev != Dev::cuda;  // as Transformer::hold_base holds it
  const double linear = static_cast<double>(FrozenBase::params_for(cfg)), rest = flat - linear;
  if (lora && !full_base) {
    const LoraBase format = s.qlora ? LoraBase::int4 : LoraBase::bf16;
    std::snprintf(note, sizeof note, "frozen: block products %s, %s",
                  s.qlora ? "int4 (4 bits, an f32 scale and u8 zero per 128 inputs)" : "bf16",
                  held ? "dequantised by panels" : "embeddings and norms bf16");
    add(s.qlora ? "base weights (QLoRA)" : "base weights (LoRA)",
        FrozenBase::bytes_for(cfg, format) + (held ? 0 : 2 * rest), note, dev_host);
  }
  if (held) {  // the rest as the f32 model keeps it; the block products' pages given back
    const double head = static_cast<double>(kernels::packed_size(cfg.vocab_size, cfg.hidden_size));
    add("weights (f32, the rest)", 4 * rest, "embeddings, LM head, norms, biases", true);
    if (bf16)
      add("weights (bf16 copies)", 2 * rest + (s.packed ? 2 * head : 0), "of the rest (the LM head packed)", true);
    else if ((rollouts || s.evaluation) && s.packed)
      add("weights (f32 packed)", 4 * head, "the LM head's, for decoding", true);
    add("base panels", panel_bytes(cfg), "a product's dequantised rows", true);
  }
  if (lora) {
    std::snprintf(note, sizeof note, "rank %lld: %lld params, f32", static_cast<long long>(s.lora_rank),
                  static_cast<long long>(p.trainable));
    add("adapters", 4 * trainable, note, dev_host);
  }
  if (dev == Dev::mirror && !lora)
    add("mirror device's copy", 16 * flat, "the mirror's params, grads and moments", true);

  // Training state.
  add("gradients", 4 * trainable, lora ? "the adapters'" : "f32", dev_host);
  if (lora && full_base) add("base gradients", 4 * flat, "the frozen base's buffer (kept; not stepped)", dev_host);
  if (held) add("base gradients", 4 * rest, "the rest's (written, not stepped; none for the held products)", true);
  std::snprintf(note, sizeof note, "f32 m and v%s", s.shard_optimizer && s.ranks > 1 ? ", 1/ranks each (ZeRO-1)" : "");
  add("AdamW moments", std::ceil(8 * trainable / shards), note, dev_host);

  // Activations of one micro-batch (the arena the step plans), and the adapters' scratch.
  double act = 0;
  if (dev == Dev::cuda) {
    act = cuda_activation_bytes(cfg, N, s.recompute);
  } else {
    const int64_t Nt = std::max(N, s.seq);
    act = static_cast<double>(Transformer::activation_bytes_for(cfg, Nt, s.seq, s.recompute));
    if (!s.recompute && !s.evaluation && !rollouts && !s.reference && !s.teacher) {
      // Training alone never writes the scratch layer and x_tmp (lazily zeroed pages: no memory until written).
      const double x = static_cast<double>(round64(static_cast<double>(Nt * cfg.hidden_size)));
      act -= (act - static_cast<double>(Transformer::activation_bytes_for(cfg, Nt, s.seq, true))) /
                 static_cast<double>(cfg.num_layers) +
             2 * x;
    }
    if (dev == Dev::mirror) act *= 2;
  }
  if (lora) act += 4.0 * 2 * static_cast<double>(N) * 3 * static_cast<double>(s.lora_rank);
  std::snprintf(note, sizeof note, "%lld x %lld tokens%s", static_cast<long long>(s.micro_batch),
                static_cast<long long>(s.seq), s.recompute ? ", recompute" : "");
  add("activations", act, note, dev_host);

  // Rollouts: the KV cache, the sampler's logits, the activations kept for the update.
  if (rollouts) {
    const int64_t seqs = std::min(s.max_seqs, s.prompts * s.group);
    const double host_elem = bf16 ? 2 : 4, elem = dev == Dev::cuda ? 4 : host_elem;
    std::snprintf(note, sizeof note, s.kv_memory_mb > 0 ? "kv_memory_mb %lld" : "%lld sequences of %lld tokens",
                  static_cast<long long>(s.kv_memory_mb > 0 ? s.kv_memory_mb : seqs), static_cast<long long>(s.seq));
    add("KV cache", kv_bytes(cfg, s.kv_memory_mb, seqs, s.seq, host_elem, elem), note, dev_host);
    add("rollout logits", 4.0 * static_cast<double>(s.max_seqs * cfg.vocab_size), "max_seqs x vocabulary, f32",
        dev_host);
    if (dev == Dev::cpu && s.reuse_activations && !s.recompute && !lora) {
      const int64_t C = cfg.hidden_size, QKV = cfg.qkv_dim(), H = cfg.num_heads;
      int64_t w = C + 1 + QKV + H * cfg.head_dim + C + 1 + 2 * cfg.intermediate_size + H;  // each_act_field
      if (cfg.qk_norm) w += QKV + H + cfg.num_kv_heads;
      if (cfg.sandwich_norm) w += 2 * C + 2;
      const double slot = 4.0 * static_cast<double>(cfg.num_layers * w + C);
      const double need = std::ceil(static_cast<double>(s.prompts) / static_cast<double>(s.ranks)) *
                          static_cast<double>((s.seq - s.max_new) + s.group * s.max_new) * slot;
      const double budget = s.reuse_activations_mb > 0 ? static_cast<double>(s.reuse_activations_mb) * kMiB
                                                       : static_cast<double>(usable_memory_bytes()) / 4 / s.local_ranks;
      add("kept activations", std::min(need, std::floor(budget / slot) * slot),
          "the rollout's, for the update (rl.reuse_activations)", true);
    }
  }

  // Held-out evaluation's engine (rl::evaluate: its own KV pool while the rollouts' stays).
  if (s.evaluation && s.eval_kv_memory_mb > 0) {
    const double host_elem = bf16 ? 2 : 4, elem = dev == Dev::cuda ? 4 : host_elem;
    double kv = kv_bytes(cfg, s.eval_kv_memory_mb, 0, s.seq, host_elem, elem);
    if (s.eval_seqs > 0)
      kv = std::min(kv, kv_bytes(cfg, 0, s.eval_seqs, s.eval_seq > 0 ? s.eval_seq : s.seq, host_elem, elem));
    add("KV cache (evaluation)", kv,
        "eval.kv_memory_mb " + std::to_string(s.eval_kv_memory_mb) +
            (s.eval_seqs > 0 ? ", " + std::to_string(s.eval_seqs) + " sequences written" : std::string()),
        dev_host);
  }

  // The KL reference: a frozen copy of the policy (LoRA: the base without adapters, no copy).
  if (s.reference && !lora) {
    double b = 0;
    if (dev == Dev::cuda) {
      b = 18 * flat + cuda_activation_bytes(cfg, N, false);
      add("KL reference", b, "a second device model: weights, bf16 copy, gradients and moments, activations", false);
      add("KL reference (host)", 4 * flat, "its f32 weights", true);
    } else {
      b = 4 * flat + (bf16 ? 2 * flat + (s.packed ? 2.0 * static_cast<double>(packed_elems(cfg)) : 0) : 0) +
          forward_activation_bytes(cfg, std::max(N, s.seq), s.seq);
      add("KL reference", b, "its weights and a forward's activations", true);
    }
  }

  // A [teacher] model: weights, packed decode copy, KV cache.
  if (s.teacher) {
    const ModelConfig& t = *s.teacher;
    const double tflat = static_cast<double>(ParamLayout(t).total());
    const double packed = s.packed && dev != Dev::cuda ? 4.0 * static_cast<double>(packed_elems(t)) : 0;
    const int64_t tmb = s.teacher_kv_mb > 0 ? s.teacher_kv_mb : s.kv_memory_mb;
    const double kv = kv_bytes(t, tmb, std::min(s.max_seqs, s.prompts * s.group), s.seq, 4, 4);
    add("teacher", 4 * tflat + packed + kv, "its f32 weights, packed decode copy and KV cache", true);
  }

  // The process itself.
  add("runtime", kHostRuntime, "binary, libraries, threads", true);
  if (held) {  // the f32 weights are loaded whole before the base is held: the peak is the larger of the two
    double steady = 0;
    for (const MemoryItem& i : p.items) steady += i.bytes;
    add("loading (transient)", 4 * flat + kHostRuntime - steady,
        "the f32 weights whole before the base is held: the peak is the load's", true);
  }
  if (dev == Dev::cuda) {
    add("runtime (device)", kCudaRuntime, "CUDA context, cuBLAS workspaces", false);
    if (!lora) add("host copies", 12 * flat, "f32 weights, AdamW moments pulled for checkpoints", true);
  }
  return p;
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

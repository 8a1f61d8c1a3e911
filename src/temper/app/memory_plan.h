// The memory plan of a training run per data-parallel rank, from the model's config and the run's settings alone:
// nothing is allocated, so it answers "does it fit?" for models far larger than this machine (`temper info`,
// `temper train` before loading). Counts what the Transformer, the Optimizer, the rollout engine, the reference and
// the teacher hold (transformer.cpp, optimizer.cpp, cuda_transformer.cpp, kv_pool.cpp, kept_activations.cpp).
// Leaves out: allocator slack and fragmentation, and a model file read whole (TEMPER_LOAD=copy; mmapped, each tensor's
// pages are given back once copied). LoRA's bf16 / int4 / nf4 base is planned as the CPU holds it (lora_held) or as the
// issue designs it for devices (everything in bf16 / 4 bits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "temper/kernels/matmul.h"
#include "temper/model/config.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/lora.h"

namespace temper::app {

struct MemorySettings {
  std::string device = "cpu";  // cpu, mirror, cuda, cuda:N
  kernels::Precision precision = kernels::Precision::f32;
  bool recompute = false;
  int64_t ranks = 1;             // data-parallel ranks: each holds everything below (the plan is per rank)
  bool shard_optimizer = false;  // ZeRO-1 (run.shard_optimizer): each rank keeps 1/ranks of the AdamW moments
  // ZeRO-2 (run.shard_gradients, with shard_optimizer; CPU, no LoRA): each rank keeps 1/ranks of the gradients and,
  // during a backward, the flat buffer's ranges not yet reduced (the largest layer's; tied: with the embedding's).
  bool shard_gradients = false;
  // The update's forward/backward: micro-batches of micro_batch sequences of up to seq tokens.
  int64_t micro_batch = 8, seq = 1024;
  // Rollouts (RL; max_new 0: none): prompts x group completions of up to max_new tokens (prompt + completion <= seq),
  // at most max_seqs at once in a KV cache of kv_memory_mb (0: enough for them all at seq tokens).
  int64_t prompts = 8, group = 8, max_new = 0, max_seqs = 64, kv_memory_mb = 0;
  // [rl.speculative]: the 4-bit self-drafter (model/int4_drafter.h): lag + 1 copies of the block products in int4
  // (groups of draft_group inputs) and its head (over draft_vocab tokens; 0: all).
  bool draft = false;
  int64_t draft_group = 128, draft_lag = 0, draft_vocab = 0;
  DraftHead draft_head = DraftHead::bf16;
  bool reuse_activations = true;     // rl.reuse_activations: the rollout keeps activations for the update (CPU)
  int64_t reuse_activations_mb = 0;  // its budget (0: a quarter of this machine's memory, shared by local ranks)
  int local_ranks = 1;               // ranks on this host (they share reuse_activations' default budget)
  bool reference = false;            // a frozen KL reference (rl.kl_coef > 0 or a method needs it)
  // [rl.async]: the explorer's snapshot of the previous version's weights (LoRA: its adapters, the base shared) and
  // its own KV cache.
  bool async = false;
  int64_t explorer_processes = 0;  // [rl.async] explorer processes on this host: each its own policy and engine
  // Held-out evaluation runs (temper train: at the start and the end, and every eval.every steps): it decodes
  // (the CPU's f32 packed copy) in a KV cache of eval_kv_memory_mb, and its forward passes write the arena's
  // one-layer scratch, which training alone without recompute never touches (its pages then cost nothing).
  bool evaluation = false;
  int64_t eval_kv_memory_mb = 256;
  // The sequences the evaluation decodes at once and their longest (prompt + eval.max_new; 0: seq), when known (0:
  // its whole KV budget): the pool reuses freed blocks before untouched ones (kv_pool.cpp), so the blocks written are
  // at most the most ever live at once.
  int64_t eval_seqs = 0, eval_seq = 0;
  // LoRA: rank 0 = full fine-tuning. Adapters on q, k, v, o, gate, up, down; the base frozen in bf16, or int4 / nf4
  // (QLoRA: 4.5 bits a weight with its scales or absmax) for the block products; the reference is the base itself.
  int64_t lora_rank = 0;
  bool qlora = false;
  LoraBase qlora_format = LoraBase::int4;  // with qlora: int4 or nf4 ([lora] base; nf4: an f32 absmax per 64 inputs)
  // [lora] base = "f32" in temper train: the frozen base as full fine-tuning keeps it (f32 master, the precision's
  // copies) with its whole gradient buffer (only the adapters are stepped). false: the bf16 / int4 / nf4 base above.
  bool lora_full_base = false;
  // The bf16 / int4 / nf4 base as the CPU Transformer holds it (Transformer::hold_base, [lora] base = "bf16" /
  // "int4" / "nf4"): the block products in FrozenBase's bytes, the rest (embeddings, LM head, norms) f32 with its
  // gradients, a product's dequantised panel, and the load's peak (the products held as they load: the held base, the
  // f32 rest and one product's working set). false: the design figures (the rest in bf16 too, no gradients: what a
  // device path would hold; planned, not built).
  bool lora_held = false;
  int64_t lora_trainable = 0;  // the adapters' parameters when known (0: rank x (in + out) on all seven products)
  std::optional<ModelConfig> teacher;  // a [teacher] model: its weights, KV cache (teacher_kv_mb) and forward
  int64_t teacher_kv_mb = 0;           // 0: kv_memory_mb's figure
  // The CPU keeps packed copies of the forward weights (AVX-512: kernels::packed_supported()).
  bool packed = kernels::packed_supported();
};

struct MemoryItem {
  std::string name;  // "weights (f32 master)", "gradients", ...
  double bytes = 0;
  std::string note;  // how it is counted, briefly
  bool host = true;  // in host memory (else on the device)
};

struct MemoryPlan {
  std::vector<MemoryItem> items;
  int64_t params = 0;           // the model's parameters (without padding)
  int64_t trainable = 0;        // those trained (adapters with LoRA)
  int64_t tokens = 0;           // of a micro-batch
  bool on_device = false;       // cuda or mirror: the device's items are counted apart from the host's
  // A held base (lora_held): the host's peak while the weights load, runtime included (the items' "loading
  // (transient)" is what it adds over the rest of the plan). 0 otherwise.
  double load_bytes = 0;
  double device_bytes() const;  // what the device holds (cpu: everything)
  double host_bytes() const;    // what the host holds beside it (cpu: the same as device_bytes)
};

// A model's config from a Hugging Face directory, its config.json or a GGUF file (headers only: no weights read).
ModelConfig read_model_config(const std::string& path);
// The plan per rank; throws naming the setting when one is out of range.
MemoryPlan plan_memory(const ModelConfig& cfg, const MemorySettings& s);
// The most sequences per micro-batch (of s.seq tokens) whose plan fits budget_bytes; 0 when not even one does.
int64_t largest_micro_batch(const ModelConfig& cfg, MemorySettings s, double budget_bytes);
// The device's memory: cpu and mirror this machine's (core/memory_info.h), cuda[:N] the device's total; 0 when
// unknown (no such device here).
double device_memory_bytes(const std::string& device);
// Settings that would make a plan that does not fit budget_bytes fit, one line each with their total, most
// economical first: a smaller micro-batch, recompute, bf16, ZeRO-1 then ZeRO-2 across ranks, LoRA, QLoRA. Empty when
// it fits.
std::vector<std::string> memory_fit_suggestions(const ModelConfig& cfg, const MemorySettings& s, double budget_bytes);
// The plan as a table (one line an item, then the total against the budget when there is one).
std::string format_memory_plan(const MemoryPlan& p, const MemorySettings& s, double budget_bytes);
std::string format_bytes(double bytes);  // "812.0 MiB", "7.09 GiB"

}  // namespace temper::app

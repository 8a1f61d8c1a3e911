#include "temper/app/run_memory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "temper/app/memory_plan.h"
#include "temper/core/error.h"

namespace temper::app {

void evaluation_sequences(const RunConfig& cfg, const ModelConfig& mc, const RunMemoryFacts& f, MemorySettings& s) {
  const rl::EvalConfig& e = cfg.eval;
  if (f.eval_prompt <= 0 || e.revisions > 0 || !e.preference.empty()) return;
  s.eval_seqs = std::max<int64_t>(1, std::min(e.max_seqs, e.problems * e.samples));
  s.eval_seq = std::min(mc.max_position_embeddings, f.eval_prompt + e.max_new);
}

namespace {

MemorySettings settings_for(const RunConfig& cfg, const ModelConfig& mc, const RunMemoryFacts& f) {
  MemorySettings s;
  if (cfg.rl_steps() > 0) {
    s.max_new = std::max<int64_t>(1, std::min(cfg.rl.max_new, f.seq - 1));
    s.prompts = cfg.rl.prompts_per_step, s.group = cfg.rl.group_size, s.max_seqs = cfg.rl.max_seqs;
    s.kv_memory_mb = cfg.rl.kv_memory_mb;
    s.reuse_activations = cfg.rl.reuse_activations, s.reuse_activations_mb = cfg.rl.reuse_activations_mb;
    s.async = cfg.rl.async && cfg.rl.async->on() && cfg.rl.async->explorer_ranks == 0;  // else on its own ranks
    if (s.async && cfg.rl.async->processes()) s.explorer_processes = cfg.rl.async->explorer_processes;
    if (const auto& d = cfg.rl.speculative) {
      s.draft = true, s.draft_group = d->group, s.draft_lag = d->lag, s.draft_vocab = d->vocab, s.draft_head = d->head;
    }
  }
  s.device = f.device;
  s.precision = f.precision;
  s.recompute = cfg.model.recompute;
  s.seq = f.seq;
  s.micro_batch = (std::max(f.tokens, f.seq) + f.seq - 1) / f.seq;  // the arena plan(max(tokens, seq), seq) reserves
  s.ranks = f.ranks, s.local_ranks = std::max(1, f.local_ranks);
  s.shard_optimizer = cfg.run.shard_optimizer && f.ranks > 1;
  s.shard_gradients = cfg.run.shard_gradients && f.ranks > 1;
  s.reference = cfg.rl_steps() > 0 && f.reference;
  s.evaluation = true;  // at the start and the end, and every eval.every steps
  s.eval_kv_memory_mb = cfg.eval.kv_memory_mb;
  evaluation_sequences(cfg, mc, f, s);
  if (f.lora) {
    const LoraBase base = f.lora->config().base;
    s.lora_rank = f.lora->rank(), s.lora_trainable = f.lora->size();
    s.lora_full_base = base == LoraBase::f32, s.lora_held = true;
    s.qlora = base == LoraBase::int4 || base == LoraBase::nf4;
    if (s.qlora) s.qlora_format = base;
  }
  if (cfg.teacher.source == "model") {
    s.teacher = read_model_config(cfg.teacher.path);
    s.teacher_kv_mb = cfg.teacher.model.kv_memory_mb;
  }
  return s;
}

}  // namespace

void check_run_memory(const RunConfig& cfg, const ModelConfig& mc, const RunMemoryFacts& f) {
  const MemorySettings s = settings_for(cfg, mc, f);
  const MemoryPlan plan = plan_memory(mc, s);
  const bool host_side = s.device == "cpu" || s.device == "mirror";
  const double budget = device_memory_bytes(s.device) / (host_side ? s.local_ranks : 1);
  if (f.print)
    std::fprintf(stderr, "temper train: %s, %lld parameters; %s", mc.summary().c_str(),
                 static_cast<long long>(plan.params), format_memory_plan(plan, s, budget).c_str());
  if (budget <= 0 || plan.device_bytes() <= budget) return;
  std::string fixes;
  for (const std::string& fix : memory_fit_suggestions(mc, s, budget)) fixes += "\n  " + fix;
  if (const char* mode = std::getenv("TEMPER_MEMORY_PLAN"); mode && std::string(mode) == "warn") {
    if (f.print)
      std::fprintf(stderr, "temper train: warning: the memory plan does not fit (TEMPER_MEMORY_PLAN=warn)\n");
    return;
  }
  TEMPER_FAIL() << f.source << ": this run needs about " << format_bytes(plan.device_bytes()) << " per rank and "
                << (host_side ? "this machine has " : s.device + " has ") << format_bytes(budget)
                << (host_side && s.local_ranks > 1 ? " per local rank" : "") << " (the plan above)"
                << (fixes.empty() ? std::string("; nothing temper can change fits: a smaller model or a larger device")
                                  : "; it would fit with:" + fixes)
                << "\n(TEMPER_MEMORY_PLAN=warn runs it anyway)";
}

}  // namespace temper::app

// TrainRun (train_run.h): the policy — a preset or a model path, on its device; [lora] adapters on the frozen
// base; the same weights on every rank; the memory plan checked before the first step.
#include <algorithm>
#include <cstdio>

#include "temper/app/codec.h"
#include "temper/app/model_source.h"
#include "temper/app/quickstart.h"
#include "temper/app/run_memory.h"
#include "temper/app/train_run.h"
#include "temper/core/error.h"
#include "temper/io/peft_adapter.h"
#include "temper/model/device_model.h"
#include "temper/model/frozen_base.h"

namespace temper::app {

// Model and tokenizer: a built-in shape with random weights and the byte-level tokenizer (the quickstart's own
// models, or a real model's shape for measuring steps on a GPU), or a model path; on its device.
void TrainRun::load_policy() {
  const ModelSection& m = cfg_.model;
  // [lora] base = "bf16" / "int4" / "nf4": the block products are held as they load or are drawn (the f32 model is
  // never whole; attach_lora's hold_base then finds the base held).
  const LoraBase held = cfg_.lora ? cfg_.lora->config.base : LoraBase::f32;
  if (m.path.empty()) {
    const std::string presets = join_words({std::begin(kTrainPresets), std::end(kTrainPresets)}, ", ");
    TEMPER_CHECK(std::find(std::begin(kTrainPresets), std::end(kTrainPresets), m.preset) != std::end(kTrainPresets))
        << recipe_.source() << ": model.preset must be one of " << presets << " when model.path is empty, got '"
        << m.preset << "'";
    ModelConfig mc = model_config_preset(m.preset);
    if (m.context > 0) mc.max_position_embeddings = m.context;
    policy_ = std::make_unique<Transformer>(mc);
    policy_->plan_held_base(held);
    policy_->init_random(m.seed);
    tok_ = std::make_shared<text::Tokenizer>(byte_tokenizer());
    eos_ids_ = {tok_->eos_id()};
  } else {
    LoadedModel lm = load_model(m.path, held, !weights_sent_);
    policy_ = std::move(lm.model);
    tok_ = lm.tokenizer;
    eos_ids_ = lm.eos_ids;
    bos_id_ = lm.bos_id;
    TEMPER_CHECK(tok_) << m.path << ": no tokenizer (tokenizer.json or GGUF tokenizer metadata) — RL needs one";
  }
  policy_->set_precision(m.precision == "bf16" ? kernels::Precision::bf16 : kernels::Precision::f32);
  policy_->set_recompute(m.recompute);  // model.recompute: training passes keep only each layer's input
  if (const FrozenBase* held = policy_->held_base()) check_held_bases_agree(*held);
  sync_weights();
  // In a data-parallel run "cuda" means this rank's local GPU.
  device_ = m.device;
  if (comm_.size() > 1 && device_ == "cuda")
    device_ = "cuda:" + std::to_string(dist::local_rank() % std::max(1, cuda_devices()));
  if (device_ != "cpu") attach_device(*policy_, device_);
  ex_.eos_ids = eos_ids_;
  ex_.bos_id = bos_id_;
  ex_.tokenizer_json_text = tok_->to_hf_json();
  ex_.tokenizer_config_json_text = tok_->to_hf_config_json();
  codec_ = make_codec(tok_, eos_ids_, m.prompt_format, m.system_prompt, m.user_template);
}

// [lora]: adapters on the frozen base, fresh (B = 0: the policy starts as the base) or from a PEFT directory
// whose config must be the recipe's.
void TrainRun::attach_lora() {
  if (!cfg_.lora) return;
  const LoraSection& l = *cfg_.lora;
  if (l.init.empty()) {
    lora_ = std::make_unique<LoraAdapters>(policy_->config(), l.config);
    lora_->init(cfg_.model.seed);
  } else {
    lora_ = io::read_peft_adapter(l.init, policy_->config());
    const LoraConfig& c = lora_->config();
    TEMPER_CHECK(c.rank == l.config.rank && c.alpha == l.config.alpha && c.targets == l.config.targets &&
                 c.use_rslora == l.config.use_rslora)
        << recipe_.source() << ": lora.init = " << l.init << " holds adapters of rank " << c.rank << ", alpha "
        << c.alpha << " on other targets or scale than [lora] gives (rank " << l.config.rank << ", alpha "
        << l.config.alpha << "); make [lora] match the adapter";
    // An adapter trained on a bf16 / int4 / nf4 base continues on that base only (the values it was fitted to); an f32
    // run may start from any adapter (as load_peft_adapter_weights rules on resume).
    const LoraBase trained = io::read_peft_adapter_config(l.init).base;
    TEMPER_CHECK(l.config.base == LoraBase::f32 || trained == l.config.base)
        << recipe_.source() << ": lora.init = " << l.init << " was trained on a " << lora_base_name(trained)
        << " base; the recipe's is " << lora_base_name(l.config.base) << " (lora.base)";
    lora_->set_base(l.config.base);
  }
  if (comm_.size() > 1) comm_.broadcast(lora_->params(), lora_->size(), 0);
  policy_->attach_lora(lora_.get());
  policy_->set_base_frozen(true);
  if (root_)
    std::fprintf(stderr,
                 "temper train: LoRA r=%lld alpha=%g on %zu product(s) per layer: %lld trainable parameters "
                 "(%.2f%% of %lld)%s\n",
                 static_cast<long long>(lora_->rank()), lora_->config().alpha, lora_->config().targets.size(),
                 static_cast<long long>(lora_->size()),
                 100.0 * static_cast<double>(lora_->size()) / static_cast<double>(policy_->num_params()),
                 static_cast<long long>(policy_->num_params()), l.init.empty() ? "" : (", from " + l.init).c_str());
}

// A base held as it loaded is each rank's own read of model.path: a node whose copy differs (another download,
// a file rewritten during the launch) would train other weights, or (an [rl.async] explorer rank: it is sent only
// the adapters) roll out on another base; every rank of the world compares digests of what it holds, once.
void TrainRun::check_held_bases_agree(const FrozenBase& held) {
  if (dist::world().size() == 1) return;
  const std::vector<int> unlike = dist::ranks_unlike_root(dist::world(), std::to_string(held.digest()));
  if (unlike.empty()) return;
  std::string ranks;
  for (int r : unlike) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  TEMPER_FAIL() << recipe_.source() << ": the " << lora_base_name(held.format()) << " base read from model.path = "
                << (cfg_.model.path.empty() ? "(preset " + cfg_.model.preset + ")" : cfg_.model.path) << " on rank(s) "
                << ranks << " differs from rank 0's: every rank must read the same file (check each node's copy)";
}

Transformer* TrainRun::reference() const {
  return reference_ ? reference_.get() : lora_ ? policy_.get() : nullptr;
}

// Every rank starts from rank 0's weights (initialisation and loading are deterministic; this makes it so
// regardless of the filesystem or the build), except a bf16 / int4 / nf4 base held as it loaded: each rank holds what
// it read from model.path, which must be the same file on every node.
void TrainRun::sync_weights() {
  if (comm_.size() == 1) return;
  if (const FrozenBase* held = policy_->held_base()) {  // held as loaded: each rank quantised the same weights
    for (const ParamEntry& e : policy_->layout().entries())
      if (!held->covers(e.offset, e.numel())) comm_.broadcast(policy_->params() + e.offset, e.numel(), 0);
  } else {
    comm_.broadcast(policy_->params(), policy_->flat_size(), 0);
  }
  policy_->params_updated();
  if (lora_) comm_.broadcast(lora_->params(), lora_->size(), 0);
}

// Memory plan: weights, gradients, AdamW moments, the KV pool, and the activation arena reserved now for the
// largest micro-batch (SFT rows of prompt + gold, RL rows of prompt + max_new; scan_inputs measured the prompts
// and the SFT rows; with teacher completions the first 64 golds stand for the rest).
void TrainRun::plan_memory() {
  const int64_t ctx = policy_->config().max_position_embeddings;
  const int64_t max_prompt = std::max<int64_t>(1, max_prompt_);
  int64_t max_gold = 1;
  const int64_t tsize = sft_task_->size(tasks::Split::train);
  for (uint64_t i = 0;
       cfg_.sft_steps() > 0 && max_sft_row_ == 0 && i < 64 && (tsize < 0 || static_cast<int64_t>(i) < tsize); ++i) {
    tasks::Problem p = sft_task_->problem(tasks::Split::train, i);
    if (!p.gold_solution.empty())
      max_gold = std::max<int64_t>(max_gold, static_cast<int64_t>(codec_.encode_completion(p.gold_solution).size()));
  }
  int64_t tokens = 1, seq = 1;
  if (cfg_.sft_steps() > 0) {
    seq = std::min(ctx, max_sft_row_ > 0 ? max_sft_row_ : max_prompt + max_gold);
    int64_t rows =
        cfg_.sft.train.micro_batch > 0 ? std::min(cfg_.sft.train.micro_batch, cfg_.sft.batch) : cfg_.sft.batch;
    tokens = rows * seq;
  }
  if (cfg_.rl_steps() > 0) {
    int64_t T = std::min(ctx, max_prompt + cfg_.rl.max_new), batch = cfg_.rl.prompts_per_step * cfg_.rl.group_size;
    int64_t rows = cfg_.rl.micro_batch > 0 ? std::min(cfg_.rl.micro_batch, batch) : batch;
    tokens = std::max(tokens, rows * T);
    seq = std::max(seq, T);
  }
  RunMemoryFacts f;  // checked before the arena is reserved: a run that cannot fit is refused, not killed
  f.device = device_, f.precision = policy_->precision(), f.tokens = tokens, f.seq = seq;
  f.ranks = comm_.size(), f.local_ranks = comm_.local_size(), f.reference = reference_ != nullptr;
  f.lora = lora_.get(), f.print = root_, f.source = recipe_.source();
  f.eval_prompt = max_eval_prompt_;
  check_run_memory(cfg_, policy_->config(), f);
  policy_->plan(std::max(tokens, seq), seq);
}

}  // namespace temper::app

// LoRA adapters in Hugging Face PEFT's format (what PeftModel.save_pretrained writes and
// PeftModel.from_pretrained loads): adapter_config.json (peft_type LORA, r, lora_alpha, lora_dropout,
// target_modules, use_rslora, ...) and adapter_model.safetensors with one lora_A [r, in] and lora_B [out, r]
// per adapted module, named base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight and so on.
// Reading refuses what temper's adapters cannot hold (DoRA, biases, per-layer ranks or alphas, layer subsets,
// modules_to_save, a regex of targets, pickled adapter_model.bin), naming the file and the field or tensor.
// Leaves out: PEFT's other adapter types, embedding adapters, Phi-3's fused qkv_proj / gate_up_proj modules.
#pragma once

#include <memory>
#include <string>

#include "temper/core/dtype.h"
#include "temper/model/config.h"
#include "temper/model/lora.h"
#include "temper/model/transformer.h"

namespace temper::io {

struct PeftWriteOptions {
  DType dtype = DType::f32;             // f32 or bf16 tensors
  std::string base_model_name_or_path;  // recorded in adapter_config.json (PEFT: informative only)
};

// Writes DIR/adapter_config.json and DIR/adapter_model.safetensors (each atomically; DIR is created).
void write_peft_adapter(const LoraAdapters& adapters, const std::string& dir, const PeftWriteOptions& o = {});

struct PeftReadOptions {
  // A lora_dropout other than 0 is refused (temper trains without dropout) unless this is set: inference and
  // merging ignore dropout, as PEFT's eval mode does; the config read then says dropout 0.
  bool ignore_dropout = false;
};

// DIR/adapter_config.json as a LoraConfig (validated). Its base: temper's field temper_lora_base, which a run on a
// bf16 / int4 base writes (absent: f32).
LoraConfig read_peft_adapter_config(const std::string& dir, const PeftReadOptions& o = {});
// New adapters for a model of shape `model` from DIR (config and weights); their base is f32 whatever DIR trained on
// (the caller's: LoraAdapters::set_base).
std::unique_ptr<LoraAdapters> read_peft_adapter(const std::string& dir, const ModelConfig& model,
                                                const PeftReadOptions& o = {});
// DIR's weights into existing adapters (resuming): DIR's config must equal theirs (rank, alpha, targets, rsLoRA, and
// the base when theirs is bf16 or int4).
void load_peft_adapter_weights(LoraAdapters& adapters, const std::string& dir);
// The PEFT tensor names of one adapter (layer l, target t): ...lora_A.weight and ...lora_B.weight.
std::string peft_tensor_name(int64_t layer, LoraTarget t, bool a);

// Reads DIR's adapter (dropout ignored) and merges it into the model's weights (W += scale B A). An adapter trained
// on an int4 (bf16) base is merged into the dequantised (rounded) block weights: the model is first replaced by the
// values the run multiplied by (FrozenBase quantises as the run did: `model` must be the run's base).
void merge_peft_adapter(Transformer& model, const std::string& dir);

}  // namespace temper::io

// Test driver for tools/ref/check_peft_lora.py (temper's LoRA adapters against the real peft): loads a Hugging Face
// model directory and prints JSON with the logits of a token sequence under LoRA adapters, unmerged and merged.
//   peft_lora_tool write MODEL_DIR ADAPTER_DIR --ids 1,2,3 [--rank R --alpha A --targets q,k,... --rslora --seed S]
//     random adapters (PEFT's init, then B ~ N(0, 0.1)) written in PEFT's format to ADAPTER_DIR
//   peft_lora_tool read MODEL_DIR ADAPTER_DIR --ids 1,2,3
//     the adapter peft wrote in ADAPTER_DIR (dropout ignored)
// Output: {"logits": [[...] per position], "merged_logits": [...]}. Errors: the message on stderr, exit 1.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/io/hf_model_dir.h"
#include "temper/io/peft_adapter.h"
#include "temper/model/lora.h"
#include "temper/model/transformer.h"

using namespace temper;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

nlohmann::json logits_json(Transformer& m, const std::vector<int32_t>& ids) {
  const int64_t T = static_cast<int64_t>(ids.size()), V = m.config().vocab_size;
  std::vector<float> z(static_cast<size_t>(T * V));
  m.forward_logits(ids.data(), 1, T, z.data());
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t t = 0; t < T; ++t) rows.push_back(std::vector<float>(z.begin() + t * V, z.begin() + (t + 1) * V));
  return rows;
}

int run(int argc, char** argv) {
  TEMPER_CHECK(argc >= 4) << "usage: peft_lora_tool write|read MODEL_DIR ADAPTER_DIR --ids 1,2,3 [options]";
  const std::string mode = argv[1], model_dir = argv[2], adapter_dir = argv[3];
  LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8;
  lc.targets = {LoraTarget::q,    LoraTarget::k,  LoraTarget::v,   LoraTarget::o,
                LoraTarget::gate, LoraTarget::up, LoraTarget::down};
  uint64_t seed = 1;
  std::vector<int32_t> ids;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      TEMPER_CHECK(i + 1 < argc) << a << " needs a value";
      return argv[++i];
    };
    if (a == "--ids") {
      for (const std::string& x : split(next())) ids.push_back(static_cast<int32_t>(std::stol(x)));
    } else if (a == "--rank") {
      lc.rank = std::stol(next());
    } else if (a == "--alpha") {
      lc.alpha = std::stod(next());
    } else if (a == "--rslora") {
      lc.use_rslora = true;
    } else if (a == "--seed") {
      seed = std::stoull(next());
    } else if (a == "--targets") {
      lc.targets.clear();
      for (const std::string& x : split(next())) {
        LoraTarget t;
        TEMPER_CHECK(lora_target_from_name(x, &t)) << "--targets: unknown target '" << x << "'";
        lc.targets.push_back(t);
      }
    } else {
      TEMPER_FAIL() << "unknown option " << a;
    }
  }
  TEMPER_CHECK(!ids.empty()) << "--ids is required";
  Transformer model = io::load_hf_model(io::read_hf_model_dir(model_dir));
  std::unique_ptr<LoraAdapters> ad;
  if (mode == "write") {
    ad = std::make_unique<LoraAdapters>(model.config(), lc);
    ad->init(seed);
    for (int64_t l = 0; l < model.config().num_layers; ++l)
      for (LoraTarget t : lc.targets) {
        Tensor b = ad->b(l, t);
        rng_fill_normal(seed + 1, static_cast<uint64_t>(l * kLoraTargetCount + static_cast<int>(t)),
                        std::span<float>(b.data<float>(), static_cast<size_t>(b.numel())), 0.f, 0.1f);
      }
    io::write_peft_adapter(*ad, adapter_dir, {.base_model_name_or_path = model_dir});
  } else {
    TEMPER_CHECK(mode == "read") << "mode must be write or read, got " << mode;
    ad = io::read_peft_adapter(adapter_dir, model.config(), {.ignore_dropout = true});
  }
  nlohmann::json out;
  model.attach_lora(ad.get());
  out["logits"] = logits_json(model, ids);
  model.attach_lora(nullptr);
  out["base_logits"] = logits_json(model, ids);
  io::merge_peft_adapter(model, adapter_dir);
  out["merged_logits"] = logits_json(model, ids);
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peft_lora_tool: %s\n", e.what());
    return 1;
  }
}

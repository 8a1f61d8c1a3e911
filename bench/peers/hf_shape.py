"""A Hugging Face model built from a config.json, for the PyTorch peers (torch_train.py, torch_generate.py).

`temper bench train --shape NAME --print-config` writes the config.json of temper's built-in shape NAME
(io::hf_config_json, the same writer `temper convert` uses; tools/ref/check_hf_roundtrip.py checks that
transformers builds the same model from it for every family). The config class comes from its model_type
(LlamaConfig, Qwen2Config, Qwen3Config, MistralConfig, Gemma2Config, Gemma3TextConfig, Phi3Config) and the
model from AutoModelForCausalLM, random weights (transformers' initialiser, seed set by the caller).
Attention: SDPA, except Gemma-2, where transformers 4.51's SDPA path drops the attention soft-cap: eager
(what transformers recommends for Gemma-2), so both engines compute the same model.
"""

import json
import os


def default_attn(config_path):
    with open(config_path) as f:
        return "eager" if json.load(f)["model_type"] == "gemma2" else "sdpa"


def shape_name(config_path):
    return os.path.splitext(os.path.basename(config_path))[0]


def build_model(config_path, attn, use_cache, min_positions=0):
    """(model in f32, config) for config.json at config_path; max_position_embeddings raised to min_positions."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    with open(config_path) as f:
        d = json.load(f)
    d.pop("architectures", None)
    model_type = d.pop("model_type")
    d["max_position_embeddings"] = max(d.get("max_position_embeddings", 0), min_positions)
    cfg = CONFIG_MAPPING[model_type](**d, use_cache=use_cache, torch_dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, torch_dtype=torch.float32)
    assert model.config._attn_implementation == attn, (model.config._attn_implementation, attn)
    return model, cfg


def num_params(model):
    return sum(p.numel() for p in model.parameters())  # tied weights once, as temper counts them

"""A Hugging Face model directory of a config's shape with random weights, for measuring `temper train` on a model
size this machine has no download of (no internet): `temper train` reads it like any model directory.

Usage: random_model_dir.py CONFIG_JSON TOKENIZER_DIR OUT_DIR [--dtype bf16|f32] [--seed S]
CONFIG_JSON: the shape (a model's config.json, e.g. Qwen2.5-1.5B's); TOKENIZER_DIR: a model directory whose
tokenizer.json / tokenizer_config.json are copied (e.g. `temper convert` of the SmolLM2 GGUF); its config.json's
bos/eos token ids replace the shape's (the vocabulary stays the shape's, larger than the tokenizer's: as Qwen pads
its embedding past its tokenizer). Weights: transformers' initialiser (hf_shape.build_model), saved as safetensors
in the chosen dtype.
"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_shape import build_model, default_attn  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("tokenizer_dir")
    ap.add_argument("out")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    import torch

    torch.manual_seed(a.seed)
    with open(os.path.join(a.tokenizer_dir, "config.json")) as f:
        tok_cfg = json.load(f)
    with open(a.config) as f:
        shape = json.load(f)
    shape.pop("torch_dtype", None)  # hf_shape builds in f32; the saved dtype is --dtype
    for k in ("bos_token_id", "eos_token_id"):
        if k in tok_cfg:
            shape[k] = tok_cfg[k]
    os.makedirs(a.out, exist_ok=True)
    shape_path = os.path.join(a.out, "config.json")
    with open(shape_path, "w") as f:
        json.dump(shape, f, indent=1)
    model, _ = build_model(shape_path, default_attn(shape_path), use_cache=False)
    if a.dtype == "bf16":
        model = model.to(torch.bfloat16)
    model.save_pretrained(a.out, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer_dir, name), os.path.join(a.out, name))
    n = sum(p.numel() for p in model.parameters())
    print(f"{a.out}: {n / 1e9:.3f}B parameters, {a.dtype}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Slow check (ctest -L slow): temper reads what transformers writes and writes what transformers reads.

For each golden config (tests/data/golden/{llama,qwen2,qwen3,llama31,mistral,gemma2,gemma3,phi3}): transformers builds the model with the
golden weights and save_pretrained()s it (dir A); `temper convert A B` re-exports it; transformers loads
B and must give bit-identical logits to A (f32 export of f32 weights); `temper logits --model A --full`
must agree with transformers' logits (max relative difference printed and bounded).
Usage: check_hf_roundtrip.py --temper build/bin/temper
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDS = [1, 5, 9, 33, 2, 100, 7, 64, 12, 0, 127, 45]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--temper", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("llama", "qwen2", "qwen3", "llama31", "mistral", "gemma2", "gemma3", "phi3"):
            gdir = os.path.join(ROOT, "tests", "data", "golden", name)
            cfg = AutoConfig.from_pretrained(gdir)
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32, attn_implementation="eager").eval()
            st = load_file(os.path.join(gdir, "golden.safetensors"))
            sd = {k: v for k, v in st.items() if k in model.state_dict()}
            missing, _ = model.load_state_dict(sd, strict=False)
            assert all(m == "lm_head.weight" for m in missing), missing
            a = os.path.join(tmp, name + "_a")
            b = os.path.join(tmp, name + "_b")
            model.save_pretrained(a, safe_serialization=True)
            subprocess.run([args.temper, "convert", a, b], check=True)
            ids = torch.tensor([IDS])
            with torch.no_grad():
                la = model(ids).logits[0]
                mb = AutoModelForCausalLM.from_pretrained(b, torch_dtype=torch.float32, attn_implementation="eager").eval()
                lb = mb(ids).logits[0]
            if not torch.equal(la, lb):
                print(f"{name}: transformers logits differ after temper convert: max {float((la - lb).abs().max())}")
                return 1
            out = subprocess.run([args.temper, "logits", "--model", a, "--ids", ",".join(map(str, IDS)), "--full"],
                                 check=True, capture_output=True, text=True).stdout
            lt = torch.tensor(json.loads(out)["logits"])
            rel = float((lt - la).abs().max() / la.abs().max())
            worst = max(worst, rel)
            top1_equal = bool((lt.argmax(-1) == la.argmax(-1)).all())
            print(f"{name}: convert round trip bit-identical in transformers; temper vs transformers logits "
                  f"max |diff| / max |logit| = {rel:.3e}, top-1 equal at every position: {top1_equal}")
            if rel > 1e-5 or not top1_equal:
                return 1
    print(f"ok (worst relative logit difference {worst:.3e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

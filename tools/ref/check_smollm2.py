#!/usr/bin/env python3
"""Slow check (ctest -L slow) on the real model, SmolLM2-135M-Instruct (Q4_1 GGUF):
1. temper and transformers (from_pretrained(gguf_file=...), float32) over a fixed prompt set: the top-1
   token must be equal at every position; the max |logit difference| is printed (docs/PERFORMANCE.md).
2. `temper convert` to a Hugging Face directory: transformers loads it and gives the same logits as
   from the GGUF (both dequantize the same blocks to f32).
   Its tokenizer.json (written by temper from the GGUF's tokenizer) gives transformers the same ids.
3. `temper convert` to GGUF (Q8_0 and F16): the gguf package reads it (tensor types, llama metadata,
   tokenizer keys), and transformers loading it agrees with temper on the same file.
Usage: check_smollm2.py --temper build/bin/temper --gguf .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import gguf
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "<|im_start|>user\nWhat is 12 * 7?<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea, there lived",
    "Photosynthesis converts light energy into",
]


def temper_logits(temper, model, ids):
    out = subprocess.run([temper, "logits", "--model", model, "--ids", ",".join(map(str, ids)), "--full"],
                         check=True, capture_output=True, text=True).stdout
    return torch.tensor(json.loads(out)["logits"])


def hf_model(path, gguf_file=None):
    kw = dict(torch_dtype=torch.float32)
    if gguf_file:
        return AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf_file, **kw).eval()
    return AutoModelForCausalLM.from_pretrained(path, **kw).eval()


def compare(name, temper, model_path, hf, ids_list):
    worst, equal, total = 0.0, 0, 0
    for ids in ids_list:
        lt = temper_logits(temper, model_path, ids)
        with torch.no_grad():
            lh = hf(torch.tensor([ids])).logits[0]
        worst = max(worst, float((lt - lh).abs().max()))
        equal += int((lt.argmax(-1) == lh.argmax(-1)).sum())
        total += len(ids)
    print(f"{name}: top-1 equal at {equal}/{total} positions, max |logit diff| {worst:.3e}")
    return equal == total, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--temper", required=True)
    ap.add_argument("--gguf", required=True)
    a = ap.parse_args()
    if not os.path.exists(a.gguf):
        print(f"skipped: {a.gguf} missing")
        return 77
    d, f = os.path.split(os.path.abspath(a.gguf))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    ids_list = [tok(p, add_special_tokens=False).input_ids for p in PROMPTS]
    ok = True
    ref = hf_model(d, f)
    good, worst = compare("GGUF Q4_1 (transformers from_pretrained(gguf_file))", a.temper, a.gguf, ref, ids_list)
    ok &= good and worst < 2e-3
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = os.path.join(tmp, "hf")
        subprocess.run([a.temper, "convert", a.gguf, hf_dir], check=True, capture_output=True)
        exported = hf_model(hf_dir)
        with torch.no_grad():
            for ids in ids_list:
                x = torch.tensor([ids])
                diff = float((exported(x).logits - ref(x).logits).abs().max())
                if diff > 1e-4:
                    print(f"HF export: transformers logits differ from the GGUF's by {diff:.3e}")
                    ok = False
        print("HF export: transformers on temper's export equals transformers on the GGUF (max diff <= 1e-4)")
        tok2 = AutoTokenizer.from_pretrained(hf_dir)
        same = all(tok2(p, add_special_tokens=False).input_ids == ids for p, ids in zip(PROMPTS, ids_list))
        print(f"HF export: transformers' tokenizer from temper's tokenizer.json gives the same ids: {same}")
        ok &= same
        for dtype in ("q8_0", "f16"):
            out = os.path.join(tmp, f"smol_{dtype}.gguf")
            subprocess.run([a.temper, "convert", a.gguf, out, "--dtype", dtype], check=True, capture_output=True)
            r = gguf.GGUFReader(out)
            types = {t.tensor_type.name for t in r.tensors}
            arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
            ntok = len(r.fields["tokenizer.ggml.tokens"].data)
            print(f"GGUF export {dtype}: gguf reads {len(r.tensors)} tensors, types {sorted(types)}, arch {arch}, "
                  f"{ntok} tokens")
            ok &= len(r.tensors) == 272 and arch == "llama" and ntok == 49152
            m = hf_model(tmp, os.path.basename(out))
            good, worst = compare(f"GGUF export {dtype} (transformers vs temper on the same file)", a.temper, out, m,
                                  ids_list)
            ok &= good and worst < 2e-3
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

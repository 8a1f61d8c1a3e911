#!/usr/bin/env python3
"""Check temper's GGUF export of the golden models against gguf-py and transformers.

Reference script only. For each golden model name it reads DIR/<name>.gguf (written by
`temper convert <hf dir> DIR/<name>.gguf --dtype f32`, the HF dir holding the golden's config.json and
its weights as model.safetensors) and checks:
  * gguf-py (GGUFReader): general.architecture is a llama.cpp arch, every tensor name is one llama.cpp
    knows for that arch (gguf.constants.MODEL_TENSORS), every {arch}.* key is a known key name;
  * transformers (from_pretrained(gguf_file=...), its own GGUF -> HF conversion), for information: the
    logits of the golden's input against the golden's fp64 logits. transformers 4.51's GGUF loader drops
    what llama.cpp's metadata does not map to its configs (rope_freqs, Mistral's window, Gemma's
    query_pre_attn_scalar and soft-caps; no gemma3), so only plain configs can agree there.

Measured (temper d019529+, transformers 4.51.3, gguf 0.17.1): every file passes the name and key checks;
transformers' logits differ by 1.9e-3 (llama31: rope_freqs ignored), 1.04 (mistral: no window),
1.59 (gemma2: default query_pre_attn_scalar 256); gemma3 unsupported; phi3 refused (pad_token_id 32000).

    .venv/bin/python tools/ref/check_gguf_export.py /tmp/hfdir llama31 mistral gemma2 gemma3 phi3
"""
import os
import sys

import gguf
import torch
from gguf.constants import MODEL_ARCH_NAMES, MODEL_TENSORS, TENSOR_NAMES, Keys
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def known_keys(arch):
    out = set()
    for group in vars(Keys).values():
        if isinstance(group, type):
            for v in vars(group).values():
                if isinstance(v, str) and v.startswith("{arch}."):
                    out.add(v.format(arch=arch))
    return out


def check_names(path):
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    ids = {v: k for k, v in MODEL_ARCH_NAMES.items()}
    assert arch in ids, f"{path}: unknown arch {arch}"
    names = set()
    for t in MODEL_TENSORS[ids[arch]]:
        names.add(TENSOR_NAMES[t])
    bad = []
    for t in r.tensors:
        base = t.name.rsplit(".", 1)[0]
        generic = base
        if base.startswith("blk."):
            parts = base.split(".")
            generic = "blk.{bid}." + ".".join(parts[2:])
        if generic not in names:
            bad.append(t.name)
    keys = known_keys(arch)
    own = {f"{arch}.attention.query_pre_attn_scalar",  # temper's own key (llama.cpp derives the scale)
           # llama.cpp keys newer than gguf-py 0.17 (llama.cpp's gguf-py/gguf/constants.py, as vendored by
           # llama-cpp-python 0.3.36: Keys.Attention.SLIDING_WINDOW_PATTERN, Keys.Rope.FREQ_BASE_SWA)
           f"{arch}.attention.sliding_window_pattern", f"{arch}.rope.freq_base_swa"}
    unknown = [k for k in r.fields if k.startswith(arch + ".") and k not in keys and k not in own]
    return arch, bad, unknown, len(r.tensors)


def check_logits(path, name):
    from transformers import AutoModelForCausalLM

    g = load_file(os.path.join(ROOT, "tests", "data", "golden", name, "golden.safetensors"))
    try:
        m = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float32)
    except Exception as e:  # an arch transformers' GGUF loader does not know
        return f"transformers cannot load it: {type(e).__name__}: {str(e)[:120]}"
    m.eval()
    with torch.no_grad():
        logits = m(input_ids=g["input_ids"].long(), use_cache=False).logits.double()
    want = g["logits"]
    rel = ((logits - want).abs().max() / want.abs().max()).item()
    return f"transformers logits vs golden: max rel {rel:.2e}"


def main():
    d, names = sys.argv[1], sys.argv[2:]
    ok = True
    for n in names:
        p = os.path.join(d, n + ".gguf")
        arch, bad, unknown, nt = check_names(p)
        print(f"{n}: arch {arch}, {nt} tensors, unknown tensor names {bad}, unknown keys {unknown}")
        ok &= not bad and not unknown
        print("   ", check_logits(p, n))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write the RoPE-scaling goldens for temper's kernel tests (tests/data/golden/rope/rope.json).

Reference script only (Python is never part of the engine). Run from the repository root with the
pinned environment (tools/ref/requirements.txt: torch 2.5.1, transformers 4.51.3):

    .venv/bin/python tools/ref/make_rope_goldens.py
    .venv/bin/python tools/ref/make_rope_goldens.py --out /tmp/rope.json   # elsewhere

For each case (a rope_scaling of a real model family: none, linear (Gemma-3 global layers), llama3
(Llama-3.1/3.2), longrope short and long (Phi-3/3.5), longrope with a given attention_factor) it
records what transformers' own rotary module computes on the CPU in float32: inv_freq (the module's
buffer after its forward, so longrope's long/short choice is HF's), attention_scaling, and the first
D/2 columns of cos and sin (emb = cat(freqs, freqs)) at a few positions. Floats are written with 9
significant digits, which round-trips float32 exactly. The output is deterministic (no randomness:
longrope's factors are a fixed formula).

Note: torch's vectorised powf (base ** exponent) differs from a correctly rounded powf by one ulp in
rare elements (e.g. D = 96, theta = 1e4, index 20); the cases with "pow_exact": false contain such
an element, and the C++ test allows the resulting angle error (position x the inv_freq difference).
"""

import argparse
import json
import math

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, Phi3Config
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

LONG_POS = [0, 1, 2, 3, 17, 100, 1000, 4095, 4096, 8191, 8192, 20000, 65535, 131071]
SHORT_POS = [0, 1, 2, 3, 17, 100, 1000, 2047, 4000, 4095]


def longrope_factors(half, lo, hi, bend):
    """A smooth, fixed ramp like Phi-3's published factors (1 at high frequencies, growing)."""
    return [float(lo + (hi - lo) * (i / (half - 1)) ** bend) for i in range(half)]


def llama_config(D, theta, rope_scaling, max_pos):
    return LlamaConfig(hidden_size=D * 2, num_attention_heads=2, head_dim=D, rope_theta=theta,
                       rope_scaling=rope_scaling, max_position_embeddings=max_pos)


def phi3_config(D, theta, rope_scaling, max_pos, original_max):
    return Phi3Config(hidden_size=D * 2, num_attention_heads=2, num_key_value_heads=2, rope_theta=theta,
                      rope_scaling=rope_scaling, max_position_embeddings=max_pos,
                      original_max_position_embeddings=original_max)


def cases():
    out = []
    for D, theta in [(64, 10000.0), (96, 10000.0)]:
        out.append(dict(name=f"none_D{D}", type="none", D=D, theta=theta, positions=LONG_POS,
                        module=LlamaRotaryEmbedding, config=llama_config(D, theta, None, 131072)))
    # Gemma-3 global layers: linear, factor 8, theta 1e6; factor 3 (not a power of two) tells a division
    # from a multiplication by the reciprocal.
    for D, theta, factor in [(64, 1e6, 3.0), (128, 1e6, 8.0)]:
        rs = {"rope_type": "linear", "factor": factor}
        out.append(dict(name=f"linear_D{D}", type="linear", D=D, theta=theta, positions=LONG_POS, scaling=rs,
                        module=LlamaRotaryEmbedding, config=llama_config(D, theta, rs, 131072)))
    # Llama-3.2-1B (D 64, factor 32) and Llama-3.1-8B (D 128, factor 8); theta 500000. Their blended band
    # holds a few frequencies and the factors are powers of two, so a third case widens the band and takes
    # factor 12: it tells HF's op order (reciprocal-multiply for scalar / tensor, (1 - s) * f / factor)
    # from its algebraic equivalents.
    for D, factor, high, tag in [(64, 32.0, 4.0, ""), (128, 8.0, 4.0, ""), (128, 12.0, 64.0, "_wide")]:
        rs = {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": high,
              "original_max_position_embeddings": 8192}
        out.append(dict(name=f"llama3{tag}_D{D}", type="llama3", D=D, theta=500000.0, positions=LONG_POS, scaling=rs,
                        module=LlamaRotaryEmbedding, config=llama_config(D, 500000.0, rs, 131072)))
    # Phi-3/3.5-mini: D 96, theta 1e4, original 4096, max 131072 (factor 32); D 64 has exact powf.
    for D in [64, 96]:
        half = D // 2
        for use_long in [False, True]:
            rs = {"type": "longrope", "short_factor": longrope_factors(half, 1.0, 1.9, 3.0),
                  "long_factor": longrope_factors(half, 1.0, 40.0, 2.0)}
            out.append(dict(name=f"longrope_{'long' if use_long else 'short'}_D{D}", type="longrope", D=D,
                            theta=10000.0, positions=LONG_POS if use_long else SHORT_POS, scaling=rs,
                            use_long=use_long, factor=131072 / 4096, original_max=4096, module=Phi3RotaryEmbedding,
                            config=phi3_config(D, 10000.0, rs, 131072, 4096)))
    D = 64  # a given attention_factor (rope_scaling.attention_factor) replaces the default
    rs = {"type": "longrope", "short_factor": longrope_factors(32, 1.0, 1.5, 2.0),
          "long_factor": longrope_factors(32, 1.0, 20.0, 2.5)}
    config = phi3_config(D, 10000.0, rs, 131072, 4096)
    config.rope_scaling["attention_factor"] = 1.25  # after Phi3Config's validation, which allows 3 keys only
    out.append(dict(name="longrope_attention_factor_D64", type="longrope", D=D, theta=10000.0, positions=LONG_POS,
                    scaling=config.rope_scaling, use_long=True, factor=131072 / 4096, original_max=4096,
                    module=Phi3RotaryEmbedding, config=config))
    return out


def powf_exact(D, theta):
    """True when torch's base ** exponent equals the correctly rounded float32 power for every i."""
    e = torch.arange(0, D, 2, dtype=torch.int64).float() / D
    got = (theta ** e).numpy()
    want = np.power(np.float64(np.float32(theta)), e.numpy().astype(np.float64)).astype(np.float32)
    return bool((got == want).all())


def run_case(c):
    rot = c["module"](c["config"])
    pos = torch.tensor([c["positions"]], dtype=torch.int64)
    x = torch.zeros(1, len(c["positions"]), c["D"], dtype=torch.float32)
    cos, sin = rot(x, pos)
    half = c["D"] // 2
    f9 = lambda a: [float("%.9g" % v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]
    rec = {k: c[k] for k in ("name", "type", "D", "theta", "positions")}
    rs = c.get("scaling", {})
    rec["factor"] = c.get("factor", rs.get("factor", 1.0))
    for k in ("low_freq_factor", "high_freq_factor", "short_factor", "long_factor", "attention_factor"):
        if k in rs:
            rec[k] = rs[k]
    rec["original_max_position"] = c.get("original_max", rs.get("original_max_position_embeddings", 0))
    rec["use_long"] = c.get("use_long", False)
    rec["pow_exact"] = powf_exact(c["D"], c["theta"])
    rec["inv_freq"] = f9(rot.inv_freq)
    rec["attention_scaling"] = float(rot.attention_scaling)
    rec["cos"] = f9(cos[0, :, :half])
    rec["sin"] = f9(sin[0, :, :half])
    assert torch.equal(cos[0, :, :half], cos[0, :, half:])
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/golden/rope/rope.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    recs = [run_case(c) for c in cases()]
    doc = {"generator": "tools/ref/make_rope_goldens.py", "torch": torch.__version__,
           "transformers": transformers.__version__, "cases": recs}
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    for r in recs:
        print(f"{r['name']:34s} D={r['D']:4d} att={r['attention_scaling']:.6f} pow_exact={r['pow_exact']}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch peer benchmark: full-parameter training-step throughput on CPU.

What it measures
    One training step = forward of a Llama-architecture causal LM on random token ids,
    loss = model(input_ids, labels=input_ids).loss (HF shifted next-token cross-entropy,
    mean over B*(T-1) targets), backward, torch.optim.AdamW(lr=1e-4, otherwise torch
    defaults: betas (0.9, 0.999), eps 1e-8, weight_decay 0.01, for-loop implementation on
    CPU) step, zero_grad(set_to_none=True). `--warmup` steps run untimed (they also allocate
    the AdamW state), then `--steps` steps are timed with time.perf_counter():
        tokens_per_s = batch * seq * steps / elapsed
    and each timed step's seconds in step_s (for a median on a noisy machine).
    peak_rss_mb = getrusage(RUSAGE_SELF).ru_maxrss / 1024 (whole-process peak, including
    model construction and the warmup steps).

    Shapes (random init, transformers' default initialiser, seed 0):
      smollm2-135m  LlamaConfig(hidden 576, 30 layers, 9 heads, 3 kv heads, head_dim 64,
                    intermediate 1536, vocab 49152, tied embeddings, rope_theta 1e5,
                    rms_norm_eps 1e-5, max_position_embeddings 2048)
      tiny          the tests/data/golden/llama config (hidden 64, 2 layers, 4/2 heads,
                    head_dim 16, intermediate 88, vocab 128, tied) with
                    max_position_embeddings = max(2048, seq)
    or --config FILE: any family temper runs, from the config.json of one of temper's built-in
    shapes (`temper bench train --shape NAME --print-config > NAME.json`; bench/peers/hf_shape.py:
    the config class of its model_type, AutoModelForCausalLM; "shape" in the JSON is the file's
    name). Gemma-2 runs eager attention there (SDPA drops its soft-cap).
    Attention: attn_implementation="sdpa" (torch.nn.functional.scaled_dot_product_attention,
    causal, no padding mask).
    Dtypes: f32 = plain fp32 everywhere. bf16 = torch.autocast("cpu", dtype=torch.bfloat16)
    around the forward+loss only (fp32 master weights, fp32 grads, fp32 AdamW state; the
    backward runs the autocast-recorded bf16 ops). Note HF upcasts the logits to fp32 inside
    the loss.

How to run (from the repository root, pinned env from tools/ref/requirements.txt):
    .venv/bin/python bench/peers/torch_train.py --shape smollm2-135m --batch 4 --seq 512 \\
        --threads 2 --dtype bf16 --steps 3 --warmup 1 --json

For a fair comparison with temper
    * same shape, batch, seq, dtype and thread count on the same otherwise idle machine;
      --threads sets torch.set_num_threads (intra-op). Also export OMP_NUM_THREADS=N
      (and MKL_NUM_THREADS=N) so the BLAS pools agree, and pin both programs the same way
      (e.g. taskset -c 0-(N-1)).
    * PyPI torch (this venv) bundles its own BLAS (MKL + oneDNN): no LD_LIBRARY_PATH needed.
    * Debian's python3-torch links the system OpenBLAS; run it with the OpenMP build of
      OpenBLAS, otherwise BLAS ignores the thread setting / oversubscribes:
        LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 \\
            bench/peers/torch_train.py ...
    * use enough --steps for a stable number (>= 3 at 135M; more for tiny) and report
      the torch version printed in the JSON.

Output: with --json exactly one JSON line on stdout:
    {"engine":"pytorch","torch":...,"shape":...,"batch":...,"seq":...,"threads":...,
     "dtype":...,"tokens_per_s":...,"peak_rss_mb":...}
Without --json a human-readable line (plus the per-step losses) is printed.
"""

import argparse
import contextlib
import json
import resource
import sys
import time

import torch


def make_config(shape, seq, attn):
    from transformers import LlamaConfig

    common = dict(hidden_act="silu", attn_implementation=attn, use_cache=False,
                  torch_dtype=torch.float32, attention_bias=False, mlp_bias=False)
    if shape == "smollm2-135m":
        if seq > 2048:
            raise SystemExit("smollm2-135m: --seq must be <= 2048 (max_position_embeddings)")
        return LlamaConfig(hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                           num_key_value_heads=3, intermediate_size=1536, vocab_size=49152,
                           tie_word_embeddings=True, rope_theta=100000.0, rms_norm_eps=1e-5,
                           max_position_embeddings=2048, **common)
    if shape == "tiny":
        return LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=16, intermediate_size=88, vocab_size=128,
                           tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-5,
                           max_position_embeddings=max(2048, seq), **common)
    raise ValueError(shape)


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU training-step throughput (peer benchmark)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--shape", choices=["smollm2-135m", "tiny"])
    src.add_argument("--config", help="config.json of a temper shape (temper bench train --print-config)")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--attn", choices=["sdpa", "eager"], default=None,
                    help="attention implementation (default: sdpa; eager on torch 1.x, which has no SDPA, "
                    "and for Gemma-2)")
    args = ap.parse_args()
    if args.attn is None:
        args.attn = "sdpa" if int(torch.__version__.split(".")[0]) >= 2 else "eager"
        if args.config:
            from hf_shape import default_attn
            args.attn = default_attn(args.config) if args.attn == "sdpa" else args.attn
    if args.steps < 1 or args.warmup < 0 or args.batch < 1 or args.seq < 2 or args.threads < 1:
        ap.error("need steps >= 1, warmup >= 0, batch >= 1, seq >= 2, threads >= 1")

    torch.set_num_threads(args.threads)
    import transformers
    from transformers import LlamaForCausalLM

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    if args.config:
        from hf_shape import build_model, shape_name
        model, cfg = build_model(args.config, args.attn, use_cache=False, min_positions=args.seq)
        args.shape = shape_name(args.config)
    else:
        cfg = make_config(args.shape, args.seq, args.attn)
        model = LlamaForCausalLM(cfg)
    assert model.config._attn_implementation == args.attn
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq))

    def autocast():
        if args.dtype == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        with autocast():
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(args.warmup):
        step()
    losses, step_s = [], []
    t0 = time.perf_counter()
    for _ in range(args.steps):
        ts = time.perf_counter()
        losses.append(step())  # .item() syncs; CPU is synchronous anyway
        step_s.append(round(time.perf_counter() - ts, 4))
    elapsed = time.perf_counter() - t0

    result = {
        "engine": "pytorch",
        "torch": torch.__version__,
        "attn": args.attn,
        "shape": args.shape,
        "batch": args.batch,
        "seq": args.seq,
        "threads": args.threads,
        "dtype": args.dtype,
        "tokens_per_s": args.batch * args.seq * args.steps / elapsed,
        "step_s": step_s,
        "params": sum(p.numel() for p in model.parameters()),
        "final_loss": losses[-1],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        n_params = sum(p.numel() for p in model.parameters())
        print(f"pytorch {torch.__version__} {args.shape} ({n_params / 1e6:.1f}M params) "
              f"B={args.batch} T={args.seq} threads={args.threads} {args.dtype}: "
              f"{result['tokens_per_s']:.1f} tokens/s, {elapsed / args.steps:.3f} s/step, "
              f"peak RSS {result['peak_rss_mb']:.0f} MB")
        print("losses:", " ".join(f"{x:.4f}" for x in losses))


if __name__ == "__main__":
    main()

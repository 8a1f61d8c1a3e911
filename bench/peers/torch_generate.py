#!/usr/bin/env python3
"""PyTorch peer benchmark for the rollout engine: batched sampling with a KV cache on CPU.

What it measures
    B sequences of P random prompt tokens each (no padding: all prompts have the same length),
    one forward over the prompts (prefill), then N-1 single-token decode steps over the KV cache,
    sampling every token from softmax(logits) (temperature 1, no truncation, torch.multinomial),
    as `temper bench rollout` does. After a 2-token warm-up run, one timed run:
        prefill_tokens_per_s = B * P / (prefill forward + first sample)
        decode_tokens_per_s  = B * (N - 1) / (the N - 1 decode steps)
    which is what temper's difference of a 1-token and an N-token run measures.
    peak_rss_mb = getrusage(RUSAGE_SELF).ru_maxrss / 1024.

    --impl loop (default): a plain loop over LlamaForCausalLM.forward with a transformers
        DynamicCache (the cache grows by concatenation each step), logits of the last position
        only (logits_to_keep=1).
    --impl generate: transformers' model.generate(do_sample=True, top_k=0, top_p=1,
        temperature=1, min_new_tokens=N, max_new_tokens=N) with its default DynamicCache; the
        prefill is timed as a separate 1-token generate (difference method, as temper).

    Shape: smollm2-135m = LlamaConfig(hidden 576, 30 layers, 9 heads, 3 kv heads, head_dim 64,
    intermediate 1536, vocab 49152, tied embeddings, rope_theta 1e5, rms_norm_eps 1e-5),
    random weights (seed 0); tiny = the tests/data/golden/llama config. Attention: SDPA.
    Or --config FILE: any family temper runs, from the config.json of a temper shape
    (`temper bench train --shape NAME --print-config > NAME.json`, bench/peers/hf_shape.py:
    the family's config class and AutoModelForCausalLM; Gemma-2 with eager attention, since
    transformers' SDPA path drops its soft-cap). Use --impl generate there: it makes each family's
    own cache (Gemma-2/3: HybridCache, which --impl loop's DynamicCache does not replace).
    Dtypes: f32 = everything fp32. bf16 = model.to(torch.bfloat16): bf16 weights, activations
    and KV cache (pure bf16 inference, as llama.cpp's BF16 GGUF); logits upcast to fp32 for
    sampling.

How to run (from the repository root, pinned env: scripts/bootstrap --python):
    OMP_NUM_THREADS=2 .venv/bin/python bench/peers/torch_generate.py --shape smollm2-135m \\
        --batch 8 --prompt-len 64 --gen-len 32 --threads 2 --dtype f32

Output: one JSON line per run with the keys of `temper bench rollout --json`:
    {"engine":"pytorch","torch":...,"impl":...,"shape":...,"batch":...,"prompt_len":...,
     "gen_len":...,"threads":...,"dtype":...,"prefill_tokens_per_s":...,
     "decode_tokens_per_s":...,"peak_rss_mb":...}
"""

import argparse
import json
import resource
import sys
import time

import torch


def make_config(shape):
    from transformers import LlamaConfig

    common = dict(hidden_act="silu", attn_implementation="sdpa", use_cache=True,
                  torch_dtype=torch.float32, attention_bias=False, mlp_bias=False)
    if shape == "smollm2-135m":
        return LlamaConfig(hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                           num_key_value_heads=3, intermediate_size=1536, vocab_size=49152,
                           tie_word_embeddings=True, rope_theta=100000.0, rms_norm_eps=1e-5,
                           max_position_embeddings=2048, **common)
    if shape == "tiny":
        return LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=16, intermediate_size=88, vocab_size=128,
                           tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-5,
                           max_position_embeddings=2048, **common)
    raise ValueError(shape)


def sample(logits, gen):
    # logits [B, V] -> token ids [B, 1], temperature 1, full vocabulary
    probs = torch.softmax(logits.float(), dim=-1)
    return torch.multinomial(probs, 1, generator=gen)


@torch.inference_mode()
def run_loop(model, ids, n_new, gen):
    """Returns (seconds for prefill + first sample, seconds for the remaining n_new - 1 steps)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    t0 = time.perf_counter()
    out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    tok = sample(out.logits[:, -1, :], gen)
    t1 = time.perf_counter()
    for _ in range(n_new - 1):
        out = model(input_ids=tok, past_key_values=cache, use_cache=True, logits_to_keep=1)
        tok = sample(out.logits[:, -1, :], gen)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


@torch.inference_mode()
def run_generate(model, ids, n_new):
    def gen(n):
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                             top_k=0, top_p=1.0, temperature=1.0, min_new_tokens=n,
                             max_new_tokens=n, pad_token_id=0, eos_token_id=None)
        assert out.shape[1] == ids.shape[1] + n
        return time.perf_counter() - t0

    t1 = gen(1)
    tn = gen(n_new)
    return t1, tn - t1


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU batched generation with a KV cache (peer benchmark)")
    ap.add_argument("--shape", choices=["smollm2-135m", "tiny"], default="smollm2-135m")
    ap.add_argument("--config", help="config.json of a temper shape (temper bench train --print-config); "
                    "overrides --shape")
    ap.add_argument("--batch", type=str, default="1", help="batch size, or a comma list (one JSON line each)")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--gen-len", type=int, default=32)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--dtype", type=str, default="f32", help="f32, bf16, or a comma list")
    ap.add_argument("--impl", choices=["loop", "generate"], default="loop")
    args = ap.parse_args()
    batches = [int(b) for b in args.batch.split(",")]
    dtypes = args.dtype.split(",")
    if args.gen_len < 2 or args.prompt_len < 1 or min(batches) < 1 or args.threads < 1:
        ap.error("need --gen-len >= 2, --prompt-len >= 1, --batch >= 1, --threads >= 1")
    for d in dtypes:
        if d not in ("f32", "bf16"):
            ap.error(f"--dtype must be f32 or bf16, got {d!r}")

    torch.set_num_threads(args.threads)
    import transformers
    from transformers import LlamaForCausalLM

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    if args.config:
        from hf_shape import build_model, default_attn, shape_name
        base, cfg = build_model(args.config, default_attn(args.config), use_cache=True,
                                min_positions=args.prompt_len + args.gen_len)
        base.eval()
        args.shape = shape_name(args.config)
    else:
        cfg = make_config(args.shape)
        base = LlamaForCausalLM(cfg).eval()
    for dtype in dtypes:
        model = base.to(torch.bfloat16) if dtype == "bf16" else base.to(torch.float32)
        for b in batches:
            g = torch.Generator().manual_seed(3)
            ids = torch.randint(0, cfg.vocab_size, (b, args.prompt_len), generator=g)
            if args.impl == "loop":
                run_loop(model, ids, 2, g)  # warm-up
                tp, td = run_loop(model, ids, args.gen_len, g)
            else:
                run_generate(model, ids, 2)
                tp, td = run_generate(model, ids, args.gen_len)
            result = {
                "engine": "pytorch",
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "impl": args.impl,
                "shape": args.shape,
                "batch": b,
                "prompt_len": args.prompt_len,
                "gen_len": args.gen_len,
                "threads": torch.get_num_threads(),
                "dtype": dtype,
                "prefill_tokens_per_s": round(b * args.prompt_len / tp, 1),
                "decode_tokens_per_s": round(b * (args.gen_len - 1) / td, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            }
            sys.stdout.write(json.dumps(result) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch peer of `temper bench cuda` on the same GPU, in the same run (scripts/gpu-check).

What it measures (one JSON line each, engine "pytorch"; shapes as temper's presets):
  train   Qwen2ForCausalLM with Qwen2.5-0.5B's config, random init (transformers' initialiser,
          seed 0), fp32 master weights, torch.autocast(bfloat16) around forward + loss, SDPA
          attention, torch.optim.AdamW(fused=True, lr 1e-5), grad-norm clip 1.0; tokens/s over
          --steps timed steps after --warmup; MFU with temper's accounting (6 x matrix params incl.
          the LM head + 6 L H D T per token) against the dense bf16 peak (989.4 TFLOP/s on
          H100/H200, 312 on A100).
  decode  the same model cast to bfloat16, model.generate(do_sample=True, top_k=0, top_p=1,
          temperature 1, max_new_tokens = min_new_tokens = --gen-len) from one-token prompts at
          each batch of --batches (dynamic KV cache, eager: transformers' default generate);
          tokens/s = batch * gen_len / seconds (the first, untimed call warms up).
  gemm    torch.matmul of bf16 [M, K] x [K, N] (M = batch * seq) at the model's GEMM shapes.
Run: python3 bench/peers/torch_gpu.py [--what all] [--batch 8 --seq 1024] [--batches 1,64,256]
"""
import argparse
import json
import sys
import time


def peak_tflops(name):
    if any(k in name for k in ("H100", "H200", "H800", "GH200")):
        return 989.4
    if "A100" in name or "A800" in name:
        return 312.0
    if "L40S" in name:
        return 362.0
    return 0.0


def qwen_config(transformers):
    return transformers.Qwen2Config(
        vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=32768,
        rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)


def matrix_params(c):
    C, D = c.hidden_size, c.hidden_size // c.num_attention_heads
    qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * D
    per_layer = qkv * C + c.num_attention_heads * D * C + 3 * c.intermediate_size * C
    return c.num_hidden_layers * per_layer + c.vocab_size * C


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--what", default="all")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batches", default="1,64,256")
    ap.add_argument("--gen-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    import torch
    import transformers
    if not torch.cuda.is_available():
        print(json.dumps({"bench": "error", "engine": "pytorch", "error": "torch sees no CUDA device"}))
        return 1
    dev = torch.cuda.get_device_name(0)
    peak = peak_tflops(dev)
    cfg = qwen_config(transformers)
    common = {"engine": "pytorch", "torch": torch.__version__, "transformers": transformers.__version__, "device": dev}

    if a.what in ("all", "gemm"):
        M = a.batch * a.seq
        C, F, D = cfg.hidden_size, cfg.intermediate_size, cfg.hidden_size // cfg.num_attention_heads
        shapes = [("qkv", (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * D, C), ("o", C, C),
                  ("gate_up", 2 * F, C), ("down", C, F), ("lm_head", cfg.vocab_size, C)]
        for name, n, k in shapes:
            x = torch.ones(M, k, device="cuda", dtype=torch.bfloat16)
            w = torch.ones(n, k, device="cuda", dtype=torch.bfloat16)
            for _ in range(3):
                y = x @ w.t()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                y = x @ w.t()
            torch.cuda.synchronize()
            sec = (time.perf_counter() - t0) / 20
            print(json.dumps({"bench": "gemm", "name": name, "M": M, "N": n, "K": k,
                              "tflops": 2 * M * n * k / sec / 1e12, **common}), flush=True)
            del x, w, y

    if a.what in ("all", "train"):
        torch.manual_seed(0)
        model = transformers.Qwen2ForCausalLM._from_config(cfg, attn_implementation="sdpa").cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
        ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")
        times = []
        for s in range(a.warmup + a.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            if s >= a.warmup:
                times.append(time.perf_counter() - t0)
        sec = sum(times) / len(times)
        N = a.batch * a.seq
        D = cfg.hidden_size // cfg.num_attention_heads
        fpt = 6.0 * matrix_params(cfg) + 6.0 * cfg.num_hidden_layers * cfg.num_attention_heads * D * a.seq
        tflops = fpt * N / sec / 1e12
        print(json.dumps({"bench": "train", "shape": "qwen2.5-0.5b", "batch": a.batch, "seq": a.seq,
                          "dtype": "bf16-autocast", "seconds_per_step": sec, "tokens_per_s": N / sec,
                          "model_tflops": tflops, "mfu": tflops / peak if peak else 0.0, "peak_tflops": peak,
                          "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30, **common}), flush=True)
        del model, opt, loss
        torch.cuda.empty_cache()

    if a.what in ("all", "decode"):
        torch.manual_seed(0)
        model = transformers.Qwen2ForCausalLM._from_config(cfg, attn_implementation="sdpa").cuda().to(torch.bfloat16)
        model.eval()
        for b in [int(x) for x in a.batches.split(",")]:
            ids = torch.randint(0, cfg.vocab_size, (b, 1), device="cuda")
            kw = dict(do_sample=True, top_k=0, top_p=1.0, temperature=1.0, max_new_tokens=a.gen_len,
                      min_new_tokens=a.gen_len, pad_token_id=0, attention_mask=torch.ones_like(ids))
            with torch.no_grad():
                model.generate(ids, **dict(kw, max_new_tokens=4, min_new_tokens=4))
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = model.generate(ids, **kw)
                torch.cuda.synchronize()
                sec = time.perf_counter() - t0
            gen = out.shape[1] - 1
            print(json.dumps({"bench": "decode", "shape": "qwen2.5-0.5b", "batch": b, "steps": gen,
                              "tokens_per_s": b * gen / sec, "ms_per_step": 1e3 * sec / gen, **common}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

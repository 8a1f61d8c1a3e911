#!/usr/bin/env python3
"""Load test of `temper serve` on loopback: C concurrent clients x R requests each (default 32 x 20) through the
official openai client (AsyncOpenAI, one connection per client). Prints throughput (requests/s, completion
tokens/s), latency p50/p90/p99 (and time to first token with --stream), the engine's steps, and asserts that no
request was lost (every one answered 200 with a finish reason and usage).

    .venv-client/bin/python bench/serve_load.py --temper build/bin/temper \\
        --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
    .venv-client/bin/python bench/serve_load.py --base-url http://127.0.0.1:8000/v1 --model-name NAME

Starting the server itself (--temper), it passes --max-seqs (default: the client count) and exits it with SIGTERM.
"""
import argparse
import asyncio
import json
import os
import sys
import time
import urllib.request

import openai

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))

PROMPTS = [
    "Write a short poem about the sea.",
    "Explain photosynthesis in two sentences.",
    "Give me three tips for learning to cook.",
    "What is the difference between a virus and a bacterium?",
    "Describe a sunset over the mountains.",
    "List four animals that live in the desert.",
    "Why is the sky blue?",
    "Tell me a fun fact about octopuses.",
]


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def one(client, args, cid, i, stats):
    prompt = PROMPTS[(cid * args.requests + i) % len(PROMPTS)]
    t0 = time.perf_counter()
    kw = dict(model=args.model_name, messages=[{"role": "user", "content": prompt}], max_tokens=args.max_tokens,
              temperature=args.temperature, seed=cid * 1000 + i)
    if args.stream:
        ttft, tokens, finish, n = None, 0, None, 0
        stream = await client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw)
        async for ch in stream:
            for c in ch.choices:
                if c.delta.content and ttft is None:
                    ttft = time.perf_counter() - t0
                finish = c.finish_reason or finish
            if ch.usage is not None:
                tokens = ch.usage.completion_tokens
            n += 1
        assert finish in ("stop", "length") and tokens > 0, (finish, tokens)
        stats["ttft"].append(ttft if ttft is not None else time.perf_counter() - t0)
    else:
        r = await client.chat.completions.create(**kw)
        assert r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens > 0, r
        tokens = r.usage.completion_tokens
    stats["latency"].append(time.perf_counter() - t0)
    stats["tokens"] += tokens
    stats["ok"] += 1


async def client_loop(base_url, args, cid, stats):
    async with openai.AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600) as client:
        for i in range(args.requests):
            try:
                await one(client, args, cid, i, stats)
            except Exception as e:  # counted as lost; the run goes on
                stats["errors"].append(f"client {cid} request {i}: {type(e).__name__}: {e}")


def engine_steps(base_url):
    try:
        with urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/stats", timeout=10) as r:
            return json.loads(r.read())["engine_steps"]
    except (OSError, KeyError, ValueError):
        return None


async def run(base_url, args):
    stats = {"latency": [], "ttft": [], "tokens": 0, "ok": 0, "errors": []}
    s0 = engine_steps(base_url)
    t0 = time.perf_counter()
    await asyncio.gather(*(client_loop(base_url, args, c, stats) for c in range(args.clients)))
    wall = time.perf_counter() - t0
    s1 = engine_steps(base_url)
    total = args.clients * args.requests
    out = {
        "clients": args.clients, "requests_per_client": args.requests, "requests": total, "ok": stats["ok"],
        "lost": total - stats["ok"], "max_tokens": args.max_tokens, "stream": args.stream, "wall_s": round(wall, 2),
        "requests_per_s": round(stats["ok"] / wall, 3), "completion_tokens": stats["tokens"],
        "completion_tokens_per_s": round(stats["tokens"] / wall, 1),
        "latency_s": {p: round(percentile(stats["latency"], q), 3) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))},
        "engine_steps": (s1 - s0) if s0 is not None and s1 is not None else None,
    }
    if args.stream:
        out["ttft_s"] = {p: round(percentile(stats["ttft"], q), 3) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))}
    return out, stats["errors"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", help="a running server's http://HOST:PORT/v1")
    ap.add_argument("--model-name", default="smol", help="the served model name (--served-model-name)")
    ap.add_argument("--temper", help="start `temper serve` with this binary (and --model)")
    ap.add_argument("--model", help="the model for the started server")
    ap.add_argument("--max-seqs", type=int, default=0, help="the started server's --max-seqs (0: --clients)")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=20, help="requests per client, one after another")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--stream", action="store_true", help="SSE streaming (adds time to first token)")
    args = ap.parse_args()
    srv = None
    if args.temper:
        from serve_process import ServeProcess
        if not args.model:
            ap.error("--temper needs --model")
        srv = ServeProcess(args.temper, args.model, "--max-seqs", str(args.max_seqs or args.clients),
                           "--max-concurrency", str(max(128, 2 * args.clients)), name=args.model_name)
        base_url = srv.base_url
    elif args.base_url:
        base_url = args.base_url
    else:
        ap.error("give --base-url or --temper/--model")
    try:
        out, errors = asyncio.run(run(base_url, args))
    finally:
        rc = srv.stop() if srv else 0
    print(json.dumps(out))
    for e in errors[:10]:
        print("lost:", e, file=sys.stderr)
    assert out["lost"] == 0, f"{out['lost']} of {out['requests']} requests lost"
    assert rc == 0, f"temper serve exited {rc} after SIGTERM"


if __name__ == "__main__":
    main()

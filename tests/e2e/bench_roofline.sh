#!/usr/bin/env bash
# `temper bench roofline --small --json`: the machine's rates at test sizes. Every GEMM rate that the entry point
# serves (kernels::gemm f32 and bf16 and oneDNN's bf16 on every product, gemm_bf16_packed on the y = x W^T ones
# where the bf16 path packs) and every bandwidth is positive and finite; the record names the CPU and its paths.
# Usage: bench_roofline.sh TEMPER   (prints ROOFLINE_OK)
set -euo pipefail
temper=$1
"$temper" bench roofline --small --json --threads 2 | tail -1 | python3 -c '
import json, math, sys
j = json.loads(sys.stdin.read())
def rate(where, v):
    assert isinstance(v, (int, float)) and math.isfinite(v) and v > 0, f"{where}: {v!r} is not a positive rate"
assert j["bench"] == "roofline" and j["threads"] == 2 and j["small"] is True, j
assert j["cpu"] and j["isa"] in ("scalar", "avx2", "avx512") and isinstance(j["amx"], bool), j
assert j["bf16_gemm"] in ("amx", "avx512_bf16", "avx512", "onednn") and j["gemm"] in ("onednn", "openblas"), j
rows = j["products_gflop_s"]
assert len(rows) == 10 and rows[0]["name"] == "square" and rows[0]["M"] == 256, rows[0]
packs = j["bf16_gemm"] != "onednn"
for r in rows:
    for k in ("f32", "bf16", "onednn_bf16"):
        rate(r["name"] + " " + k, r[k])
    fwd = not r["ta"] and r["tb"]
    if fwd and packs:
        rate(r["name"] + " bf16_packed", r["bf16_packed"])
    else:
        assert r["bf16_packed"] is None, r
for k, v in j["peak_gflop_s"].items():
    if v is not None or k != "bf16_packed" or packs:
        rate("peak " + k, v)
    assert v is None or v == max(r[k] for r in rows if r[k] is not None), (k, v)
for k in ("read", "copy", "triad"):
    rate("memory " + k, j["memory_gb_s"][k])
    assert j["memory_bytes"][k] >= 2**26, j["memory_bytes"]
for k in ("f32", "bf16"):
    rate("ridge " + k, j["ridge_flop_per_byte"][k])
print("ROOFLINE_OK")
'

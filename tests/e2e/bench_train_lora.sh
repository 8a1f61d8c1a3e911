#!/usr/bin/env bash
# `temper bench train --lora R --lora-base f32|bf16|int4`: the LoRA / QLoRA training step. On the tiny shape each base
# trains (finite loss, the JSON names rank and base; bf16 and int4 move the loss off f32's by their rounding only); on
# SmolLM2-135M's shape (random weights, 540 MB of f32) a held int4 base's load peak is under half the f32 base's: the
# block products are held as they are drawn, never as f32 whole. A base without a rank is refused.
# Usage: bench_train_lora.sh TEMPER   (prints BENCH_LORA_OK)
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for base in f32 bf16 int4; do
  "$temper" bench train --quick --lora 8 --lora-base "$base" --threads 2 --json | tail -1 > "$work/tiny-$base.json"
done
for base in f32 int4; do
  "$temper" bench train --shape smollm2-135m --batch 1 --seq 16 --steps 1 --warmup 0 --lora 16 --lora-base "$base" \
    --threads 2 --json | tail -1 > "$work/smol-$base.json"
done
if "$temper" bench train --quick --lora-base int4 > "$work/refused.txt" 2>&1; then
  echo "--lora-base int4 without --lora was accepted"; exit 1
fi
grep -q -- "--lora-base int4 needs one" "$work/refused.txt"
python3 - "$work" <<'PY'
import json, math, sys
w = sys.argv[1]
tiny = {b: json.load(open(f"{w}/tiny-{b}.json")) for b in ("f32", "bf16", "int4")}
for b, j in tiny.items():
    assert j["lora"] == 8 and j["lora_base"] == b, j
    assert math.isfinite(j["final_loss"]) and j["tokens_per_s"] > 0, j
    assert 0 < j["load_peak_rss_mb"] <= j["peak_rss_mb"], j
f = tiny["f32"]["final_loss"]
for b in ("bf16", "int4"):
    d = abs(tiny[b]["final_loss"] - f)
    assert 0 < d < 0.05 * abs(f), (b, tiny[b]["final_loss"], f)
smol = {b: json.load(open(f"{w}/smol-{b}.json")) for b in ("f32", "int4")}
lf, li = smol["f32"]["load_peak_rss_mb"], smol["int4"]["load_peak_rss_mb"]
print(f"SmolLM2-135M shape, load peak RSS: f32 base {lf} MB, int4 base held as drawn {li} MB; "
      f"step peak {smol['f32']['peak_rss_mb']} / {smol['int4']['peak_rss_mb']} MB")
assert li < 0.5 * lf, (li, lf)
PY
echo BENCH_LORA_OK

#!/usr/bin/env bash
# The memory plan (`temper info --json`, app/memory_plan.h) against the peak RSS `temper bench train` measures for the
# same model and settings, one training step each: within 10% for the quickstart model (batch 8 x seq 256, f32),
# SmolLM2-135M's shape with random weights (batch 4 x seq 256, f32), the same in bf16 with recompute, and the same
# (f32) as QLoRA r=16: adapters on the seven products over an int4 base held as its weights are drawn; with MPI,
# quickstart-large on 2 ranks with ZeRO-2 (run.shard_gradients: moments and gradients sharded).
# Usage: memory_plan_rss.sh TEMPER   (prints one line per configuration: plan, measured, relative error)
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() {  # shape batch seq dtype [--recompute] [info's LoRA flags] [bench train's LoRA flags]
  local shape=$1 batch=$2 seq=$3 dtype=$4 rc=${5:-} info_lora=${6:-} bench_lora=${7:-}
  mkdir -p "$work/$shape"
  "$temper" bench train --shape "$shape" --print-config > "$work/$shape/config.json"
  local plan measured
  plan=$("$temper" info "$work/$shape" --batch "$batch" --seq "$seq" --precision "$dtype" $rc $info_lora --json |
         python3 -c 'import json, sys; print(json.load(sys.stdin)["total_bytes"] / 2**20)')
  measured=$("$temper" bench train --shape "$shape" --batch "$batch" --seq "$seq" --dtype "$dtype" $rc $bench_lora \
             --steps 1 --warmup 0 --threads 2 --json | python3 -c 'import json, sys; print(json.loads(sys.stdin.read().splitlines()[-1])["peak_rss_mb"])')
  python3 - "$shape" "$batch" "$seq" "$dtype" "$rc $bench_lora" "$plan" "$measured" <<'PY' || fail=1
import sys
shape, batch, seq, dtype, rc, plan, measured = sys.argv[1:]
plan, measured = float(plan), float(measured)
err = (plan - measured) / measured
print(f"{shape} {batch} x {seq} {dtype} {rc.strip()}: plan {plan:.1f} MiB, peak RSS {measured:.1f} MiB, {100 * err:+.1f}%")
sys.exit(0 if abs(err) <= 0.10 else 1)
PY
}
check quickstart 8 256 f32
check smollm2-135m 4 256 f32
check smollm2-135m 4 256 bf16 --recompute
check smollm2-135m 4 256 f32 "" "--lora 16 --qlora" "--lora 16 --lora-base int4"
# ZeRO-2 on 2 ranks (skipped where mpirun cannot start them): each rank trains 4 of the 8 rows (the plan's
# micro-batch) and keeps half the moments and gradients; the larger rank's peak against the plan per rank.
mkdir -p "$work/ql"
"$temper" bench train --shape quickstart-large --print-config > "$work/ql/config.json"
rc=0
out=$("$(dirname "$0")/../dist/mpirun_n.sh" 2 "$temper" bench train --shape quickstart-large --batch 8 --seq 256 \
      --zero 2 --steps 1 --warmup 0 --threads 1 --json) || rc=$?
if [ "$rc" = 77 ]; then
  echo "quickstart-large on 2 ranks, ZeRO-2: skipped (mpirun cannot start 2 ranks here)"
elif [ "$rc" != 0 ]; then
  echo "quickstart-large on 2 ranks, ZeRO-2: bench train failed ($rc): $out"; fail=1
else
  plan=$("$temper" info "$work/ql" --batch 4 --seq 256 --ranks 2 --zero2 --json |
         python3 -c 'import json, sys; print(json.load(sys.stdin)["total_bytes"] / 2**20)')
  measured=$(echo "$out" | python3 -c 'import json, sys; print(max(json.loads(l)["peak_rss_mb"] for l in sys.stdin if l.startswith("{")))')
  python3 - "$plan" "$measured" <<'PY' || fail=1
import sys
plan, measured = map(float, sys.argv[1:])
err = (plan - measured) / measured
print(f"quickstart-large 8 x 256 f32 on 2 ranks, ZeRO-2: plan {plan:.1f} MiB, peak RSS {measured:.1f} MiB (larger rank), {100 * err:+.1f}%")
sys.exit(0 if abs(err) <= 0.10 else 1)
PY
fi
[ "$fail" = 0 ] && echo MEMORY_PLAN_OK

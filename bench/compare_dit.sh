#!/usr/bin/env bash
# The DiT's flow-matching training step, temper vs PyTorch, side by side on this machine (issue 38's bar: >= 1.5x):
# `temper bench dit` and bench/peers/dit_step.py on the same shape, alternated REPS times per dtype so a noisy
# neighbour hits both, then the medians over all timed steps of wall seconds and of process CPU seconds per step
# (with THREADS = 1, CPU seconds leave out the time other processes held the core) and their ratios.
#
#   bench/compare_dit.sh [THREADS=1] [DTYPES="f32 bf16"] [REPS=3] [extra options for both, e.g. --batch 32]
#
# Run from the repository root after building (build/bin/temper) with the pinned venv (.venv).
set -euo pipefail
THREADS=${1:-1}
DTYPES=${2:-"f32 bf16"}
REPS=${3:-3}
shift $(($# < 3 ? $# : 3))
TEMPER=${TEMPER:-build/bin/temper}
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for dtype in $DTYPES; do
  for _ in $(seq "$REPS"); do
    "$PY" bench/peers/dit_step.py --threads "$THREADS" --dtype "$dtype" --steps 8 --warmup 2 --json "$@" >>"$log"
    "$TEMPER" bench dit --threads "$THREADS" --dtype "$dtype" --steps 8 --warmup 2 --json "$@" >>"$log"
  done
done
"$PY" - "$log" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
first = runs[0]
print(f"DiT {first['image']}x{first['image']}x{first['channels']} patch {first['patch']}, hidden {first['hidden']}, "
      f"depth {first['depth']}, heads {first['heads']}, batch {first['batch']}, {first['threads']} thread(s), "
      f"{first['params'] / 1e6:.2f}M params; torch {first.get('torch', '?')}")
print(f"{'dtype':6} {'engine':8} {'wall s/step':>12} {'cpu s/step':>11} {'images/s':>9}")
for dtype in dict.fromkeys(r["dtype"] for r in runs):
    med = {}
    for engine in ("pytorch", "temper"):
        rs = [r for r in runs if r["dtype"] == dtype and r["engine"] == engine]
        wall = statistics.median(s for r in rs for s in r["step_s"])
        cpu = statistics.median(s for r in rs for s in r["cpu_step_s"])
        med[engine] = (wall, cpu)
        print(f"{dtype:6} {engine:8} {wall:12.4f} {cpu:11.4f} {first['batch'] / wall:9.1f}")
    (pw, pc), (tw, tc) = med["pytorch"], med["temper"]
    print(f"{dtype:6} {'ratio':8} {pw / tw:11.2f}x {pc / tc:10.2f}x")
EOF

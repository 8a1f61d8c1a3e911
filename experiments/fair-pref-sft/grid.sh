#!/usr/bin/env bash
# After `experiments/run.sh fair-pref-sft SEEDS`: the SFT checkpoint and each seed's fair policy, greedy on
# 500 held-out problems at the preferences (1,0), (.75,.25), (.5,.5), (.25,.75), (0,1): (correct, brevity)
# and GGF_w(omega * means) with the linear Gini weights (2/3, 1/3); whether one policy's points are
# mutually non-dominated (a front traced by one policy). Prints a markdown table (means over seeds).
# Usage: experiments/fair-pref-sft/grid.sh [SEEDS] [TEMPER]
#   env OUT (the experiment's run folder), TASK_PARAMS (default: the recipe's "min_ops=1 max_ops=2 ops=+-";
#   experiments/fair-pref-sft-easy: OUT=runs/experiments/fair-pref-sft-easy TASK_PARAMS="min_ops=1 max_ops=1 ops=+")
set -euo pipefail
seeds=${1:-"1"}
temper=${2:-build/bin/temper}
out=${OUT:-runs/experiments/fair-pref-sft}
ckpt() { ls -d "$1"/checkpoints/step-* | sort -t- -k2 -n | tail -1; }
params=()
for kv in ${TASK_PARAMS:-min_ops=1 max_ops=2 ops=+-}; do params+=(--param "$kv"); done
ev() {  # run pref json
  [ -f "$3" ] || "$temper" eval --model "$(ckpt "$1")" --task arithmetic --param seed=1 "${params[@]}" \
    --param max_operand=20 --problems 500 --max-new 40 --preference "$2" --objectives correct,brevity --json "$3" > /dev/null 2>&1
}
for p in 100 75 50 25 0; do
  pref=$(python3 -c "print(f'{$p/100:.2f},{1-$p/100:.2f}')")
  ev "$out/sft" "$pref" "$out/sft/grid_$p.json"
  for s in $seeds; do ev "$out/fair-s$s" "$pref" "$out/fair-s$s/grid_$p.json"; done
done
python3 - "$out" "$seeds" <<'PY'
import json, statistics, sys
out, seeds = sys.argv[1], sys.argv[2].split()
def load(runs, p):
    rows = [json.load(open(f"{out}/{r}/grid_{p}.json")) for r in runs]
    return [statistics.mean(r["objectives"][k] for r in rows) for k in ("correct", "brevity")] + [statistics.mean(r["welfare"] for r in rows)]
print("| preference (correct, brevity) | SFT: correct | SFT: brevity | SFT: GGF | fair: correct | fair: brevity | fair: GGF |")
print("|---|---|---|---|---|---|---|")
fronts = {"SFT": [], "fair": []}
for p in (100, 75, 50, 25, 0):
    a, f = load(["sft"], p), load([f"fair-s{s}" for s in seeds], p)
    fronts["SFT"].append((p, a[0], a[1]))
    fronts["fair"].append((p, f[0], f[1]))
    print(f"| ({p/100:.2f}, {1-p/100:.2f}) | {a[0]:.3f} | {a[1]:.3f} | {a[2]:.4f} | {f[0]:.3f} | {f[1]:.3f} | {f[2]:.4f} |")
for name, pts in fronts.items():
    dom = [(x[0], y[0]) for x in pts for y in pts if x is not y and y[1] >= x[1] and y[2] >= x[2] and (y[1] > x[1] or y[2] > x[2])]
    print(f"\n{name}: points dominated by another of its points (pref x by pref y):", dom if dom else "none (mutually non-dominated)")
PY

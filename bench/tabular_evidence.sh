#!/usr/bin/env bash
# Evidence for Pareto Q-learning with reward machines (docs/METHODS.md): temper tabular train runs, 3 seeds each.
#   methods: PQLRM vs PQL on the cross-product vs scalarised QRM (weights 1,1,1) on the office worlds at equal
#            environment steps: steps to 95% of the true hypervolume, the final hypervolume ratio, true points recovered.
#   cost:    PQLRM (and PQL) on the 9x9 office with 2-4 objectives, as one vector machine or a product of machines:
#            joint machine states, microseconds per step, table updates per step, vectors stored, steps to 95%.
#   epsilon: PQLRM on the office with epsilon 0.2 / 0.5 / 0.8 / 1.0 (300k steps).
# Usage: bench/tabular_evidence.sh TEMPER [methods|cost|epsilon|all] [STEPS]  (markdown tables; ~5 min on 2 cores)
set -euo pipefail
temper=$1
what=${2:-all}
steps=${3:-1000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One run: world machine method seed steps [epsilon]; prints "world machine method+epsilon seed U steps95 hv_ratio
# recovered true_points us_per_step updates stored".
run() {
  local world=$1 machine=$2 method=$3 seed=$4 n=$5 eps=${6:-0.8} dir="$work/$1-$2-$3-$4-$5-${6:-0.8}"
  "$temper" tabular train --out "$dir" --set tabular.world="$world" --set tabular.machine="$machine" \
    --set tabular.method="$method" --set tabular.seed="$seed" --set tabular.steps="$n" --set tabular.eval_every=500 \
    --set tabular.checkpoint_every="$n" --set tabular.epsilon="$eps" 2> "$dir.log" || { cat "$dir.log" >&2; exit 1; }
  python3 - "$dir" "$dir.log" "$world" "$machine" "$method" "$seed" "$eps" <<'PY'
import json, re, sys
d, log, world, machine, method, seed, eps = sys.argv[1:]
method += "" if eps == "0.8" else ",eps=" + eps
rows = [json.loads(l) for l in open(d + "/metrics.jsonl")]
hit = next((r["step"] for r in rows if r.get("hv_ratio", 0) >= 0.95), -1)
last = rows[-1]
text = open(log).read()
us = float(re.search(r"\(([0-9.]+) us per step", text).group(1))
U = int(re.search(r"\((\d+) joint states\)", text).group(1))
true_pts = int(re.search(r"true front: (\d+) points", text).group(1))
print(world, machine, method, seed, U, hit, round(last["hv_ratio"], 4), int(last["recovered"]), true_pts, us,
      round(last["updates"] / last["step"], 2), int(last["stored"]))
PY
}

summarise() {  # reads run lines, prints one markdown row per (world, machine, method)
  python3 -c '
import sys, statistics as st
groups = {}
for line in sys.stdin:
    f = line.split()
    groups.setdefault(tuple(f[:3]), []).append(f)
print("| world | machine | method | joint states | steps to 95% HV (3 seeds) | final HV ratio | recovered / true | us per step | updates per step | vectors stored |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (w, m, meth), rs in groups.items():
    hits = ", ".join("not reached" if r[5] == "-1" else r[5] for r in rs)
    hv = ", ".join(r[6] for r in rs)
    rec = ", ".join(r[7] for r in rs) + " / " + rs[0][8]
    us = "%.2f" % st.mean(float(r[9]) for r in rs)
    print(f"| {w} | {m} | {meth} | {rs[0][4]} | {hits} | {hv} | {rec} | {us} | {rs[0][10]} | {st.mean(int(r[11]) for r in rs):.0f} |")
'
}

if [ "$what" = methods ] || [ "$what" = all ]; then
  for world in office_small office; do
    for method in pqlrm pql qrm; do
      for seed in 0 1 2; do run "$world" office3 "$method" "$seed" "$steps"; done
    done
  done | summarise
fi
if [ "$what" = epsilon ] || [ "$what" = all ]; then
  for eps in 0.2 0.5 0.8 1.0; do
    for seed in 0 1 2; do run office office3 pqlrm "$seed" 300000 "$eps"; done
  done | summarise
fi
if [ "$what" = cost ] || [ "$what" = all ]; then
  for machine in office2 office3 office4 office2_split office3_split office4_split; do
    for seed in 0 1 2; do run office "$machine" pqlrm "$seed" 300000; done
  done | summarise
  for machine in office2 office4; do
    for seed in 0 1 2; do run office "$machine" pql "$seed" 300000; done
  done | summarise
fi

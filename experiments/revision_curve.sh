#!/usr/bin/env bash
# Sequential-revision curves of an experiment's final checkpoints: for every run ARM-sSEED under OUT,
# `temper eval --revisions K` on each evaluation listed in the experiment's `revision_eval` (lines
# "LABEL|temper eval arguments"), then a table of the share solved within r revisions, mean over seeds
# per arm (revision_curve.md / .json under OUT).
# Usage: experiments/revision_curve.sh NAME [K (default 16)]   env TEMPER, OUT as experiments/run.sh
set -euo pipefail
name=${1:?usage: experiments/revision_curve.sh NAME [K]}
k=${2:-16}
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/$name
temper=${TEMPER:-build/bin/temper}
out=${OUT:-runs/experiments/$name}
[ -f "$dir/revision_eval" ] || { echo "no $dir/revision_eval" >&2; exit 2; }
ckpt() { ls -d "$1"/checkpoints/step-* 2>/dev/null | sort -t- -k2 -n | tail -1; }
for arm in $(cat "$dir/arms"); do
  for run in "$out/$arm"-s*/; do
    run=${run%/}
    c=$(ckpt "$run" || true)
    [ -n "$c" ] || continue
    while IFS='|' read -r label args; do
      [ -n "$label" ] || continue
      [ -f "$run/revisions-$label.json" ] && continue
      eval "\"$temper\" eval --model \"$c\" --revisions $k --json \"$run/revisions-$label.json\" $args" > /dev/null
      echo "   $run $label: done"
    done < "$dir/revision_eval"
  done
done
python3 - "$out" "$dir/arms" "$dir/revision_eval" "$k" <<'PY'
import json, sys, glob, statistics as st
out, arms_file, evals_file, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
arms = [a for a in open(arms_file).read().split() if a]
labels = [l.split("|")[0] for l in open(evals_file).read().splitlines() if l.strip()]
cols = [r for r in (0, 1, 2, 4, 8, 16) if r <= k]
res, md = {}, []
for label in labels:
    md.append(f"\n{label}: share solved within r revisions (mean over seeds; per seed in brackets)\n")
    md.append("| arm | " + " | ".join(f"r = {r}" for r in cols) + " |")
    md.append("|---|" + "---|" * len(cols))
    for arm in arms:
        curves = [json.load(open(f))["solved_within_revisions"] for f in sorted(glob.glob(f"{out}/{arm}-s*/revisions-{label}.json"))]
        if not curves:
            continue
        res.setdefault(label, {})[arm] = curves
        cells = []
        for r in cols:
            v = [c[r] for c in curves]
            cells.append(f"{st.mean(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})")
        md.append(f"| {arm} | " + " | ".join(cells) + " |")
open(f"{out}/revision_curve.md", "w").write("\n".join(md) + "\n")
json.dump(res, open(f"{out}/revision_curve.json", "w"), indent=1)
print("\n".join(md))
PY

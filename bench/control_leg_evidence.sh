#!/usr/bin/env bash
# Meta-knowledge transfer to the 2-link leg (issue 40; docs/METHODS.md "Meta-knowledge transfer"): 3 seeds,
# transfer (the meta run's frozen high level, the leg's own low level and adaptor) vs scratch, with the leg's
# default action noise (control.init_log_std = -1.0, control::default_init_log_std). Reuses the meta runs of the
# section's main command (META=dir holding meta-0..2; trained here when absent), then prints the table's columns.
# Usage: bench/control_leg_evidence.sh [OUT_DIR]   (env: TEMPER=build/bin/temper META=OUT_DIR)
set -euo pipefail
OUT=${1:-runs/ctl-leg}
TEMPER=${TEMPER:-build/bin/temper}
META=${META:-$OUT}
mkdir -p "$OUT"
for s in 0 1 2; do
  if [ ! -d "$META/meta-$s" ]; then
    TEMPER_THREADS=1 nice -n 10 "$TEMPER" control train recipes/control_meta.toml --set control.seed=$s --out "$META/meta-$s"
  fi
  for arm in transfer scratch; do
    extra=()
    [ $arm = transfer ] && extra=(--set control.meta_run="$META/meta-$s")
    [ -f "$OUT/$arm-leg-$s.eval.json" ] && continue
    TEMPER_THREADS=1 nice -n 10 "$TEMPER" control train recipes/control_$arm.toml --set control.seed=$s \
      --set control.body=leg "${extra[@]}" --out "$OUT/$arm-leg-$s" > "$OUT/$arm-leg-$s.log"
    "$TEMPER" control eval "$OUT/$arm-leg-$s" --json "$OUT/$arm-leg-$s.eval.json" > /dev/null
  done
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def evals(run):
    return {m["step"]: m for m in map(json.loads, open(f"{out}/{run}/metrics.jsonl")) if m["kind"] == "eval"}
k = lambda n: "> budget" if n < 0 else f"{n / 1000:.0f}k"
print("seed | transfer steps to 0.4 | +meta | scratch steps to 0.4 | transfer/scratch | (transfer+meta)/scratch"
      " | error at transfer's budget T/S | unseen error T/S | mode ARI")
for s in range(3):
    t, c = (json.load(open(f"{out}/{a}-leg-{s}.eval.json")) for a in ("transfer", "scratch"))
    te, ce = evals(f"transfer-leg-{s}"), evals(f"scratch-leg-{s}")
    last = max(te)
    ts, cs = t["steps_to_threshold"], c["steps_to_threshold"]
    ratio = f"{100 * ts / cs:.0f}%" if ts > 0 and cs > 0 else "-"
    ratio_m = f"{100 * (ts + t['meta_env_steps']) / cs:.0f}%" if ts > 0 and cs > 0 else "-"
    plus = k(ts + t["meta_env_steps"]) if ts > 0 else "-"
    print(f"{s} | {k(ts)} | {plus} | {k(cs)} | {ratio} | {ratio_m} | {te[last]['final_error']:.3f} / "
          f"{ce[last]['final_error']:.3f} | {t['final_error']:.3f} / {c['final_error']:.3f} | {t['mode_ari']:.3f}")
PY

#!/usr/bin/env bash
# The reward protocol's share of an RL step (docs/PERFORMANCE.md "Reward programs"): SmolLM2-135M-Instruct on
# recipes/smollm2-arithmetic.toml for a few GRPO steps, once with the builtin arithmetic verifier and once with
# examples/rewards/arithmetic_exact.py as a [[reward]] program (the same rewards), same seed; prints reward_s and
# step_s per step from each run's metrics.jsonl and the means.
# Usage: bench/reward_share.sh [TEMPER_BIN] [STEPS] [OUT_DIR]   (extra --set overrides: REWARD_SHARE_SETS)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-./build/bin/temper}
STEPS=${2:-4}
OUT=${3:-$(mktemp -d /tmp/reward_share.XXXXXX)}
mkdir -p "$OUT"
RECIPE=recipes/smollm2-arithmetic.toml
SETS=(--set rl.steps="$STEPS" --set eval.every=0 --set run.checkpoint_every=0 --set run.samples_every=1 ${REWARD_SHARE_SETS:-})
cp "$RECIPE" "$OUT/program.toml"
cat >> "$OUT/program.toml" <<TOML

[[reward]]
name = "exact"
program = ["python3", "$PWD/examples/rewards/arithmetic_exact.py"]
TOML
"$BIN" train "$RECIPE" --out "$OUT/builtin" "${SETS[@]}" > "$OUT/builtin.log" 2>&1
"$BIN" train "$OUT/program.toml" --out "$OUT/program" "${SETS[@]}" > "$OUT/program.log" 2>&1
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for arm in ("builtin", "program"):
    rows = [json.loads(l) for l in open(f"{out}/{arm}/metrics.jsonl") if '"reward_s"' in l]
    rs = [r["reward_s"] for r in rows]
    ss = [r["step_s"] for r in rows]
    rew = [r.get("reward_mean", r.get("reward")) for r in rows]
    print(f"{arm:8s} steps {len(rows)}  reward_s {['%.4f' % x for x in rs]}  step_s {['%.1f' % x for x in ss]}  "
          f"reward {rew}")
    print(f"{arm:8s} mean reward_s {sum(rs)/len(rs):.4f}  mean step_s {sum(ss)/len(ss):.2f}  "
          f"share {100*sum(rs)/sum(ss):.3f}%")
PY

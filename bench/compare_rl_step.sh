#!/usr/bin/env bash
# Seconds per GRPO RL step, temper vs TRL, side by side on the same 2 cores, the quickstart model
# (random init) and the same RL configuration: 8 prompts x G=8, up to 48 new tokens, temperature 1,
# top_p 1, beta 0, lr 1e-4, one optimiser step per rollout batch, arithmetic 1-2 ops over 0..20.
# Usage: bench/compare_rl_step.sh [TEMPER] [THREADS] [STEPS]   (env TEMPER_SET: more --set overrides for temper,
# e.g. TEMPER_SET="model.precision=\"bf16\""; env NO_TRL=1: temper only; env FROM=DIR: both engines start from the
# quickstart-shaped weights in DIR instead of random init, e.g. the quickstart's SFT checkpoint, so rewards are mixed
# and the update has a real gradient: `temper train --out W --set rl.steps=0` writes W/checkpoints/step-1000;
# FROM=sft makes that checkpoint first, ~45 s)
set -euo pipefail
temper=${1:-build/bin/temper}
threads=${2:-2}
steps=${3:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${FROM:-}" = sft ]; then
  "$temper" train --out "$work/sft" --threads "$threads" --set rl.steps=0 --set eval.problems=100 2> "$work/sft.log"
  FROM="$work/sft/checkpoints/step-1000"
  echo "from the quickstart's SFT checkpoint (held-out accuracy $(grep -o '[0-9.]* at the end' "$work/sft.log" || true))"
fi
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$temper" train --out "$work/run" --threads "$threads" --set sft.steps=0 --set rl.steps="$steps" \
  --set rl.prompts_per_step=8 --set rl.group_size=8 --set rl.max_new=48 --set rl.dynamic_sampling=false --set rl.temperature=1.0 \
  --set rl.lr=1e-4 --set rl.warmup=0 --set task.params.ops='"+-*"' --set task.params.max_operand=20 \
  --set task.params.min_ops=1 --set task.params.max_ops=2 --set eval.problems=8 --set eval.every=0 \
  --set run.checkpoint_every=0 ${FROM:+--set model.path="\"$FROM\"" --set model.prompt_format='"raw"'} \
  ${TEMPER_SET:+--set "$TEMPER_SET"} 2> "$work/temper.log"
python3 - "$work/run/metrics.jsonl" "$threads" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tr = [r for r in rows if r["kind"] == "train"][1:]  # the first step is warm-up
s = [r["step_s"] for r in tr]
tok = [r["response_len_mean"] * r["sequences"] for r in tr]
print(json.dumps({"engine": "temper", "threads": int(sys.argv[2]), "steps": len(s),
                  "seconds_per_step": statistics.mean(s), "median_seconds_per_step": statistics.median(s),
                  "min_seconds_per_step": min(s), "completion_tokens_per_step": statistics.mean(tok),
                  "completion_tokens_per_s": sum(tok) / sum(s),
                  "rollout_s": statistics.mean(r["rollout_s"] for r in tr),
                  "reward_mean": statistics.mean(r["reward_mean"] for r in tr),
                  "no_gradient_share": statistics.mean(r["no_gradient_positions"] / r["train_positions"] for r in tr),
                  "reward_s": statistics.mean(r["reward_s"] for r in tr),
                  "train_s": statistics.mean(r["train_s"] for r in tr)}))
PY
if [ -n "${NO_TRL:-}" ]; then
  :
elif [ -x .venv/bin/python ] && .venv/bin/python -c "import trl" 2>/dev/null; then
  .venv/bin/python bench/peers/trl_grpo.py --threads "$threads" --steps "$steps" ${FROM:+--model "$FROM"} 2>/dev/null | tail -1
else
  echo "TRL peer skipped: run scripts/bootstrap --python"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

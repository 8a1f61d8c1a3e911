#!/usr/bin/env bash
# Seconds per GRPO RL step, temper vs TRL's GRPOTrainer, side by side on the same cores and the same RL configuration.
# Usage: bench/compare_rl_step.sh [TEMPER] [THREADS] [STEPS] [MODEL]
#
# Without MODEL: the quickstart model (random init), 8 prompts x G=8, up to 48 new tokens, temperature 1, top_p 1,
# beta 0, lr 1e-4, one optimiser step per rollout batch, arithmetic 1-2 ops over 0..20, f32 (env TEMPER_SET: more
# --set overrides for temper, e.g. TEMPER_SET="model.precision=\"bf16\""; env NO_TRL=1: temper only; env FROM=DIR:
# both engines start from the quickstart-shaped weights in DIR instead of random init, e.g. the quickstart's SFT
# checkpoint, so rewards are mixed and the update has a real gradient: `temper train --out W --set rl.steps=0` writes
# W/checkpoints/step-1000; FROM=sft makes that checkpoint first).
#
# With MODEL (a chat model: a GGUF, converted for TRL with `temper convert` into a temporary HF directory, or an HF
# directory), e.g. .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf: 8 prompts x 8 samples, max_new 128, temperature 1,
# top_p 1, beta 0, lr 1e-6, loss GRPO (seq_mean_token_mean), one optimizer step per batch in micro-batches of 8 rows,
# bf16 products with f32 master weights (temper model.precision = "bf16"; TRL bf16=True: autocast), the chat template
# with the system turn and user template of recipes/smollm2-arithmetic.toml, arithmetic with one operation (+ - *)
# over 0..20. temper runs twice: with its defaults, and with rl.skip_no_gradient = false, the same work as TRL (which
# has no such skip: at temperature 1 most groups' rewards are all 0, so most micro-batches have no gradient). STEPS
# counts the first (warm-up) step, left out of every figure; default 3 with MODEL.
# Prints one JSON line per run and a summary line with the ratios (TRL s/step over temper s/step, means and medians).
set -euo pipefail
temper=${1:-build/bin/temper}
threads=${2:-2}
model=${4:-}
steps=${3:-$([ -n "$model" ] && echo 3 || echo 6)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary() {  # metrics.jsonl threads label: one JSON line for temper's timed steps
  python3 - "$1" "$2" "$3" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tr = [r for r in rows if r["kind"] == "train"][1:]  # the first step is warm-up
s = [r["step_s"] for r in tr]
tok = [r["response_len_mean"] * r["sequences"] for r in tr]
print(json.dumps({"engine": "temper", "run": sys.argv[3], "threads": int(sys.argv[2]), "steps": len(s),
                  "seconds_per_step": statistics.mean(s), "median_seconds_per_step": statistics.median(s),
                  "min_seconds_per_step": min(s), "completion_tokens_per_step": statistics.mean(tok),
                  "completion_tokens_per_s": sum(tok) / sum(s),
                  "rollout_s": statistics.mean(r["rollout_s"] for r in tr),
                  "reward_mean": statistics.mean(r["reward_mean"] for r in tr),
                  "no_gradient_share": statistics.mean(r["no_gradient_positions"] / r["train_positions"] for r in tr),
                  "reward_s": statistics.mean(r["reward_s"] for r in tr),
                  "train_s": statistics.mean(r["train_s"] for r in tr),
                  "step_seconds": [round(x, 3) for x in s]}))
PY
}
if [ -n "$model" ]; then
  [ -e "$model" ] || { echo "compare_rl_step.sh: MODEL '$model' does not exist (a .gguf or a Hugging Face directory)" >&2; exit 2; }
  [ "$steps" -ge 2 ] || { echo "compare_rl_step.sh: STEPS must be >= 2 (the first is warm-up), got $steps" >&2; exit 2; }
  system="You are a careful calculator."
  user='Calculate {question} and end with the line #### <number>.'
  "$temper" info | sed -n 's/^cpu: /cpu: /p;s/^products: /products: /p'
  echo "model: $model, threads $threads, steps $steps (1 warm-up), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for skip in true false; do
    "$temper" train --out "$work/run-$skip" --threads "$threads" --set model.path="\"$model\"" \
      --set model.prompt_format='"chat"' --set model.system_prompt="\"$system\"" --set model.user_template="\"$user\"" \
      --set model.precision='"bf16"' --set sft.steps=0 --set rl.steps="$steps" --set rl.prompts_per_step=8 \
      --set rl.group_size=8 --set rl.max_new=128 --set rl.temperature=1.0 --set rl.top_p=1.0 --set rl.lr=1e-6 \
      --set rl.warmup=0 --set rl.dynamic_sampling=false --set rl.kl_coef=0 --set rl.micro_batch=8 \
      --set rl.loss_agg='"seq_mean_token_mean"' --set rl.skip_no_gradient=$skip --set task.name='"arithmetic"' \
      --set task.params.ops='"+-*"' --set task.params.min_ops=1 --set task.params.max_ops=1 \
      --set task.params.max_operand=20 --set eval.problems=1 --set eval.max_new=8 --set eval.every=0 \
      --set run.checkpoint_every=0 ${TEMPER_SET:+--set "$TEMPER_SET"} 2> "$work/temper-$skip.log" ||
      { tail -20 "$work/temper-$skip.log" >&2; exit 1; }
    summary "$work/run-$skip/metrics.jsonl" "$threads" "skip_no_gradient=$skip" | tee -a "$work/results.jsonl"
  done
  if [ -z "${NO_TRL:-}" ] && ! { [ -x .venv/bin/python ] && .venv/bin/python -c "import trl" 2>/dev/null; }; then
    echo "TRL peer skipped: run scripts/bootstrap --python"
  elif [ -z "${NO_TRL:-}" ]; then
    hf=$model
    if [ ! -d "$model" ]; then
      hf=$work/hf
      "$temper" convert "$model" "$hf" > /dev/null
    fi
    .venv/bin/python bench/peers/trl_grpo.py --hf "$hf" --threads "$threads" --steps "$steps" --warmup 1 \
      --prompts 8 --group 8 --max-new 128 --lr 1e-6 --min-ops 1 --max-ops 1 --max-operand 20 --ops '+-*' \
      --system "$system" --user-template "$user" --bf16 --micro-batch 8 2> "$work/trl.log" | tail -1 |
      tee -a "$work/results.jsonl" || { tail -20 "$work/trl.log" >&2; exit 1; }
    python3 - "$work/results.jsonl" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
trl = next(r for r in rs if r["engine"] == "trl")
out = {"summary": "TRL s/step over temper s/step"}
for r in rs:
    if r["engine"] == "temper":
        out[r["run"]] = {"mean": round(trl["seconds_per_step"] / r["seconds_per_step"], 2),
                         "median": round(trl["median_seconds_per_step"] / r["median_seconds_per_step"], 2)}
print(json.dumps(out))
PY
  fi
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
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
summary "$work/run/metrics.jsonl" "$threads" default
if [ -n "${NO_TRL:-}" ]; then
  :
elif [ -x .venv/bin/python ] && .venv/bin/python -c "import trl" 2>/dev/null; then
  .venv/bin/python bench/peers/trl_grpo.py --threads "$threads" --steps "$steps" ${FROM:+--model "$FROM"} 2>/dev/null | tail -1
else
  echo "TRL peer skipped: run scripts/bootstrap --python"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# Evidence for discriminator-guided RL on flows (issue 38, spec methods-other section 4; docs/METHODS.md): on 2-D
# data with a known density, per seed: a capacity-limited base 2-D flow (2 hidden layers of 48) trained with a cosine
# schedule until its FD stops improving (eval.patience), then from it:
#   grpo    DG-RL: GRPO on SDE paths, reward = the discriminator's clipped logit, KL to the base (betas 0.25..4)
#   fm      the base trained longer on real data, the compute grpo (beta 1) used (model row-evaluations)
#   rwfm    DG-RL: reward-weighted flow matching on base ODE samples, weights exp(r / beta) (betas 0.25..4, and
#           1000: the same fine-tuning on the base's own samples without the tilt, its control)
# Prints one markdown row per arm (docs/METHODS.md's table): means +- sd over the seeds of the final evaluation (SDE
# samples: FD, MMD^2, NLL under p_data, grid TV, precision, recall; ODE samples: FD and the exact KL(model || data)),
# the base's row (step 0) with the FD floor of a second real set and the discriminator's logit vs the true log ratio
# (Pearson r at base samples).
# Usage: bench/flow_dgrl.sh TEMPER [DATA=gaussians] [SEEDS="0 1 2"] [RL_STEPS=200]  (about 5 min a seed on 2 cores)
set -euo pipefail
temper=$1
data=${2:-gaussians}
seeds=${3:-"0 1 2"}
rl_steps=${4:-200}
work=${FLOW_WORK:-$(mktemp -d)}
export OMP_WAIT_POLICY=passive
ev=(--set eval.samples=5000 --set eval.mmd_samples=2000)
. "$(dirname "$0")/flow_dgrl_lib.sh"

for seed in $seeds; do
  base="$work/base-$seed"
  [ -d "$base" ] || "$temper" flow train --out "$base" --threads 2 "${ev[@]}" --set data.kind="$data" \
    --set model.hidden=48 --set model.depth=2 --set train.seed="$seed" --set train.steps=12000 \
    --set train.schedule=cosine --set eval.every=2000 --set eval.patience=2 --set train.checkpoint_every=2000 \
    > "$base.log" 2>&1 || fail "base $seed: $(tail -3 "$base.log")"
  rl() {  # NAME KEY=VALUE...
    local name=$1 dir="$work/$1-$seed"
    shift
    local sets=()
    for kv in "$@"; do sets+=(--set "$kv"); done
    [ -d "$dir" ] || "$temper" flow rl --out "$dir" --threads 2 "${ev[@]}" --set rl.base="$base" \
      --set rl.seed="$seed" --set rl.discriminator.samples=16384 "${sets[@]}" > "$dir.log" 2>&1 ||
      fail "$name $seed: $(tail -3 "$dir.log")"
  }
  for beta in 1 0.25 0.5 2 4; do
    rl "grpo-b$beta" rl.method=grpo rl.beta="$beta" rl.steps="$rl_steps" eval.every=$((rl_steps / 4))
  done
  # The compute grpo (beta 1) used, in flow-matching steps of batch 256 (3 x 256 row-evaluations each).
  compute=$(dgrl_compute "$work/grpo-b1-$seed")
  fm_steps=$(python3 -c "print(int(float('$compute') / 768))")
  rl fm rl.method=fm rl.steps="$fm_steps" eval.every=$((fm_steps / 4))
  for beta in 1 0.25 0.5 2 4 1000; do
    rl "rwfm-b$beta" rl.method=rwfm rl.beta="$beta" rl.steps=300 rl.pool=32768 eval.every=100
  done
done

dgrl_table "$work" "$seeds" "fd_sde fd mmd_sde kl_model_data nll_sde tv_sde precision_sde recall_sde" %.4g
python3 - "$work" "$seeds" <<'PY'
import json, statistics, sys, os
work, seeds = sys.argv[1], sys.argv[2].split()
def evals(d):
    return [r for r in map(json.loads, open(d + "/metrics.jsonl")) if r["kind"] == "eval"]
base0 = [evals(f"{work}/grpo-b1-{s}")[0] for s in seeds if os.path.isdir(f"{work}/grpo-b1-{s}")]
if base0:
    print()
    print("step 0 of grpo-b1 (the base through the rl run's evaluation): fd %.4g (sde %.4g), fd_real floor %.4g, mmd_real %.3g, "
          "discriminator logit vs true log ratio r = %.3f +- %.2f" % (
          statistics.mean(r["fd"] for r in base0), statistics.mean(r["fd_sde"] for r in base0),
          statistics.mean(r["fd_real"] for r in base0), statistics.mean(r["mmd_real"] for r in base0),
          statistics.mean(r["disc_ratio_corr"] for r in base0), statistics.pstdev(r["disc_ratio_corr"] for r in base0)))
PY
echo "runs in $work"

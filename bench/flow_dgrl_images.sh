#!/usr/bin/env bash
# Evidence for discriminator-guided RL on an image flow model (issue 38, spec methods-other section 4;
# docs/METHODS.md): per seed, a small DiT (recipes/flow_shapes_dit.toml: patch 4, hidden 64, 2 blocks) on procedural
# 16x16 RGB shapes, trained with a cosine schedule until its FD in the frozen image network's feature space stops
# improving, then from it (recipes/flow_dgrl_dit.toml):
#   grpo    DG-RL: GRPO on SDE paths, reward = the per-class discriminator's clipped logit, KL to the base (betas 0.5,
#           1, 2)
#   fm      the base trained longer on real data (batch 64, lr 1e-4 and 3e-4 constant), the compute grpo (beta 1)
#           used
#   rwfm    DG-RL: reward-weighted flow matching on base ODE samples, weights exp(r / beta), the same compute (beta 1;
#           and beta 1000: the same fine-tuning on the base's own samples without the tilt, its control)
# Prints one markdown row per arm: means +- sd over the seeds of the last evaluation (SDE and ODE samples: FD, MMD^2,
# precision, recall), each arm's FD change per seed (last evaluation, and the mean over the run's second half), the
# base's FD over its evaluations and the discriminator's accuracy; writes sample grids (the first seed: the base beside
# grpo beta 1, rwfm beta 1 and fm, the same noise) to GRIDS (default: WORK/grids).
# Usage: bench/flow_dgrl_images.sh TEMPER [DATA=shapes] [SEEDS="0 1 2"] [BASE_STEPS=16000] [RL_STEPS=80]
# (about 10 minutes a seed on one core of the shared 2-core machine; FLOW_WORK=DIR keeps the runs and a rerun on it
# only runs what is missing; THREADS=1 by default: one core is faster per core than two on a loaded machine).
set -euo pipefail
temper=$1
data=${2:-shapes}
seeds=${3:-"0 1 2"}
base_steps=${4:-16000}
rl_steps=${5:-80}
threads=${THREADS:-1}
work=${FLOW_WORK:-$(mktemp -d)}
grids=${GRIDS:-$work/grids}
here=$(cd "$(dirname "$0")/.." && pwd)
classes=$([ "$data" = digits ] && echo 10 || echo 6)
export OMP_WAIT_POLICY=passive
. "$here/bench/flow_dgrl_lib.sh"
mkdir -p "$work" "$grids"

for seed in $seeds; do
  base="$work/base-$seed"
  [ -d "$base" ] || "$temper" flow train "$here/recipes/flow_shapes_dit.toml" --out "$base" --threads "$threads" \
    --set data.kind="$data" --set features.cache="$work/features" --set train.seed="$seed" \
    --set train.steps="$base_steps" --set eval.every=$((base_steps / 8)) > "$base.log" 2>&1 ||
    fail "base $seed: $(tail -3 "$base.log")"
  rl() {  # NAME KEY=VALUE...
    local name=$1 dir="$work/$1-$seed"
    shift
    local sets=()
    for kv in "$@"; do sets+=(--set "$kv"); done
    [ -d "$dir" ] || "$temper" flow rl "$here/recipes/flow_dgrl_dit.toml" --out "$dir" --threads "$threads" \
      --set rl.base="$base" --set rl.seed="$seed" "${sets[@]}" > "$dir.log" 2>&1 ||
      fail "$name $seed: $(tail -3 "$dir.log")"
  }
  for beta in 1 0.5 2; do
    rl "grpo-b$beta" rl.method=grpo rl.beta="$beta" rl.steps="$rl_steps" eval.every=$((rl_steps / 4))
  done
  # The compute grpo (beta 1) used (model row-evaluations: its discriminator's base samples, sampling, training and
  # the base's forwards), in flow-matching steps of batch 64 (3 x 64 row-evaluations each); rwfm spends part of it
  # on its discriminator's and its pool's base ODE samples (2 x 1000 per class x 25 steps).
  compute=$(dgrl_compute "$work/grpo-b1-$seed")
  fm_steps=$(python3 -c "print(int(float('$compute') / 192))")
  rw_steps=$(python3 -c "print(max(100, int((float('$compute') - 2 * 1000 * $classes * 25) / 192)))")
  for lr in 1e-4 3e-4; do
    rl "fm-lr$lr" rl.method=fm rl.lr="$lr" rl.batch=64 rl.steps="$fm_steps" eval.every=$((fm_steps / 4))
  done
  for beta in 1 1000; do
    rl "rwfm-b$beta" rl.method=rwfm rl.beta="$beta" rl.lr=1e-4 rl.batch=64 rl.pool=$((1000 * classes)) \
      rl.steps="$rw_steps" eval.every=$((rw_steps / 4))
  done
done

# Sample grids of the first seed: the same noise seed through the base and a DG-RL policy (8 per class, one row per
# class; the first 4 columns of each kept), each sampler as its arm trains it (grpo: SDE; rwfm and fm: ODE); side by
# side, drawn 2x larger.
s0=${seeds%% *}
sample() {  # RUN SAMPLER
  [ -f "$work/grid-$1-$2.png" ] && return 0
  "$temper" flow sample "$work/$1-$s0" --sampler "$2" --steps $([ "$2" = sde ] && echo 20 || echo 25) --n 48 \
    --seed 4242 --threads "$threads" --out "$work/grid-$1-$2.png" > /dev/null 2>&1 || fail "sample $1: see $work"
}
for rs in "base sde" "grpo-b1 sde" "base ode" "rwfm-b1 ode" "fm-lr1e-4 ode"; do sample $rs; done
python3 "$here/bench/png_upscale.py" "$grids/base-vs-grpo-b1-sde.png" 2 --width 69 "$work/grid-base-sde.png" "$work/grid-grpo-b1-sde.png"
python3 "$here/bench/png_upscale.py" "$grids/base-vs-rwfm-b1-ode.png" 2 --width 69 "$work/grid-base-ode.png" "$work/grid-rwfm-b1-ode.png"
python3 "$here/bench/png_upscale.py" "$grids/base-vs-fm-ode.png" 2 --width 69 "$work/grid-base-ode.png" "$work/grid-fm-lr1e-4-ode.png"

arms="base fm-lr1e-4 fm-lr3e-4 grpo-b0.5 grpo-b1 grpo-b2 rwfm-b1 rwfm-b1000"
dgrl_table "$work" "$seeds" "fd_sde fd mmd_sde mmd precision_sde recall_sde precision recall" %.3g "$arms"
python3 - "$work" "$seeds" "$arms" <<'PY'
import json, statistics, sys, os
work, seeds, arms = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def evals(d):
    return [r for r in map(json.loads, open(d + "/metrics.jsonl")) if r["kind"] == "eval"]
print()
print("FD change from the base per seed, last evaluation (and the mean of the evaluations in the run's second half):")
for arm in arms[1:]:
    cells = []
    for s in seeds:
        d = f"{work}/{arm}-{s}"
        if not os.path.isdir(d): continue
        e = evals(d)
        half = [r for r in e[1:] if r["step"] >= e[-1]["step"] / 2]
        half = [r for i, r in enumerate(half) if i == len(half) - 1 or half[i + 1]["step"] - r["step"] > e[-1]["step"] / 100]
        rel = lambda k, rs: 100 * (statistics.mean(r[k] for r in rs) / e[0][k] - 1)
        cells.append("sde %+.0f%% (%+.0f%%), ode %+.0f%% (%+.0f%%)" % (rel("fd_sde", [e[-1]]), rel("fd_sde", half),
                                                                     rel("fd", [e[-1]]), rel("fd", half)))
    print(f"  {arm}: " + " | ".join(cells))
print()
for s in seeds:
    b = [r for r in map(json.loads, open(f"{work}/base-{s}/metrics.jsonl")) if r["kind"] == "eval"]
    print(f"seed {s}: base FD (ODE) by step: " + ", ".join(f"{r['step']}: {r['fd']:.2f}" for r in b) +
          f"; fd_real floor {b[-1]['fd_real']:.3f}")
    for arm in ["grpo-b1", "rwfm-b1"]:
        t = [r for r in map(json.loads, open(f"{work}/{arm}-{s}/metrics.jsonl")) if r["kind"] == "train"]
        e = evals(f"{work}/{arm}-{s}")
        print(f"  {arm}: discriminator balanced accuracy {t[-1]['disc_accuracy']:.3f}, compute {t[-1]['compute']:.3g}, "
              f"FD sde {e[0]['fd_sde']:.2f} -> {e[-1]['fd_sde']:.2f}, ode {e[0]['fd']:.2f} -> {e[-1]['fd']:.2f}")
PY
echo "runs in $work, grids in $grids"

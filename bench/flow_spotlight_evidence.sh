#!/usr/bin/env bash
# Evidence for Spotlight (issue 39 items 2-3, spec methods-other section 3; docs/METHODS.md "Spotlight"): wall-clock
# to a target score, synchronous GRPO on random seeds against GRPO whose seeds one explorer process chooses on the
# previous weights, with and without preemptions (SIGKILL of the explorer at random intervals, mean PREEMPT_S, its
# replacement starting 0.2 s later). Tasks (TASKS, default "dgrl density"; "images" for the DiT):
#   dgrl     on a 2-D flow (8 Gaussians, 4 classes, 128x3 MLP, 500 flow-matching steps): DG-RL, reward = the
#            discriminator's clipped logit, beta 1 (the optimum is p_data): score = FD (ODE)
#   density  the same 2-D base, reward = log p_data(x | y) clipped, beta 0.2 (reward maximisation): score = the eval
#            samples' NLL
#   images   on an image DiT (recipes/flow_shapes_dit.toml: 16x16 RGB shapes, 6 classes, patch 4, hidden 64, 2
#            blocks, IMAGE_BASE_STEPS flow-matching steps, default 16000): DG-RL as recipes/flow_dgrl_dit.toml sets it
#            (beta 1, lr 5e-5, 6 groups, 1000 discriminator samples a class), IMAGE_STEPS RL steps (default 80),
#            evaluation of 1000 ODE samples every 10 steps: score = FD in the frozen image network's feature space
# Each task has one base, shared by the seeds. Arms (ARMS, default all five): sync1 (explorers 0, trainer on 1
# thread), sync2 (explorers 0, 2 threads), spot (1 explorer, trainer on 1 thread), spot_nice (spot with the explorer
# at niceness +19: the trainer keeps the core when both want it), spot_pre (spot with preemptions). wall = training
# time (evaluations excluded).
# Prints per task and arm (means +- sd over seeds): steps and wall to the target (first evaluation at or under it;
# "-" for seeds that never reach it), the final and best score, seconds per step, explorer deaths, re-queued and
# expired requests, lost explorer seconds, mean join (spawn -> ready) of the explorers.
# Usage: bench/flow_spotlight_evidence.sh TEMPER [SEEDS="0 1 2"] [STEPS=100] [FD_TARGET=0.0125] [NLL_TARGET=0.6]
#          [IMAGE_FD_TARGET=10]
# SPOTLIGHT_WORK=DIR keeps the runs; a rerun on it runs only what is missing, unfinished or made with other settings
# (a new target re-reads the same runs).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
temper=$1
seeds=${2:-"0 1 2"}
steps=${3:-100}
fd_target=${4:-0.0125}
nll_target=${5:-0.6}
image_fd_target=${6:-10}
tasks=${TASKS:-"dgrl density"}
arms=${ARMS:-"sync1 sync2 spot spot_nice spot_pre"}
preempt=${PREEMPT_S:-1.0}
work=${SPOTLIGHT_WORK:-$(mktemp -d)}
mkdir -p "$work"
export OMP_WAIT_POLICY=passive
fail() { echo "FAIL: $*" >&2; exit 1; }
run_once() {  # DIR SETTINGS CMD...: run CMD (its output to DIR.log) unless DIR.done records SETTINGS (a finished run
  # with the same settings); a run left unfinished or made with other settings is removed and run again
  local dir=$1 settings=$2
  shift 2
  [ "$(cat "$dir.done" 2> /dev/null)" = "$settings" ] && return
  rm -rf "$dir" "$dir.done"
  "$@" > "$dir.log" 2>&1 || fail "$(basename "$dir"): $(tail -3 "$dir.log")"
  echo "$settings" > "$dir.done"
}
base_of() {  # TASK: the base run directory of a task (trained here the first time)
  if [ "$1" = images ]; then
    run_once "$work/base-images" "steps ${IMAGE_BASE_STEPS:-16000}" "$temper" flow train \
      "$here/recipes/flow_shapes_dit.toml" --out "$work/base-images" --threads 1 \
      --set train.steps="${IMAGE_BASE_STEPS:-16000}" --set features.cache="\"$work/features\""
    echo "$work/base-images"
  else
    run_once "$work/base" "steps 500" "$temper" flow train --out "$work/base" --threads 1 --set data.classes=4 \
      --set train.steps=500 --set eval.every=500
    echo "$work/base"
  fi
}
for seed in $seeds; do
  for task in $tasks; do
    n=$steps every=5
    case $task in
      dgrl) t=(--set rl.reward='"discriminator"' --set rl.beta=1.0) ;;
      density) t=(--set rl.reward='"density"' --set rl.beta=0.2) ;;
      images) n=${IMAGE_STEPS:-80} every=10
        t=(--set rl.reward='"discriminator"' --set rl.beta=1.0 --set rl.lr=5e-5 --set rl.grpo.groups=6
           --set rl.discriminator.samples=1000 --set eval.samples=1000 --set eval.mmd_samples=500 --set eval.steps=25) ;;
      *) fail "unknown task $task (dgrl, density, images)" ;;
    esac
    base=$(base_of "$task")
    for arm in $arms; do
      case $arm in
        sync1) a=(--threads 1 --set flow.spotlight.explorers=0) ;;
        sync2) a=(--threads 2 --set flow.spotlight.explorers=0) ;;
        spot) a=(--set flow.spotlight.explorers=1) ;;
        spot_nice) a=(--set flow.spotlight.explorers=1 --set flow.spotlight.explorer_nice=19) ;;
        spot_pre) a=(--set flow.spotlight.explorers=1 --set flow.spotlight.preempt_every_s="$preempt"
                     --set flow.spotlight.respawn_delay_s=0.2) ;;
      esac
      dir="$work/$task-$arm-$seed"
      run_once "$dir" "base $(cat "$base.done") steps $n every $every ${t[*]} ${a[*]}" "$temper" flow spotlight \
        --out "$dir" --set rl.base="$base" --set rl.seed="$seed" --set rl.steps="$n" --set eval.every="$every" \
        --set rl.checkpoint_every="$n" "${t[@]}" "${a[@]}"
    done
  done
done

python3 - "$work" "$seeds" "$fd_target" "$nll_target" "$image_fd_target" "$tasks" "$arms" <<'PY'
import json, statistics, sys, os
work, seeds, fd_t, nll_t, img_t = sys.argv[1], sys.argv[2].split(), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
tasks, arms = sys.argv[6].split(), sys.argv[7].split()
def ms(v, f="%.3g"):
    v = [x for x in v if x is not None]
    if not v: return "-"
    return (f % statistics.mean(v)) + (" +- " + f % statistics.pstdev(v) if len(v) > 1 else "") + ("" if len(v) == len(seeds) else f" ({len(v)}/{len(seeds)})")
for task, key, target in (("dgrl", "fd", fd_t), ("density", "nll", nll_t), ("images", "fd", img_t)):
    if task not in tasks: continue
    print(f"\n{task}: score {key}, target {target}\n")
    print("| arm | steps to target | wall s to target | final | best | s / step | deaths | re-queued | expired | lost s | join s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for arm in arms:
        cols = [[] for _ in range(10)]
        for s in seeds:
            d = f"{work}/{task}-{arm}-{s}"
            if not os.path.isdir(d): continue
            rows = [json.loads(l) for l in open(d + "/metrics.jsonl")]
            ev = [r for r in rows if r["kind"] == "eval"]
            tr = [r for r in rows if r["kind"] == "train"]
            hit = next((r for r in ev if r[key] <= target), None)
            cols[0].append(hit["step"] if hit else None)
            cols[1].append(hit["wall_s"] if hit else None)
            cols[2].append(ev[-1][key])
            cols[3].append(min(r[key] for r in ev))
            cols[4].append(tr[-1]["wall_s"] / len(tr))
            last = tr[-1]
            cols[5].append(last.get("explorer_deaths", 0))
            cols[6].append(last["requeued"])
            cols[7].append(last["expired"])
            cols[8].append(last.get("lost_seconds", 0))
            joins = [r["join_s"] for r in tr if "join_s" in r]
            cols[9].append(statistics.mean(joins) if joins else None)
        if not cols[2]: continue
        print(f"| {arm} | {ms(cols[0], '%.1f')} | {ms(cols[1], '%.2f')} | {ms(cols[2], '%.4g')} | {ms(cols[3], '%.4g')} | "
              f"{ms(cols[4], '%.4f')} | {ms(cols[5], '%.1f')} | {ms(cols[6], '%.1f')} | {ms(cols[7], '%.0f')} | "
              f"{ms(cols[8], '%.3f')} | {ms(cols[9], '%.3f')} |")
PY
echo "runs in $work"

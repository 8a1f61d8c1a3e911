#!/usr/bin/env bash
# Seconds per RL step with 1 process (THREADS threads) vs `mpirun -np 2` (THREADS/2 threads per rank)
# on the same cores, the same global batch and recipe: the quickstart model shape PRESET (random init),
# 16 prompts x G=8, up to 48 new tokens, micro-batches of 16, no eval or checkpoints. Prints per-step
# means of step, rollout, reward and train time and, for 2 ranks, the bytes each rank sent through
# collectives and the seconds spent in them.
# Usage: bench/compare_ranks.sh [TEMPER] [PRESET] [STEPS] [THREADS]
#   MODEL=path (a GGUF or HF directory) trains that model instead of the preset; PROMPTS, GROUP,
#   MAX_NEW override 16, 8, 48.
set -euo pipefail
temper=${1:-build/bin/temper}
preset=${2:-quickstart}
steps=${3:-6}
threads=${4:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
common=(--set model.preset="\"$preset\"" --set sft.steps=0 --set rl.steps="$steps" --set rl.prompts_per_step=${PROMPTS:-16}
        --set rl.group_size=${GROUP:-8} --set rl.max_new=${MAX_NEW:-48} --set rl.micro_batch=16 --set rl.dynamic_sampling=false --set rl.temperature=1.0
        --set rl.lr=1e-4 --set rl.warmup=0 --set eval.problems=8 --set eval.every=0 --set run.checkpoint_every=0)
if [ -n "${MODEL:-}" ]; then common+=(--set model.path="\"$MODEL\""); preset=$(basename "$MODEL"); fi
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$temper" train --out "$work/one" --threads "$threads" "${common[@]}" 2> "$work/one.log"
TEMPER_THREADS=$((threads / 2)) mpirun -np 2 --oversubscribe --bind-to none -x TEMPER_THREADS "$temper" train --out "$work/two" "${common[@]}" 2> "$work/two.log"
python3 - "$work/one/metrics.jsonl" "$work/two/metrics.jsonl" "$preset" "$threads" <<'PY'
import json, statistics, sys
for path, ranks in ((sys.argv[1], 1), (sys.argv[2], 2)):
    tr = [json.loads(l) for l in open(path)]
    tr = [r for r in tr if r["kind"] == "train"][1:]  # the first step is warm-up
    out = {"preset": sys.argv[3], "ranks": ranks, "threads_per_rank": int(sys.argv[4]) // ranks, "steps": len(tr)}
    for k in ("step_s", "rollout_s", "reward_s", "train_s", "comm_s", "comm_mb", "response_len_mean"):
        if k in tr[0]:
            out[k] = round(statistics.mean(r[k] for r in tr), 4)
    print(json.dumps(out))
PY

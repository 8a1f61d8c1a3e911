#!/usr/bin/env bash
# [rl.async] explorer ranks through `temper train` (quickstart shortened: 3 SFT + 4 RL steps): mpirun -np 2 with
# rl.async.explorer_ranks = 1 (rank 0 trains, rank 1 explores) equals one process with the explorer thread (weights,
# optimiser state and samples bitwise; metrics but the communication counters), and a run stopped after RL step 2
# (--stop-after) and resumed under mpirun equals it too. Exit 77 when MPI cannot start 2 ranks here.
# Usage: train_async_mpi.sh TEMPER
set -uo pipefail
temper=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--threads 1 --set sft.steps=3 --set rl.steps=4 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.dynamic_sampling=false --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16 --set eval.every=0
        --set sft.batch=8 --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1
        --set rl.async.max_staleness=1 --set rl.ent_coef=0.01)
mpi() { "$here/../dist/mpirun2.sh" "$@"; }
mpi true > /dev/null 2>&1; [ $? = 77 ] && { echo "no usable MPI: skipped"; exit 77; }
set -e
source "$here/compare_runs.sh"
strip_comm() { strip "$1" | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(json.dumps({k: v for k, v in r.items() if not k.startswith(("comm_", "ranks"))}, sort_keys=True))'; }
same_mpi() {
  diff <(strip_comm "$1/metrics.jsonl") <(strip_comm "$2/metrics.jsonl") | head -20
  diff -q <(strip_comm "$1/metrics.jsonl") <(strip_comm "$2/metrics.jsonl") > /dev/null || { echo "metrics differ"; exit 1; }
  for f in model.safetensors trainer_state.safetensors; do
    cmp "$1/checkpoints/step-7/$f" "$2/checkpoints/step-7/$f" || { echo "$f differs: $1 vs $2"; exit 1; }
  done
  cmp "$1/samples.jsonl" "$2/samples.jsonl" || { echo "samples differ"; exit 1; }
}
"$temper" train --out "$work/thread" "${common[@]}" 2> "$work/thread.log"
mpi "$temper" train --out "$work/ranks" "${common[@]}" --set rl.async.explorer_ranks=1 2> "$work/ranks.log" ||
  { tail -30 "$work/ranks.log"; exit 1; }
grep -q "ranks 0-0 train, ranks 1-1 explore" "$work/ranks.log" || { cat "$work/ranks.log"; exit 1; }
same_mpi "$work/thread" "$work/ranks"
mpi "$temper" train --out "$work/stop" "${common[@]}" --set rl.async.explorer_ranks=1 --stop-after 5 2> "$work/stop.log"
grep -q "stopped (--stop-after) after step 5" "$work/stop.log" || { tail -30 "$work/stop.log"; exit 1; }
mpi "$temper" train --resume "$work/stop" --threads 1 2>> "$work/stop.log" || { tail -30 "$work/stop.log"; exit 1; }
same_mpi "$work/thread" "$work/stop"
echo ASYNC_MPI_OK

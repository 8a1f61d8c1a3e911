#!/usr/bin/env bash
# [rl.async] with [lora] through `temper train` on the quickstart, shortened (2 SFT + 4 RL steps, adapters on q, v,
# down): max_staleness = 0 equals the run without the section; with max_staleness = 1, on an f32 base and on an int4
# base (QLoRA), the RL steps after the first train on batches one adapter version old (async_staleness [0, 1, 1, 1]),
# the memory plan counts the explorer's snapshot as adapters on the shared base, checkpoints hold adapters only, and a
# run stopped after RL step 2 (--stop-after) and resumed equals the uninterrupted one (metrics, samples, adapters and
# their moments bitwise); explorer ranks under mpirun -np 2 (the adapters sent per version) equal the explorer thread.
# Usage: train_lora_async.sh TEMPER. Prints LORA_ASYNC_OK.
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/compare_runs.sh"
opts=(--set sft.steps=2 --set rl.steps=4 --set rl.prompts_per_step=4 --set rl.group_size=4
      --set rl.dynamic_sampling=false --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16
      --set eval.every=0 --set sft.batch=8 --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1
      --set lora.rank=4 --set lora.alpha=8 --set lora.targets=q,v,down --set rl.ent_coef=0.01)
common=(--threads 2 "${opts[@]}")
# Metrics, samples, and the last checkpoint's adapters and optimiser state (a [lora] checkpoint has no model weights).
same_lora() {
  diff <(strip "$1/metrics.jsonl") <(strip "$2/metrics.jsonl") > /dev/null ||
    { echo "metrics differ: $1 vs $2"; diff <(strip "$1/metrics.jsonl") <(strip "$2/metrics.jsonl") | head -20; exit 1; }
  cmp "$1/samples.jsonl" "$2/samples.jsonl" || { echo "samples differ: $1 vs $2"; exit 1; }
  for f in adapter_model.safetensors trainer_state.safetensors; do
    cmp "$1/checkpoints/step-6/$f" "$2/checkpoints/step-6/$f" || { echo "$f differs: $1 vs $2"; exit 1; }
  done
}
staleness() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
tr = [json.loads(l) for l in open(sys.argv[1])]
lag = [r["async_staleness"] for r in tr if r["kind"] == "train"]
assert lag == [0, 1, 1, 1], lag
PY
}

"$temper" train --out "$work/sync" "${common[@]}" 2> "$work/sync.log"
"$temper" train --out "$work/zero" "${common[@]}" --set rl.async.max_staleness=0 2> "$work/zero.log"
same_lora "$work/sync" "$work/zero"

for base in f32 int4; do
  run=(--set lora.base="\"$base\"" --set rl.async.max_staleness=1)
  "$temper" train --out "$work/$base" "${common[@]}" "${run[@]}" 2> "$work/$base.log" || { cat "$work/$base.log"; exit 1; }
  staleness "$work/$base"
  grep -q "explorer snapshot .*the previous version's adapters" "$work/$base.log" || { cat "$work/$base.log"; exit 1; }
  test -f "$work/$base/checkpoints/step-6/adapter_model.safetensors"
  test ! -e "$work/$base/checkpoints/step-6/model.safetensors"
  "$temper" train --out "$work/$base-stop" "${common[@]}" "${run[@]}" --stop-after 4 2> "$work/$base-stop.log"
  grep -q "stopped (--stop-after) after step 4" "$work/$base-stop.log"
  "$temper" train --resume "$work/$base-stop" --threads 2 2>> "$work/$base-stop.log"
  same_lora "$work/$base" "$work/$base-stop"
done
# The int4 base's rollouts are not the f32 base's.
cmp -s "$work/f32/samples.jsonl" "$work/int4/samples.jsonl" && { echo "the int4 and f32 runs sampled the same"; exit 1; }

# Explorer ranks (mpirun -np 2, rl.async.explorer_ranks = 1: each version sends the adapters alone) equal the explorer
# thread, on the int4 base (metrics but the communication counters). Skipped where MPI cannot start 2 ranks.
mpi() { "$(dirname "$0")/../dist/mpirun2.sh" "$@"; }
if mpi true > /dev/null 2>&1; then
  run=(--threads 1 "${opts[@]}" --set lora.base='"int4"' --set rl.async.max_staleness=1)
  "$temper" train --out "$work/thread" "${run[@]}" 2> "$work/thread.log"
  mpi "$temper" train --out "$work/ranks" "${run[@]}" --set rl.async.explorer_ranks=1 \
    2> "$work/ranks.log" || { tail -30 "$work/ranks.log"; exit 1; }
  grep -q "ranks 0-0 train, ranks 1-1 explore" "$work/ranks.log" || { cat "$work/ranks.log"; exit 1; }
  same_but_comm "$work/thread" "$work/ranks"
  cmp "$work/thread/checkpoints/step-6/adapter_model.safetensors" "$work/ranks/checkpoints/step-6/adapter_model.safetensors"
else
  echo "no usable MPI: explorer ranks skipped"
fi
echo LORA_ASYNC_OK

#!/usr/bin/env bash
# [rl.async] through `temper train` on the quickstart, shortened (3 SFT + 4 RL steps): max_staleness = 0 equals the
# run without the section (metrics, samples, weights, optimiser state); with max_staleness = 1 the RL steps after the
# first train on batches one version old (async_staleness 1), a rerun is bitwise equal, and a run stopped after RL
# step 2 (--stop-after) or by SIGTERM inside a step and resumed equals the uninterrupted one (the checkpoint holds
# the batch explored ahead). A recipe pairing it with a method that steers decoding is refused, naming both.
# Usage: train_async.sh TEMPER
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--threads 2 --set sft.steps=3 --set rl.steps=4 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.dynamic_sampling=false --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16 --set eval.every=0
        --set sft.batch=8 --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1 --set rl.ent_coef=0.01)
source "$(dirname "$0")/compare_runs.sh"

"$temper" train --out "$work/sync" "${common[@]}" 2> "$work/sync.log"
"$temper" train --out "$work/zero" "${common[@]}" --set rl.async.max_staleness=0 2> "$work/zero.log"
same "$work/sync" "$work/zero" 7

"$temper" train --out "$work/async" "${common[@]}" --set rl.async.max_staleness=1 2> "$work/async.log"
python3 - "$work/async/metrics.jsonl" <<'PY'
import json, sys
tr = [json.loads(l) for l in open(sys.argv[1])]
tr = [r for r in tr if r["kind"] == "train"]
lag = [r["async_staleness"] for r in tr]
assert lag == [0, 1, 1, 1], lag
print("staleness per RL step", lag, "ratio_mean", [round(r["ratio_mean"], 4) for r in tr])
PY
"$temper" train --out "$work/again" "${common[@]}" --set rl.async.max_staleness=1 2> "$work/again.log"
same "$work/async" "$work/again" 7

"$temper" train --out "$work/stop" "${common[@]}" --set rl.async.max_staleness=1 --stop-after 5 2> "$work/stop.log"
grep -q "stopped (--stop-after) after step 5" "$work/stop.log"
"$temper" train --resume "$work/stop" --threads 2 2>> "$work/stop.log"
same "$work/async" "$work/stop" 7

TEMPER_FAULT_SIGNAL_IN_STEP=6:15 "$temper" train --out "$work/sig" "${common[@]}" --set rl.async.max_staleness=1 \
  2> "$work/sig.log" || { echo "SIGTERM: expected exit 0"; cat "$work/sig.log"; exit 1; }
grep -q "stopped by signal 15 after step 6" "$work/sig.log"
"$temper" train --resume "$work/sig" --threads 2 2>> "$work/sig.log"
same "$work/async" "$work/sig" 7

if "$temper" train --out "$work/dre" "${common[@]}" --set rl.async.max_staleness=1 --set rl.dre.mode='"online"' \
  2> "$work/dre.log"; then
  echo "expected [rl.dre] online with [rl.async] to be refused"; exit 1
fi
grep -q "\[rl.dre\].*cannot run with \[rl.async\]" "$work/dre.log" || { cat "$work/dre.log"; exit 1; }
echo ASYNC_OK

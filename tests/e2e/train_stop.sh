#!/usr/bin/env bash
# What `temper train` promises about stops and run directories (docs/RELIABILITY.md), on the quickstart
# (signals sent by the TEMPER_FAULT_SIGNAL_IN_STEP hook at a chosen point, and a burst sent from outside):
#  1. SIGTERM as the step-0 evaluation starts: abandoned at once, exit 0, no checkpoint; --resume starts over.
#  2. SIGINT as an RL step's rollouts start: abandoned, the step before checkpointed, exit 0.
#  3. SIGTERM as the step-2 evaluation starts: checkpoint 2, the evaluation runs again first on resume.
#  4. 20 SIGINTs and a SIGTERM from outside, wherever they land: exit 0. Every resumed run of 1-4 equals the
#     uninterrupted one bit for bit (metrics, samples, weights, optimiser state).
#  5. A run killed (SIGKILL) while writing its first checkpoint: a new run there is refused naming --resume,
#     which starts it over; equal. An error after the directory exists names the same command.
#  6. A refused recipe (a bad key, a run the memory plan says cannot fit) leaves no directory behind.
#  7. --resume keeps the run's config: --set refused naming the change, applied with --allow-changes and
#     recorded in history.jsonl.
# Usage: train_stop.sh TEMPER. Prints STOP_OK.
set -euo pipefail
temper=$1
work=$(mktemp -d)
bg=
trap '[ -n "$bg" ] && kill -9 $bg 2>/dev/null; rm -rf "$work"' EXIT
source "$(dirname "$0")/compare_runs.sh"
common=(--threads 2 --set sft.steps=2 --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.dynamic_sampling=false --set rl.max_new=32 --set eval.problems=16 --set eval.max_new=32
        --set eval.every=2 --set sft.batch=8 --set run.checkpoint_every=0 --set run.samples_every=1)
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; tail -5 "$f"; done; exit 1; }
wait_for() {  # FILE PATTERN: until FILE holds PATTERN (60 s at most)
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "timed out waiting for '$2' in $1"
}
summary() { grep 'done, 5 steps' "$1" | sed 's/Report.*//'; }
"$temper" train --out "$work/full" "${common[@]}" 2> "$work/full.log"
# The plan printed before loading counts the evaluation's KV blocks it writes (16 sequences of a short prompt + 32
# tokens: 1.5 MiB), not its whole 256 MiB pool.
eval_kv=$(sed -n 's/^ *KV cache (evaluation) *\([0-9.]*\) MiB *eval.kv_memory_mb 256, 16 sequences written$/\1/p' \
          "$work/full.log")
[ -n "$eval_kv" ] && awk -v m="$eval_kv" 'BEGIN { exit !(m > 0 && m < 8) }' ||
  fail "the plan's evaluation KV item: '$(grep 'KV cache (evaluation)' "$work/full.log")'"

# 1. SIGTERM as the step-0 evaluation starts: abandoned, exit 0, no checkpoint; --resume starts the run over; equal.
TEMPER_FAULT_SIGNAL_IN_STEP=0:15:eval "$temper" train --out "$work/e0" "${common[@]}" 2> "$work/e0.log" \
  || fail "SIGTERM during the evaluation: expected exit 0"
grep -q "stopped by signal 15 during the evaluation at step 0" "$work/e0.log" || fail "no stop message"
grep -q "eval @ step 0" "$work/e0.log" && fail "the evaluation finished instead of stopping"
test ! -e "$work/e0/checkpoints" || fail "a checkpoint without a step"
"$temper" train --resume "$work/e0" --threads 2 2>> "$work/e0.log"
grep -q "starting it over from step 0" "$work/e0.log" || fail "no start-over message"
same "$work/full" "$work/e0" 5

# 2. SIGINT as step 4's rollouts begin: abandoned, step 3 checkpointed, exit 0; resume redoes step 4; equal.
TEMPER_FAULT_SIGNAL_IN_STEP=4:2:rollout "$temper" train --out "$work/ro" "${common[@]}" 2> "$work/ro.log" \
  || fail "SIGINT during the rollouts: expected exit 0"
grep -q "stopped by signal 2 during the rollouts of step 4" "$work/ro.log" || fail "no rollout stop message"
test -d "$work/ro/checkpoints/step-3" && test ! -e "$work/ro/checkpoints/step-4" || fail "expected checkpoint 3 only"
"$temper" train --resume "$work/ro" --threads 2 2>> "$work/ro.log"
same "$work/full" "$work/ro" 5

# 3. SIGTERM as the evaluation at step 2 begins: checkpoint 2; resume evaluates step 2 first; equal, and the
#    summary's "at the start" is the run's first evaluation (not the resumed process's first).
TEMPER_FAULT_SIGNAL_IN_STEP=2:15:eval "$temper" train --out "$work/e2" "${common[@]}" 2> "$work/e2.log" \
  || fail "SIGTERM during the step-2 evaluation: expected exit 0"
grep -q "during the evaluation at step 2" "$work/e2.log" || fail "not stopped inside the step-2 evaluation"
test -d "$work/e2/checkpoints/step-2" || fail "no checkpoint of step 2"
"$temper" train --resume "$work/e2" --threads 2 2>> "$work/e2.log"
grep -q "eval @ step 2" "$work/e2.log" || fail "the step-2 evaluation was not run again"
same "$work/full" "$work/e2" 5
[ "$(summary "$work/e2.log")" = "$(summary "$work/full.log")" ] || fail "summaries differ"

# 4. Real signals from outside: 20 SIGINTs 3 ms apart, then a SIGTERM, once RL has begun: exit 0 (never an abort),
#     and the resumed run equals (the stop lands in a rollout, an update or an evaluation; a short run may be done).
"$temper" train --out "$work/burst" "${common[@]}" --set rl.max_new=96 2> "$work/burst.log" &
bg=$!
wait_for "$work/burst/metrics.jsonl" '"kind":"train"'
for _ in $(seq 20); do kill -INT $bg 2>/dev/null || true; sleep 0.003; done
kill -TERM $bg 2>/dev/null || true
wait $bg || fail "a burst of signals: expected exit 0"
bg=
"$temper" train --out "$work/burstfull" "${common[@]}" --set rl.max_new=96 2> "$work/burstfull.log"
grep -q "done, 5 steps" "$work/burst.log" || "$temper" train --resume "$work/burst" --threads 2 2>> "$work/burst.log"
same "$work/burstfull" "$work/burst" 5

# 5. SIGKILL inside the first checkpoint: no checkpoint; --out refused naming --resume; --resume starts over; equal.
set +e
TEMPER_FAULT_KILL_IN_CHECKPOINT=1 "$temper" train --out "$work/k" "${common[@]}" --set run.checkpoint_every=1 \
  2> "$work/k.log"
rc=$?
set -e
[ $rc -eq 137 ] || fail "expected the fault-injected run to die by SIGKILL (137), got $rc"
if "$temper" train --out "$work/k" "${common[@]}" 2> "$work/k2.log"; then fail "a new run over an unstarted one was accepted"; fi
grep -q "stopped before its first checkpoint; start it over with --resume $work/k" "$work/k2.log" || fail "k2 message"
"$temper" train --resume "$work/k" --threads 2 2>> "$work/k.log"
grep -q "starting it over from step 0" "$work/k.log" || fail "no start-over message"
same "$work/full" "$work/k" 5
python3 - "$work/k/history.jsonl" <<'PY'
import json, sys
ev = [json.loads(l)["event"] for l in open(sys.argv[1])]
assert ev == ["start", "restart"], ev
PY
# An error after the directory exists (checkpoints/ is a file: the first checkpoint cannot be written) names the
# command that continues; with the obstacle gone it does.
mkdir -p "$work/e" && : > "$work/e/checkpoints"
if "$temper" train --out "$work/e" "${common[@]}" 2> "$work/e.log"; then fail "an unwritable checkpoint was accepted"; fi
grep -q "continue the run with temper train --resume $work/e, which starts it over" "$work/e.log" || fail "e message"
rm "$work/e/checkpoints"
"$temper" train --resume "$work/e" --threads 2 2>> "$work/e.log"
same "$work/full" "$work/e" 5

# 6. A refused recipe (an unknown preset) leaves no directory behind.
if "$temper" train --out "$work/bad" "${common[@]}" --set model.preset='"nope"' 2> "$work/bad.log"; then fail "bad preset accepted"; fi
test ! -e "$work/bad" || fail "a refused run left $work/bad behind"
# A run that cannot fit this machine's memory is refused by the memory plan before anything is allocated, naming
# the settings that would make it fit.
if "$temper" train --out "$work/big" "${common[@]}" --set model.preset='"smollm2-135m"' --set sft.batch=4096 \
  2> "$work/big.log"; then fail "a run larger than the machine was accepted"; fi
grep -q "this run needs about .* GiB per rank and this machine has" "$work/big.log" || fail "no memory refusal"
grep -q "recompute (model.recompute = true)" "$work/big.log" || fail "no fix named"
test ! -e "$work/big" || fail "a refused run left $work/big behind"

# 7. --resume keeps the config: a change is refused naming it; --allow-changes applies it, recorded.
"$temper" train --out "$work/c" "${common[@]}" --stop-after 3 2> "$work/c.log"
if "$temper" train --resume "$work/c" --set rl.lr=1e-3 2> "$work/c2.log"; then fail "a change on resume was accepted"; fi
grep -q "change the run's config .*rl.lr (5e-05 -> 0.001).*--allow-changes" "$work/c2.log" || fail "c2 message"
"$temper" train --resume "$work/c" --set rl.lr=5e-05 --threads 2 --stop-after 4 2>> "$work/c.log"  # no change: accepted
"$temper" train --resume "$work/c" --set rl.lr=1e-3 --allow-changes --threads 2 2>> "$work/c.log"
grep -qx "lr = 0.001" "$work/c/config.toml" || fail "the allowed change is not in config.toml"
python3 - "$work/c/history.jsonl" <<'PY'
import json, sys
h = [json.loads(l) for l in open(sys.argv[1])]
assert [e["event"] for e in h] == ["start", "resume", "resume"], h
assert h[2]["changes"] == [{"key": "rl.lr", "before": "5e-05", "after": "0.001"}] and h[2]["step"] == 4, h[2]
PY

# 8. A bit flipped in the newest checkpoint's weights: --resume refuses naming the damage and --fallback, which
#    continues from the previous checkpoint (the damaged one set aside in damaged/); equal.
"$temper" train --out "$work/d" "${common[@]}" --set run.checkpoint_every=1 --stop-after 4 2> "$work/d.log"
python3 - "$work/d/checkpoints/step-4/model.safetensors" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-100, 2); b = f.read(1); f.seek(-100, 2); f.write(bytes([b[0] ^ 1]))
PY
if "$temper" train --resume "$work/d" 2> "$work/d2.log"; then fail "a damaged checkpoint was resumed"; fi
grep -q "step-4: damaged: model.safetensors: SHA-256 mismatch" "$work/d2.log" || fail "d2 message"
grep -q "previous good checkpoint is .*step-3.*--fallback" "$work/d2.log" || fail "d2 offers no fallback"
"$temper" train --resume "$work/d" --fallback --threads 2 2>> "$work/d.log"
test -d "$work/d/damaged/step-4" || fail "the damaged checkpoint was not set aside"
same "$work/full" "$work/d" 5
echo STOP_OK

#!/usr/bin/env bash
# [rl.async] with explorer processes (rl.async.explorer_processes, rl/async_processes.h) through `temper train` on
# the quickstart, shortened (3 SFT + 4 RL steps; rl.ent_coef = 0.01 so that every RL step moves the weights even where
# every reward is 0, and a batch sampled on other weights shows). One process with the whole batch in one block equals
# the explorer thread; with blocks of one prompt, two explorers = one explorer; explorers SIGKILLed while they hold a
# block (rl.async.kill_steps) or at random (preempt_every_s), a run stopped (--stop-after) and resumed, and one whose
# trainer got SIGTERM inside a step and resumed all equal the uninterrupted run: metrics (less the explorers' event
# counts), samples, weights and optimiser state bit for bit; the killed blocks were re-queued and the replacements
# joined (async_join_s). With [lora] the explorers are sent adapters and a killed one changes nothing either. Refused:
# kill settings without explorer processes (the rest: tests/app/test_run_config.cpp); explorers that cannot start
# end the run with a message saying so. Explorers joining over TCP (explorer_listen, `temper train --connect`), dropped
# at random and joining again, give the same bits; one with another TEMPER_EXPLORER_TOKEN is turned away.
# Usage: train_async_processes.sh TEMPER. Prints ASYNC_PROCESSES_OK.
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT  # a failed check leaves no trainer behind
source "$(dirname "$0")/compare_runs.sh"
common=(--threads 2 --set sft.steps=3 --set rl.steps=4 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.dynamic_sampling=false --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16 --set eval.every=0
        --set sft.batch=8 --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1
        --set rl.ent_coef=0.01 --set rl.async.max_staleness=1)
procs=(--set rl.async.explorer_processes=2)
# Metrics without timings and without the explorers' event counts (deaths, re-queued blocks, live explorers).
events() {
  strip "$1" | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(json.dumps({k: v for k, v in r.items() if k not in ("async_explorers", "async_deaths", "async_requeued")},
                     sort_keys=True))'
}
same_run() {
  diff <(events "$1/metrics.jsonl") <(events "$2/metrics.jsonl") > /dev/null ||
    { echo "metrics differ: $1 vs $2"; diff <(events "$1/metrics.jsonl") <(events "$2/metrics.jsonl") | head; exit 1; }
  cmp "$1/samples.jsonl" "$2/samples.jsonl" || { echo "samples differ: $1 vs $2"; exit 1; }
  for f in ${3:-model.safetensors} trainer_state.safetensors; do
    cmp "$1/checkpoints/step-7/$f" "$2/checkpoints/step-7/$f" || { echo "$f differs: $1 vs $2"; exit 1; }
  done
}
# Sums of the explorers' metrics over the RL steps: "deaths requeued joins" (joins: steps with one). Spawned explorers
# are replaced at once (one alive after every step); explorers over TCP (a second argument) may be between joins.
counts() {
  python3 - "$1/metrics.jsonl" "${2:-}" <<'PY'
import json, sys
tr = [json.loads(l) for l in open(sys.argv[1])]
tr = [r for r in tr if r["kind"] == "train"]
assert sys.argv[2] or all(r["async_explorers"] >= 1 for r in tr), tr
joins = [r["async_join_s"] for r in tr if "async_join_s" in r]
assert all(j > 0 for j in joins), joins
print(int(sum(r["async_deaths"] for r in tr)), int(sum(r["async_requeued"] for r in tr)), len(joins))
PY
}

"$temper" train --out "$work/thread" "${common[@]}" 2> "$work/thread.log"
"$temper" train --out "$work/whole" "${common[@]}" --set rl.async.explorer_processes=1 \
  --set rl.async.request_prompts=4 2> "$work/whole.log"
same_run "$work/thread" "$work/whole"
python3 - "$work/whole/metrics.jsonl" <<'PY'
import json, sys
tr = [json.loads(l) for l in open(sys.argv[1])]
lag = [r["async_staleness"] for r in tr if r["kind"] == "train"]
assert lag == [0, 1, 1, 1], lag
PY

"$temper" train --out "$work/two" "${common[@]}" "${procs[@]}" 2> "$work/two.log"
"$temper" train --out "$work/one" "${common[@]}" --set rl.async.explorer_processes=1 2> "$work/one.log"
same_run "$work/two" "$work/one"
read -r deaths requeued joins <<< "$(counts "$work/two")"
[ "$deaths" = 0 ] && [ "$requeued" = 0 ] && [ "$joins" -ge 1 ] || { echo "two: $deaths $requeued $joins"; exit 1; }

"$temper" train --out "$work/kill" "${common[@]}" "${procs[@]}" --set 'rl.async.kill_steps=[2,3]' \
  --set rl.async.min_request_s=0.05 2> "$work/kill.log"
[ "$(grep -c "SIGKILLed explorer" "$work/kill.log")" = 2 ] || { echo "kill: expected 2 kills"; cat "$work/kill.log"; exit 1; }
same_run "$work/two" "$work/kill"
read -r deaths requeued joins <<< "$(counts "$work/kill")"
[ "$deaths" = 2 ] && [ "$requeued" = 2 ] && [ "$joins" -ge 3 ] || { echo "kill: $deaths $requeued $joins"; exit 1; }

"$temper" train --out "$work/preempt" "${common[@]}" "${procs[@]}" --set rl.async.preempt_every_s=0.05 \
  --set rl.async.min_request_s=0.02 2> "$work/preempt.log"
same_run "$work/two" "$work/preempt"
read -r deaths requeued joins <<< "$(counts "$work/preempt")"
[ "$deaths" -ge 1 ] || { echo "preempt: no explorer was killed"; exit 1; }
echo "preempted: $deaths deaths, $requeued blocks re-queued, joins in $joins steps"

"$temper" train --out "$work/stop" "${common[@]}" "${procs[@]}" --stop-after 5 2> "$work/stop.log"
grep -q "stopped (--stop-after) after step 5" "$work/stop.log"
"$temper" train --resume "$work/stop" --threads 2 2>> "$work/stop.log"
same_run "$work/two" "$work/stop"
TEMPER_FAULT_SIGNAL_IN_STEP=6:15 "$temper" train --out "$work/sig" "${common[@]}" "${procs[@]}" 2> "$work/sig.log" ||
  { echo "SIGTERM: expected exit 0"; cat "$work/sig.log"; exit 1; }
grep -q "stopped by signal 15 after step 6" "$work/sig.log"
"$temper" train --resume "$work/sig" --threads 2 2>> "$work/sig.log"
same_run "$work/two" "$work/sig"

lora=(--set lora.rank=4 --set lora.alpha=8 --set lora.targets=q,v,down)
"$temper" train --out "$work/lora_thread" "${common[@]}" "${lora[@]}" 2> "$work/lora_thread.log"
"$temper" train --out "$work/lora_kill" "${common[@]}" "${lora[@]}" --set rl.async.explorer_processes=1 \
  --set rl.async.request_prompts=4 --set 'rl.async.kill_steps=[3]' --set rl.async.min_request_s=0.05 \
  2> "$work/lora_kill.log"
grep -q "SIGKILLed explorer" "$work/lora_kill.log"
same_run "$work/lora_thread" "$work/lora_kill" adapter_model.safetensors

# Explorers on other machines (rl.async.explorer_listen, here on loopback): a trainer with no explorer of its own, and
# explorers that join with `temper train --connect`, dropped by the preemption schedule every ~0.2 s (their socket
# shut) and joining again in a loop, give the spawned explorers' run bit for bit; with TEMPER_EXPLORER_TOKEN an
# explorer with another token is turned away, one with the same joins.
listening() {  # listening NAME ARGS...: the trainer in the background (pid in $tpid); its port in $port
  "$temper" train --out "$work/$1" "${common[@]}" --set rl.async.explorer_listen='"127.0.0.1:0"' "${@:2}" \
    > /dev/null 2> "$work/$1.log" &
  tpid=$!
  for _ in $(seq 300); do
    port=$(grep -o "may join on 127.0.0.1:[0-9]*" "$work/$1.log" | grep -o "[0-9]*$" || true)
    [ -n "$port" ] && return
    sleep 0.1
  done
  echo "the trainer did not listen"; kill -9 "$tpid"; cat "$work/$1.log"; exit 1
}
listening tcp --set rl.async.preempt_every_s=0.2 --set rl.async.min_request_s=0.05
(while kill -0 "$tpid" 2> /dev/null; do
  "$temper" train --connect "127.0.0.1:$port" --threads 1 > /dev/null 2>> "$work/tcp_explorers.log" || true
done) &
loop=$!
wait "$tpid" || { echo "tcp: the trainer failed"; tail -20 "$work/tcp.log"; exit 1; }
kill "$loop" 2> /dev/null || true
pkill -f -- "--connect 127.0.0.1:$port " || true  # one that started as the trainer ended retries its connect
same_run "$work/two" "$work/tcp"
read -r deaths requeued joins <<< "$(counts "$work/tcp" tcp)"
[ "$deaths" -ge 1 ] && [ "$joins" -ge 2 ] || { echo "tcp: $deaths deaths, $joins joins"; exit 1; }
echo "explorers over TCP: $deaths dropped, $requeued blocks re-queued, joins in $joins steps"
TEMPER_EXPLORER_TOKEN=right listening token
TEMPER_EXPLORER_TOKEN=wrong "$temper" train --connect "127.0.0.1:$port" --threads 1 2> "$work/wrong.log" || true
TEMPER_EXPLORER_TOKEN=right "$temper" train --connect "127.0.0.1:$port" --threads 1 2> "$work/right.log"
wait "$tpid" || { echo "token: the trainer failed"; tail -20 "$work/token.log"; exit 1; }
grep -q "without the right token" "$work/token.log" || { echo "token: the wrong one was not turned away"; exit 1; }
grep -q "closed the connection before sending its setup" "$work/wrong.log" || { echo "token: not told"; exit 1; }
same_run "$work/two" "$work/token"

refused() {  # refused LOG PATTERN ARGS...: the run fails before its first step, naming the setting
  local log=$1 pattern=$2
  shift 2
  if "$temper" train --out "$work/refused" "${common[@]}" "$@" 2> "$log"; then echo "expected a refusal: $*"; exit 1; fi
  grep -q -- "$pattern" "$log" || { echo "refusal without '$pattern':"; cat "$log"; exit 1; }
}
refused "$work/r1.log" "kill_steps, preempt_every_s and min_request_s are about explorer processes" \
  --set 'rl.async.kill_steps=[2]'
TEMPER_SPOTLIGHT_EXE=/bin/false refused "$work/r3.log" "in a row died before they were set up" \
  "${procs[@]}"
echo ASYNC_PROCESSES_OK

#!/usr/bin/env bash
# Soak (ctest -L slow): the quickstart, shortened, under a random schedule of 20 interruptions (SIGKILL, SIGTERM,
# SIGINT, a burst of SIGINTs; at random times: while loading, evaluating, rolling out, updating, checkpointing),
# continued with `temper train --resume` after each, ends bitwise equal to the run in one go (metrics, samples,
# weights, optimiser state). Every continuation is the one command the run prints; a run killed before its first
# checkpoint starts over. The schedule is drawn from SEED (default 1) and printed.
# Usage: soak_interrupts.sh TEMPER [SEED]. Prints SOAK_OK.
set -euo pipefail
temper=$1
seed=${2:-1}
work=$(mktemp -d)
bg=
trap '[ -n "$bg" ] && kill -9 $bg 2>/dev/null; rm -rf "$work"' EXIT
source "$(dirname "$0")/../e2e/compare_runs.sh"
common=(--threads 2 --set sft.steps=10 --set rl.steps=200 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.dynamic_sampling=false --set rl.max_new=96 --set eval.problems=32 --set eval.max_new=64
        --set eval.every=20 --set sft.batch=8 --set run.checkpoint_every=3 --set run.keep_last=3 --set run.samples_every=1)
"$temper" train --out "$work/full" "${common[@]}" 2> "$work/full.log"

# The schedule: (signal, delay in ms) x 20, from the seed.
mapfile -t schedule < <(python3 - "$seed" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
for _ in range(20):
    print(r.choice(["KILL", "KILL", "TERM", "INT", "INT-burst"]), r.randint(50, 1200))
PY
)
n=0
for entry in "${schedule[@]}"; do
  read -r sig delay <<<"$entry"
  n=$((n + 1))
  if [ -e "$work/run/config.toml" ] || [ -d "$work/run/checkpoints" ]; then
    args=(--resume "$work/run" --threads 2)
  else
    args=(--out "$work/run" "${common[@]}")
  fi
  "$temper" train "${args[@]}" 2>> "$work/run.log" &
  bg=$!
  sleep "$(python3 -c "print($delay / 1000)")"
  case $sig in
    KILL) kill -9 $bg 2>/dev/null || true ;;
    TERM) kill -TERM $bg 2>/dev/null || true ;;
    INT) kill -INT $bg 2>/dev/null || true ;;
    INT-burst) for _ in $(seq 30); do kill -INT $bg 2>/dev/null || true; sleep 0.003; done ;;
  esac
  set +e
  wait $bg
  rc=$?
  set -e
  bg=
  echo "interruption $n: SIG$sig after ${delay} ms: exit $rc"
  if [ "$sig" = KILL ]; then
    [ $rc -eq 137 ] || [ $rc -eq 0 ] || { echo "SIGKILL: unexpected exit $rc"; tail -5 "$work/run.log"; exit 1; }
  else
    [ $rc -eq 0 ] || { echo "SIG$sig: expected exit 0, got $rc"; tail -20 "$work/run.log"; exit 1; }
  fi
  grep -q "done, 210 steps" "$work/run.log" && { echo "the run finished after $n interruptions"; break; }
done
while ! grep -q "done, 210 steps" "$work/run.log"; do
  "$temper" train --resume "$work/run" --threads 2 2>> "$work/run.log"
done
same "$work/full" "$work/run" 210
echo SOAK_OK

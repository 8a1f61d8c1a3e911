#!/usr/bin/env bash
# One `temper train` per run directory: while one resumes a run, a second --resume is refused naming its pid;
# once the first is killed (SIGKILL: its lock file stays behind), the run is resumed again. Prints LOCK_OK.
set -uo pipefail
temper=$1
t=$(mktemp -d)
trap 'kill -9 $bg 2>/dev/null; rm -rf "$t"' EXIT
"$temper" train --out "$t/r" --set sft.steps=2 --set rl.steps=400 --stop-after 1 > "$t/log0" 2>&1 || { cat "$t/log0"; exit 1; }
"$temper" train --resume "$t/r" > "$t/log1" 2>&1 &
bg=$!
for _ in $(seq 300); do [ "$(cat "$t/r/.lock" 2>/dev/null)" = "$bg" ] && break; sleep 0.1; done
"$temper" train --resume "$t/r" > "$t/log2" 2>&1 && { echo "the second run was not refused"; exit 1; }
grep -q "another temper train (pid $bg) is using this run directory" "$t/log2" || { cat "$t/log2"; exit 1; }
kill -9 $bg; wait $bg 2>/dev/null
"$temper" train --resume "$t/r" --stop-after 2 > "$t/log3" 2>&1 || { cat "$t/log3"; exit 1; }
echo LOCK_OK

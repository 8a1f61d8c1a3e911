#!/usr/bin/env bash
# [rl.async] explorer ranks: a killed explorer rank ends the job. Rank 1 (the explorer) dies by SIGKILL after its
# first job's requests arrive, while trainer rank 0 waits for it; mpirun must end the job with a failure, in under
# 60 s, the launch line naming the roles ("ranks 1-1 explore") and mpirun naming the killed rank.
# Usage: async_kill.sh TEST_ASYNC_MPI (exit 77: no usable MPI here).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
out=$(TEMPER_KILL_EXPLORER=1 "$here/mpirun2.sh" -x TEMPER_KILL_EXPLORER "$1" --gtest_filter='*AKilledExplorer*' 2>&1)
rc=$?
took=$(($(date +%s) - start))
[ "$rc" = 77 ] && { echo "$out"; exit 77; }
echo "$out" | tail -20
echo "exit $rc after ${took}s"
[ "$rc" != 0 ] || { echo "FAIL: the job succeeded without its explorer"; exit 1; }
[ "$took" -lt 60 ] || { echo "FAIL: the job took ${took}s to end"; exit 1; }
echo "$out" | grep -q "ranks 1-1 explore" || { echo "FAIL: no line naming the explorer rank"; exit 1; }
echo "$out" | grep -Eiq "rank 1|signal 9|killed" || { echo "FAIL: mpirun did not name the killed rank"; exit 1; }
echo "ASYNC_KILL_OK"

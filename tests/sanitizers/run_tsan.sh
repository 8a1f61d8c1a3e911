#!/usr/bin/env bash
# make test-tsan: the thread pool (test_core), rollout engine (test_rollout), trainer (test_rl: RL and SFT trainers,
# env rollouts, reward sets) and the reward and environment programs (test_reward, test_env: worker threads, the
# episode table) tests under ThreadSanitizer, built in build-tsan with -DTEMPER_TSAN=ON.
# OpenMP: TEMPER_THREADS=1 and OMP_NUM_THREADS=1 keep OpenMP teams out of everything but the tests that set a
# thread count themselves (ThreadPool, engine/trainer thread-count invariance); reports from inside OpenMP regions
# are suppressed by tsan.supp (libgomp is not instrumented; see there). Any other report fails the run.
#   run_tsan.sh [BUILD_DIR] [TEST_BINARY...]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-tsan}
shift || true
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(test_core test_rollout test_rl test_env test_reward)
# history_size=7: an OpenMP worker's stack is kept long enough to be restored (and matched by tsan.supp) in long tests.
export TSAN_OPTIONS="suppressions=$root/tests/sanitizers/tsan.supp history_size=7 second_deadlock_stack=1 exitcode=66 ${TSAN_OPTIONS:-}"
export TEMPER_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive TEMPER_TEST_DATA="$root/tests/data"
failed=()
for t in "${tests[@]}"; do
  log="$build/tests/$t.tsan.log"
  echo "== $t (log: $log)"
  (cd "$build/tests" && "./$t" --gtest_brief=1) > "$log" 2>&1
  rc=$?
  races=$(grep -c '^WARNING: ThreadSanitizer' "$log")
  tail -n 3 "$log"
  echo "   exit $rc, ThreadSanitizer reports: $races"
  [ "$rc" -eq 0 ] && [ "$races" -eq 0 ] || failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-tsan: FAILED: ${failed[*]} (the reports are in the logs above)"
  exit 1
fi
echo "test-tsan: OK (${tests[*]})"

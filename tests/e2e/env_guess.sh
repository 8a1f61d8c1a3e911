#!/usr/bin/env bash
# `temper train` with [env]: the guessing game as an environment program (examples/envs/guess_env.py) on
# SmolLM2-135M-Instruct: conversations of several turns through the model's chat template, one GRPO step. Then
# [rl.async] (max_staleness 1): the explorer thread converses with step k + 1's episodes on version k while the
# trainer updates: three steps train on batches 0, 1, 1 versions old without environment failures, and a run stopped
# after step 2 and resumed (its checkpoint holds step 3's conversations) equals the uninterrupted one (metrics,
# samples, weights, optimiser state). Then explorer ranks (mpirun -np 2, rl.async.explorer_ranks = 1: rank 1 spawns
# its own guess program and converses with the versions rank 0 sends): a run stopped after step 2 and resumed under
# mpirun equals the explorer thread's bit for bit (metrics but the communication counters); skipped where MPI cannot
# start 2 ranks. Two explorer ranks (mpirun -np 3) give the explorer thread's samples and metrics (log-prob-derived
# ones up to rounding). Explorer processes (each its own guess program): a kill mid-round changes no bit. Prints ENV_OK
# when all of it holds.
set -euo pipefail
temper=$1 gguf=$2 root=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cat > "$t/guess.toml" <<TOML
[model]
path = "$gguf"
[env]
kind = "program"
program = ["python3", "$root/examples/envs/guess_env.py"]
max_turns = 4
turn_max_new = 16
[env.params]
n = 10
[rl]
steps = 1
prompts_per_step = 2
group_size = 2
max_new = 200
temperature = 0.7
kv_memory_mb = 128
[run]
samples_every = 1
TOML
"$temper" train "$t/guess.toml" --out "$t/run" > "$t/log" 2>&1 || { cat "$t/log"; exit 1; }
m=$(cat "$t/run/metrics.jsonl")
turns=$(echo "$m" | grep -o '"env/turns":[0-9.]*' | head -1 | cut -d: -f2)
fails=$(echo "$m" | grep -o '"env/failures":[0-9.]*' | head -1 | cut -d: -f2)
echo "env/turns $turns env/failures $fails"
{ awk -v x="$turns" -v f="$fails" 'BEGIN { exit !(x >= 2 && f == 0) }' && grep -qF '\nuser\n' "$t/run/samples.jsonl"; } ||
  { echo "expected multi-turn episodes without failures"; exit 1; }

async=(--set rl.steps=3 --set rl.async.max_staleness=1 --threads 2)
"$temper" train "$t/guess.toml" --out "$t/async" "${async[@]}" > "$t/async.log" 2>&1 || { cat "$t/async.log"; exit 1; }
python3 - "$t/async/metrics.jsonl" <<'PY'
import json, sys
tr = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
lag = [r["async_staleness"] for r in tr]
assert lag == [0, 1, 1], lag
assert all(r["env/failures"] == 0 and r["env/turns"] >= 1 for r in tr), tr
print("async staleness", lag, "env/turns", [r["env/turns"] for r in tr])
PY
"$temper" train "$t/guess.toml" --out "$t/stop" "${async[@]}" --stop-after 2 > "$t/stop.log" 2>&1 || { cat "$t/stop.log"; exit 1; }
grep -q "stopped (--stop-after) after step 2" "$t/stop.log" || { cat "$t/stop.log"; exit 1; }
"$temper" train --resume "$t/stop" --threads 2 >> "$t/stop.log" 2>&1 || { cat "$t/stop.log"; exit 1; }
source "$(dirname "$0")/compare_runs.sh"
same "$t/async" "$t/stop" 3

mpi() { "$(dirname "$0")/../dist/mpirun2.sh" "$@"; }
if mpi true > /dev/null 2>&1; then
  # Stopped after step 2 and resumed: steps 1-2 and, from the checkpoint's explored-ahead conversations, step 3.
  ranks=(--set rl.steps=3 --set rl.async.max_staleness=1 --set rl.async.explorer_ranks=1 --threads 1)
  mpi "$temper" train "$t/guess.toml" --out "$t/ranks" "${ranks[@]}" --stop-after 2 > "$t/ranks.log" 2>&1 ||
    { tail -30 "$t/ranks.log"; exit 1; }
  grep -q "ranks 0-0 train, ranks 1-1 explore" "$t/ranks.log" || { cat "$t/ranks.log"; exit 1; }
  grep -q "stopped (--stop-after) after step 2" "$t/ranks.log" || { cat "$t/ranks.log"; exit 1; }
  mpi "$temper" train --resume "$t/ranks" --threads 1 >> "$t/ranks.log" 2>&1 || { tail -30 "$t/ranks.log"; exit 1; }
  same_but_comm "$t/async" "$t/ranks"
  for f in model.safetensors trainer_state.safetensors; do
    cmp "$t/async/checkpoints/step-3/$f" "$t/ranks/checkpoints/step-3/$f" || { echo "explorer ranks: $f differs"; exit 1; }
  done
  echo "explorer ranks, stopped and resumed: the explorer thread's run bit for bit"
else
  echo "no usable MPI: explorer ranks skipped"
fi

# Two explorer ranks (mpirun -np 3, rl.async.explorer_ranks = 2, 3 problems a round: blocks of 1 and 2, each rank its
# own guess program) against the explorer thread on the same 3 problems: the same samples (completions, rewards) and
# metrics; the log-prob-derived ones (entropy, loss, ratio_mean, grad_norm) within 1e-4 relative: each explorer rank
# prefills and decodes its block alone, and the real model's products give other last bits for other row counts
# (measured: up to 5e-6). Those last bits reach the update through the importance ratios, so with a learning rate
# the two runs' weights part in their last bits after step 1 and a later sample may flip a token (it did in the
# fresh-clone CI of 2026-12-07, a step-2/3 sample): rl.lr = 1e-30 (updates far below every weight's last bit;
# rl.lr must be > 0) keeps every version's weights the same, so three steps of versions and explored-ahead rounds
# compare sample for sample.
mpi3() { "$(dirname "$0")/../dist/mpirun_n.sh" 3 "$@"; }
if mpi3 true > /dev/null 2>&1; then
  three=(--set rl.steps=3 --set rl.prompts_per_step=3 --set rl.async.max_staleness=1 --set rl.lr=1e-30 --threads 1)
  "$temper" train "$t/guess.toml" --out "$t/thread3" "${three[@]}" > "$t/thread3.log" 2>&1 ||
    { tail -30 "$t/thread3.log"; exit 1; }
  mpi3 "$temper" train "$t/guess.toml" --out "$t/ranks3" "${three[@]}" --set rl.async.explorer_ranks=2 \
    > "$t/ranks3.log" 2>&1 || { tail -30 "$t/ranks3.log"; exit 1; }
  grep -q "ranks 0-0 train, ranks 1-2 explore" "$t/ranks3.log" || { cat "$t/ranks3.log"; exit 1; }
  cmp "$t/thread3/samples.jsonl" "$t/ranks3/samples.jsonl" || { echo "two explorer ranks: samples differ"; exit 1; }
  python3 - "$t/thread3/metrics.jsonl" "$t/ranks3/metrics.jsonl" <<'PY'
import json, sys
a, b = ([r for r in map(json.loads, open(f)) if r["kind"] == "train"] for f in sys.argv[1:])
assert len(a) == len(b) == 3, (len(a), len(b))
near = ("entropy", "loss", "pg_loss", "ratio_mean", "grad_norm")
for x, y in zip(a, b):
    for k, v in x.items():
        if k.endswith(("_s", "tokens_per_s", "rss_mb")) or k.startswith(("comm_", "ranks")):
            continue
        if k in near:
            assert abs(v - y[k]) <= 1e-4 * max(abs(v), 1e-3), (x["step"], k, v, y[k])
        else:
            assert v == y[k], (x["step"], k, v, y[k])
print("two explorer ranks: env/turns", [r["env/turns"] for r in b], "env/episodes", [r["env/episodes"] for r in b])
PY
  echo "two explorer ranks: the explorer thread's samples and metrics"
else
  echo "MPI cannot start 3 ranks: two explorer ranks skipped"
fi
# Explorer processes (rl.async.explorer_processes = 2, blocks of one problem: each explorer starts its own guess
# program and converses its blocks with the version the trainer sends): a run whose explorer was SIGKILLed while
# holding a block of step 2's round (re-queued, a replacement joined with its own program) equals the run without the
# kill: samples, weights and optimiser state bitwise, metrics but the explorers' event counts.
procs=(--set rl.steps=3 --set rl.async.max_staleness=1 --set rl.async.explorer_processes=2 --threads 2)
"$temper" train "$t/guess.toml" --out "$t/procs" "${procs[@]}" > "$t/procs.log" 2>&1 || { tail -30 "$t/procs.log"; exit 1; }
"$temper" train "$t/guess.toml" --out "$t/killed" "${procs[@]}" --set 'rl.async.kill_steps=[2]' \
  --set rl.async.min_request_s=0.5 > "$t/killed.log" 2>&1 || { tail -30 "$t/killed.log"; exit 1; }
grep -q "SIGKILLed explorer" "$t/killed.log" || { cat "$t/killed.log"; exit 1; }
python3 - "$t/procs/metrics.jsonl" "$t/killed/metrics.jsonl" <<'PY'
import json, sys
events = ("async_explorers", "async_deaths", "async_requeued")
a, b = ([r for r in map(json.loads, open(f)) if r["kind"] == "train"] for f in sys.argv[1:])
assert [r["async_staleness"] for r in a] == [0, 1, 1], a
assert sum(r["async_deaths"] for r in b) == 1 and sum(r["async_requeued"] for r in b) == 1, b
assert all(r["env/failures"] == 0 for r in a + b), (a, b)
for x, y in zip(a, b):
    for k, v in x.items():
        if not k.endswith(("_s", "tokens_per_s", "rss_mb")) and k not in events:
            assert v == y[k], (x["step"], k, v, y[k])
print("explorer processes: env/turns", [r["env/turns"] for r in b], "a kill at step 2 changed nothing")
PY
cmp "$t/procs/samples.jsonl" "$t/killed/samples.jsonl" || { echo "explorer processes: samples differ"; exit 1; }
for f in model.safetensors trainer_state.safetensors; do
  cmp "$t/procs/checkpoints/step-3/$f" "$t/killed/checkpoints/step-3/$f" || { echo "explorer processes: $f differs"; exit 1; }
done
echo ENV_OK

#!/usr/bin/env bash
# `mpirun -np 2 temper train` on the quickstart, shortened (3 SFT + 3 RL steps, an entropy bonus so the
# RL steps move the weights too):
#  1. equals the one-process run with the same global batch: weights within 5e-5 relative (float
#     summation order: each rank sums its rows, then MPI sums the ranks), the same rewards and samples;
#     rank 0 alone writes the run directory;
#  2. resumes exactly with 2 ranks from a checkpoint 2 ranks wrote (bitwise equal to the uninterrupted run);
#  3. resumes with 2 ranks from a checkpoint 1 rank wrote (within the tolerance of 1.); ZeRO-1 (sharded AdamW
#     moments) equals it too and resumes from 2 ranks on 1 and from 1 on 2; ZeRO-2 (gradients sharded too) equals
#     it and resumes from 2 ranks on 1 and on 3;
#  4. a rank killed (SIGKILL) mid-run ends every rank with a non-zero status, without hanging;
#  5. ZPPO (teacher model, buffer), DRE online and STARE together: the same metrics on 1 and 2 ranks;
#  6. speculative rollouts ([rl.speculative]): the same samples, acceptance and ladder on 1 and 2 ranks;
#  7. a [[reward]] program: each rank's workers score its share; the same metrics and samples on 1 and 2 ranks.
# In 1. each rank's update takes its rows' activations from its own rollout (rl.reuse_activations).
# Usage: train_mpi.sh TEMPER   (exit 77: skipped, no mpirun or an MPI runtime that cannot start 2 ranks)
set -euo pipefail
temper=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v mpirun > /dev/null || { echo "no mpirun: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
if ! probe=$(timeout 60 mpirun -np 2 --oversubscribe --bind-to none true 2>&1); then  # the MPI runtime, not temper
  echo "the MPI runtime cannot start 2 ranks here: skipped"; echo "$probe" | tail -5; exit 77
fi
work=$(mktemp -d)
trap 'pkill -9 -f "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
mpi=(timeout 300 mpirun -np 2 --oversubscribe --bind-to none)
common=(--set sft.steps=3 --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.group_size=4 --set rl.max_new=16
        --set rl.dynamic_sampling=false --set rl.ent_coef=0.01 --set eval.problems=8 --set eval.max_new=16
        --set eval.every=0 --set sft.batch=8 --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1)

wait_rl() {  # RUN: until RUN's metrics have an RL row (60 s at most)
  for _ in $(seq 600); do grep -q '"kind":"train"' "$1/metrics.jsonl" 2>/dev/null && return 0; sleep 0.1; done
}

metrics_close() {  # the same rows and keys; numbers within 1e-4 relative (timings and communication left out)
  python3 - "$1" "$2" <<'PY'
import json, sys
timing = ("_s", "tokens_per_s", "rss_mb")
rows = [[json.loads(l) for l in open(p)] for p in sys.argv[1:3]]
assert len(rows[0]) == len(rows[1]), f"{len(rows[0])} vs {len(rows[1])} metric rows"
# comm_*: 2 ranks only; train_positions: a prompt shared by rows on two ranks is held once on each (so also
# no_gradient_positions, the positions of micro-batches without gradient); reused_positions: a rank reuses only
# the rows it rolled out itself (methods' rows may come from the other)
keep = lambda r: {k: v for k, v in r.items() if not k.endswith(timing) and not k.startswith("comm_")
                  and k not in ("train_positions", "reused_positions", "no_gradient_positions")}
for a, b in zip(*rows):
    a, b = keep(a), keep(b)
    assert a.keys() == b.keys(), f"step {a.get('step')}: keys differ: {sorted(a.keys() ^ b.keys())}"
    for k, x in a.items():
        y = b[k]
        ok = abs(x - y) <= 1e-4 * max(abs(x), abs(y)) + 1e-6 if isinstance(x, float) else x == y
        assert ok, f"step {a.get('step')} {a.get('kind')}: {k} {x} vs {y}"
PY
}
close() {  # run dirs A and B: the same metrics and samples, weights within 5e-5
  metrics_close "$1/metrics.jsonl" "$2/metrics.jsonl" || { echo "metrics differ: $1 vs $2"; exit 1; }
  cmp "$1/samples.jsonl" "$2/samples.jsonl" || { echo "samples differ: $1 vs $2"; exit 1; }
  python3 "$here/weights_close.py" "$1/checkpoints/step-6/model.safetensors" "$2/checkpoints/step-6/model.safetensors" 5e-5
}

"$temper" train --out "$work/one" --threads 1 "${common[@]}" 2> "$work/one.log"
"${mpi[@]}" "$temper" train --out "$work/two" "${common[@]}" 2> "$work/two.log"
grep -q "data-parallel over 2 ranks (mpi), 1 thread(s) per rank" "$work/two.log"
[ "$(grep -c 'temper train: done' "$work/two.log")" -eq 1 ] || { echo "expected one rank to report"; exit 1; }
python3 "$here/weights_close.py" "$work/one/checkpoints/step-3/model.safetensors" "$work/one/checkpoints/step-6/model.safetensors" 0 \
  && { echo "the RL steps did not change the weights"; exit 1; }
close "$work/one" "$work/two"
python3 - "$work/two/metrics.jsonl" <<'PY'  # each rank trained on the rows it rolled out from their kept activations
import json, sys
rl = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train" and "reused_positions" in r]
assert rl and all(r["reused_positions"] == r["train_positions"] for r in rl), [(r["reused_positions"], r["train_positions"]) for r in rl]
PY

# 2. Stop after step 4 (inside RL) with 2 ranks, resume with 2 ranks: bitwise the uninterrupted 2-rank run.
"${mpi[@]}" "$temper" train --out "$work/two_s4" "${common[@]}" --stop-after 4 2> "$work/two_s4.log"
grep -q "stopped (--stop-after) after step 4" "$work/two_s4.log"
"${mpi[@]}" "$temper" train --resume "$work/two_s4" 2>> "$work/two_s4.log"
cmp "$work/two/checkpoints/step-6/model.safetensors" "$work/two_s4/checkpoints/step-6/model.safetensors"
cmp "$work/two/checkpoints/step-6/trainer_state.safetensors" "$work/two_s4/checkpoints/step-6/trainer_state.safetensors"

# 3. A checkpoint written by one process, resumed by 2 ranks.
"$temper" train --out "$work/one_s4" --threads 1 "${common[@]}" --stop-after 4 2> "$work/one_s4.log"
"${mpi[@]}" "$temper" train --resume "$work/one_s4" 2>> "$work/one_s4.log"
close "$work/one" "$work/one_s4"

# 3b. ZeRO-1 (run.shard_optimizer): each rank keeps half the AdamW moments; equal to one process within the
#     data-parallel tolerance; its checkpoints hold the full moments: a sharded 2-rank run resumes on 1 process
#     and a 1-process checkpoint resumes sharded on 2 ranks, both close to the run in one go.
"${mpi[@]}" "$temper" train --out "$work/zero" "${common[@]}" --set run.shard_optimizer=true 2> "$work/zero.log"
close "$work/one" "$work/zero"
# the full moments, gathered from both ranks, as the replicated run's
python3 "$here/weights_close.py" "$work/two/checkpoints/step-6/trainer_state.safetensors" \
  "$work/zero/checkpoints/step-6/trainer_state.safetensors" 1e-3
"${mpi[@]}" "$temper" train --out "$work/zero_s4" "${common[@]}" --set run.shard_optimizer=true --stop-after 4 \
  2> "$work/zero_s4.log"
"$temper" train --resume "$work/zero_s4" --threads 1 2>> "$work/zero_s4.log"
close "$work/one" "$work/zero_s4"
"$temper" train --out "$work/one_z4" --threads 1 "${common[@]}" --set run.shard_optimizer=true --stop-after 4 2> "$work/one_z4.log"
"${mpi[@]}" "$temper" train --resume "$work/one_z4" 2>> "$work/one_z4.log"
close "$work/one" "$work/one_z4"

# 3c. ZeRO-2 (run.shard_gradients): the gradients sharded too (each range reduce-scattered as the backward ends it);
#     within the data-parallel tolerance of one process; a checkpoint 2 ZeRO-2 ranks wrote resumes on 1 process and
#     on 3 ranks (uneven shares: ranks with fewer micro-batches join the others' reductions), both close to the run
#     in one go.
"${mpi[@]}" "$temper" train --out "$work/zero2" "${common[@]}" --set run.shard_gradients=true 2> "$work/zero2.log"
grep -q '^shard_optimizer = true' "$work/zero2/config.toml"  # implied
close "$work/one" "$work/zero2"
"${mpi[@]}" "$temper" train --out "$work/zero2_s4" "${common[@]}" --set run.shard_gradients=true --stop-after 4 \
  2> "$work/zero2_s4.log"
cp -r "$work/zero2_s4" "$work/zero2_s4_3"
"$temper" train --resume "$work/zero2_s4" --threads 1 2>> "$work/zero2_s4.log"
close "$work/one" "$work/zero2_s4"
timeout 300 mpirun -np 3 --oversubscribe --bind-to none "$temper" train --resume "$work/zero2_s4_3" \
  2> "$work/zero2_s4_3.log"
grep -q "data-parallel over 3 ranks" "$work/zero2_s4_3.log"
close "$work/one" "$work/zero2_s4_3"

# 5. Methods with batch-wide state and their own generation: ZPPO (a teacher model answering hard
#    questions, a replay buffer), DRE online (forks in the rollout hook on each rank's share) and STARE
#    (batch-wide quantiles, a controller) give the same metrics on 1 and 2 ranks.
ck="$work/one/checkpoints/step-6"
methods=("$here/../../experiments/zppo-teacher/zppo.toml" --set model.path="\"$ck\"" --set teacher.path="\"$ck\""
         --set rl.steps=3 --set rl.prompts_per_step=6 --set rl.group_size=4 --set rl.max_new=24 --set teacher.max_new=24
         --set eval.every=0 --set eval.problems=8 --set eval.max_new=24 --set rl.dre.mode='"online"' --set rl.stare.control='"band"')
"$temper" train --out "$work/m1" --threads 1 "${methods[@]}" 2> "$work/m1.log"
"${mpi[@]}" "$temper" train --out "$work/m2" "${methods[@]}" 2> "$work/m2.log"
grep -q '"zppo_bcq"' "$work/m1/metrics.jsonl" && grep -q '"dre_edits"' "$work/m1/metrics.jsonl" && grep -q '"stare_w"' "$work/m1/metrics.jsonl"
metrics_close "$work/m1/metrics.jsonl" "$work/m2/metrics.jsonl" || { echo "methods: metrics differ on 2 ranks"; exit 1; }

# 6. EfficientRollout: speculative rollouts on every rank (toggle always), the ladder moved by acceptance summed
#    over ranks: the same samples, acceptance and gamma as one process. (It caught a ramp guard on the live
#    count, which one sequence finishing at its first token turned off in one process but not on a rank.)
spec=("${common[@]}" --set run.checkpoint_every=0 --set rl.speculative.toggle='"always"' --set rl.speculative.ladder='[1, 2, 3]'
      --set rl.speculative.alpha_up=0.3 --set rl.speculative.alpha_down=0.1 --set rl.speculative.persistence=1)
"$temper" train --out "$work/sp1" --threads 1 "${spec[@]}" 2> "$work/sp1.log"
"${mpi[@]}" "$temper" train --out "$work/sp2" "${spec[@]}" 2> "$work/sp2.log"
cmp "$work/sp1/samples.jsonl" "$work/sp2/samples.jsonl" || { echo "speculative: samples differ on 2 ranks"; exit 1; }
python3 - "$work/sp1/metrics.jsonl" "$work/sp2/metrics.jsonl" <<'PY' || { echo "speculative: metrics differ on 2 ranks"; exit 1; }
import json, sys
rows = [[json.loads(l) for l in open(f) if '"spec_gamma"' in l] for f in sys.argv[1:]]
assert len(rows[0]) == 3 and len(rows[1]) == 3, rows
for a, b in zip(*rows):
    for k in ("spec_gamma", "spec_accept_rate", "spec_accepted_len", "reward_mean"):
        assert abs(a[k] - b[k]) <= 1e-9 + 1e-6 * abs(a[k]), (k, a[k], b[k])
assert rows[0][0]["spec_accept_rate"] > 0
PY

# 7. A reward program ([[reward]] program = [...], 2 workers per rank): each rank's workers score its share of the
#    step; the same metrics (reward/exact included) and samples as one process.
{ cat "$here/../../recipes/quickstart.toml"
  printf '\n[[reward]]\nname = "exact"\nprogram = ["python3", "%s"]\nworkers = 2\n' "$here/../../examples/rewards/arithmetic_exact.py"
} > "$work/rp.toml"
"$temper" train "$work/rp.toml" --out "$work/rp1" --threads 1 "${common[@]}" --set run.checkpoint_every=0 2> "$work/rp1.log"
"${mpi[@]}" "$temper" train "$work/rp.toml" --out "$work/rp2" "${common[@]}" --set run.checkpoint_every=0 2> "$work/rp2.log"
grep -q '"reward/exact"' "$work/rp2/metrics.jsonl" || { echo "reward program: no reward/exact"; exit 1; }
metrics_close "$work/rp1/metrics.jsonl" "$work/rp2/metrics.jsonl" || { echo "reward program: metrics differ on 2 ranks"; exit 1; }
cmp "$work/rp1/samples.jsonl" "$work/rp2/samples.jsonl" || { echo "reward program: samples differ on 2 ranks"; exit 1; }

# 4. SIGKILL one rank mid-run: mpirun ends the job non-zero; no rank is left behind.
set +e
"${mpi[@]}" "$temper" train --out "$work/kill" "${common[@]}" --set rl.steps=100000 2> "$work/kill.log" &
job=$!
wait_rl "$work/kill"
victim=$(pgrep -f "^$temper train --out $work/kill" | tail -1)
[ -n "$victim" ] || { echo "no rank to kill"; exit 1; }
kill -9 "$victim"
wait $job
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "expected a non-zero exit (not the 300 s timeout), got $rc"; tail -5 "$work/kill.log"; exit 1; }
sleep 1
! pgrep -f "^$temper train --out $work/kill" > /dev/null || { echo "a rank outlived the job"; exit 1; }
# 8. A burst of 10 SIGTERMs to one rank mid-run (a handler used to race oneDNN there and abort the job): every rank
#    stops after the same step with a checkpoint, mpirun exits 0, and the run resumes on 2 ranks.
"${mpi[@]}" "$temper" train --out "$work/term" "${common[@]}" --set rl.steps=200 2> "$work/term.log" &
job=$!
wait_rl "$work/term"
victim=$(pgrep -f "^$temper train --out $work/term" | tail -1)
[ -n "$victim" ] || { echo "no rank to signal"; exit 1; }
for _ in $(seq 10); do kill -TERM "$victim" 2>/dev/null || true; sleep 0.003; done
wait $job || { echo "SIGTERM to one rank: expected exit 0"; tail -5 "$work/term.log"; exit 1; }
grep -Eq "stopped (by signal 15|\(another rank was signalled\)) after step" "$work/term.log" || { tail -5 "$work/term.log"; exit 1; }
last=$(ls "$work/term/checkpoints" | sed 's/step-//' | sort -n | tail -1)
"${mpi[@]}" "$temper" train --resume "$work/term" --stop-after $((last + 1)) 2>> "$work/term.log" \
  || { echo "resume on 2 ranks after the SIGTERM failed"; tail -5 "$work/term.log"; exit 1; }
test -d "$work/term/checkpoints/step-$((last + 1))"
echo "train_mpi: all checks passed (killed rank $victim, mpirun exit $rc)"

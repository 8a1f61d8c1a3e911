#!/usr/bin/env bash
# Exact resume of `temper train` on the quickstart, shortened: a run of 6 steps (3 SFT + 3 RL) in one
# go equals (a) 2 steps + --resume, (b) 4 steps + --resume (resumed inside RL: optimiser moments, data
# cursor, step seeds), and (c) a run SIGKILLed halfway through writing checkpoint 4, resumed from
# checkpoint 3: metrics.jsonl rows (timings left out) and the final weights are bitwise equal.
# Usage: train_resume.sh TEMPER
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Dynamic sampling off: after 3 SFT steps the model earns no reward, and dynamic sampling would drop every group
# (no RL update to resume inside).
common=(--threads 2 --set sft.steps=3 --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.dynamic_sampling=false --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16 --set eval.every=0 --set sft.batch=8
        --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1)

source "$(dirname "$0")/compare_runs.sh"

"$temper" train --out "$work/full" "${common[@]}" 2> "$work/full.log"
test -f "$work/full/report.html" && test -f "$work/full/config.toml" && ls "$work/full"/events.out.tfevents.* > /dev/null
test -f "$work/full/checkpoints/step-6/config.json" && test -f "$work/full/checkpoints/step-6/tokenizer.json"

for stop in 2 4; do
  "$temper" train --out "$work/s$stop" "${common[@]}" --stop-after $stop 2> "$work/s$stop.log"
  grep -q "stopped (--stop-after) after step $stop" "$work/s$stop.log"
  test ! -e "$work/s$stop/checkpoints/step-$((stop + 1))"
  "$temper" train --resume "$work/s$stop" --threads 2 2>> "$work/s$stop.log"
  same "$work/full" "$work/s$stop"
done

# A crash (SIGKILL) halfway through writing checkpoint 4: resume from 3, same result.
set +e
TEMPER_FAULT_KILL_IN_CHECKPOINT=4 "$temper" train --out "$work/crash" "${common[@]}" 2> "$work/crash.log"
rc=$?
set -e
[ $rc -eq 137 ] || { echo "expected the fault-injected run to die by SIGKILL (137), got $rc"; exit 1; }
test ! -e "$work/crash/checkpoints/step-4" && ls -d "$work/crash/checkpoints/step-4.tmp."* > /dev/null
"$temper" train --resume "$work/crash" --threads 2 2>> "$work/crash.log"
grep -q "removed 1 partial checkpoint" "$work/crash.log"
grep -q "from $work/crash/checkpoints/step-3" "$work/crash.log"
same "$work/full" "$work/crash"

# SIGTERM (a spot instance going away) or SIGINT (Ctrl-C) arriving inside step 4: the step finishes, checkpoint 4 is
# written, exit 0; resume equals.
for sig in 15 2; do
  TEMPER_FAULT_SIGNAL_IN_STEP=4:$sig "$temper" train --out "$work/sig$sig" "${common[@]}" 2> "$work/sig$sig.log" \
    || { echo "signal $sig: expected exit 0"; cat "$work/sig$sig.log"; exit 1; }
  grep -q "stopped by signal $sig after step 4" "$work/sig$sig.log"
  test -e "$work/sig$sig/checkpoints/step-4" && test ! -e "$work/sig$sig/checkpoints/step-5"
  "$temper" train --resume "$work/sig$sig" --threads 2 2>> "$work/sig$sig.log"
  same "$work/full" "$work/sig$sig"
done
# The same signal sent from another process once RL has begun (a short run may end first: then it is simply done).
"$temper" train --out "$work/sigext" "${common[@]}" 2> "$work/sigext.log" &
pid=$!
for _ in $(seq 600); do
  grep -q '"kind":"train"' "$work/sigext/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
kill -TERM $pid 2>/dev/null || true
wait $pid || { echo "SIGTERM from outside: expected exit 0"; cat "$work/sigext.log"; exit 1; }
if ! grep -q "done, 6 steps" "$work/sigext.log"; then
  grep -Eq "stopped by signal 15 (after step|during the (rollouts|evaluation))" "$work/sigext.log"
  "$temper" train --resume "$work/sigext" --threads 2 2>> "$work/sigext.log"
fi
same "$work/full" "$work/sigext"

# Keep-last-N: with run.keep_last = 2 only the two newest checkpoints stay.
"$temper" train --out "$work/keep" "${common[@]}" --set run.keep_last=2 2> "$work/keep.log"
[ "$(ls "$work/keep/checkpoints")" = "$(printf 'step-5\nstep-6')" ] || { echo "keep_last 2 kept: $(ls "$work/keep/checkpoints")"; exit 1; }

# The metrics a run writes: every train row has the per-step fields (and the update's when one ran: dynamic sampling
# may drop every group of a step), eval rows the held-out accuracy.
python3 - "$work/full/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
need = {"sft": ["step", "loss", "lr", "grad_norm"],
        "train": ["step", "reward_mean", "reward_std", "accuracy", "entropy", "response_len_mean", "response_len_max",
                  "rollout_tokens_per_s", "rollout_s", "reward_s", "train_s", "rss_mb", "reward_failures", "updates_skipped"],
        "eval": ["step", "eval_accuracy"]}
update = ["loss", "kl", "clip_frac", "ratio_mean", "grad_norm", "train_tokens", "no_gradient_positions"]
seen = set()
for r in rows:
    k = r["kind"]
    seen.add(k)
    want = need.get(k, []) + (update if k == "train" and "loss" in r else [])
    missing = [f for f in want if f not in r]
    assert not missing, f"{k} row at step {r.get('step')} lacks {missing}"
assert {"sft", "train", "eval"} <= seen and all("loss" in r for r in rows if r["kind"] == "train"), seen
PY

# Methods keep state across steps, checkpointed; stop + resume inside RL equals one go.
resume_equal() {  # NAME STOP ARGS...: the run in one go vs stopped after STOP steps and resumed
  local n=$1 stop=$2
  shift 2
  "$temper" train --out "$work/${n}full" "${common[@]}" "$@" 2> "$work/${n}full.log"
  "$temper" train --out "$work/${n}stop" "${common[@]}" "$@" --stop-after "$stop" 2> "$work/${n}stop.log"
  "$temper" train --resume "$work/${n}stop" --threads 2 2>> "$work/${n}stop.log"
  same "$work/${n}full" "$work/${n}stop"
}
state_has() {  # RUN METHOD TEXT: the method's checkpointed state at step 5 contains TEXT
  python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['methods']; assert sys.argv[3] in s[sys.argv[2]], s" \
    "$1/checkpoints/step-5/trainer_state.json" "$2" "$3"
}
# STARE's band controller keeps an integral; DRE online forks.
resume_equal m 5 --set rl.stare.control='"band"' --set rl.stare.target_entropy=50 --set rl.stare.w_max=3 \
  --set rl.stare.top_ratio=0.5 --set rl.dre.mode='"online"' --set rl.dre.min_tail=1
grep -q '"stare_w"' "$work/mfull/metrics.jsonl" && grep -q '"dre_edits"' "$work/mfull/metrics.jsonl"
state_has "$work/mfull" stare "integral="
# ZPPO with the gold teacher: the prompt buffer (replayed questions).
zppo=(--set rl.zppo.aug_ratio=0.5 --set rl.zppo.replay_ratio=0.5 --set teacher.source='"gold"'
      --set rl.scale_rewards='"batch_active"' --set rl.epochs=2)
resume_equal z 4 "${zppo[@]}"
grep -q '"zppo_replayed":2' "$work/zfull/metrics.jsonl" && grep -q '"zppo_bcq":[1-9]' "$work/zfull/metrics.jsonl"
# The report shows what the policy was asked: a candidate question among the samples (every group kept:
# with dynamic sampling this barely trained model's all-zero groups leave no samples).
"$temper" train --out "$work/zsamples" "${common[@]}" "${zppo[@]}" --set rl.steps=1 --set run.checkpoint_every=0 \
  --set rl.dynamic_sampling=false 2> "$work/zsamples.log"
grep -q "<candidate>" "$work/zsamples/samples.jsonl"
# With [rl.zppo] the recipe's defaults are the paper's (4 update epochs, normalisation over the groups whose rewards
# differ, clip-higher 0.28), its baselines' too; without it GRPO's stay (the run of 6 steps above).
"$temper" train --out "$work/zdefaults" "${common[@]}" --set rl.zppo.mode='"buffer"' --set rl.steps=1 \
  --set run.checkpoint_every=0 2> "$work/zdefaults.log"
for kv in 'epochs = 4' 'scale_rewards = "batch_active"' 'eps_high = 0.28' 'match_candidates = true'; do
  grep -qx "$kv" "$work/zdefaults/config.toml" || { echo "[rl.zppo]'s resolved recipe lacks '$kv'"; exit 1; }
done
for kv in 'epochs = 1' 'scale_rewards = "group"' 'eps_high = 0.2'; do
  grep -qx "$kv" "$work/full/config.toml" || { echo "the plain run's resolved recipe lacks '$kv'"; exit 1; }
done
state_has "$work/zfull" zppo "entries="
# REVES: the augmentation pool (a refresh every 2 steps, the stop between refreshes).
resume_equal r 5 --set rl.reves.seeds=6 --set rl.reves.rounds=2 --set rl.reves.refresh_every=2 \
  --set rl.reves.aug_ratio=0.5 --set eval.revisions=2 --set eval.every=3
grep -q '"reves_pool"' "$work/rfull/metrics.jsonl" && grep -q '"eval_revised_accuracy"' "$work/rfull/metrics.jsonl"
state_has "$work/rfull" reves '"pool"'
# EfficientRollout: speculative rollouts (toggle always, a ladder that moves), the controller in the checkpoint.
resume_equal sp 4 --set rl.speculative.toggle='"always"' --set rl.speculative.ladder='[1, 2, 3]' \
  --set rl.speculative.alpha_up=0.3 --set rl.speculative.alpha_down=0.1 --set rl.speculative.persistence=1
python3 - "$work/spfull/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"spec_gamma"' in l]
assert len(rows) == 3 and all(r["spec_accept_rate"] > 0 and r["spec_steps_frac"] > 0 for r in rows), rows
assert [r["spec_gamma"] for r in rows] == [1, 2, 3], [r["spec_gamma"] for r in rows]  # up a rung after each rollout
PY
state_has "$work/spfull" speculative '"rung":2'
# The drafter's head over the 48 tokens most often sampled so far: the counts are in the checkpoint (a resumed run that
# lost them would draft from another head and sample other tokens).
resume_equal spv 4 --set rl.speculative.toggle='"always"' --set rl.speculative.gamma=3 --set rl.speculative.vocab=48
python3 - "$work/spvfull/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"spec_vocab_coverage"' in l]
cov = [r["spec_vocab_coverage"] for r in rows]
assert len(rows) == 3 and all(r["spec_accept_rate"] > 0 for r in rows), rows
# this barely trained byte-level model samples from most of its 259 tokens: a head of 48 covers a part of them
assert all(0 < c < 1 for c in cov), cov
PY
state_has "$work/spvfull" speculative '"vocab_counts"'
if "$temper" train --out "$work/bad" "${common[@]}" --set rl.speculative.vocab=48 --set rl.speculative.head='"f32"' 2> "$work/bad.log"; then echo "a vocabulary subset of the f32 head was accepted"; exit 1; fi
grep -q 'rl.speculative.*vocab = 48 needs head' "$work/bad.log"
rm -rf "$work/bad"
if "$temper" train --out "$work/bad" "${common[@]}" --set rl.speculative.toggle='"sometimes"' 2> "$work/bad.log"; then echo "a bad rl.speculative.toggle was accepted"; exit 1; fi
grep -q "rl.speculative.toggle" "$work/bad.log"
rm -rf "$work/bad"
if "$temper" train --out "$work/bad" "${common[@]}" --set rl.speculative.ladder='[5, 3]' 2> "$work/bad.log"; then echo "a decreasing ladder was accepted"; exit 1; fi
grep -q "rl.speculative.*ladder must be increasing" "$work/bad.log"
rm -rf "$work/bad"
if "$temper" train --out "$work/bad" "${common[@]}" --set rl.zppo.mode='"inject"' 2> "$work/bad.log"; then echo "ZPPO inject without a teacher was accepted"; exit 1; fi
grep -q 'needs a teacher' "$work/bad.log"
rm -rf "$work/bad"
# A bad method setting is refused with the key and the allowed values.
if "$temper" train --out "$work/bad" "${common[@]}" --set rl.stare.control='"pid"' 2> "$work/bad.log"; then echo "a bad rl.stare.control was accepted"; exit 1; fi
grep -q "rl.stare.control" "$work/bad.log"

# A new run into a used directory is refused (nothing overwritten).
if "$temper" train --out "$work/full" "${common[@]}" 2> "$work/refuse.log"; then echo "a used run dir was accepted"; exit 1; fi
grep -q "already holds a run; continue it with --resume" "$work/refuse.log"
# The final checkpoint is a model temper eval (and transformers) opens; the report regenerates.
"$temper" eval --model "$work/full/checkpoints/step-6" --task arithmetic --param max_operand=9 --problems 5 \
  --max-new 16 --json "$work/eval.json" > "$work/eval.txt"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['problems']==5 and 0<=j['accuracy']<=1 and 'pass_at_1' in j, j" "$work/eval.json"
# k samples: pass@k for each k, mean length, the per-difficulty breakdown (values: tests/rl/test_evaluate.cpp).
"$temper" eval --model "$work/full/checkpoints/step-6" --task arithmetic --param max_operand=9 --problems 4 -k 4 \
  --max-new 16 --reward-timeout 30 --json "$work/evalk.json" > /dev/null
python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['samples_per_problem'] == 4 and 'pass_at_1' in j and 'pass_at_4' in j and j['pass_at_4'] >= j['pass_at_1'], j
assert j['mean_len'] > 0 and j['by_difficulty'] and j['reward_failures'] == 0, j" "$work/evalk.json"
# Fair RL's deployment: a preference alone measures [rl.fair]'s default objectives (correct, brevity) and their welfare;
# three weights need three objectives, named in the error.
"$temper" eval --model "$work/full/checkpoints/step-6" --task arithmetic --param max_operand=9 --problems 4 \
  --max-new 16 --preference 0.7,0.3 --json "$work/evalp.json" > /dev/null
python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert sorted(j['objectives']) == ['brevity', 'correct'] and 0 <= j['objectives']['brevity'] <= 1 and 'welfare' in j, j" "$work/evalp.json"
if "$temper" eval --model "$work/full/checkpoints/step-6" --task arithmetic --problems 2 --max-new 8 \
  --preference 0.5,0.3,0.2 > /dev/null 2> "$work/bad.log"; then echo "a 3-weight preference without objectives was accepted"; exit 1; fi
grep -q -- "--preference has 3 values and --objectives names 0" "$work/bad.log"
if "$temper" train --out "$work/bad" "${common[@]}" --set task.reward_timeout_s=-1 2> "$work/bad.log"; then echo "a negative reward timeout was accepted"; exit 1; fi
grep -q "task.reward_timeout_s must be >= 0" "$work/bad.log"
"$temper" report "$work/full" > /dev/null
echo RESUME_OK

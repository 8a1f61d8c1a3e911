#!/usr/bin/env bash
# `temper control train` / `eval` end to end: a meta run in one go equals one stopped (--stop-after) and resumed
# (metrics.jsonl and the last checkpoint's trainer_state bitwise); a transfer run from it and a scratch run train
# and resume the same way; eval prints its JSON; a transfer without a meta run, a meta run on another body and a
# resume that changes the config are refused; a leg run records its own action noise (init_log_std -1).
# Usage: cli_control.sh TEMPER
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TEMPER_THREADS=1
small=(--set control.n_envs=8 --set control.iterations=6 --set control.eval_every=2 --set control.eval_envs=8
       --set control.fit_envs=8 --set control.checkpoint_every=2 --set control.ppo.epochs=2
       --set control.task.episode_seconds=1.0 --set 'control.hidden=[16]' --set 'control.ppo.value_hidden=[16]')

same() {  # full and stopped+resumed runs of the same command line
  local name=$1; shift
  "$temper" control train --out "$work/$name-full" "$@" 2> "$work/$name-full.log"
  test -f "$work/$name-full/report.html" && test -f "$work/$name-full/config.toml"
  ls "$work/$name-full"/events.out.tfevents.* > /dev/null
  "$temper" control train --out "$work/$name-stop" "$@" --stop-after 3 2> "$work/$name-stop.log"
  grep -q "stopped at iteration 3" "$work/$name-stop.log"
  test -d "$work/$name-stop/checkpoints/step-3" && test ! -e "$work/$name-stop/checkpoints/step-4"
  "$temper" control train --resume "$work/$name-stop" 2>> "$work/$name-stop.log"
  cmp "$work/$name-full/metrics.jsonl" "$work/$name-stop/metrics.jsonl"
  [ "$(grep -c '"kind":"eval"' "$work/$name-full/metrics.jsonl")" -eq 3 ]
  for f in trainer_state.safetensors trainer_state.json; do
    cmp "$work/$name-full/checkpoints/step-6/$f" "$work/$name-stop/checkpoints/step-6/$f"
  done
}

same meta "${small[@]}" --set control.stage='"meta"' --set control.lag_max=0.4
same transfer "${small[@]}" --set control.stage='"transfer"' --set control.body='"leg"' --set control.lag_max=0 \
  --set control.meta_run="\"$work/meta-full\"" --set control.low_iterations=2
same scratch "${small[@]}" --set control.stage='"scratch"' --set control.body='"second_order_slow"' --set control.lag_max=0
# the leg's own action noise is recorded in config.toml (so the resume above read it back); other bodies keep -0.5
grep -Eq '^init_log_std = -1(\.0*)?$' "$work/transfer-full/config.toml"
grep -Eq '^init_log_std = -0\.50*$' "$work/scratch-full/config.toml"
grep -q '"tracking_phase":1' "$work/transfer-full/metrics.jsonl"
grep -q '"tracking_phase":0' "$work/transfer-full/metrics.jsonl"

"$temper" control eval "$work/meta-full" --envs 16 > "$work/eval.json"
# the variational mixture prior: a meta run with control.hierarchy.prior = "stick_breaking" fits and evaluates
"$temper" control train --out "$work/sb" "${small[@]}" --set control.stage='"meta"' --set control.lag_max=0.4 \
  --set control.hierarchy.prior='"stick_breaking"' 2> "$work/sb.log"
grep -q '^prior = "stick_breaking"' "$work/sb/config.toml"
"$temper" control eval "$work/sb" --envs 16 | grep -q '"mode_ari":'
grep -q '"stage":"meta"' "$work/eval.json" && grep -q '"mode_ari":' "$work/eval.json"
grep -q '"env_steps":480' "$work/eval.json"  # 6 iterations x 8 envs x 10 steps
"$temper" control eval "$work/transfer-full" --tasks eval | grep -q '"meta_env_steps":480'

if "$temper" control train --out "$work/bad1" "${small[@]}" --set control.stage='"transfer"' 2> "$work/bad1.log"; then
  exit 1
fi
grep -q "control.meta_run" "$work/bad1.log" && test ! -e "$work/bad1"
if "$temper" control train --out "$work/bad2" "${small[@]}" --set control.body='"leg"' --set control.lag_max=0 2> "$work/bad2.log"; then
  exit 1
fi
grep -q "body must be point_mass" "$work/bad2.log"
if "$temper" control train --resume "$work/meta-full" --set control.seed=5 2> "$work/bad3.log"; then exit 1; fi
grep -q "control.seed" "$work/bad3.log"
echo CONTROL_CLI_OK

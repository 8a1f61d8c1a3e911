#!/usr/bin/env bash
# `temper tabular train` / `front` end to end: a run in one go equals one stopped (--stop-after) and resumed
# (metrics.jsonl and the last checkpoint's tables bitwise), for PQLRM and scalarised QRM; the front printout matches
# the exact front on office_small; a bad machine is refused before anything is written; a resume that changes the
# config is refused. Usage: cli_tabular.sh TEMPER
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--set tabular.world=office_small --set tabular.steps=20000 --set tabular.eval_every=500
        --set tabular.checkpoint_every=4000)

for method in pqlrm qrm; do
  "$temper" tabular train --out "$work/full-$method" "${common[@]}" --set tabular.method=$method 2> "$work/full-$method.log"
  test -f "$work/full-$method/report.html" && test -f "$work/full-$method/config.toml"
  ls "$work/full-$method"/events.out.tfevents.* > /dev/null
  "$temper" tabular train --out "$work/stop-$method" "${common[@]}" --set tabular.method=$method --stop-after 6000 \
    2> "$work/stop-$method.log"
  grep -q "stopped at step 6000" "$work/stop-$method.log"
  test -d "$work/stop-$method/checkpoints/step-6000" && test ! -e "$work/stop-$method/checkpoints/step-8000"
  "$temper" tabular train --resume "$work/stop-$method" 2>> "$work/stop-$method.log"
  grep -q "resuming" "$work/stop-$method.log"
  cmp "$work/full-$method/metrics.jsonl" "$work/stop-$method/metrics.jsonl"
  [ "$(wc -l < "$work/full-$method/metrics.jsonl")" -eq 40 ]
  for f in trainer_state.safetensors trainer_state.json; do
    cmp "$work/full-$method/checkpoints/step-20000/$f" "$work/stop-$method/checkpoints/step-20000/$f"
  done
done

"$temper" tabular front "$work/full-pqlrm" > "$work/front.txt"
grep -q "learned front at (start, start): 5 points" "$work/front.txt"
grep -q "recovered 5, missing 0, spurious 0" "$work/front.txt"
[ "$(grep -c ' yes$' "$work/front.txt")" -eq 5 ]
"$temper" tabular front "$work/full-qrm" > "$work/front-qrm.txt"
grep -q "learned front at (start, start): 1 points" "$work/front-qrm.txt"
"$temper" tabular front --json "$work/full-pqlrm" | grep -q '"recovered":5'

cat > "$work/bad.toml" <<'TOML'
[tabular]
world = "office_small"
machine = "custom"
[[tabular.machines]]
name = "tea"
objectives = ["tea"]
states = ["start", "done"]
terminal = ["done"]
edges = ["start tea done 1"]
TOML
if "$temper" tabular train "$work/bad.toml" --out "$work/bad" 2> "$work/bad.log"; then exit 1; fi
grep -q "machine 'tea': edge 'start tea done 1': unknown event 'tea'" "$work/bad.log"
test ! -e "$work/bad"

if "$temper" tabular train --resume "$work/stop-pqlrm" --set tabular.gamma=0.9 2> "$work/change.log"; then exit 1; fi
grep -q "tabular.gamma" "$work/change.log"
echo TABULAR_CLI_OK

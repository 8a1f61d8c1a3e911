#!/usr/bin/env bash
# Runs one method experiment: its SFT stage once, then every RL arm for every seed from the SFT
# checkpoint, then `temper compare` (charts, summary over seeds). Each experiment is a folder of
# recipes: sft.toml, one <arm>.toml per arm (listed in `arms`), `metrics` (KIND:NAME per line), and
# optionally teacher.toml: a teacher trained once first, whose checkpoint the arms with a [teacher]
# section (source = "model") get as teacher.path.
# Without sft.toml the arms start from the model.path their recipes name.
# Usage: experiments/run.sh NAME [SEEDS (default "1 2 3")] [JOBS (default 1)]
#   env TEMPER (default build/bin/temper), OUT (default runs/experiments/NAME), THREADS (per run, default 2/JOBS),
#   ARMS (the arms to run, default the experiment's `arms` file)
set -euo pipefail
name=${1:?usage: experiments/run.sh NAME [SEEDS] [JOBS]}
seeds=${2:-"1 2 3"}
jobs=${3:-1}
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/$name
[ -d "$dir" ] || { echo "experiments/run.sh: no experiment '$name' (folders: $(ls -d "$here"/*/ | xargs -n1 basename | tr '\n' ' '))" >&2; exit 2; }
temper=${TEMPER:-build/bin/temper}
out=${OUT:-runs/experiments/$name}
threads=${THREADS:-$(( jobs > 1 ? 1 : 2 ))}
mkdir -p "$out"

# An experiment with make_data.py makes its data first, into OUT/data (where its recipes read it).
if [ -f "$dir/make_data.py" ] && [ ! -f "$out/data/train.jsonl" ]; then
  echo "== $name: data" >&2
  python3 "$dir/make_data.py" "$out/data" > "$out/data.log" 2>&1 ||
    { echo "experiments/run.sh: make_data.py failed, see $out/data.log" >&2; exit 1; }
fi

ckpt() { ls -d "$1"/checkpoints/step-* 2>/dev/null | sort -t- -k2 -n | tail -1; }
# A stage trained once before the arms (sft.toml, teacher.toml): its newest checkpoint, or nothing if the
# experiment has no such recipe.
stage() {  # NAME
  [ -f "$dir/$1.toml" ] || return 0
  if [ -z "$(ckpt "$out/$1")" ]; then
    echo "== $name: $1" >&2
    rm -rf "${out:?}/$1"
    "$temper" train "$dir/$1.toml" --out "$out/$1" --threads 2 > "$out/$1.log" 2>&1 ||
      { echo "experiments/run.sh: the $1 stage failed, see $out/$1.log" >&2; exit 1; }
  fi
  ckpt "$out/$1"
}
sft=$(stage sft)          # none: the arms start from their own model.path (a pretrained model)
teacher=$(stage teacher)
echo "== $name: RL arms from ${sft:-their model.path}${teacher:+ (teacher $teacher)}"

run_arm() {  # arm seed
  local run=$out/$1-s$2
  if [ -f "$run/report.html" ]; then echo "   $1 seed $2: done before"; return; fi
  rm -rf "$run"
  local extra=()
  if [ -n "$teacher" ] && grep -q 'source = "model"' "$dir/$1.toml"; then extra=(--set teacher.path="\"$teacher\""); fi
  if [ -n "$sft" ]; then extra+=(--set model.path="\"$sft\""); fi
  "$temper" train "$dir/$1.toml" --out "$run" --threads "$threads" --set model.seed="$2" \
    "${extra[@]}" > "$run.log" 2>&1 && echo "   $1 seed $2: $(tail -1 "$run.log")"
}
pids=()
for arm in ${ARMS:-$(cat "$dir/arms")}; do
  for s in $seeds; do
    run_arm "$arm" "$s" &
    pids+=($!)
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 2; done
  done
done
for p in "${pids[@]}"; do wait "$p"; done

args=()
for arm in ${ARMS:-$(cat "$dir/arms")}; do for s in $seeds; do args+=("$arm=$out/$arm-s$s"); done; done
metrics=()
# A metric none of the runs logged (another arm's, when ARMS picks a few) is left out of the comparison.
while read -r m || [ -n "$m" ]; do
  [ -n "$m" ] || continue
  if grep -qs "\"${m#*:}\":" "${args[@]#*=}" --include=metrics.jsonl -r; then metrics+=(--metric "$m"); else echo "   $m: in no run, left out"; fi
done < "$dir/metrics"
"$temper" compare --out "$out/compare" --title "$name" --smooth 10 "${metrics[@]}" "${args[@]}"

#!/usr/bin/env bash
# After `experiments/run.sh turing-users SEEDS`: samples K turns (temperature 1) for N held-out and N
# training conversations from SFT-Init, every Turing-RL checkpoint (steps 100, 200; scripted and
# discriminator judges, the n-gram judge and the n-gram discriminator reward, the fast arm of the weak start) and the likelihood
# arm's final checkpoint, then judge.py (held-out judges' pairwise accuracy, per-user diversity, style).
# Usage: experiments/turing-users/evaluate.sh [SEEDS] [TEMPER]   (env N=200, K=4; TEMP=0.7 samples at that temperature,
# into samples-t0.7/ and judge-t0.7.json: the simulator as deployed at a lower temperature)
set -euo pipefail
seeds=${1:-"1 2 3"}
temper=${2:-build/bin/temper}
out=${OUT:-runs/experiments/turing-users}  # OUT=runs/experiments/turing-users-weak for the weak start (data: DATA)
data=${DATA:-runs/experiments/turing-users/data}
n=${N:-200}
k=${K:-4}
temp=${TEMP:-1}
sd="$out/samples"; [ "$temp" = 1 ] || sd="$out/samples-t$temp"
samp() {  # checkpoint dir-for-samples
  mkdir -p "$2"
  for split in eval train; do
    [ -f "$2/${split}_samples.jsonl" ] && continue
    "$temper" eval --model "$1" --task user_sim --param path="$data/train.jsonl" --param eval_path="$data/$split.jsonl" \
      --problems "$n" -k "$k" --temperature "$temp" --max-new 96 --seed 7 --samples-out "$2/${split}_samples.jsonl" \
      --json "$2/${split}_eval.json" > /dev/null 2>&1
  done
}
last() { ls -d "$1"/checkpoints/step-* | sort -t- -k2 -n | tail -1; }
samp "$(last "$out/sft")" "$sd/sft"
arms=("sft-init=$sd/sft")
for s in $seeds; do
  for arm in turing turing_disc turing_disc_refit turing_disc_refit_slow turing_ngram_refit disc_ngram_refit turing_fast; do
    [ -d "$out/$arm-s$s/checkpoints" ] || continue
    for ck in "$out/$arm-s$s"/checkpoints/step-*; do
      st=${ck##*step-}
      samp "$ck" "$sd/$arm-s$s-$st"
      arms+=("$arm-s$s@$st=$sd/$arm-s$s-$st")
    done
  done
  samp "$(last "$out/likelihood-s$s")" "$sd/likelihood-s$s"
  arms+=("likelihood-s$s=$sd/likelihood-s$s")
done
py=${PYTHON:-.venv/bin/python}; [ -x "$py" ] || py=python3  # judge.py needs numpy (scripts/bootstrap --python)
"$py" "$(dirname "$0")/judge.py" "$data" "${arms[@]}" | tee "$out/judge$([ "$temp" = 1 ] || echo "-t$temp").json"

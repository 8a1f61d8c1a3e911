#!/usr/bin/env bash
# DRE's three group modes (rl.dre.compose = add_beside | add_and_prefer | replace) side by side on the quickstart
# task (arithmetic, + and -, 1-2 operations, operands 0-20) with 0-3 "check" lines after the last step
# (task.params.check_lines = 3: correct answers that keep writing, the overthinking DRE edits away, put in by SFT as
# in experiments/dre-overthinking). One SFT stage (cached in OUT/sft), then each mode runs RL_STEPS online-DRE steps
# from it per seed (the sampling streams), and the script prints, per mode and seed, the rollout accuracy and the
# length of correct rollouts (means over the last half of the RL steps), the edits per step, and the held-out greedy
# accuracy and length of correct completions at the end; then the means over seeds.
# Usage: bench/dre_compose.sh [TEMPER]   env: OUT (runs/bench/dre_compose), SFT_STEPS (1000), RL_STEPS (40),
#        SEEDS ("1 2 3"), THREADS (2), EVAL (500 problems), SFT (a checkpoint to start from instead of the SFT
#        stage). Its time with the defaults is in docs/METHODS.md beside the command.
set -euo pipefail
temper=${1:-build/bin/temper}
out=${OUT:-runs/bench/dre_compose}
sft_steps=${SFT_STEPS:-1000}
rl_steps=${RL_STEPS:-40}
seeds=${SEEDS:-1 2 3}
threads=${THREADS:-2}
eval_n=${EVAL:-500}
mkdir -p "$out"

task='[task]
name = "arithmetic"
[task.params]
seed = 1
min_ops = 1
max_ops = 2
max_operand = 20
ops = "+-"
check_lines = 3'
# The sections every run ends with.
tail="[eval]
every = 0
problems = $eval_n
max_new = 96
[run]
checkpoint_every = 0
keep_last = 1"

# train TOML RUN WHAT: trains into a fresh RUN (its output in RUN.log); took = its seconds.
train() {
  rm -rf "$2"
  local start=$SECONDS
  "$temper" train "$1" --out "$2" --threads "$threads" > "$2.log" 2>&1 ||
    { echo "dre_compose.sh: $3 failed, see $2.log" >&2; exit 1; }
  took=$((SECONDS - start))
}

ckpt() { ls -d "$1"/checkpoints/step-* 2>/dev/null | sort -t- -k2 -n | tail -1; }
if [ -z "${SFT:-}" ] && [ -z "$(ckpt "$out/sft")" ]; then
  cat > "$out/sft.toml" <<TOML
[model]
preset = "quickstart"
seed = 0
$task
[sft]
steps = $sft_steps
batch = 32
lr = 3e-3
warmup = 10
$tail
TOML
  train "$out/sft.toml" "$out/sft" SFT
  echo "SFT $sft_steps steps: $took s; $(grep -o 'Held-out accuracy.*' "$out/sft.log" | head -1)"
fi
sft=${SFT:-$(ckpt "$out/sft")}

for mode in add_beside add_and_prefer replace; do
  for seed in $seeds; do
    run=$out/$mode-s$seed
    cat > "$run.toml" <<TOML
[model]
path = "$sft"
seed = $seed
$task
[rl]
steps = $rl_steps
prompts_per_step = 16
group_size = 8
max_new = 96
lr = 1e-4
warmup = 5
temperature = 1.0
[rl.dre]
mode = "online"
compose = "$mode"
$tail
TOML
    train "$run.toml" "$run" "$mode seed $seed"
    echo "$mode seed $seed: $took s"
  done
done

python3 - "$out" $seeds <<'PY'
import json, statistics, sys
out, seeds = sys.argv[1], sys.argv[2:]
cols = ["rollout acc", "len correct", "edits/step", "eval acc", "eval len correct"]
print(f"{'compose':<16}{'seed':>5}" + "".join(f"{c:>17}" for c in cols))
summary = {}
for mode in ["add_beside", "add_and_prefer", "replace"]:
    for seed in seeds:
        rows = [json.loads(l) for l in open(f"{out}/{mode}-s{seed}/metrics.jsonl")]
        train = [r for r in rows if "dre_edits" in r]
        train = train[len(train) // 2:]  # the last half of the RL steps
        ev = [r for r in rows if "eval_accuracy" in r]
        mean = lambda k: sum(r.get(k, 0) for r in train) / max(1, len(train))
        last = ev[-1] if ev else {}
        v = [mean("accuracy"), mean("dre_len_correct"), mean("dre_edits"), last.get("eval_accuracy", float("nan")),
             last.get("eval_len_correct_mean", float("nan"))]
        summary.setdefault(mode, []).append(v)
        print(f"{mode:<16}{seed:>5}" + "".join(f"{x:>17.3f}" for x in v))
print("means over seeds (sd):")
for mode, vs in summary.items():
    cells = []
    for j in range(len(cols)):
        xs = [v[j] for v in vs]
        sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
        cells.append(f"{statistics.mean(xs):.3f}+/-{sd:.3f}")
    print(f"{mode:<16}{'':>5}" + "".join(f"{c:>17}" for c in cells))
PY

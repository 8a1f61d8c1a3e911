#!/usr/bin/env bash
# Synchronous vs [rl.async] RL on the quickstart (`temper train` defaults: 150 RL steps, 16 prompts x 16, dynamic
# sampling, temperature 0.7) from the quickstart's SFT checkpoint, per seed, the modes in turn so they share the
# machine's load: sync (2 threads), sync1 (1 thread: no fork-join, the async workers' arithmetic in series) and
# async (max_staleness 1, 2 threads: the explorer's share 1 and the trainer's 1, each lending its share while it
# waits), procs (max_staleness 1 on one explorer process, rl.async.explorer_processes = 1: 1 thread each, nothing
# lent across processes) and procs_pre (procs with an explorer SIGKILLed every PREEMPT_S seconds on average, default 10,
# and replaced at once: its weights must equal procs' bit for bit, the signature being the time the kills cost).
# Per run: RL seconds (the steps' step_s summed, evaluations left out), completion tokens per second
# over them, the explorer's rollout tokens/s, and held-out accuracy (EVAL problems, every EVERY steps) against the
# RL seconds spent to reach it (and the held-out family's accuracy where the recipe has [eval.heldout]).
# Usage: bench/async_rl.sh [TEMPER] [SFT_CHECKPOINT] [SEEDS] [EVERY] [EVAL]
#   SFT_CHECKPOINT: `temper train --out W --set rl.steps=0` writes W/checkpoints/step-1000 (made here when absent).
# env ASYNC_SET: more --set overrides for the async runs (default rl.async.max_staleness=1).
# env RECIPE: a recipe in place of the quickstart's defaults (its RL stage from SFT_CHECKPOINT, which is then required),
#   e.g. RECIPE=experiments/gsm-smollm2/grpo.toml with runs/experiments/gsm-smollm2/sft/checkpoints/step-60;
#   env STEPS: rl.steps (default the recipe's). env MODES: the modes run (default "sync sync1 async"; also procs,
#   procs_pre). env PREEMPT_S: procs_pre's mean seconds between kills (default 10).
set -euo pipefail
# Waiting OpenMP threads sleep instead of spinning (as `make test` runs): on a machine shared with other work a
# spinning 2-thread team loses its cores (docs/PERFORMANCE.md, "make test on 2 cores"); OMP_WAIT_POLICY=active keeps
# them spinning, OMP_WAIT_POLICY=unset leaves libgomp's default (spin a while, then sleep) for a machine kept quiet.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ "$OMP_WAIT_POLICY" = unset ] && unset OMP_WAIT_POLICY
temper=${1:-build/bin/temper}
sft=${2:-}
seeds=${3:-"0 1 2"}
every=${4:-25}
eval_n=${5:-500}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
recipe=${RECIPE:-}
if [ -n "$recipe" ] && [ -z "$sft" ]; then
  echo "bench/async_rl.sh: RECIPE=$recipe needs SFT_CHECKPOINT (the checkpoint its RL stage starts from)" >&2
  exit 2
fi
if [ -z "$sft" ]; then
  "$temper" train --out "$work/sft" --threads 2 --set rl.steps=0 2> "$work/sft.log"
  sft="$work/sft/checkpoints/step-1000"
fi
modes=${MODES:-"sync sync1 async"}
for mode in $modes; do
  case $mode in
    sync | sync1 | async | procs | procs_pre) ;;
    *) echo "bench/async_rl.sh: unknown mode '$mode' in MODES (expected sync, sync1, async, procs, procs_pre)" >&2
      exit 2 ;;
  esac
done
# The quickstart's RL stage from its SFT checkpoint (raw prompts, no SFT steps), or the recipe's.
base=(--set sft.steps=0 --set model.prompt_format='"raw"')
[ -n "$recipe" ] && base=("$recipe")
[ -n "${STEPS:-}" ] && base+=(--set rl.steps="$STEPS")
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}, modes: $modes"
for seed in $seeds; do
  for mode in $modes; do
    extra=()
    [ "$mode" = async ] && extra=(--set "${ASYNC_SET:-rl.async.max_staleness=1}")
    [ "$mode" = procs ] && extra=(--set rl.async.max_staleness=1 --set rl.async.explorer_processes=1)
    [ "$mode" = procs_pre ] && extra=(--set rl.async.max_staleness=1 --set rl.async.explorer_processes=1
                                      --set rl.async.preempt_every_s="${PREEMPT_S:-10}")
    threads=2
    [ "$mode" = sync1 ] && threads=1
    "$temper" train "${base[@]}" --out "$work/$mode-$seed" --threads $threads --set model.path="\"$sft\"" \
      --set model.seed="$seed" --set eval.every="$every" \
      --set eval.problems="$eval_n" --set run.checkpoint_every=0 "${extra[@]}" 2> "$work/$mode-$seed.log" ||
      { tail -20 "$work/$mode-$seed.log" >&2; exit 1; }
    python3 - "$work/$mode-$seed/metrics.jsonl" "$mode" "$seed" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t, toks, curve, gen, gen_s = 0.0, 0.0, [], 0.0, 0.0
deaths, lost, joins = 0, 0.0, []
for r in rows:
    if r["kind"] == "train":
        deaths += int(r.get("async_deaths", 0))
        lost += r.get("async_lost_s", 0.0)
        if "async_join_s" in r:
            joins.append(round(r["async_join_s"], 3))
        t += r["step_s"]
        toks += r["gen_tokens"]
        gen += r["gen_tokens"]
        gen_s += r["rollout_s"]
    elif r["kind"] == "eval":
        curve.append((r["step"], round(t, 2), r["eval_accuracy"]) +
                     ((r["heldout_accuracy"],) if "heldout_accuracy" in r else ()))
print(json.dumps({"mode": sys.argv[2], "seed": int(sys.argv[3]), "rl_seconds": round(t, 2),
                  "tokens_per_s": round(toks / t, 1), "rollout_tokens_per_s": round(gen / gen_s, 1),
                  "final_accuracy": curve[-1][2], "curve_step_seconds_accuracy": curve}
                 | ({"explorer_deaths": deaths, "lost_s": round(lost, 3), "joins_s": joins} if joins else {})))
PY
  done
done | tee "$work/results.jsonl"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
for mode in ("sync", "sync1", "async", "procs", "procs_pre"):
    m = [r for r in rs if r["mode"] == mode]
    if not m:
        continue
    print(json.dumps({"mode": mode, "runs": len(m),
                      "rl_seconds_mean": round(statistics.mean(r["rl_seconds"] for r in m), 2),
                      "tokens_per_s_mean": round(statistics.mean(r["tokens_per_s"] for r in m), 1),
                      "final_accuracy_mean": round(statistics.mean(r["final_accuracy"] for r in m), 4)}))
PY

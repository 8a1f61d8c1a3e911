#!/usr/bin/env bash
# After `experiments/run.sh zppo-warm SEEDS`: experiments/zppo-hard/evaluate.sh over this experiment's runs (the
# two-operation family from the warmed-up student and from each arm's final policy, the table over seeds).
# Usage: experiments/zppo-warm/evaluate.sh [SEEDS] [TEMPER]   (env OUT, ARMS)
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-runs/experiments/zppo-warm} ARMS=${ARMS:-$(cat "$here/arms")} \
  BASE=${OUT:-runs/experiments/zppo-warm}/data/warmup/checkpoints/step-40 exec "$here/../zppo-hard/evaluate.sh" "$@"

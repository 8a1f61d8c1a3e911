#!/usr/bin/env bash
# temper vs PyTorch, side by side on this machine, same shape/batch/seq/threads, f32 and bf16.
# Prints each engine's JSON line and the ratios (tokens/s and peak memory). Used by `make bench`.
#   bench/compare_train.sh [SHAPE] [BATCH] [SEQ] [THREADS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
shape=${1:-smollm2-135m}; batch=${2:-8}; seq=${3:-256}; threads=${4:-$(nproc)}; steps=${5:-3}
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
py=.venv/bin/python
for dtype in f32 bf16; do
  t=$(build/bin/temper bench train --shape "$shape" --batch "$batch" --seq "$seq" --threads "$threads" \
        --dtype "$dtype" --steps "$steps" --warmup 1 --json)
  p=$($py bench/peers/torch_train.py --shape "$shape" --batch "$batch" --seq "$seq" --threads "$threads" \
        --dtype "$dtype" --steps "$steps" --warmup 1 --json | tail -n 1)
  echo "$t"
  echo "$p"
  $py - "$t" "$p" <<'PY'
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{t['dtype']}: temper {t['tokens_per_s']:.1f} tok/s vs pytorch {p['tokens_per_s']:.1f} -> "
      f"{t['tokens_per_s'] / p['tokens_per_s']:.2f}x; peak RSS {t['peak_rss_mb']:.0f} MB vs "
      f"{p['peak_rss_mb']:.0f} MB -> {t['peak_rss_mb'] / p['peak_rss_mb']:.2f}x")
PY
done

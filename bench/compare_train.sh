#!/usr/bin/env bash
# temper vs PyTorch, side by side on this machine, same shape/batch/seq/threads, f32 and bf16.
# Prints each engine's JSON line and the ratios (tokens/s and peak memory). Used by `make bench`.
# Peers: PyPI torch in .venv (scripts/bootstrap --python) and, when present, Debian's python3-torch
# in .venv-debian (scripts/bootstrap --debian-torch), run with the OpenMP build of OpenBLAS.
#   bench/compare_train.sh [SHAPE] [BATCH] [SEQ] [THREADS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
shape=${1:-smollm2-135m}; batch=${2:-8}; seq=${3:-256}; threads=${4:-$(nproc)}; steps=${5:-3}
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
py=.venv/bin/python
peer() {  # peer PYTHON [ENV...]: one JSON line from bench/peers/torch_train.py
  local python=$1; shift
  env "$@" "$python" bench/peers/torch_train.py --shape "$shape" --batch "$batch" --seq "$seq" \
    --threads "$threads" --dtype "$dtype" --steps "$steps" --warmup 1 --json | tail -n 1
}
for dtype in f32 bf16; do
  t=$(build/bin/temper bench train --shape "$shape" --batch "$batch" --seq "$seq" --threads "$threads" \
        --dtype "$dtype" --steps "$steps" --warmup 1 --json)
  echo "$t"
  peers=("$(peer $py)")
  if [ -x .venv-debian/bin/python ]; then
    peers+=("$(peer .venv-debian/bin/python LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp)")
  fi
  for p in "${peers[@]}"; do
    echo "$p"
    $py - "$t" "$p" <<'PY'
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{t['dtype']}: temper {t['tokens_per_s']:.1f} tok/s vs pytorch {p['torch']} {p['tokens_per_s']:.1f} -> "
      f"{t['tokens_per_s'] / p['tokens_per_s']:.2f}x; peak RSS {t['peak_rss_mb']:.0f} MB vs "
      f"{p['peak_rss_mb']:.0f} MB -> {t['peak_rss_mb'] / p['peak_rss_mb']:.2f}x")
PY
  done
done

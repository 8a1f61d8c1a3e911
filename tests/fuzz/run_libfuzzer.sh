#!/usr/bin/env bash
# Coverage-guided fuzzing (ctest -L slow): builds the harness and the library with clang,
# libFuzzer and AddressSanitizer in build-fuzz/, then runs a fixed number of inputs from the seed
# corpus. Exit 77 (skipped) without clang.
#   run_libfuzzer.sh NAME [RUNS]
set -euo pipefail
name=$1; runs=${2:-20000}
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v clang++ >/dev/null || { echo "skipped: clang++ not installed"; exit 77; }
cmake -S "$root" -B "$root/build-fuzz" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEMPER_CUDA=OFF -DTEMPER_FUZZ=ON >/dev/null
cmake --build "$root/build-fuzz" -j 2 --target "fuzz_$name" >/dev/null
work=$(mktemp -d)
cp -r "$root/tests/fuzz/corpus/$name/." "$work/"
"$root/build-fuzz/tests/fuzz_$name" -runs="$runs" -max_len=65536 -seed=1 "$work" 2>&1 | tail -n 5
rm -rf "$work"

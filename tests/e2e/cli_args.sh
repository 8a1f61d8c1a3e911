#!/usr/bin/env bash
# Odd arguments refused before anything runs: --threads outside 1..4 x the hardware threads (0: the default) on every
# command that takes it, TEMPER_THREADS likewise, and train's --allow-changes / --fallback without --resume.
# Prints ARGS_OK.
set -uo pipefail
temper=$1
range="expected (an integer )?1 to [0-9]+ \((4 x this machine's [0-9]+ hardware threads|this machine's hardware threads are unknown)\)"
# refused PATTERN ARGS...: the command exits non-zero and says PATTERN.
refused() {
  local pattern=$1 out
  shift
  out=$("$@" 2>&1) && { echo "accepted: $*"; exit 1; }
  grep -Eq -- "$pattern" <<<"$out" || { echo "$*: expected /$pattern/, got:"; echo "$out"; exit 1; }
}
refused "^--threads: 100000: $range" "$temper" train --list-keys --threads 100000
refused "^--threads: -1: $range" "$temper" train --list-keys --threads -1
refused "^--threads: -1: $range" "$temper" generate --model none --prompt hi --threads -1
refused "^--threads: 100000: $range" "$temper" eval --model none --threads 100000
refused "^--threads: 100000: $range" "$temper" serve --model none --threads 100000
refused "^--threads: abc: $range" "$temper" bench train --quick --threads abc
refused "^--threads: -1: $range" "$temper" bench rollout --shape tiny --threads -1
# The bound itself is accepted, one more is not.
max=$("$temper" train --list-keys --threads 100000 2>&1 | sed -nE 's/.*expected 1 to ([0-9]+).*/\1/p')
[ -n "$max" ] || { echo "no bound in the message"; exit 1; }
"$temper" train --list-keys --threads "$max" > /dev/null || { echo "--threads $max refused"; exit 1; }
refused "^--threads: $((max + 1)): $range" "$temper" train --list-keys --threads $((max + 1))
out=$("$temper" bench train --quick --json --threads 1) || { echo "--threads 1: $out"; exit 1; }
grep -q '"threads":1,' <<<"$out" || { echo "--threads 1 not applied: $out"; exit 1; }
refused "TEMPER_THREADS='100000': $range" env TEMPER_THREADS=100000 "$temper" bench train --quick
refused "TEMPER_THREADS='2x': $range" env TEMPER_THREADS=2x "$temper" bench train --quick
refused "^--allow-changes requires --resume" "$temper" train --allow-changes --out /nonexistent/run
refused "^--fallback requires --resume" "$temper" train --fallback --out /nonexistent/run
refused "run.threads = 100000: expected 0 \\(every core\\) or 1 to [0-9]+" "$temper" train --out /nonexistent/run --set run.threads=100000
echo ARGS_OK

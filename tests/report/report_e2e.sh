#!/usr/bin/env bash
# e2e for `temper report`: copies the fixture run (tests/data/report/run) into the build tree, runs the
# real CLI on it and checks the page: written atomically at RUN_DIR/report.html, one chart per metric
# (19 in the fixture: 16 train + 3 eval keys; sft and train loss share a chart), the samples escaped, no external URLs. Prints REPORT_OK.
#   report_e2e.sh TEMPER FIXTURE_RUN_DIR WORK_DIR
set -euo pipefail
temper=$1 fixture=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cp -r "$fixture" "$work/run"
out=$("$temper" report "$work/run")
[ "$out" = "$work/run/report.html" ] || { echo "printed '$out', expected $work/run/report.html"; exit 1; }
html=$work/run/report.html
[ -s "$html" ] || { echo "no $html"; exit 1; }
ls "$work/run" | grep -q '\.tmp\.' && { echo "temporary file left behind"; exit 1; }
svgs=$(grep -o '<svg' "$html" | wc -l)
[ "$svgs" -eq 19 ] || { echo "expected 19 charts, found $svgs"; exit 1; }
grep -q '&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;' "$html" || { echo "sample not escaped"; exit 1; }
! grep -q '<script' "$html" || { echo "raw <script> in the page"; exit 1; }
! sed 's#xmlns="http://www.w3.org/2000/svg"##g' "$html" | grep -Eq 'https?://' || { echo "external URL in the page"; exit 1; }
# --out writes elsewhere and leaves the run directory alone.
rm "$html"
"$temper" report "$work/run" --out "$work/elsewhere.html" > /dev/null
[ -s "$work/elsewhere.html" ] && [ ! -e "$html" ] || { echo "--out not honoured"; exit 1; }
echo REPORT_OK

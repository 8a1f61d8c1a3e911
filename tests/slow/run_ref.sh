#!/usr/bin/env bash
# Runs a tools/ref script with the pinned venv; exits 77 (CTest: skipped) when the venv is absent
# (create it with `scripts/bootstrap --python`).
root=$(cd "$(dirname "$0")/../.." && pwd)
py=$root/.venv/bin/python
if [ ! -x "$py" ]; then
  echo "skipped: $py missing (run scripts/bootstrap --python)"
  exit 77
fi
exec "$py" "$@"

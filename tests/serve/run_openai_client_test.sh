#!/usr/bin/env bash
# Runs tests/serve/openai_client_test.py with the pinned openai client in .venv-client; exits 77 (CTest:
# skipped) when that venv is absent (scripts/bootstrap creates it).
root=$(cd "$(dirname "$0")/../.." && pwd)
py=$root/.venv-client/bin/python
if [ ! -x "$py" ] || ! "$py" -c "import openai" 2>/dev/null; then
  echo "skipped: $py with the openai client missing (run scripts/bootstrap)"
  exit 77
fi
exec "$py" "$root/tests/serve/openai_client_test.py" --temper "$1" --model "$2"

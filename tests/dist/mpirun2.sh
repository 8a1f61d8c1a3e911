#!/usr/bin/env bash
# Runs a command on 2 MPI ranks: mpirun_n.sh 2 (exit 77, ctest's skip, where MPI cannot start 2 ranks here).
# Usage: mpirun2.sh COMMAND [ARGS...]
exec "$(dirname "$0")/mpirun_n.sh" 2 "$@"

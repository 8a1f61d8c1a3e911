#!/usr/bin/env bash
# Runs a command on 2 MPI ranks (mpirun -np 2 --oversubscribe), time-limited. Exit 77 (ctest: skipped)
# when there is no mpirun or the MPI runtime itself cannot start 2 ranks here (probed with `true`),
# so a machine without a working MPI skips rather than fails; temper's own failures still fail.
# Usage: mpirun2.sh COMMAND [ARGS...]
set -uo pipefail
command -v mpirun > /dev/null || { echo "no mpirun: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
if ! probe=$(timeout 60 mpirun -np 2 --oversubscribe --bind-to none true 2>&1); then
  echo "the MPI runtime cannot start 2 ranks here: skipped"
  echo "$probe" | tail -5
  exit 77
fi
exec timeout 300 mpirun -np 2 --oversubscribe --bind-to none "$@"

#!/usr/bin/env bash
# Runs a command on N MPI ranks (mpirun -np N --oversubscribe), time-limited; exit 77
# (ctest: skipped) when there is no mpirun or the MPI runtime cannot start N ranks here.
# Usage: mpirun_n.sh N COMMAND [ARGS...]
set -uo pipefail
n=$1
shift
command -v mpirun > /dev/null || { echo "no mpirun: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
if ! probe=$(timeout 60 mpirun -np "$n" --oversubscribe --bind-to none true 2>&1); then
  echo "the MPI runtime cannot start $n ranks here: skipped"
  echo "$probe" | tail -5
  exit 77
fi
exec timeout 300 mpirun -np "$n" --oversubscribe --bind-to none "$@"

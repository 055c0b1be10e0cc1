#!/usr/bin/env bash
# The test suite as `make test` runs it, in three parts:
#   1. the tests of the local Slurm cluster (marked `cluster`), in one process,
#      beside
#   2. everything else but `serial`, in two pytest-xdist workers;
#   3. then the tests marked `serial` (they restart the PostgreSQL server the
#      others use), alone.
# The cluster's tests wait on Slurm (time limits, daemon outages) far more than
# they use the CPU, and no other test touches the cluster, so they run beside
# the rest instead of after it. Their output is printed once both have ended.
# Exits non-zero if any part fails; the serial part runs only if the rest passed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}

log=$(mktemp -t nasctl-cluster-tests.XXXXXX)
"$PY" -m pytest -m cluster -p no:cacheprovider >"$log" 2>&1 &
cluster=$!
trap 'kill "$cluster" 2>/dev/null; rm -f "$log"' EXIT

"$PY" -m pytest -n 2 --dist worksteal -m "not serial and not cluster"
rest=$?
wait "$cluster"
cluster_rc=$?
echo
echo "=== the local Slurm cluster's tests (pytest -m cluster), run beside the rest: exit $cluster_rc ==="
cat "$log"
if [ "$rest" -ne 0 ] || [ "$cluster_rc" -ne 0 ]; then
  exit 1
fi
"$PY" -m pytest -m serial

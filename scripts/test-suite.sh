#!/usr/bin/env bash
# The test suite as `make test` runs it, in three parts:
#   1. the tests of the local Slurm cluster (marked `cluster`), in one process,
#      then the SAASBO tests (marked `saasbo`) with the saasbo extra's folder
#      ($SAASBO_PATH, where `make install-test` puts JAX and NumPyro) on
#      PYTHONPATH, beside
#   2. everything else but `serial`, in two pytest-xdist workers, without JAX
#      (BoTorch would import it at every orchestrator's start);
#   3. then the tests marked `serial` (they restart the PostgreSQL server the
#      others use), alone.
# The cluster's tests wait on Slurm (time limits, daemon outages) far more than
# they use the CPU, and no other test touches the cluster, so they run beside
# the rest instead of after it. Their output is printed once both have ended.
# Exits non-zero if any part fails; the serial part runs only if the rest passed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
SAASBO_PATH=${SAASBO_PATH:-$(dirname "$(dirname "$PY")")/saasbo}
[ -d "$SAASBO_PATH" ] || { echo "no saasbo extra in $SAASBO_PATH: run 'make install-test'" >&2; exit 2; }

log=$(mktemp -t nasctl-cluster-tests.XXXXXX)
saasbo_log=$(mktemp -t nasctl-saasbo-tests.XXXXXX)
{
  "$PY" -m pytest -m cluster -p no:cacheprovider >"$log" 2>&1
  echo $? >"$log.rc"
  PYTHONPATH="$SAASBO_PATH${PYTHONPATH:+:$PYTHONPATH}" \
    "$PY" -m pytest -m "saasbo and not cluster and not serial" -p no:cacheprovider >"$saasbo_log" 2>&1
  echo $? >"$saasbo_log.rc"
} &
beside=$!
trap 'kill "$beside" 2>/dev/null; rm -f "$log" "$log.rc" "$saasbo_log" "$saasbo_log.rc"' EXIT

"$PY" -m pytest -n 2 --dist worksteal -m "not serial and not cluster and not saasbo"
rest=$?
wait "$beside"
cluster_rc=$(cat "$log.rc" 2>/dev/null || echo 1)
saasbo_rc=$(cat "$saasbo_log.rc" 2>/dev/null || echo 1)
echo
echo "=== the local Slurm cluster's tests (pytest -m cluster), run beside the rest: exit $cluster_rc ==="
cat "$log"
echo
echo "=== the SAASBO tests (pytest -m saasbo, JAX from $SAASBO_PATH), run after them: exit $saasbo_rc ==="
cat "$saasbo_log"
if [ "$rest" -ne 0 ] || [ "$cluster_rc" -ne 0 ] || [ "$saasbo_rc" -ne 0 ]; then
  exit 1
fi
"$PY" -m pytest -m serial

#!/usr/bin/env bash
# Mutation testing (cosmic-ray) of the loop, the store's lease and database checks,
# and the dashboard's access checks, with the tests that cover each. See
# docs/hardening.md for what it found.
#
#   scripts/mutation.sh [SAMPLE_STORE] [SAMPLE_LOOP] [SAMPLE_WEB]   (0 = every mutant)
#
# cosmic-ray lives in its own environment ($CR_VENV, default /tmp/nasctl-cr-venv):
# it pins SQLAlchemy and must not touch the project's. Each area is mutated in its
# own copy of the tree (mutants are written in place), so the three run side by
# side. Only mutants on the lines of the functions named below are kept; with a
# sample size, a seeded random sample of them. Needs root (the tests mount tmpfs
# file systems) and the machine's PostgreSQL and MariaDB.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
CR_VENV=${CR_VENV:-/tmp/nasctl-cr-venv}
WORK=${WORK:-/tmp/nasctl-mutation}
SAMPLE_STORE=${1:-30}
SAMPLE_LOOP=${2:-25}
SAMPLE_WEB=${3:-35}

[ -x "$CR_VENV/bin/cosmic-ray" ] || { python3.11 -m venv "$CR_VENV" && "$CR_VENV/bin/pip" install -q cosmic-ray==8.7.0; }
mkdir -p "$WORK"

# line ranges of the functions under test, found by name so that edits elsewhere do not shift them
ranges() {  # FILE NAME... -> "(file, first, last)" for each def NAME (up to the next def at its indent)
    "$PY" - "$@" <<'PY'
import ast, sys
path, names = sys.argv[1], set(sys.argv[2:])
tree = ast.parse(open(path).read())
out = []
for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])  # decorators count
        out.append((path.split("/")[-1], first, node.end_lineno))
print(out)
PY
}

setup() {  # AREA MODULES TESTS RANGES SAMPLE
    local area=$1 modules=$2 tests=$3 ranges=$4 sample=$5 dir=$WORK/$1
    rsync -a --delete --exclude .git --exclude .venv "$ROOT/" "$dir/"
    cat > "$dir/cr.toml" <<EOF
[cosmic-ray]
module-path = $modules
timeout = 300.0
excluded-modules = []
test-command = "env PYTHONPATH=$dir $PY -m pytest -x -q -p no:cacheprovider --timeout 240 $tests"
[cosmic-ray.distributor]
name = "local"
EOF
    (cd "$dir" && rm -f "$area.sqlite" && "$CR_VENV/bin/cosmic-ray" init cr.toml "$area.sqlite")
    "$PY" - "$dir/$area.sqlite" "$ranges" "$sample" <<'PY'
import ast, random, sqlite3, sys
db, n = sys.argv[1], int(sys.argv[3])
ranges = ast.literal_eval(sys.argv[2].replace("] + [", ", "))  # the lists of each module, joined
c = sqlite3.connect(db)
rows = c.execute("select job_id, module_path, start_pos_row from mutation_specs").fetchall()
inside = [j for j, m, r in rows if any(m.endswith(f) and a <= r <= b for f, a, b in ranges)]
keep = set(inside if n <= 0 or n >= len(inside) else random.Random(29).sample(inside, n))
print(f"{db}: {len(rows)} mutants in the modules, {len(inside)} in the functions under test, running {len(keep)}")
drop = [(j,) for j, _, _ in rows if j not in keep]
c.executemany("delete from mutation_specs where job_id=?", drop)
c.executemany("delete from work_items where job_id=?", drop)
c.commit()
PY
}

# the heartbeat check inside run(): its 4 lines, not the whole method
BEAT=$(grep -n "if now - last_beat >= HEARTBEAT_SECONDS:" "$ROOT/nasctl/orchestration/loop.py" | cut -d: -f1)

setup store '["nasctl/store/store.py", "nasctl/store/engine.py"]' \
    "tests/integration/test_store.py::test_lease tests/integration/test_store.py::test_set_work_dir_records_a_move_only_when_it_moves tests/integration/test_store.py::test_missing_sqlite_file_is_not_created_by_readers tests/unit/test_loop_resume.py::test_an_orchestrator_that_lost_its_lease_stops tests/integration/test_bad_databases.py" \
    "$(ranges "$ROOT/nasctl/store/store.py" set_work_dir acquire_lease heartbeat release_lease) + $(ranges "$ROOT/nasctl/store/engine.py" _check_sqlite_path _not_sqlite)" \
    "$SAMPLE_STORE"
setup loop '"nasctl/orchestration/loop.py"' \
    "tests/unit/test_loop_resume.py tests/e2e/test_disk_full.py" \
    "$(ranges "$ROOT/nasctl/orchestration/loop.py" _load_existing _attach_running _check_requests _cancel_too_late _disk_full _dispatch) + [('loop.py', $BEAT, $((BEAT + 3)))]" \
    "$SAMPLE_LOOP"
setup web '["nasctl/web/api.py", "nasctl/web/logs.py", "nasctl/cli/cmd_web.py"]' \
    "tests/web/test_api.py::test_writes_need_the_token_and_record_requests tests/web/test_api.py::test_a_dashboard_without_a_token_refuses_writes tests/web/test_api.py::test_nasctl_web_guards_the_host_header_when_bound_to_loopback tests/web/test_api.py::test_nasctl_web_on_loopback_refuses_a_foreign_host_header tests/web/test_api.py::test_logs_cannot_be_read_outside_the_work_dir tests/web/test_api.py::test_log_confinement_is_by_folder_not_by_name_prefix" \
    "$(ranges "$ROOT/nasctl/web/api.py" require_token) + $(ranges "$ROOT/nasctl/web/logs.py" confined_path) + $(ranges "$ROOT/nasctl/cli/cmd_web.py" is_loopback command)" \
    "$SAMPLE_WEB"

for area in store loop web; do
    (cd "$WORK/$area" && "$CR_VENV/bin/cosmic-ray" exec cr.toml "$area.sqlite" > exec.log 2>&1) &
done
wait
for area in store loop web; do
    echo "== $area"
    "$CR_VENV/bin/cr-report" --show-pending "$WORK/$area/$area.sqlite" | tail -4
done
echo "survivors: $CR_VENV/bin/cr-report $WORK/AREA/AREA.sqlite (each 'surviving' job shows its diff)"

#!/usr/bin/env bash
# The suite in two phases (`make test`). 2 cores and ~1,300 tests of which most wait on sockets, subprocesses and
# Redis: those, the slow ones (whole systems, real vLLM engines) included, run on two pytest-xdist workers, a test
# file per worker (its module fixtures built once), each with one torch/OpenMP thread (two workers × two spinning
# OpenMP threads on two cores is slower than one worker). Then, alone, the tests marked `serial`
# (tests/conftest.py): those that time the machine (`timed`: latency bounds, stop deadlines), which a neighbour
# on the other core would make flaky. Both phases always run; the status is the first failure's.
# $1 (optional): a marker expression both phases keep to, e.g. "not slow" (`make test-fast`).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=(.venv/bin/python -m pytest -q --tb=short)  # short tracebacks: a CI log shows the failing line and its message, not the helpers
keep=${1:-}
and=${keep:+ and ($keep)}
# the first phase's collection lists the files that hold a serial test (tests/conftest.py): the second collects
# only those (all of tests/ when the list is missing or empty)
serial_files=$(mktemp)
trap 'rm -f "$serial_files"' EXIT
start=$(date +%s)
# --no-loadscope-reorder: files in the order tests/conftest.py gives (the slow ones first)
SLCA_SERIAL_FILES=$serial_files OMP_NUM_THREADS=1 "${PYTEST[@]}" -n 2 --dist loadfile --no-loadscope-reorder \
  -m "not serial$and" --durations=20 tests
parallel=$?
mid=$(date +%s)
mapfile -t where < "$serial_files"
[ "${#where[@]}" -gt 0 ] || where=(tests)
"${PYTEST[@]}" -m "serial$and" --durations=20 "${where[@]}"
serial=$?
end=$(date +%s)
echo "tests: parallel phase $(( mid - start )) s (status $parallel), serial phase $(( end - mid )) s (status $serial)"
# 5: a phase selected no test (e.g. a -m filter that leaves none for it) is not a failure
for s in $parallel $serial; do [ "$s" = 0 ] || [ "$s" = 5 ] || exit "$s"; done
exit 0

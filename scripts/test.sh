#!/usr/bin/env bash
# `make test` after set-up: the unit tests and the notebooks under nbval, side by side. Run one after the other they
# took ~32 min on 2 cores, with a core idle most of the unit stage (its tests mostly wait on the clusters, SSH hosts
# and CLIs they start); side by side, with three unit workers (Makefile's UNIT_WORKERS), both cores stay busy.
# Each suite writes its own log (.test-logs/) and the log is printed whole when the suite ends, so their lines
# never interleave. Exit status: non-zero if either suite failed.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=.test-logs
mkdir -p "$logs"
start=$(date +%s)
if [ -f RELEASE.md ]; then  # a student release (nmtkit release): its notebooks wait for the student's answers
  echo "[test] a student release: the unit tests only (the notebooks hold your exercises; run them in JupyterLab)"
  exec make --no-print-directory unit
fi
# The linter first, in seconds: a finding fails the run before the half hour of suites (rules: pyproject.toml).
echo "[test] ruff check nmtkit tools bench tests"
if ! ruff check nmtkit tools bench tests; then
  echo "[test] FAILED: ruff's findings above (\`ruff check --fix\` sorts imports; the rest by hand), then make test again"
  exit 1
fi
echo "[test] unit tests and notebooks side by side; logs: $logs/unit.log, $logs/notebooks.log"
make --no-print-directory unit >"$logs/unit.log" 2>&1 &
unit=$!
make --no-print-directory notebooks >"$logs/notebooks.log" 2>&1 &
notebooks=$!

status=0
for suite in unit notebooks; do
  pid=${!suite}
  wait "$pid"; rc=$?
  echo "===================== make $suite: exit $rc ($(( $(date +%s) - start )) s since the start) ====================="
  cat "$logs/$suite.log"
  [ "$rc" -eq 0 ] || status=1
done
echo "[test] both suites done in $(( $(date +%s) - start )) s: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status

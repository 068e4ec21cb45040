#!/usr/bin/env bash
# `make test-all` (what CI runs): the quick suites of `make test`, the long tier, then the heavy ones in tests/heavy/
# (Docker images, the release's own set-up and tests, Horovod's GPU-mode compile, the class's hub). Exit status:
# non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=.test-logs
mkdir -p "$logs"
start=$(date +%s)
status=0
bash scripts/test.sh || status=1
echo "[test-all] the long tier (make long: tests/conftest.py's LONG); log: $logs/long.log"
make --no-print-directory long >"$logs/long.log" 2>&1; rc=$?
tail -n 25 "$logs/long.log"
[ "$rc" -eq 0 ] || status=1
echo "[test-all] long tier: exit $rc ($(( $(date +%s) - start )) s since the start)"
echo "[test-all] the heavy suites (tests/heavy/); log: $logs/heavy.log"
"${PY:-.venv/bin/python}" -m pytest tests/heavy -q -p no:cacheprovider --durations=15 --junitxml="$logs/heavy.xml" \
  2>&1 | tee "$logs/heavy.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=1  # 5: pytest collected no heavy test
echo "[test-all] done in $(( $(date +%s) - start )) s: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status

#!/usr/bin/env bash
# `make test-all` (what CI runs): the quick suites of `make test`, the long tier, then the heavy ones in tests/heavy/
# (Docker images, the release's own set-up and tests, Horovod's GPU-mode compile, the class's hub), and a table of
# each tier's seconds against its budget (scripts/budget.sh). Exit status: non-zero if any failed.
#
# Tiers in parallel: `make test` runs its unit tests and notebooks side by side (scripts/test.sh), `make long` on
# three workers. The long tier and the heavy suites run one after the other: both keep the 2 cores busy (clusters of
# TensorFlow processes; the course, grading and compiles), so side by side they would share the same cores for no
# gain, while the long tier's deadlines (engines started, ranks joined) would get half the CPU. The heavy suites run on
# two pytest-xdist workers, a suite's tests together (tests/heavy/conftest.py's GROUPS), on one image built first.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=.test-logs
mkdir -p "$logs"
py=${PY:-.venv/bin/python}
start=$(date +%s)
status=0
tiers="$logs/tiers.tsv"  # tier, seconds, exit status: read by scripts/budget.sh
[ -n "${NMTKIT_SETUP_SECONDS:-}" ] && printf 'set-up\t%s\t0\n' "$NMTKIT_SETUP_SECONDS" > "$tiers" || : > "$tiers"
tier() { printf '%s\t%s\t%s\n' "$1" "$(( $(date +%s) - $2 ))" "$3" >> "$tiers"; }

t=$(date +%s)
bash scripts/test.sh; rc=$?
[ "$rc" -eq 0 ] || status=1
tier "make test" "$t" "$rc"

t=$(date +%s)
echo "[test-all] the long tier (make long: tests marked long); log: $logs/long.log"
make --no-print-directory long >"$logs/long.log" 2>&1; rc=$?
tail -n 25 "$logs/long.log"
[ "$rc" -eq 0 ] || status=1
tier long "$t" "$rc"
echo "[test-all] long tier: exit $rc ($(( $(date +%s) - start )) s since the start)"

t=$(date +%s)
echo "[test-all] the heavy suites (tests/heavy/); log: $logs/heavy.log"
built=$(mktemp -d "${TMPDIR:-/tmp}/nmtkit-image.XXXXXX")
if [ -d nmtkit/course/instructor ] && [ -x /usr/bin/docker ] && /usr/bin/docker info >/dev/null 2>&1; then
  # the students' image, once for every suite and worker (tests/heavy/imagebuild.py)
  if "$py" tests/heavy/imagebuild.py build "$built" >"$logs/image.log" 2>&1; then
    tail -n 3 "$logs/image.log"
    export NMTKIT_TEST_IMAGE NMTKIT_TEST_RELEASE
    NMTKIT_TEST_IMAGE=$(sed -n 's/^NMTKIT_TEST_IMAGE=//p' "$logs/image.log")
    NMTKIT_TEST_RELEASE=$(sed -n 's/^NMTKIT_TEST_RELEASE=//p' "$logs/image.log")
  else
    tail -n 40 "$logs/image.log"
    echo "[test-all] the students' image did not build (log: $logs/image.log); the suites that need it fail"
    status=1
  fi
fi
# the arm64 suites run in their own tier below (test_arm64_course.py: `make test-arm64` only)
"$py" -m pytest tests/heavy -q -rs -n 2 --dist loadgroup -p no:cacheprovider --durations=15 \
  --ignore=tests/heavy/test_arm64.py --ignore=tests/heavy/test_arm64_course.py \
  --junitxml="$logs/heavy.xml" 2>&1 | tee "$logs/heavy.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=1  # 5: pytest collected no heavy test
tier heavy "$t" "$rc"

# The students' linux/arm64 image under QEMU (Apple Silicon's): built from a release as the amd64 one, kept between
# runs with its build cache (a warm rebuild redoes the kit's last layers; cold, with the aarch64 Horovod wheel, ~55
# min: bench/README.md, issue 73), then its suite, which also
# pushes both images as one name (an OCI index) to a registry on localhost: so the amd64 image is removed after it
t=$(date +%s)
echo "[test-all] the arm64 tier (tests/heavy/test_arm64.py, under QEMU); log: $logs/arm64.log"
arm=$(mktemp -d "${TMPDIR:-/tmp}/nmtkit-arm64.XXXXXX")
if [ ! -d nmtkit/course/instructor ] || ! /usr/bin/docker info >/dev/null 2>&1; then
  echo "[test-all] no arm64 tier: it needs the instructor's kit and a running dockerd (as the heavy suites)"; rc=0
elif [ -n "${NMTKIT_TEST_IMAGE:-}" ] && "$py" tests/heavy/imagebuild.py build-arm64 "$arm" >"$logs/image-arm64.log" 2>&1; then
  tail -n 3 "$logs/image-arm64.log"
  export NMTKIT_TEST_ARM64_IMAGE NMTKIT_TEST_ARM64_RELEASE
  NMTKIT_TEST_ARM64_IMAGE=$(sed -n 's/^NMTKIT_TEST_ARM64_IMAGE=//p' "$logs/image-arm64.log")
  NMTKIT_TEST_ARM64_RELEASE=$(sed -n 's/^NMTKIT_TEST_ARM64_RELEASE=//p' "$logs/image-arm64.log")
  "$py" -m pytest tests/heavy/test_arm64.py -q -s -rs -p no:cacheprovider --junitxml="$logs/arm64.xml" 2>&1 |
    tee "$logs/arm64.log"
  rc=${PIPESTATUS[0]}
else
  tail -n 40 "$logs/image-arm64.log" 2>/dev/null
  echo "[test-all] the arm64 image did not build (log: $logs/image-arm64.log), or the amd64 one is missing"
  rc=1
fi
rm -rf "$arm"
[ "$rc" -eq 0 ] || status=1
tier arm64 "$t" "$rc"
"$py" tests/heavy/imagebuild.py remove "$built" >>"$logs/image.log" 2>&1
rm -rf "$built"

echo "[test-all] done in $(( $(date +%s) - start )) s: $([ $status -eq 0 ] && echo passed || echo FAILED)"
bash scripts/budget.sh "$tiers"
exit $status

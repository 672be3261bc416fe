#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies, builds, checks the layer
# order of the sources (scripts/check-layers.py), runs the Catch2 tests
# (tests/'s mmfs-unit-tests, bench/'s mmfs-bench-tests) and the pytest
# integration tests (pjdfstest among them), and ends with one line
# "N passed, M failed" (totals over all). Exits non-zero if anything failed.
#
#   scripts/test.sh               against build/
#   scripts/test.sh --sanitize    against build-asan/ (ASan + UBSan)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

sanitize=${MMFS_SANITIZE:-0}
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg' (accepted: --sanitize)" >&2; exit 2 ;;
  esac
done
if [[ $sanitize == 1 ]]; then
  build_dir=$root/build-asan
  build_args=(--sanitize)
else
  build_dir=$root/build
  build_args=()
fi

bash scripts/install-deps.sh --tests
bash scripts/build.sh "${build_args[@]}"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
strip_colour() { sed 's/\x1b\[[0-9;]*m//g' "$1"; }

passed=0
failed=0

# --- the layer order of the sources (scripts/check-layers.py) ---------------
echo
echo "=== layers: scripts/check-layers.py"
if python3 scripts/check-layers.py; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

# --- Catch2 tests ----------------------------------------------------------
# catch2_suite LABEL BINARY: runs one Catch2 binary and adds its test cases to
# the totals (a crash or a missing binary counts every test case as failed).
catch2_suite() {
  local label=$1 bin=$2
  local log out summary rc=0 pass=0 fail=0 xfail=0
  log=$logs/$(basename "$bin").txt
  echo
  echo "=== $label: ${bin#"$root"/}"
  "$bin" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
  out=$(strip_colour "$log")
  if summary=$(grep -E '^All tests passed \(' <<<"$out" | tail -n1) && [[ -n $summary ]]; then
    # "All tests passed (12 assertions in 3 test cases)"
    pass=$(sed -E 's/.* in ([0-9]+) test cases?\).*/\1/' <<<"$summary")
  elif summary=$(grep -E '^test cases:' <<<"$out" | tail -n1) && [[ -n $summary ]]; then
    # "test cases: 5 | 3 passed | 1 failed | 1 failed as expected" (zero columns omitted)
    pass=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
    fail=$(grep -oE '[0-9]+ failed( \||$)' <<<"$summary" | grep -oE '[0-9]+' | head -n1 || echo 0)
    xfail=$(grep -oE '[0-9]+ failed as expected' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
    pass=$((pass + xfail))
  elif grep -qE '^No tests ran' <<<"$out"; then
    :
  else
    # No summary: the binary crashed, was missing, or was killed. Count every
    # test case it holds as failed.
    fail=$("$bin" --list-test-names-only 2>/dev/null | grep -c . || true)
    [[ $fail -gt 0 ]] || fail=1
    echo "test.sh: ${bin##*/} exited with status $rc without a summary" >&2
  fi
  if [[ $rc -ne 0 && $fail -eq 0 ]]; then
    # E.g. a sanitizer report at exit after every test case passed.
    echo "test.sh: ${bin##*/} exited with status $rc" >&2
    fail=1
  fi
  passed=$((passed + pass))
  failed=$((failed + fail))
}

catch2_suite "unit tests" "$build_dir/tests/mmfs-unit-tests"
catch2_suite "bench tests" "$build_dir/bench/mmfs-bench-tests"

# --- pytest integration tests ----------------------------------------------
echo
echo "=== integration tests: tests/integration"
py_rc=0
MMFS_BUILD=$build_dir python3 -m pytest tests/integration -q --durations=15 2>&1 | tee "$logs/pytest.txt" || py_rc=${PIPESTATUS[0]}
# The last line: "2 failed, 14 passed, 1 skipped in 1.23s" (or "no tests ran in 0.01s").
py_summary=$(strip_colour "$logs/pytest.txt" | grep -E ' in [0-9.]+s' | tail -n1 || true)
count() { grep -oE "[0-9]+ $1" <<<"$py_summary" | grep -oE '[0-9]+' | head -n1 || echo 0; }
p_pass=$(count passed)
p_fail=$(($(count failed) + $(count errors?)))
case $py_rc in
  0 | 5) ;;  # 5: no tests collected
  1) [[ $p_fail -gt 0 ]] || p_fail=1 ;;
  *)
    echo "test.sh: pytest exited with status $py_rc" >&2
    [[ $p_fail -gt 0 ]] || p_fail=1
    ;;
esac
passed=$((passed + p_pass))
failed=$((failed + p_fail))

# pjdfstest ran inside pytest (tests/integration/test_pjdfstest.py, counted
# there as one test); its summary line again, next to the totals.
pjd=$(strip_colour "$logs/pytest.txt" | grep -E '^pjdfstest [0-9.]+: ' | tail -n1 || true)

echo
echo "${pjd:-pjdfstest: no summary (skipped, or failed before it ran: see the pytest output above)}"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]

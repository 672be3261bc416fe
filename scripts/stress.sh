#!/usr/bin/env bash
# The outside suites with long counts, for a release or a night run:
# the same pytest modules scripts/test.sh runs with CI counts, here with
#
#   fsx-rs           MMFS_FSX_OPS=1000000       per run (a plain and an array file,
#                                               and the plain one on /var/tmp's
#                                               filesystem; fsx processes of
#                                               MMFS_FSX_OPS_PER_PROCESS=100000)
#   O_DIRECT checker MMFS_ODIRECT_OPS=100000    per run (a plain and an array file)
#   metadata churn   MMFS_CHURN_SECONDS=600     4 processes (MMFS_CHURN_WORKERS)
#   concurrency soak MMFS_SOAK_SECONDS=600      16 readers of views, 2 writers
#   crash campaign   MMFS_CRASH_POINTS=10000    SIGKILLs of the daemon under load
#
# Each variable already set in the environment wins (e.g. MMFS_FSX_OPS=300000
# for a shorter fsx run; CI runs 100,000); so do the seeds MMFS_FSX_SEED,
# MMFS_ODIRECT_SEED, MMFS_CHURN_SEED, MMFS_SOAK_SEED and MMFS_CRASH_SEED.
# About an hour and ten minutes on a 2-core machine (fsx runs at roughly
# 1,000 ops/s on mmfs), plus about three hours for the crash campaign (~1 s
# per crash point). Builds first, like test.sh; extra arguments go to pytest
# (e.g. -k soak, -k crash). Exits non-zero if anything failed; each run's
# rate is printed at the end of the pytest output.
#
#   scripts/stress.sh               against build/
#   MMFS_BUILD=build-asan scripts/stress.sh   against another build directory
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case "${1:-}" in
  -h|--help) sed -n '2,24s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac

export MMFS_FSX_OPS=${MMFS_FSX_OPS:-1000000}
export MMFS_ODIRECT_OPS=${MMFS_ODIRECT_OPS:-100000}
export MMFS_CHURN_SECONDS=${MMFS_CHURN_SECONDS:-600}
export MMFS_SOAK_SECONDS=${MMFS_SOAK_SECONDS:-600}
export MMFS_CRASH_POINTS=${MMFS_CRASH_POINTS:-10000}
export MMFS_BUILD=${MMFS_BUILD:-$PWD/build}

bash scripts/install-deps.sh --tests
if [[ $MMFS_BUILD == "$PWD/build" ]]; then
  bash scripts/build.sh
fi

echo "stress: fsx $MMFS_FSX_OPS ops, O_DIRECT $MMFS_ODIRECT_OPS ops, churn $MMFS_CHURN_SECONDS s," \
  "soak $MMFS_SOAK_SECONDS s, $MMFS_CRASH_POINTS crash points ($MMFS_BUILD)"
exec python3 -m pytest -q -rA tests/integration/test_outside_fsx.py tests/integration/test_outside_odirect.py \
  tests/integration/test_outside_churn.py tests/integration/test_soak.py tests/integration/test_crash_campaign.py "$@"

# Shared plumbing of the example walk-throughs (sourced, not run).
#
# The walk-throughs themselves (earthquake/walkthrough.sh, s3d/walkthrough.sh)
# spell out every mmfs step: mkfs, mount, import, views, unmount, fsck. This
# file only holds what would distract from them: argument parsing, finding
# the built tools, printing, timing, and the clean-up that ALWAYS unmounts.
#
# A walk-through sets EXAMPLE (its name), DEFAULT_SCALE and a usage text
# (USAGE), sources this file, then calls `parse_args "$@"`, `find_tools`,
# `prepare_workdir`, and `start_cleanup_trap`.

EXAMPLES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$EXAMPLES_DIR/.." && pwd)
COMMON_DIR=$EXAMPLES_DIR/common
PY_COMMON=$COMMON_DIR   # plot_slice.py, plan_table.py, mmfsview.py

SCALE=
WORK=
BUILD=
KEEP=0
DAEMON_PID=
MNT=
IMAGE=
OUT=
INPUT_DIR=
STEP_NAMES=()
STEP_SECONDS=()
_step_started=

die() { printf '%s: %s\n' "$EXAMPLE" "$*" >&2; exit 2; }

parse_args() {
  SCALE=$DEFAULT_SCALE
  WORK=/var/tmp/mmfs-example-$EXAMPLE
  BUILD=${MMFS_BUILD:-$REPO_ROOT/build}
  while [[ $# -gt 0 ]]; do
    case $1 in
      --scale) [[ $# -ge 2 ]] || die "--scale needs a value"; SCALE=$2; shift 2 ;;
      --scale=*) SCALE=${1#*=}; shift ;;
      --workdir) [[ $# -ge 2 ]] || die "--workdir needs a value"; WORK=$2; shift 2 ;;
      --workdir=*) WORK=${1#*=}; shift ;;
      --build) [[ $# -ge 2 ]] || die "--build needs a value"; BUILD=$2; shift 2 ;;
      --build=*) BUILD=${1#*=}; shift ;;
      --keep) KEEP=1; shift ;;
      -h|--help) printf '%s\n' "$USAGE"; exit 0 ;;
      *) printf '%s\n' "$USAGE" >&2; die "unknown argument: $1" ;;
    esac
  done
  [[ $SCALE =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] &&
    awk -v f="$SCALE" 'BEGIN { exit !(f > 0 && f <= 64) }' ||
    die "--scale must be a number in (0, 64], got '$SCALE'"
}

# The tools the walk-throughs need, from $BUILD (--build, else $MMFS_BUILD, else <repo>/build).
find_tools() {
  BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || die "build directory not found: $BUILD (use --build DIR or MMFS_BUILD)"
  MKFS=$BUILD/mkfs/mkfs.mmfs
  MMFS=$BUILD/daemon/mmfs
  IMPORT=$BUILD/tools/mmfs-import
  EXPORT=$BUILD/tools/mmfs-export
  FSCK=$BUILD/tools/mmfsck
  local tool missing=0
  for tool in "$MKFS" "$MMFS" "$IMPORT" "$EXPORT" "$FSCK"; do
    if [[ ! -x $tool ]]; then
      printf '%s: %s is not built\n' "$EXAMPLE" "$tool" >&2
      missing=1
    fi
  done
  if [[ $missing == 1 ]]; then
    die "build mmfs first (bash scripts/build.sh; mmfs-import/mmfs-export need libhdf5-dev), or point --build / MMFS_BUILD at a build directory that has these tools"
  fi
  python3 -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('numpy', 'h5py', 'matplotlib')))" 2>/dev/null ||
    die "python3 needs numpy, h5py and matplotlib (bash scripts/install-deps.sh installs them)"
  command -v fusermount3 >/dev/null || die "fusermount3 is missing (apt-get install fuse3)"
  command -v getfattr >/dev/null || die "getfattr/setfattr are missing (apt-get install attr)"
  [[ -e /dev/fuse ]] || die "/dev/fuse is missing: FUSE is not available here"
}

# $WORK/input (the generated HDF5; with --keep, reused by the next run of the
# same scale), $WORK/vol.img (the mmfs volume), $WORK/mnt (its mount point) and
# $WORK/out (the PNGs, the exported HDF5 file, the daemon's log: always kept).
prepare_workdir() {
  mkdir -p "$WORK"
  WORK=$(cd "$WORK" && pwd)
  IMAGE=$WORK/vol.img
  MNT=$WORK/mnt
  OUT=$WORK/out
  INPUT_DIR=$WORK/input
  if is_mounted "$MNT"; then
    die "$MNT is still mounted (a --keep run?): unmount it first with: fusermount3 -u $MNT"
  fi
  mkdir -p "$MNT" "$OUT" "$INPUT_DIR"
  rm -f "$IMAGE"
}

# Is $1 a mount point? Read from /proc/self/mountinfo: never blocks on a FUSE
# daemon that stopped answering (a stat of the mount point would).
is_mounted() {
  local target
  target=$(realpath -m "$1" | sed 's/ /\\040/g')
  awk -v m="$target" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# Starts the daemon in the foreground (-f) as our background job, so that we
# know its pid, and waits until the mount is up. Extra arguments: mmfs options.
mount_volume() {
  "$MMFS" -f "$@" "$IMAGE" "$MNT" >>"$OUT/daemon.log" 2>&1 &
  DAEMON_PID=$!
  local i
  for i in $(seq 150); do
    is_mounted "$MNT" && return 0
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    sleep 0.1
  done
  cat "$OUT/daemon.log" >&2
  if kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill "$DAEMON_PID" 2>/dev/null   # our own child, by its pid: it never mounted
  fi
  die "the mmfs daemon did not mount $IMAGE on $MNT"
}

# Waits (at most $1 seconds) for the daemon to exit; returns its exit status.
# A daemon still running after that is stopped with SIGTERM (it is our child).
wait_daemon() {
  local i
  for i in $(seq $(( ${1:-120} * 10 ))); do
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$DAEMON_PID" 2>/dev/null; then
    echo "$EXAMPLE: the daemon (pid $DAEMON_PID) did not exit; sending SIGTERM" >&2
    kill "$DAEMON_PID" 2>/dev/null
  fi
  local status=0
  wait "$DAEMON_PID" || status=$?
  DAEMON_PID=
  return $status
}

# fusermount3 -u (retried while the mount is busy); the daemon then writes
# everything dirty, syncs and exits 0. Falls back to a lazy unmount.
unmount_volume() {
  cd "$WORK"
  if is_mounted "$MNT"; then
    local i
    for i in $(seq 50); do
      fusermount3 -u "$MNT" 2>/dev/null && break
      is_mounted "$MNT" || break
      sleep 0.1
    done
    if is_mounted "$MNT"; then
      echo "$EXAMPLE: $MNT is busy; unmounting lazily" >&2
      fusermount3 -uz "$MNT" || true
    fi
  fi
  if [[ -n $DAEMON_PID ]]; then
    wait_daemon 120   # it writes everything dirty and syncs before exiting
  fi
}

# Runs on every exit (success, failure, Ctrl-C): unmounts, then removes the
# image and the generated input unless --keep. $OUT stays.
_cleanup() {
  local rc=$?
  set +e
  [[ -n $MNT ]] || exit $rc   # nothing was set up yet
  unmount_volume >/dev/null 2>&1
  if [[ $KEEP == 1 ]]; then
    printf '\n%s: kept %s (remount with: %s %s %s)\n' "$EXAMPLE" "$WORK" "$MMFS" "$IMAGE" "$MNT"
  else
    rm -f "$IMAGE" "$INPUT_DIR"/*-scale*.h5 "$INPUT_DIR"/*-scale*.h5.part
    rmdir "$MNT" "$INPUT_DIR" 2>/dev/null
  fi
  if [[ $rc != 0 ]]; then
    printf '\n%s: FAILED (exit %s); the volume is unmounted. Daemon log: %s/daemon.log\n' "$EXAMPLE" "$rc" "$OUT" >&2
  fi
  exit $rc
}

start_cleanup_trap() {
  trap _cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# --- printing -------------------------------------------------------------------

# step "title": a numbered section; records how long the previous one took.
step() {
  _end_step
  STEP_NAMES+=("$*")
  _step_started=$EPOCHREALTIME
  printf '\n=== %d. %s\n' "${#STEP_NAMES[@]}" "$*"
}

_end_step() {
  if [[ -n $_step_started ]]; then
    STEP_SECONDS+=("$(awk -v a="$_step_started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')")
    _step_started=
  fi
}

# A comment for the reader, wrapped in the output.
say() { printf '%s\n' "$*" | fold -s -w 100 | sed 's/^/   /'; }

# show CMD...: prints "$ CMD" (paths shortened) and runs it. The command is a
# single string evaluated by bash, so it may contain pipes and redirections.
show() {
  local shown=${1//"$MNT"/\$MNT}
  shown=${shown//"$WORK"/\$WORK}
  shown=${shown//"$BUILD"/\$BUILD}
  shown=${shown//"$EXAMPLES_DIR"/\$EXAMPLES}
  printf '$ %s\n' "$shown"
  eval "$1"
}

TIMEFORMAT='   (took %R s)'   # the output of bash's `time`

timing_summary() {
  _end_step
  printf '\n=== Timing\n'
  local i
  for i in "${!STEP_NAMES[@]}"; do
    printf '  %6s s  %d. %s\n' "${STEP_SECONDS[$i]:-?}" "$((i + 1))" "${STEP_NAMES[$i]}"
  done
}

# Image size for DATA_BYTES of arrays: room for every array twice (a relayout
# builds the new placement before it frees the old one) plus MultiMap's
# padding, and the metadata. The image file is sparse: only what is written
# takes disk space.
image_size_for() {
  awk -v b="$1" 'BEGIN { m = (3 * b + 512 * 2^20) / 2^20; printf "%dM\n", (m == int(m)) ? m : int(m) + 1 }'
}

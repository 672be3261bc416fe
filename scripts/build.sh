#!/usr/bin/env bash
# Configures (or reconfigures) and builds mmfs with meson + ninja.
#
#   scripts/build.sh               -> build/        (release, -O2)
#   scripts/build.sh --sanitize    -> build-asan/   (-Dsanitize=true: ASan + UBSan)
#   MMFS_SANITIZE=1 scripts/build.sh   same as --sanitize
#
# Extra arguments after the options are passed to `meson setup` (e.g. -Dtests=false).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

sanitize=${MMFS_SANITIZE:-0}
meson_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitize) sanitize=1 ;;
    -h|--help) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) meson_args+=("$1") ;;
  esac
  shift
done

if [[ $sanitize == 1 ]]; then
  build_dir=build-asan
  meson_args+=(-Dsanitize=true)
else
  build_dir=build
  meson_args+=(-Dsanitize=false)
fi

# ccache (meson uses it when installed): the unit tests' precompiled header is
# cacheable only with this sloppiness (meson passes -fpch-preprocess), and the
# cache is kept outside the tree so a fresh clone reuses it.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}

if [[ -f $build_dir/meson-private/coredata.dat ]]; then
  meson setup --reconfigure "$build_dir" "${meson_args[@]}"
else
  # A directory left by a failed first setup holds no configuration: start afresh.
  rm -rf "$build_dir"
  meson setup "$build_dir" "${meson_args[@]}"
fi
ninja -C "$build_dir"

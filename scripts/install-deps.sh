#!/usr/bin/env bash
# Installs what building and running mmfs needs on Debian 12 (bookworm); with
# --tests also what only the test suite needs (the user `tests`, pjdfstest and
# fsx built by cargo: minutes on a fresh machine). Idempotent: installs only
# what is missing, so it is fast on a ready machine. Run as root (or with sudo
# available) when something has to be installed.
#
#   scripts/install-deps.sh           build, mount, read (scripts/demo.sh)
#   scripts/install-deps.sh --tests   and the test suite's tools (scripts/test.sh)
set -euo pipefail

for_tests=0
for arg in "$@"; do
  case "$arg" in
    --tests) for_tests=1 ;;
    -h|--help) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown argument '$arg' (accepted: --tests)" >&2; exit 2 ;;
  esac
done

APT_PACKAGES=(
  meson ninja-build pkg-config g++
  ccache   # meson compiles through it when present: a rebuild in a fresh clone reuses unchanged objects
  libfuse3-dev fuse3 libhdf5-dev libzstd-dev libroaring-dev liburing-dev
  catch2 nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  attr fio
  python3 python3-pip
  libacl1-dev curl ca-certificates
  libnbd-dev nbdkit   # NBD targets (fs/device/nbd_device.*) and their tests' servers (memory, file plugins)
)
PIP_PACKAGES=(numpy h5py hdf5plugin pytest matplotlib zarr duckdb pyroaring)

log() { printf 'install-deps: %s\n' "$*"; }

# Runs a command quietly; on failure shows its full output and fails.
quiet() {
  local out rc=0
  out=$(mktemp)
  "$@" >"$out" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    cat "$out" >&2
    rm -f "$out"
    printf 'install-deps: failed (exit %d): %s\n' "$rc" "$*" >&2
    return "$rc"
  fi
  rm -f "$out"
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    printf 'install-deps: need root to run: %s\n' "$*" >&2
    return 1
  fi
}

installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  quiet as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  quiet as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! python3 -c 'import numpy, h5py, hdf5plugin, pytest, matplotlib, zarr' >/dev/null 2>&1; then
  log "installing Python packages: ${PIP_PACKAGES[*]}"
  # Debian 12's python3 is "externally managed" (PEP 668); this tells pip to
  # install anyway (older pips ignore the variable).
  quiet env PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    python3 -m pip install -q "${PIP_PACKAGES[@]}"
  python3 -c 'import numpy, h5py, hdf5plugin, pytest, matplotlib, zarr' || {
    log "Python packages still not importable after pip install" >&2
    exit 1
  }
fi

# --- the Python client, python/ (import mmfs; xarray's engine "mmfs") -----------------
# Installed from this checkout every time (a copy, not a link), so the
# installed package is always this tree's.
log "installing the Python client (python/)"
quiet env PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
  python3 -m pip install -q "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/python"

if [[ $for_tests == 0 ]]; then
  exit 0
fi

# --- the Python client's optional dependencies (tests/integration/test_python_*.py) ----
# h5netcdf: xarray's netCDF-4 engine (test_python_netcdf.py's round trips);
# tensorstore: a stock reader of the Zarr v3 view (test_zarr_view.py).
if ! python3 -c 'import xarray, dask.array, pandas, tqdm, h5netcdf, tensorstore' >/dev/null 2>&1; then
  log "installing Python packages: xarray dask[array] pandas tqdm h5netcdf tensorstore"
  quiet env PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    python3 -m pip install -q xarray 'dask[array]' pandas tqdm h5netcdf tensorstore
  python3 -c 'import xarray, dask.array, pandas, tqdm, h5netcdf, tensorstore' || {
    log "Python packages still not importable after pip install" >&2
    exit 1
  }
fi

# --- pjdfstest (tests/integration/test_pjdfstest.py) ---------------------------------
# The POSIX conformance suite's Rust rewrite, from crates.io, built by cargo
# into /opt/pjdfstest-VERSION (it needs libacl1-dev, above, and Rust 1.85 or
# later: rustup's toolchain, since Debian 12's cargo is 1.63). Its user
# switching needs the users nobody (group nogroup) and tests. A failure here
# is reported, not fatal: the test then fails (or skips when there is no
# cargo at all) and the rest of the suite still runs.
PJDFSTEST_VERSION=0.2.2
PJDFSTEST_ROOT=/opt/pjdfstest-$PJDFSTEST_VERSION

if ! id -u tests >/dev/null 2>&1; then
  log "creating the user 'tests' (pjdfstest and the permission tests switch to it)"
  as_root useradd --system --user-group --no-create-home --home-dir / --shell /usr/sbin/nologin tests ||
    log "could not create the user 'tests': test_pjdfstest.py will fail" >&2
fi

# A cargo of Rust 1.85 or later: on PATH, in ~/.cargo/bin, or installed by rustup.
find_cargo() {
  local c v
  for c in "$(command -v cargo 2>/dev/null)" "$HOME/.cargo/bin/cargo"; do
    [[ -n $c && -x $c ]] || continue
    v=$("$c" --version 2>/dev/null | awk '{print $2}')
    # 1.85.0 or later (major 1 assumed; a 2.x would pass too)
    if [[ ${v%%.*} -gt 1 || (${v%%.*} -eq 1 && $(cut -d. -f2 <<<"$v") -ge 85) ]]; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

# Prints the path of a cargo that find_cargo finds, after installing the Rust
# toolchain with rustup when there is none.
ensure_cargo() {
  local cargo
  if ! cargo=$(find_cargo); then
    log "installing the Rust toolchain with rustup (pjdfstest needs Rust 1.85 or later)" >&2
    local init
    init=$(mktemp)
    quiet curl --proto '=https' --tlsv1.2 -sSf -o "$init" https://sh.rustup.rs || { rm -f "$init"; return 1; }
    quiet sh "$init" -y --profile minimal --no-modify-path || { rm -f "$init"; return 1; }
    rm -f "$init"
    cargo=$(find_cargo) || return 1
  fi
  echo "$cargo"
}

# cargo_install_opt CRATE VERSION BINARY: builds CRATE VERSION from crates.io
# (with its own Cargo.lock) and installs its executable BINARY as
# /opt/CRATE-VERSION/bin/BINARY. Built as the current user (whose toolchain
# it is), installed as root.
cargo_install_opt() {
  local crate=$1 version=$2 binary=$3 cargo
  cargo=$(ensure_cargo) || return 1
  log "building $crate $version from crates.io into /opt/$crate-$version (a minute or a few, once)"
  local staging rc=0
  staging=$(mktemp -d)
  quiet env PATH="$(dirname "$cargo"):$PATH" "$cargo" install "$crate" --version "$version" --locked \
    --root "$staging" &&
    quiet as_root install -D -m 755 "$staging/bin/$binary" "/opt/$crate-$version/bin/$binary" || rc=$?
  rm -rf "$staging"
  return "$rc"
}

if [[ ! -x $PJDFSTEST_ROOT/bin/pjdfstest ]]; then
  cargo_install_opt pjdfstest "$PJDFSTEST_VERSION" pjdfstest ||
    log "could not install pjdfstest $PJDFSTEST_VERSION: test_pjdfstest.py will fail or skip" >&2
fi

# --- fsx-rs (tests/integration/test_outside_fsx.py) ------------------------------------
# The File System eXerciser's Rust rewrite ("fsx" on crates.io, Rust 1.82 or
# later), built by cargo into /opt/fsx-VERSION like pjdfstest above. A failure
# here is reported, not fatal: test_outside_fsx.py then fails (or skips when
# there is no cargo at all).
FSX_VERSION=0.3.2
FSX_ROOT=/opt/fsx-$FSX_VERSION

if [[ ! -x $FSX_ROOT/bin/fsx ]]; then
  cargo_install_opt fsx "$FSX_VERSION" fsx || log "could not install fsx $FSX_VERSION: test_outside_fsx.py will fail or skip" >&2
fi

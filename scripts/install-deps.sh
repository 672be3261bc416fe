#!/usr/bin/env bash
# Installs what building and testing mmfs needs on Debian 12 (bookworm).
# Idempotent: installs only what is missing, so it is fast on a ready machine.
# Run as root (or with sudo available) when something has to be installed.
set -euo pipefail

APT_PACKAGES=(
  meson ninja-build pkg-config g++
  libfuse3-dev fuse3 libhdf5-dev libzstd-dev libroaring-dev liburing-dev
  catch2 nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  attr fio
  python3 python3-pip
)
PIP_PACKAGES=(numpy h5py pytest matplotlib zarr duckdb pyroaring)

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

if ! python3 -c 'import numpy, h5py, pytest, matplotlib, zarr' >/dev/null 2>&1; then
  log "installing Python packages: ${PIP_PACKAGES[*]}"
  # Debian 12's python3 is "externally managed" (PEP 668); this tells pip to
  # install anyway (older pips ignore the variable).
  quiet env PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    python3 -m pip install -q "${PIP_PACKAGES[@]}"
  python3 -c 'import numpy, h5py, pytest, matplotlib, zarr' || {
    log "Python packages still not importable after pip install" >&2
    exit 1
  }
fi

#!/usr/bin/env bash
# An S3D-like 3-D combustion field (the MLOC paper's S3D data) on mmfs.
#
# A synthetic turbulent premixed flame — temperature and velocity, float64 on
# a 512^3 grid, the way the S3D combustion code writes a time step — goes from
# an HDF5 file into an mmfs volume. We read slices along every axis with plain
# tools, look at what they cost on the modeled disk, and use MLOC's
# Precision-based Level of Detail (PLoD): A@/plod/K keeps the K most
# significant bytes of every double, so an analysis that tolerates 1e-4
# relative error can ask for 3 bytes of the 8. We measure that error against
# full precision, plot a slice at both precisions, export a reduced-precision
# box to HDF5, and always unmount.
set -euo pipefail

EXAMPLE=s3d
DEFAULT_SCALE=1
USAGE="usage: examples/s3d/walkthrough.sh [--scale F] [--workdir DIR] [--build DIR] [--keep]

  --scale F      grid N = round(512 F) points per axis (default 1: 512^3 float64, 1 GiB per
                 variable, two variables; 0.25 = 128^3, 16 MiB each; 0.125 = 64^3, seconds)
  --workdir DIR  where the HDF5 input, the volume image and the outputs go
                 (default /var/tmp/mmfs-example-s3d; prefer a real disk to tmpfs: the daemon uses O_DIRECT)
  --build DIR    the mmfs build directory (default \$MMFS_BUILD, else <repo>/build)
  --keep         keep the volume image and the generated input (default: only DIR/out stays)"
source "$(dirname "${BASH_SOURCE[0]}")/../common/common.sh"
parse_args "$@"
find_tools
prepare_workdir
start_cleanup_trap
HERE=$EXAMPLES_DIR/s3d

printf 'mmfs example: an S3D-like turbulent combustion field (MLOC paper)\n'
printf 'scale %s, work directory %s, tools from %s\n' "$SCALE" "$WORK" "$BUILD"

# ---------------------------------------------------------------------------
step "Generate the combustion field as an HDF5 file (numpy + h5py)"
say "Turbulence is a sum of random Fourier modes with Kolmogorov's k^(-5/3) spectrum; it wrinkles" \
    "a premixed flame front that crosses the box along x. Temperature goes from 800 K (fresh gas)" \
    "to 2200 K (burnt gas); the velocity u jumps across the flame as the burnt gas expands."
H5=$INPUT_DIR/s3d-scale$SCALE.h5
if [[ -f $H5 ]]; then
  echo "   reusing $H5 (from an earlier --keep run)"
else
  show "python3 $HERE/generate.py --scale $SCALE $H5.part && mv $H5.part $H5"
fi
summary=$(python3 - "$H5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    total = 0
    for name, d in f.items():
        total += d.nbytes
        print(f"   /{name:12s} shape {d.shape}  {d.dtype}  {d.attrs['units']:4s} chunks {d.chunks}  {d.compression}")
    print(f"   {total / 2**20:.0f} MiB of data in {f.id.get_filesize() / 2**20:.0f} MiB on disk")
    print(total)
PY
)
printf '%s\n' "${summary%$'\n'*}"
DATA_BYTES=${summary##*$'\n'}

# ---------------------------------------------------------------------------
step "Format a volume (Maxtor Atlas 10K III geometry) and mount it"
show "$MKFS -f -q -s $(image_size_for "$DATA_BYTES") -g atlas10k3 -L s3d $IMAGE"
mount_volume
show "grep ' $MNT ' /proc/self/mounts"
cd "$MNT"

step "Import the whole HDF5 file with mmfs-import"
say "Given a file and no dataset, mmfs-import makes a directory: each dataset becomes an array file" \
    "of the same name, each group a directory; the file's root attributes go on the directory."
show "$IMPORT --layout multimap $H5 s3d"
show "ls -l s3d"
show "getfattr -d -m user s3d"
show "getfattr -d -m user s3d/temperature | grep -v hdf5.types"
T=$MNT/s3d/temperature
U=$MNT/s3d/u
N=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1] + '@/info'))['shape'][0])" "$T")
K=$(( N / 2 ))

# ---------------------------------------------------------------------------
step "Read slices along every axis with plain tools"
say "A@/slice/D/I is the plane x_D = I: ${N}x${N} doubles = $(( N * N * 8 )) bytes, whichever D." \
    "Reading along x (D = 0) crosses the flame; along z it is a plane parallel to the flow."
for d in 0 1 2; do
  show "stat -c '%n: %s bytes' '$T@/slice/$d/$K'"
done
say "The first four temperatures of the plane z = $K, straight from od:"
show "od -A n -t f8 -N 32 '$T@/slice/2/$K'"
show "python3 -c \"import h5py, numpy as np; a = np.fromfile('$U@/slice/1/$K', '<f8'); b = h5py.File('$H5', 'r')['u'][:, $K, :]; print('u plane y = $K, mmfs view vs h5py:', 'equal' if a.tobytes() == b.tobytes() else 'DIFFERENT', f'({a.size} values)')\""

step "What the slices cost on the modeled disk: MultiMap vs Hilbert"
say "The default order makes the last dimension, z, MultiMap's primary (streaming) one; the others" \
    "are reached through adjacent tracks. Hilbert-ordered cells are MLOC's spatial level. The plans" \
    "(A@/plan/VIEW: requests, bytes, modeled time on the Atlas 10K III from an idle disk):"
VIEWS=(
  "x plane (across the flame)=slice/0/$K"
  "y plane=slice/1/$K"
  "z plane=slice/2/$K"
  "a 32^3 box in the flame=box/$(( K - 16 < 0 ? 0 : K - 16 )):$(( K + 16 > N ? N : K + 16 )),0:$(( N < 32 ? N : 32 )),0:$(( N < 32 ? N : 32 ))"
  "z plane, PLoD 3 bytes=plod/3@/slice/2/$K"
)
PLANS=$OUT/plans.json
rm -f "$PLANS"
python3 "$PY_COMMON/plan_table.py" show "$T" "${VIEWS[@]}" --record "$PLANS"
show "time setfattr -n user.mmfs.layout -v hilbert s3d/temperature"
python3 "$PY_COMMON/plan_table.py" show "$T" "${VIEWS[@]}" --record "$PLANS"
python3 "$PY_COMMON/plan_table.py" compare "$PLANS" --base multimap
say "Under MultiMap the planes that contain the primary dimension z (the x and y planes) are long" \
    "runs along tracks and adjacent tracks; the z plane cuts across it and touches a cell in every" \
    "group of tracks: the expensive one. Hilbert costs about the same whichever plane, and wins" \
    "compact boxes. So choose user.mmfs.order (mmfs-import --order) to make the dimension you" \
    "slice across least the primary one."
say "The PLoD row reads the same cells as the full-precision one: with these layouts every double" \
    "is stored whole, so PLoD saves the bytes handed to the application, not the device's. MLOC's" \
    "own layout stores the bytes of equal significance together (byte planes), so that 3 bytes" \
    "read 3/8 of the data. Asking mmfs for it:"
if setfattr -n user.mmfs.layout -v mloc s3d/temperature 2>/dev/null; then
  python3 "$PY_COMMON/plan_table.py" show "$T" "${VIEWS[@]}" --record "$PLANS"
  python3 "$PY_COMMON/plan_table.py" compare "$PLANS" --base multimap
else
  echo "   layout mloc is not available on this build yet; the daemon says:"
  tail -n 1 .mmfs/errors | sed 's/^/   /'
fi
show "time setfattr -n user.mmfs.layout -v multimap s3d/temperature"

# ---------------------------------------------------------------------------
step "Precision-based Level of Detail: A@/plod/K"
say "A@/plod/K is the whole array with only the K most significant bytes of each double kept; the" \
    "dropped bytes are filled as MLOC does (0x7F, then 0xFF), which puts the value near the middle" \
    "of the interval the kept bytes allow. It has the array's size, and A@/plod/K@/... gives its" \
    "views. The first double of the plane z = $K at full precision and with 2 and 3 bytes" \
    "(little-endian: the most significant byte is the last):"
show "stat -c '%n: %s bytes' '$T' '$T@/plod/2'"
for view in "slice/2/$K" "plod/2@/slice/2/$K" "plod/3@/slice/2/$K"; do
  printf '   %-22s' "$view"
  od -A n -t x1 -N 8 "$T@/$view" | tr -d '\n'
  printf '   = %s\n' "$(od -A n -t f8 -N 8 "$T@/$view" | tr -d ' ')"
done
say "Max relative error of each PLoD level against full precision, for the plane z = $K of both" \
    "variables; and whether mmfs's bytes are exactly the truncation computed by numpy:"
python3 - "$T" "$U" "$K" <<'PY'
import sys
import numpy as np
t_path, u_path, k = sys.argv[1], sys.argv[2], sys.argv[3]

def plod(a, nbytes):  # docs/reference.md's PLoD of float64: keep nbytes, fill 0x7F then 0xFF
    b = a.view(np.uint8).reshape(-1, 8).copy()
    drop = 8 - nbytes
    if drop:
        b[:, drop - 1] = 0x7F
        b[:, :drop - 1] = 0xFF
    return b.view("<f8").reshape(a.shape)

for path in (t_path, u_path):
    name = path.rsplit("/", 1)[-1]
    full = np.fromfile(f"{path}@/slice/2/{k}", "<f8")
    for nbytes in (2, 3, 4):
        low = np.fromfile(f"{path}@/plod/{nbytes}@/slice/2/{k}", "<f8")
        rel = np.abs(low - full) / np.abs(full)
        same = "equal" if low.tobytes() == plod(full, nbytes).tobytes() else "DIFFERENT"
        print(f"   {name:12s} plod/{nbytes}: max relative error {rel.max():.2e} (mean {rel.mean():.1e}); "
              f"bytes vs numpy truncation: {same}")
PY
say "MLOC (§III.B) reports a maximum per-point relative error of 0.008% (8e-5) for S3D data with" \
    "3 bytes (its 'PLoD level 2'): plod/3 here is of the same order."
say "A whole-array analysis at reduced precision — the mean temperature, as in MLOC's mean-value" \
    "test — streaming A@/plod/K in 8 MiB pieces:"
python3 - "$T" <<'PY'
import sys
import numpy as np
path = sys.argv[1]
def mean(p):
    total, count = 0.0, 0
    with open(p, "rb") as f:
        while chunk := f.read(8 << 20):
            a = np.frombuffer(chunk, "<f8")
            total += float(a.sum()); count += a.size
    return total / count
full = mean(path)
print(f"   mean temperature, full precision: {full:.6f} K")
for nbytes in (2, 3):
    m = mean(f"{path}@/plod/{nbytes}")
    print(f"   mean temperature, plod/{nbytes}:        {m:.6f} K  (relative error {abs(m - full) / full:.1e})")
PY

# ---------------------------------------------------------------------------
step "Plot a slice to PNG: full precision next to PLoD 2 and 3 bytes"
say "With 2 bytes a double keeps 4 bits of mantissa: temperatures between 1024 and 2048 K come in" \
    "steps of 64 K, and the plot shows the contour bands; with 3 bytes (12 bits, 0.25 K steps)" \
    "it is indistinguishable from full precision."
show "python3 $PY_COMMON/plot_slice.py $OUT/temperature-plod.png '$T@/slice/2/$K' '$T@/plod/2@/slice/2/$K' '$T@/plod/3@/slice/2/$K' --cmap inferno --panel-titles 'full precision (8 bytes)|plod/2 (2 bytes)|plod/3 (3 bytes)' --title 'temperature, plane z = $K'"
show "python3 $PY_COMMON/plot_slice.py $OUT/velocity.png '$U@/slice/2/$K' '$U@/slice/1/$K' --cmap RdBu_r --title 'x velocity: planes z = $K and y = $K'"

# ---------------------------------------------------------------------------
step "Export boxes back to HDF5 with mmfs-export"
say "Any data view exports, PLoD views included: a box in the middle of the flame at full precision," \
    "and the same box through plod/3, into one HDF5 file."
lo() { echo $(( $1 - $2 < 0 ? 0 : $1 - $2 )); }
hi() { echo $(( $1 + $2 > N ? N : $1 + $2 )); }
BOX="$(lo $K 16):$(hi $K 16),$(lo $K 64):$(hi $K 64),$(lo $K 64):$(hi $K 64)"
rm -f "$OUT/s3d-box.h5"
show "$EXPORT '$T@/box/$BOX' $OUT/s3d-box.h5:/temperature"
show "$EXPORT '$T@/plod/3@/box/$BOX' $OUT/s3d-box.h5:/temperature_plod3"
python3 - "$OUT/s3d-box.h5" "$H5" "$BOX" <<'PY'
import sys
import h5py
import numpy as np
out, src, box = sys.argv[1], sys.argv[2], sys.argv[3]
sel = tuple(slice(*map(int, item.split(":"))) for item in box.split(","))
with h5py.File(out, "r") as f, h5py.File(src, "r") as g:
    orig = g["temperature"][sel]
    full, low = f["temperature"][()], f["temperature_plod3"][()]
    b = orig.view(np.uint8).reshape(-1, 8).copy()
    b[:, 4] = 0x7F
    b[:, :4] = 0xFF
    expect = b.view("<f8").reshape(orig.shape)
    print(f"   exported /temperature {full.shape} vs the source file:", "equal" if full.tobytes() == orig.tobytes() else "DIFFERENT")
    print(f"   exported /temperature_plod3 {low.shape} vs 3-byte truncation of the source:",
          "equal" if low.tobytes() == expect.tobytes() else "DIFFERENT",
          f"(max relative error {float(np.max(np.abs(low - orig) / np.abs(orig))):.1e})")
PY

# ---------------------------------------------------------------------------
step "Unmount and check the volume"
cd "$WORK"
show "fusermount3 -u $MNT"
unmount_volume
show "$FSCK -n $IMAGE"

timing_summary
printf '\nOutputs in %s:\n' "$OUT"
ls -l "$OUT" | sed 1d | sed 's/^/   /'
echo
echo "Walk-through finished."

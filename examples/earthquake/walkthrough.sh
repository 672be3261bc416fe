#!/usr/bin/env bash
# The 4-D earthquake dataset of the MultiMap paper (§5.4) on mmfs.
#
# A synthetic ground-motion field — the vertical ground velocity of a 38 x 38
# x 14 km block of earth on a 64^3 grid, for 2000 time steps — goes from an
# HDF5 file into an mmfs volume that models the paper's disk (the Maxtor Atlas
# 10K III). We then read it the way seismologists do: the time series of one
# point (a seismogram), a snapshot of the whole volume at one instant, maps
# and cross-sections; and we ask mmfs what each of those reads costs on the
# modeled disk under MultiMap, Naive and Hilbert placement. Everything is read
# with plain tools (cat, dd, od, numpy.fromfile): views are ordinary files.
#
# The volume is always unmounted at the end, also when a step fails or the
# run is interrupted.
set -euo pipefail

EXAMPLE=earthquake
DEFAULT_SCALE=1
USAGE="usage: examples/earthquake/walkthrough.sh [--scale F] [--workdir DIR] [--build DIR] [--keep]

  --scale F      time steps = round(2000 F) on the paper's 64^3 grid (default 1:
                 2000x64x64x64 float32, 2 GiB; 0.1 = 200 MiB, 0.01 = 20 MiB, seconds)
  --workdir DIR  where the HDF5 input, the volume image and the outputs go
                 (default /var/tmp/mmfs-example-earthquake; prefer a real disk to tmpfs: the daemon uses O_DIRECT)
  --build DIR    the mmfs build directory (default \$MMFS_BUILD, else <repo>/build)
  --keep         keep the volume image and the generated input (default: only DIR/out stays)"
source "$(dirname "${BASH_SOURCE[0]}")/../common/common.sh"
parse_args "$@"
find_tools
prepare_workdir
start_cleanup_trap
HERE=$EXAMPLES_DIR/earthquake

printf 'mmfs example: the 4-D earthquake dataset (MultiMap paper, §5.4)\n'
printf 'scale %s, work directory %s, tools from %s\n' "$SCALE" "$WORK" "$BUILD"

# ---------------------------------------------------------------------------
step "Generate the ground-motion field as an HDF5 file (numpy + h5py)"
say "A point source 8 km deep radiates a P and an S wave through layered rock; the 1 km of soft" \
    "sediments under the surface slows the waves down and makes the surface ring. The file is" \
    "written slab by slab along time (chunked, gzip), as a simulation would write it."
H5=$INPUT_DIR/earthquake-scale$SCALE.h5
if [[ -f $H5 ]]; then
  echo "   reusing $H5 (from an earlier --keep run)"
else
  show "python3 $HERE/generate.py --scale $SCALE $H5.part && mv $H5.part $H5"
fi
summary=$(python3 - "$H5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    d = f["velocity"]
    print(f"   {sys.argv[1].rsplit('/', 1)[-1]}:/velocity  shape {d.shape}  {d.dtype}  chunks {d.chunks}  "
          f"{d.compression} -> {f.id.get_filesize() / 2**20:.0f} MiB on disk for {d.nbytes / 2**20:.0f} MiB of data")
    print("   attributes:", ", ".join(sorted(d.attrs)))
    print(d.nbytes)
PY
)
printf '%s\n' "${summary%$'\n'*}"
DATA_BYTES=${summary##*$'\n'}

# ---------------------------------------------------------------------------
step "Format a volume with the geometry of the Maxtor Atlas 10K III"
say "-g atlas10k3 stores the disk model (zones, track lengths, skew, settle time) in the superblock:" \
    "from now on mmfs places array cells by it and predicts the service time of every read." \
    "The image file is sparse: it only takes the space that is written."
show "$MKFS -f -s $(image_size_for "$DATA_BYTES") -g atlas10k3 -L earthquake $IMAGE"

step "Mount it"
say "The daemon runs in the foreground (-f) as a background job of this script, so the script knows" \
    "its pid and can always unmount it. Its messages go to out/daemon.log."
mount_volume
show "grep ' $MNT ' /proc/self/mounts"
cd "$MNT"

# ---------------------------------------------------------------------------
step "Import the dataset with mmfs-import (MultiMap layout, time as the streaming dimension)"
say "--order 0,3,2,1 makes dimension 0, time, the primary dimension — the paper's Dim0, laid along" \
    "the disk's tracks — then depth, y and x. That is the paper's choice ('time as the major order')" \
    "and what seismologists read most: the history of a point. MultiMap then puts the neighbours" \
    "along depth, y and x on *adjacent tracks*, which the head reaches after a settle time and no" \
    "rotational latency."
mkdir quake
show "$IMPORT --layout multimap --order 0,3,2,1 $H5:/velocity quake/velocity"
A=$MNT/quake/velocity
show "ls -l quake"

step "The array file: schema xattrs and the HDF5 attributes that came along"
say "user.mmfs.* is the schema (docs/reference.md §4), defaults included: the cell is the brick of elements" \
    "that fills 4 KiB, the basic cube is MultiMap's. Every HDF5 attribute became a user.NAME" \
    "xattr (numbers and arrays as JSON), and user.hdf5.types remembers their HDF5 types."
show "getfattr -d -m user quake/velocity | grep -v hdf5.types"
python3 - "$A" <<'PY'
import json, sys
i = json.load(open(sys.argv[1] + "@/info"))
print(f"   A@/info: shape {i['shape']} {i['dtype']}, layout {i['layout']}, order {i['order']}, "
      f"cell {i['cell']}, basic cube {i.get('basic_cube')},")
print(f"            {i['bytes'] / 2**20:.1f} MiB of data in {i['device_bytes']['data'] / 2**20:.1f} MiB on the "
      f"device, {i['extents']} extent(s), geometry {i['geometry']}")
PY

# Where to look, from the xattrs the import carried over: the source's grid
# index, the time step, the grid spacing; and the array's shape from A@/info.
eval "$(python3 - "$A" <<'PY'
import json, os, sys
a = sys.argv[1]
shape = json.load(open(a + "@/info"))["shape"]
T, NX, NY, NZ = shape
x = lambda name: os.getxattr(a, "user." + name).decode()
dt = float(x("dt"))
sx, sy, sz = json.loads(x("source_index"))
dx, dy, dz = json.loads(x("grid_spacing_m"))
idx = lambda seconds: min(T - 1, int(round(seconds / dt)))
ts = idx(6.5)                        # the S wave is reaching the surface
t0, t1 = ts, min(T, ts + 10)
h = lambda c, n: (max(0, c - 5), min(n, c + 5))
(x0, x1), (y0, y1), (z0, z1) = h(sx, NX), h(sy, NY), h(sz, NZ)
far_x, far_y = min(NX - 1, sx + NX // 3), max(0, sy - NY // 3)
print(f"T={T} NX={NX} NY={NY} NZ={NZ} DT={dt} SX={sx} SY={sy} SZ={sz} TS={ts}")
print(f"TIMES='{idx(4.5)} {ts} {idx(9.0)}' FARX={far_x} FARY={far_y} ASPECT={dz / dx:.4f}")
print(f"CUBE={t0}:{t1},{x0}:{x1},{y0}:{y1},{z0}:{z1}")
PY
)"

# ---------------------------------------------------------------------------
step "Read views with plain tools"
say "A@/box/SEL and A@/slice/D/I are read-only files holding the C-order elements of the selection" \
    "(docs/reference.md §5); stat gives their exact size. The seismogram of the station above the source is" \
    "the beam along time: A@/box/:,$SX,$SY,0 — $T float32 values."
show "stat -c '%n: %s bytes' '$A@/box/:,$SX,$SY,0'"
show "python3 -c \"import numpy as np; v = np.fromfile('$A@/box/:,$SX,$SY,0', '<f4'); i = int(abs(v).argmax()); print(f'peak ground velocity {v[i]:+.4f} m/s at t = {i * $DT:.2f} s (step {i})')\""
say "dd and od work too: the 4 samples from step $TS on, as raw float32:"
show "dd if='$A@/box/:,$SX,$SY,0' bs=4 skip=$TS count=4 status=none | od -A n -t f4"
say "A snapshot of the whole volume at one instant is the slice t = $TS (${NX}x${NY}x${NZ} values):"
show "cat '$A@/slice/0/$TS' | wc -c"
say "A map of the surface (depth index 0) at that instant, and a vertical section through the source:"
show "stat -c '%n: %s bytes' '$A@/box/$TS,:,:,0' '$A@/box/$TS,:,$SY,:'"

step "Compare with h5py: the same numbers as the HDF5 file"
show "python3 -c \"import h5py, numpy as np; a = np.fromfile('$A@/box/:,$SX,$SY,0', '<f4'); b = h5py.File('$H5', 'r')['velocity'][:, $SX, $SY, 0]; print('seismogram, mmfs view vs h5py:', 'equal' if a.tobytes() == b.tobytes() else 'DIFFERENT', f'({a.size} values)')\""
show "python3 -c \"import h5py, numpy as np; a = np.fromfile('$A@/slice/0/$TS', '<f4').reshape($NX, $NY, $NZ); b = h5py.File('$H5', 'r')['velocity'][$TS]; print('snapshot, mmfs view vs h5py:', 'equal' if a.tobytes() == b.tobytes() else 'DIFFERENT', f'({a.size} values)')\""

# ---------------------------------------------------------------------------
step "Plot slices to PNG (numpy.fromfile on the views, shape from A@/info)"
say "plot_slice.py reads each view's bytes with numpy.fromfile and derives its shape from A@/info" \
    "and the view's path; axis names come from the user.dims xattr (the HDF5 attribute 'dims')." \
    "The section's aspect ratio is dz/dx from user.grid_spacing_m."
read -r T_A T_B T_C <<<"$TIMES"
sec() { awk -v i="$1" -v dt="$DT" 'BEGIN { printf "t = %.2f s (step %d)", i * dt, i }'; }
show "python3 $PY_COMMON/plot_slice.py $OUT/section.png '$A@/box/$T_A,:,$SY,:' '$A@/box/$T_B,:,$SY,:' '$A@/box/$T_C,:,$SY,:' --transpose --aspect $ASPECT --cmap seismic --symmetric --clip 0.3 --panel-titles '$(sec "$T_A")|$(sec "$T_B")|$(sec "$T_C")' --title 'ground velocity in the vertical plane y = $SY through the source (depth down)'"
show "python3 $PY_COMMON/plot_slice.py $OUT/surface.png '$A@/box/$T_A,:,:,0' '$A@/box/$T_B,:,:,0' '$A@/box/$T_C,:,:,0' --transpose --cmap seismic --symmetric --panel-titles '$(sec "$T_A")|$(sec "$T_B")|$(sec "$T_C")' --title 'ground velocity at the surface (z = 0): the four lobes of the S wave'"
show "python3 $PY_COMMON/plot_slice.py $OUT/seismograms.png '$A@/box/:,$SX,$SY,0' '$A@/box/:,$FARX,$FARY,0' '$A@/box/:,$SX,$SY,$SZ' --panel-titles 'surface, above the source|surface, far station|at the source depth' --title 'seismograms: beams along time'"

# ---------------------------------------------------------------------------
step "What each read costs on the modeled disk: A@/plan under MultiMap"
say "A@/plan/VIEW is the device I/O plan of a view: requests, bytes read (whole cells) vs bytes" \
    "returned, and the service time the Atlas 10K III model predicts, from an idle disk."
say "Under MultiMap the seismogram is a run along the tracks (streaming, like reading a file)," \
    "and a beam along x, y or depth hops from track to *adjacent* track: one settle time per cell," \
    "no rotational latency. That is the point of MultiMap: every dimension is cheap."
VIEWS=(
  "seismogram: beam along t=box/:,$SX,$SY,0"
  "beam along x=box/$TS,:,$SY,$SZ"
  "beam along y=box/$TS,$SX,:,$SZ"
  "beam along depth=box/$TS,$SX,$SY,:"
  "10^4 cube around the source=box/$CUBE"
  "surface map at one instant=box/$TS,:,:,0"
  "snapshot: whole volume=slice/0/$TS"
  "all surface seismograms=slice/3/0"
)
PLANS=$OUT/plans.json
rm -f "$PLANS"
show "cut -c 1-240 '$A@/plan/box/:,$SX,$SY,0'; echo ..."
python3 "$PY_COMMON/plan_table.py" show "$A" "${VIEWS[@]}" --record "$PLANS"

say "The plan is what a read executes: /.mmfs/stats counts the device requests and their modeled" \
    "time since the mount. Reading a snapshot (t = $T_C, not read yet) for real:"
python3 - "$MNT" "$A" "slice/0/$T_C" <<'PY'
import json, sys
mnt, a, view = sys.argv[1:]
stats = lambda: json.load(open(mnt + "/.mmfs/stats"))
plan = json.load(open(f"{a}@/plan/{view}"))
before = stats()
n = len(open(f"{a}@/{view}", "rb").read())
after = stats()
d = {k: after[k] - before[k] for k in ("requests", "sectors_read", "modeled_ms")}
print(f"   the plan:  {plan['requests']} device requests, {plan['bytes_read'] / 2**20:.2f} MiB, modeled {plan['modeled_ms']:.1f} ms")
print(f"   the read:  {d['requests']} device requests, {d['sectors_read'] * after['sector_size'] / 2**20:.2f} MiB, "
      f"modeled {d['modeled_ms']:.1f} ms  ({n} bytes returned)")
PY

step "Relayout to Naive, then Hilbert: the same bytes, placed differently"
say "Setting user.mmfs.layout on an array that holds data re-lays it out; setfattr returns when the" \
    "new placement is durable. The bytes do not change — h5py still agrees — only where they are."
show "time setfattr -n user.mmfs.layout -v naive quake/velocity"
python3 "$PY_COMMON/plan_table.py" show "$A" "${VIEWS[@]}" --record "$PLANS"
show "time setfattr -n user.mmfs.layout -v hilbert quake/velocity"
python3 "$PY_COMMON/plan_table.py" show "$A" "${VIEWS[@]}" --record "$PLANS"
show "python3 -c \"import h5py, numpy as np; a = np.fromfile('$A@/box/:,$SX,$SY,0', '<f4'); b = h5py.File('$H5', 'r')['velocity'][:, $SX, $SY, 0]; print('after two relayouts, mmfs view vs h5py:', 'equal' if a.tobytes() == b.tobytes() else 'DIFFERENT')\""

step "MultiMap vs Naive vs Hilbert (the paper's Figure 13)"
python3 "$PY_COMMON/plan_table.py" compare "$PLANS" --base multimap
say "What to look for (the paper's Figure 13; examples/README.md has this table at --scale 1):" \
    "the seismogram runs along the streaming dimension, so MultiMap and Naive read it in a few" \
    "long requests while Hilbert scatters it; the beams along x, y and depth cost Naive a seek" \
    "and a rotational latency per cell, MultiMap one settle time per cell (adjacent tracks);" \
    "Hilbert spreads the cost over every dimension, which favours snapshots and cubes and hurts" \
    "the seismogram. MultiMap is the one that keeps time streaming *and* space cheap. At small" \
    "scales (0.1 and below) the time axis fills only a few tracks and the layouts differ less."
say "(Times are modeled from an idle disk. Mount with -o simulate and reads take them in wall-clock" \
    "time.) Back to MultiMap for the rest:"
show "time setfattr -n user.mmfs.layout -v multimap quake/velocity"

# ---------------------------------------------------------------------------
step "Export a box back to HDF5 with mmfs-export"
say "Any data view can be exported: here 10 time steps of the upper 16 depth levels around the" \
    "source. The dataset's shape is the view's shape."
BOX="$TS:$(( TS + 10 < T ? TS + 10 : T )),$(( SX > 16 ? SX - 16 : 0 )):$(( SX + 16 < NX ? SX + 16 : NX )),$(( SY > 16 ? SY - 16 : 0 )):$(( SY + 16 < NY ? SY + 16 : NY )),0:$(( NZ < 16 ? NZ : 16 ))"
rm -f "$OUT/velocity-box.h5"
show "$EXPORT '$A@/box/$BOX' $OUT/velocity-box.h5:/velocity_box"
show "python3 -c \"import h5py, numpy as np; a = h5py.File('$OUT/velocity-box.h5', 'r')['velocity_box']; b = h5py.File('$H5', 'r')['velocity'][$BOX]; print('exported box', a.shape, a.dtype, 'vs the source file:', 'equal' if a.shape == b.shape and a[()].tobytes() == b.tobytes() else 'DIFFERENT')\""

# ---------------------------------------------------------------------------
step "Unmount and check the volume"
say "fusermount3 -u makes the daemon write everything dirty, sync and exit 0; mmfsck -n then checks" \
    "the unmounted volume (superblocks, tree, extents, checksummed metadata)."
cd "$WORK"
show "fusermount3 -u $MNT"
unmount_volume
show "$FSCK -n $IMAGE"

timing_summary
printf '\nOutputs in %s:\n' "$OUT"
ls -l "$OUT" | sed 1d | sed 's/^/   /'
echo
echo "Walk-through finished."

#!/usr/bin/env bash
# The main job: installs what is missing, builds, formats an image file with
# the atlas10k3 geometry, mounts it with the mmfs daemon, creates an array
# through xattrs, writes it, reads slices along every dimension with cat,
# shows the I/O plan of the slices under naive and under the layout the
# volume's model chose, then gives that array a copy in a second layout and
# shows each slice served by the placement that wins (its plan names it),
# then on a second image with the default (flash) geometry times slices
# cold on the real device from a plain C-order file and from an array file
# in the default layout with a C-order copy, and unmounts (always, even on
# failure).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

bash scripts/install-deps.sh
echo "Building (the first build takes about 15 minutes on 2 cores; later ones only what changed)..."
bash scripts/build.sh >/dev/null   # its errors still reach the terminal
BUILD=$root/build

work=$(mktemp -d /var/tmp/mmfs-demo.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
daemon_pid=
cleanup() {
  cd "$root"
  if mountpoint -q "$mnt"; then fusermount3 -u "$mnt" || fusermount3 -uz "$mnt" || true; fi
  if [[ -n $daemon_pid ]]; then wait "$daemon_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

header() { printf '\n=== %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; eval "$@"; }

header "Format a 1 GiB image with the modeled Maxtor Atlas 10K III"
show "$BUILD/mkfs/mkfs.mmfs -s 1G -g atlas10k3 $work/vol.img"

header "Mount it"
"$BUILD/daemon/mmfs" -f "$work/vol.img" "$mnt" 2>"$work/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
mountpoint -q "$mnt" || { cat "$work/daemon.log"; exit 1; }
show "mount | grep fuse.mmfs"
cd "$mnt"

header "Make two float64 arrays of shape 256x128x64 through xattrs (one naive, one in the model's choice)"
show "touch naive.f8 mm.f8"
show "setfattr -n user.mmfs.layout -v naive naive.f8"
show "setfattr -n user.mmfs.shape -v 256,128,64 naive.f8"
show "setfattr -n user.mmfs.shape -v 256,128,64 mm.f8      # no layout: the volume's model chooses"
show "getfattr -d -m user.mmfs mm.f8"
python3 -c "import json; i = json.load(open('mm.f8@/info')); print('layout_rule:', i['layout_rule'][:300])"
show "ls -l naive.f8 mm.f8"

header "Write the same data into both (x[i,j,k] = i*10000 + j*100 + k, C order)"
python3 - <<'PY'
import numpy as np
i, j, k = np.meshgrid(np.arange(256), np.arange(128), np.arange(64), indexing="ij")
data = (i * 10000 + j * 100 + k).astype(np.float64)
for name in ("naive.f8", "mm.f8"):
    with open(name, "r+b") as f:
        f.write(data.tobytes())
print("wrote", data.nbytes, "bytes into each")
PY

header "Read slices along every dimension with cat (views are plain files)"
for view in slice/0/100 slice/1/7 slice/2/42; do
  printf '$ head -c 32 mm.f8@/%s | od -A d -t f8    (the view holds %s bytes)\n' "$view" "$(stat -c %s "mm.f8@/$view")"
  head -c 32 "mm.f8@/$view" | od -A d -t f8
done
show "cat 'mm.f8@/box/3,4:6,10:12' | od -A n -t f8"
show "cat mm.f8@/lbn/1,2,3"
show "head -c 300 mm.f8@/info; echo ..."

slice_plans() {
  for name in "$@"; do
    for view in slice/0/100 slice/1/7 slice/2/42; do
      python3 - "$name" "$view" <<'PY'
import json, sys
name, view = sys.argv[1], sys.argv[2]
p = json.load(open(f"{name}@/plan/{view}"))
served = ""
if "served_by" in p:
    c = p["copies"][p["served_by"]]
    others = ", ".join(f"{o['layout']} {o['modeled_ms']:.1f}" for o in p["copies"] if o["copy"] != p["served_by"])
    served = f"  served by {'the primary' if c['copy'] == 0 else 'copy %d' % c['copy']} ({c['layout']}; {others} ms)"
print(f"{name:9s} {view:12s} requests {p['requests']:5d}  bytes read/useful {p['bytes_read']:8d}/{p['bytes_useful']:7d}"
      f"  modeled {p['modeled_ms']:8.1f} ms{served}")
PY
    done
  done
}
header "The slices under naive and under the model's choice: device requests and modeled time on the Atlas 10K III"
slice_plans naive.f8 mm.f8

header "A copy in a second layout: every slice is served by the placement that reads it cheapest"
copy=multimap
[[ $(getfattr --only-values -n user.mmfs.layout mm.f8) == multimap ]] && copy=hilbert
show "setfattr -n user.mmfs.copies -v $copy mm.f8      # built from the data; durable when setfattr returns"
show "getfattr -n user.mmfs.copies mm.f8"
slice_plans mm.f8
show "cmp mm.f8@/copy/0@/slice/1/7 mm.f8@/copy/1@/slice/1/7 && echo 'the primary and the copy hold the same bytes'"
show "head -8 .mmfs/stats"

header "A bitmap index and queries (docs/reference.md §5): the elements x >= 2550000"
show "setfattr -n user.mmfs.bins -v edges:1000000,2000000,2550000 mm.f8"
show "setfattr -n user.mmfs.index -v e1 mm.f8      # built from the data; durable when setfattr returns"
show "cat 'mm.f8@/query/>=2550000/count'"
show "cat 'mm.f8@/plan/query/>=2550000/coords'; echo   # aligned bins: the index alone answers, no data bytes"
show "cat 'mm.f8@/query/>=2550000&<2550003/values' | od -A n -t f8"
show "cat 'mm.f8@/query/>=2550000&<2550003/count'    # no longer aligned: candidates checked against the data"
show "cat 'naive.f8@/query/in[2550000,2550002]/count'  # no index: a scan"

header "Unmount (flushes everything) and check the volume"
cd "$root"
fusermount3 -u "$mnt"
wait "$daemon_pid"
daemon_pid=
show "$BUILD/tools/mmfsck -n $work/vol.img"

header "On the real device: an image with the default geometry (flash), slices on the real clock"
mount_real() {
  "$BUILD/daemon/mmfs" -f "$work/real.img" "$mnt" 2>>"$work/daemon.log" &
  daemon_pid=$!
  for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
  mountpoint -q "$mnt" || { cat "$work/daemon.log"; exit 1; }
}
unmount_real() { fusermount3 -u "$mnt"; wait "$daemon_pid"; daemon_pid=; }
show "$BUILD/mkfs/mkfs.mmfs -q -s 2G $work/real.img     # no -g: the ssd geometry"
mount_real
python3 - "$mnt" <<'PY'
import os, sys
import numpy as np
mnt = sys.argv[1]
data = np.random.default_rng(1).standard_normal((512, 512, 256))  # 512 MiB of float64
data.tofile(os.path.join(mnt, "plain.f8"))  # a plain file: C order, as numpy or HDF5 contiguous store it
path = os.path.join(mnt, "array.f8")
open(path, "wb").close()
os.setxattr(path, "user.mmfs.shape", b"512,512,256")
os.setxattr(path, "user.mmfs.copies", b"naive")  # a C-order copy beside the default layout
data.tofile(path)
fd = os.open(path, os.O_RDONLY)
os.fsync(fd)  # the primary is durable; the copy catches up in the background
os.close(fd)
import json, time
while any(c["state"] != "current" for c in json.load(open(path + "@/info"))["copies"]):
    time.sleep(0.1)
print("wrote 512 MiB into plain.f8 (a plain file) and array.f8 (an array file, layout",
      os.getxattr(path, "user.mmfs.layout").decode() + ", with a naive copy)")
PY
unmount_real
echo "Cold reads of a[100, :, :] and a[:, :, 100] (256 KiB and 2 MiB of 512 MiB): caches dropped, daemon remounted"
for view in 0 2; do
  for how in plain array; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    mount_real
    python3 - "$mnt" "$how" "$view" <<'PY'
import json, os, sys, time
import numpy as np
mnt, how, d = sys.argv[1], sys.argv[2], int(sys.argv[3])
sel = (100, slice(None), slice(None)) if d == 0 else (slice(None), slice(None), 100)
spelled = "a[100, :, :]" if d == 0 else "a[:, :, 100]"
t = time.perf_counter()
if how == "plain":
    got = np.array(np.memmap(os.path.join(mnt, "plain.f8"), dtype=np.float64, mode="r", shape=(512, 512, 256))[sel])
    note = f"np.memmap(plain.f8){spelled[1:]}"
else:
    got = np.fromfile(os.path.join(mnt, f"array.f8@/slice/{d}/100"), dtype=np.float64)
    plan = json.load(open(os.path.join(mnt, f"array.f8@/plan/slice/{d}/100")))
    c = plan["copies"][plan["served_by"]]
    note = (f"array.f8@/slice/{d}/100: {plan['requests']} requests, {plan['bytes_read'] >> 10} KiB read, served "
            f"by {'the primary' if c['copy'] == 0 else 'copy %d' % c['copy']} ({c['layout']})")
dt = time.perf_counter() - t
print(f"  {spelled}  {dt * 1000:7.1f} ms  {note}")
PY
    unmount_real
  done
done
echo
echo "Demo finished."

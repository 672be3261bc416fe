#!/usr/bin/env bash
# The main job: builds mmfs and walks through what exists today, the geometry
# engine, through mmfs-geom (SPEC §7). The FUSE daemon does not exist yet;
# when it does, this demo will format and mount a volume.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
echo "Building (the first build takes a few minutes)..."
bash scripts/build.sh >/dev/null   # its errors still reach the terminal
BUILD=build
GEOM=$BUILD/tools/mmfs-geom

header() { printf '\n=== %s\n' "$*"; }
note() { printf '    %s\n' "$@"; }
# Shows the command, then runs it.
run() {
  printf '$ mmfs-geom %s\n' "$*"
  "$GEOM" "$@"
}

header "The Maxtor Atlas 10K III (the disk of the MultiMap and Atropos papers)"
note "Capacity, sector size, zones, settle time and the derived depth D and skew:"
run atlas10k3 info

header "Track boundaries: the first and last LBN of the track holding LBN 0"
run atlas10k3 boundaries 0

header "Adjacent blocks (MultiMap GETADJACENT): reachable with no rotational latency"
note "The block 1 track away from LBN 0:"
run atlas10k3 adjacent 0 1
note "and 128 tracks away (any step from 1 to D, the depth shown by info, is allowed):"
run atlas10k3 adjacent 0 128 || true

header "Atropos quadrangle parameters for the zone of LBN 0 (block size 1)"
run atlas10k3 quadrangle

header "MEMS equivalence classes: LBNs the G2 MEMStore can read in parallel"
printf '$ mmfs-geom mems-g2 equivalent 0 | head\n'
class=$("$GEOM" mems-g2 equivalent 0)
printf '%s\n' "$class" | head
note "... $(printf '%s\n' "$class" | wc -l) LBNs in the class"

header "Modeled service time: an adjacent pair vs. a pair half a track apart"
lbn=0
adj=$("$GEOM" atlas10k3 adjacent "$lbn" 1)
read -r low high < <("$GEOM" atlas10k3 boundaries "$adj")
n=$((high - low + 1))
far=$((low + (adj - low + n / 2) % n))
note "Both pairs read LBN $lbn, then a sector one track further, from an idle disk:" \
     "$adj is adjacent to $lbn; $far is on the same track as $adj, half a revolution away."
printf '$ echo "%s" | mmfs-geom atlas10k3 time\n' "$lbn:1 $adj:1"
echo "$lbn:1 $adj:1" | "$GEOM" atlas10k3 time
printf '$ echo "%s" | mmfs-geom atlas10k3 time\n' "$lbn:1 $far:1"
echo "$lbn:1 $far:1" | "$GEOM" atlas10k3 time

header "A geometry file: the uniform toy disk of SPEC §7"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
toy=$tmp/toy-disk.json
cat >"$toy" <<'JSON'
{"kind": "disk", "sector_size": 512, "cylinders": 1000, "surfaces": 1,
 "sectors_per_track": 8, "rpm": 10000, "track_skew_sectors": 0,
 "settle_ms": 0, "settle_cylinders": 4, "conservatism_deg": 0}
JSON
cat "$toy"
note "No skew and a zero settle angle, D = 4: adjacent(L, s) = L + 8*s (MultiMap §4.2)."
run "$toy" adjacent 0 1
run "$toy" adjacent 0 4
note "A step beyond D is refused:"
run "$toy" adjacent 0 5 || true

header "Layouts on the modeled disk: the MultiMap paper's experiments, small"
note "Naive, Hilbert and MultiMap plans of beams and cubes, costed by the service-time model:"
echo '$ mmfs-bench model --profile atlas10k3 --quick --runs 3'
"$BUILD/tools/mmfs-bench" model --profile atlas10k3 --quick --runs 3 | sed -n '1,20p'

header "A volume: mkfs.mmfs and mmfsck on an image file"
img=$tmp/demo.img
echo "\$ mkfs.mmfs -s 1G -g atlas10k3 -L demo $img"
"$BUILD/mkfs/mkfs.mmfs" -s 1G -g atlas10k3 -L demo "$img"
echo "\$ mmfsck -n $img"
"$BUILD/tools/mmfsck" -n "$img"
note "A damaged superblock copy is found and repaired from the other one:"
printf '\x00' | dd of="$img" bs=1 seek=200 conv=notrunc status=none
"$BUILD/tools/mmfsck" -n "$img" || true
"$BUILD/tools/mmfsck" -y "$img" || true
"$BUILD/tools/mmfsck" -n "$img"

header "Done"
note "See README.md for more; 'mmfs-geom --help', 'mmfs-bench --help', 'mkfs.mmfs --help' and 'mmfsck --help' describe every option."

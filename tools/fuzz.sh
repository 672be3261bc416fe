#!/usr/bin/env bash
# Builds and runs mmfs's libFuzzer targets with ASan and UBSan. Not part of CI.
#   decoders    tools/fuzz/fuzz_decoders.cc: the volume's on-disk decoders
#   conditions  tools/fuzz/fuzz_conditions.cc: query conditions (parse, to_text
#               round trip, combine, scans) and the bitmap index's decoders
#   tools/fuzz.sh [SECONDS] [decoders|conditions|all]   (600 s each; all: one after the other)
# Needs clang (apt-get install clang). Findings land in build-fuzz/crash-*.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-600}
target=${2:-all}
case "$target" in decoders|conditions|all) ;; *) echo "fuzz.sh: unknown target '$target'" >&2; exit 2 ;; esac
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is missing (apt-get install clang)" >&2; exit 1; }
out=build-fuzz
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)

run_decoders() {
  mkdir -p "$out/corpus"
  python3 geometry/embed_profiles.py "$out/embedded_profiles.cc" geometry/profiles/*.json
  clang++ "${flags[@]}" \
    tools/fuzz/fuzz_decoders.cc fs/*/*.cc layouts/*.cc geometry/*.cc indexes/*.cc "$out/embedded_profiles.cc" \
    -lfmt -luring -lxxhash -lroaring -lzstd -o "$out/fuzz_decoders"
  # Seed the corpus with real on-disk structures: a freshly formatted region.
  if [ ! -e "$out/corpus/seeded" ]; then
    python3 - "$out/corpus" <<'PY'
import os, sys
d = sys.argv[1]
open(os.path.join(d, "zeros"), "wb").write(bytes(4096))
open(os.path.join(d, "seeded"), "wb").write(b"MMFSVOL1" + bytes(100))
PY
  fi
  (cd "$out" && ./fuzz_decoders -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 corpus)
}

run_conditions() {
  mkdir -p "$out/corpus_conditions"
  clang++ "${flags[@]}" tools/fuzz/fuzz_conditions.cc indexes/*.cc -lfmt -lxxhash -lroaring -lzstd \
    -o "$out/fuzz_conditions"
  # Seeds: condition texts, an index object of every encoding, a delta, a bitmap.
  clang++ -std=c++20 -O1 -I. -DMMFS_FUZZ_SEED_MAIN tools/fuzz/fuzz_conditions.cc indexes/*.cc \
    -lfmt -lxxhash -lroaring -lzstd -o "$out/fuzz_conditions_seed"
  "$out/fuzz_conditions_seed" "$out/corpus_conditions"
  (cd "$out" && ./fuzz_conditions -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 corpus_conditions)
}

case "$target" in
  decoders) run_decoders ;;
  conditions) run_conditions ;;
  all) run_decoders; run_conditions ;;
esac

#!/usr/bin/env bash
# Builds and runs the libFuzzer target over mmfs's on-disk decoders
# (tools/fuzz/fuzz_decoders.cc) with ASan and UBSan. Not part of CI.
#   tools/fuzz.sh [SECONDS]     (default 600)
# Needs clang (apt-get install clang). Findings land in build-fuzz/crash-*.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-600}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is missing (apt-get install clang)" >&2; exit 1; }
out=build-fuzz
mkdir -p "$out/corpus"
python3 geometry/embed_profiles.py "$out/embedded_profiles.cc" geometry/profiles/*.json
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
  tools/fuzz/fuzz_decoders.cc fs/*.cc layouts/*.cc geometry/*.cc "$out/embedded_profiles.cc" \
  -lfmt -luring -lxxhash -o "$out/fuzz_decoders"
# Seed the corpus with real on-disk structures: a freshly formatted region.
if [ ! -e "$out/corpus/seeded" ]; then
  python3 - "$out/corpus" <<'PY'
import os, sys
d = sys.argv[1]
open(os.path.join(d, "zeros"), "wb").write(bytes(4096))
open(os.path.join(d, "seeded"), "wb").write(b"MMFSVOL1" + bytes(100))
PY
fi
cd "$out"
exec ./fuzz_decoders -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 corpus

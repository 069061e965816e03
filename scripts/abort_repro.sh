#!/usr/bin/env bash
# Run one peer regression file N times at once through ours (default: warp_specialize, whose process
# aborted at exit in some parallel runs on the H200, sessions 22-23: "double free or corruption" after
# its last output) with scripts/abort_backtrace.c preloaded, and collect the native stacks.
# Usage (on the GPU machine, from the project root, .peer carried): N=7 FOLDER=warp_specialize scripts/abort_repro.sh
# TL=/path/to/tree TAG=name: import tilelang from another tree (an A/B); files are named by TAG.
# Writes $OUT/abort_repro-$TAG.txt: per run its exit status and, for a run killed by a signal, the stack.
set -u
ROOT=$PWD; OUT=${OUT:-/tmp/out}; N=${N:-7}; FOLDER=${FOLDER:-warp_specialize}; TAG=${TAG:-ours}
TL=${TL:-$ROOT}  # the tilelang tree to import (a patched copy for an A/B)
EX=$ROOT/.peer/tilelang-examples
mkdir -p /tmp/peer-site && python3 -m pip install -q --no-index --no-deps --target /tmp/peer-site "$ROOT"/.peer/wheels/*.whl >/dev/null 2>&1
gcc -shared -fPIC -O1 -o /tmp/abort_backtrace.so "$ROOT/scripts/abort_backtrace.c" || exit 2
W=/tmp/abort-repro-$TAG; rm -rf "$W"; mkdir -p "$W"; cp -r "$EX/$FOLDER" "$W/"
f=$(cd "$W/$FOLDER" && ls regression_*.py | head -1)
for i in $(seq 1 "$N"); do
  (cd "$W/$FOLDER" && LD_PRELOAD=/tmp/abort_backtrace.so PYTHONPATH=$TL:/tmp/peer-site TL_PERF_REGRESSION_FORMAT=json \
     TILELANG_CACHE_DIR=/tmp/tlcache-abort-$TAG-$i timeout 300 python3 "$f" > "$W/run$i.out" 2> "$W/run$i.err"; echo $? > "$W/run$i.rc") &
done
wait
{
  for i in $(seq 1 "$N"); do
    rc=$(cat "$W/run$i.rc"); echo "run $i rc=$rc lines_out=$(wc -l < "$W/run$i.out")"
    if [ "$rc" != 0 ]; then
      grep -v -E "^[0-9a-f]+-[0-9a-f]+ " "$W/run$i.err" | tail -60
      echo "-- executable mappings of run $i:"; grep -E " r-xp " "$W/run$i.err" | awk '{print $1, $6}' | sort -u -k2 | head -80
    fi
  done
} | tee "$OUT/abort_repro-$TAG.txt"
echo "abort_repro: $(grep -c 'rc=0' "$OUT/abort_repro-$TAG.txt") of $N runs exited 0"

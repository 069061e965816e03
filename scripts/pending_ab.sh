#!/usr/bin/env bash
# One device call (~6 minutes) that times the switches landed without a settled device figure (docs/STATUS.md),
# each against ours as is in the same process; benchmarks/attention.py re-times every build and SDPA in 5
# interleaved rounds and reports their medians (session 33 saw ~5 % between two passes of one build):
#   attention D64 (the case still under cuDNN: 0.937 at 192x128 / 384 threads in session 33): the exp2
#     polynomial fractions and ping-pong at the 192-row tiles beside 128x128;
#   attention D128: the producer at 40 registers against 24 at 128x128 (one pass gave 643 against 582,
#     another 574 against 582), ping-pong and the polynomial;
#   host time per out_idx call: the lean launcher;
#   fp8_lighting_indexer (peer regression case, public wheel beside): the wgmma grid cost check.
# Usage (GPU machine, project root, .peer carried): bash scripts/pending_ab.sh
# Writes $OUT/attention64.txt / .json, $OUT/attention128.txt / .json, $OUT/host.txt, $OUT/indexer.txt.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
echo "== attention D64 (192-row tiles, exp2 polynomial, ping-pong)"
timeout 300 python3 benchmarks/attention.py --cases 16,16,2048,64 --configs 128,128,2,256 192,128,2,384 \
  --ab tl.enable_exp2_poly=0.25 tl.enable_exp2_poly=0.5 tl.enable_ws_pingpong=True tl.enable_ws_overlap \
  --json "$OUT/attention64.json" > "$OUT/attention64.txt" 2>&1
sed -n '/interleaved rounds:/,/^attention B/p' "$OUT/attention64.txt" | tail -40
echo "== attention D128 (producer registers, ping-pong, exp2 polynomial)"
timeout 240 python3 benchmarks/attention.py --cases 8,16,4096,128 --configs 128,128,2,256 \
  --ab tl.ws_producer_regs=40 tl.enable_ws_pingpong=False tl.enable_exp2_poly=0.25 \
  --json "$OUT/attention128.json" > "$OUT/attention128.txt" 2>&1
sed -n '/interleaved rounds:/,/^attention B/p' "$OUT/attention128.txt" | tail -20
grep -A8 "^attention forward" "$OUT/attention64.txt" "$OUT/attention128.txt" | grep -E "B[0-9]+ H"
echo "== host time per call"
PYTHONPATH=$PWD timeout 120 python3 benchmarks/host_overhead.py --ab tl.disable_lean_launcher --calls 200 --repeats 51 \
  > "$OUT/host.txt" 2>&1
tail -8 "$OUT/host.txt"
echo "== fp8_lighting_indexer"
TL_PERF_REGRESSION_ONLY=fp8_lighting_indexer PER_FILE_S=120 timeout 400 bash scripts/ab_regress.sh ./deepseek_v32/ \
  tl.disable_wgmma_policy_cost=1 tl.disable_wgmma_policy=1 > "$OUT/indexer.txt" 2>&1
tail -8 "$OUT/indexer.txt"

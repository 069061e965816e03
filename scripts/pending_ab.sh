#!/usr/bin/env bash
# One device call (~6 minutes) that times the switches landed without a device figure (docs/STATUS.md
# "Not timed"), each against ours as is in the same process or call:
#   attention: the exp2 polynomial fractions, ping-pong alone and with the polynomial at 1/4, and the
#     per-warpgroup epilogue where it is registered;
#   host time per out_idx call: the lean launcher;
#   fp8_lighting_indexer (peer regression case, public wheel beside): the wgmma grid cost check;
#   attention D64 key tiles at the wgmma widths outside the common set (176, 112) and 192-row tiles (three
#   consumer warpgroups), beside 128x128;
#   the warp-specialized producer at 40 registers (the earlier builds) against 24 (the default since
#   session 32: consumers get 240 / 160 where they got 232 / 152), on attention and the 192-row tiles.
# Usage (GPU machine, project root, .peer carried): bash scripts/pending_ab.sh
# Writes $OUT/attention.txt, $OUT/attention.json, $OUT/host.txt, $OUT/indexer.txt, $OUT/ab.jsonl.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
has() { python3 -c "import sys; from tilelang.transform.pass_config import PassConfigKey as K; \
sys.exit(0 if any(k.value == '$1' for k in K) else 1)"; }
# ping-pong is on by default for head dim >= 128 (session 27): False is the A/B's other side there,
# True forces it at D64
ab="tl.enable_exp2_poly=0.25 tl.enable_ws_pingpong=False tl.enable_ws_pingpong=True"
ab="$ab tl.enable_ws_pingpong=True+tl.enable_exp2_poly=0.25"
has tl.disable_ws_wg_epilogue && ab="$ab tl.disable_ws_wg_epilogue"
has tl.ws_producer_regs && ab="$ab tl.ws_producer_regs=40"
echo "== attention ($ab)"
timeout 240 python3 benchmarks/attention.py --cases 16,16,2048,64 8,16,4096,128 --configs 128,128,2,256 \
  --ab $ab --json "$OUT/attention.json" > "$OUT/attention.txt" 2>&1
grep -E "TFLOP/s|ours/cuDNN|^ *B[0-9]" "$OUT/attention.txt" | tail -40
echo "== attention D64 tile shapes"
timeout 300 python3 benchmarks/attention.py --cases 16,16,2048,64 --configs 128,128,2,256 128,176,2,256 \
  128,112,2,256 192,128,2,384 192,112,2,384 192,176,2,384 $(has tl.ws_producer_regs && echo "--ab tl.ws_producer_regs=40") --json "$OUT/attention_tiles.json" > "$OUT/attention_tiles.txt" 2>&1
grep -E "TFLOP/s|ours/cuDNN|^ *B[0-9]" "$OUT/attention_tiles.txt" | tail -30
echo "== attention D128 tile shapes (192x128 spilled 768 B with the producer at 40, none at 24)"
timeout 200 python3 benchmarks/attention.py --cases 8,16,4096,128 --configs 128,128,2,256 192,128,2,384 \
  128,176,2,256 $(has tl.ws_producer_regs && echo "--ab tl.ws_producer_regs=40") \
  --json "$OUT/attention_tiles128.json" > "$OUT/attention_tiles128.txt" 2>&1
grep -E "TFLOP/s|ours/cuDNN|^ *B[0-9]" "$OUT/attention_tiles128.txt" | tail -20
echo "== host time per call"
PYTHONPATH=$PWD timeout 120 python3 benchmarks/host_overhead.py --ab tl.disable_lean_launcher --calls 200 --repeats 51 \
  > "$OUT/host.txt" 2>&1
tail -8 "$OUT/host.txt"
echo "== fp8_lighting_indexer"
TL_PERF_REGRESSION_ONLY=fp8_lighting_indexer PER_FILE_S=120 timeout 400 bash scripts/ab_regress.sh ./deepseek_v32/ \
  tl.disable_wgmma_policy_cost=1 tl.disable_wgmma_policy=1 > "$OUT/indexer.txt" 2>&1
tail -8 "$OUT/indexer.txt"

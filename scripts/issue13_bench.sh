#!/usr/bin/env bash
# The timed benchmarks of issue 13 that are not regression cases, in one device call (~400 s), from the
# project's root after `bash ../shared/peer/prepare.sh --public` (carry .peer); every line also goes to $OUT:
#   attention (benchmarks/attention.py, ours beside cuDNN / flash SDPA, 7 interleaved rounds): D64 and D128
#     at 128x128 (two consumer warpgroups) and 192x128 (three); the seed GEMM and host time per out_idx call through
#     ours and the public wheel; MLA decode at batch 132 (the peer example) through both.
#   seedab: the seed GEMM at 4096^3 and 8192^3 with each of its persistent-schedule switches off in turn
#     (stream-K, its fan-in limit, k-serpentine, persistence) and with 2-block clusters (TMA multicast
#     halves one operand's L2 traffic, which 128x128 tiles on one consumer warpgroup may be bound by),
#     each run beside cuBLAS;
#     then 3 interleaved rounds of stream-K against whole tiles at 8192^3, and the per-wave timeline
#     (benchmarks/gemm_timeline.py) at both sizes and at 8192^3 with whole tiles.
# Environment: OUT (default /tmp/out), SKIP (space-separated parts to leave out: attn64 attn128 seed host mla
#   seedab).
set -u
ROOT=$PWD; P=$ROOT/.peer; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; SKIP=" ${SKIP:-} "
[ -d "$P/tilelang-examples" ] || { echo "no .peer: run bash ../shared/peer/prepare.sh --public and carry .peer"; exit 2; }
mkdir -p /tmp/tlsite; [ -d /tmp/tlsite/tilelang ] || tar -xJf "$P/tl-site.tar.xz" -C /tmp/tlsite
mkdir -p /tmp/peer-site && python3 -m pip install -q --no-index --no-deps --target /tmp/peer-site "$P"/wheels/*.whl >/dev/null 2>&1
part() { case "$SKIP" in *" $1 "*) return 1;; esac; echo "== $1 $(date +%T)" | tee -a "$OUT/bench.log"; }
run() { "$@" 2>&1 | tee -a "$OUT/bench.log"; }
if part attn64; then
  run timeout 200 python3 benchmarks/attention.py --cases 16,16,2048,64 --configs 192,128,2,384 128,128,2,256 \
      --rounds 7
fi
if part attn128; then
  run timeout 200 python3 benchmarks/attention.py --cases 8,16,4096,128 --configs 128,128,2,256 192,128,2,384 \
      --rounds 7
fi
if part seed; then
  run timeout 90 python3 benchmarks/gemm_seed.py
  PYTHONPATH=/tmp/tlsite run timeout 120 python3 benchmarks/gemm_seed.py
fi
if part host; then
  PYTHONPATH=$ROOT run timeout 60 python3 benchmarks/host_overhead.py
  PYTHONPATH=/tmp/tlsite run timeout 90 python3 benchmarks/host_overhead.py
fi
if part mla; then
  d=$P/tilelang-examples/deepseek_mla
  (cd "$d" && PYTHONPATH=$ROOT:/tmp/peer-site run timeout 120 python3 example_mla_decode.py --batch 132)
  (cd "$d" && PYTHONPATH=/tmp/tlsite:/tmp/peer-site run timeout 150 python3 example_mla_decode.py --batch 132)
fi
if part seedab; then
  for pc in "" tl.disable_stream_k=true tl.stream_k_max_fanin=0 tl.disable_k_serpentine=true \
            tl.disable_persistent=true tl.enable_cluster=true; do
    PYTHONPATH=$ROOT run timeout 90 python3 benchmarks/gemm_seed.py --sizes 4096 8192 ${pc:+--pass-config $pc}
  done
  for r in 1 2 3; do  # 8192^3: stream-K (last wave of 4 tiles) against whole tiles (deferred epilogue), interleaved
    for pc in "" tl.disable_stream_k=true; do
      PYTHONPATH=$ROOT run timeout 90 python3 benchmarks/gemm_seed.py --sizes 8192 ${pc:+--pass-config $pc}
    done
  done
  for n in 4096 8192; do  # per-wave k-loop and epilogue times of the seed config (tl.debug_timeline)
    PYTHONPATH=$ROOT run timeout 90 python3 benchmarks/gemm_timeline.py --shape $n,$n,$n --config 128,128,32,128,3
  done
  PYTHONPATH=$ROOT run timeout 90 python3 benchmarks/gemm_timeline.py --shape 8192,8192,8192 --config 128,128,32,128,3 \
      --no-stream-k
fi
echo "== done $(date +%T)" | tee -a "$OUT/bench.log"

"""Per-wave timeline of the persistent warp-specialized GEMM (pass config tl.debug_timeline).

    python benchmarks/gemm_timeline.py [--shape 4096,4096,4096] [--config 128,256,64,256,4]
                                       [--dtype fp16|bf16] [--no-stream-k]

Compiles `gemm.make_gemm` with per-tile timestamps, checks a launch against float64 (first
256 rows), times it, then prints one row per wave (the j-th tile or stream-K unit of every
block): when it starts, its k-loop and epilogue times, and when its last block ends, in
microseconds from the first start (`tilelang.tools.timeline`). The timestamps cost a few global
stores per tile; compare the summary's total with the timing printed above it.
"""
from __future__ import annotations

import argparse
import sys
import warnings

import torch
from common import bench
from gemm import make_gemm

import tilelang
from tilelang.tools.timeline import summarize


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4096,4096,4096")
    ap.add_argument("--config", default="128,256,64,256,4", help="block_M,block_N,block_K,threads,stages")
    ap.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    ap.add_argument("--no-stream-k", action="store_true")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to trace")
        return 0
    M, N, K = (int(x) for x in args.shape.split(","))
    cfg = tuple(int(x) for x in args.config.split(","))
    tl_dtype, tdt = {"fp16": ("float16", torch.float16), "bf16": ("bfloat16", torch.bfloat16)}[args.dtype]
    conf = {"tl.debug_timeline": True, "tl.disable_stream_k": args.no_stream_k}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make_gemm(M, N, K, *cfg, dtype=tl_dtype), target="cuda", pass_configs=conf)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    k(a, b, c)
    ref = a[:256].double() @ b.double()
    err = ((c[:256].double() - ref).abs().max() / ref.abs().max()).item()
    ms = bench(lambda: k(a, b, c))
    print(f"{args.dtype} {M}x{N}x{K} cfg={cfg} stream_k={not args.no_stream_k}: rel_err {err:.2e}, "
          f"{ms * 1e3:.1f} us, {2 * M * N * K / ms / 1e9:.1f} TFLOP/s")
    torch.cuda.synchronize()
    k(a, b, c)  # one launch alone, after the timing loop
    print(summarize(k.timeline()))
    return 0 if err < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())

"""The seed program's GEMM (128 threads, 128x128x32 tiles, 3 stages, fp16 in, fp32 accumulate)
beside cuBLAS, with whichever `tilelang` is importable -- run it once with ours and once with the
public TileLang on PYTHONPATH to put the three side by side (both run this same user program):

    python benchmarks/gemm_seed.py [--sizes 4096 8192] [--config 128,128,32,128,3] [--pass-config k=v ...]
    PYTHONPATH=/tmp/tlsite python benchmarks/gemm_seed.py      # the public wheel (tl-site.tar.xz)

Uses only the public API (T.prim_func, tilelang.compile, kernel(a, b, c)); the output is checked
against float64 on a 256x256 corner with the output poisoned first. Prints one line per size:
`SEED <impl> n=<n> tilelang <TFLOP/s> cuBLAS <TFLOP/s>`.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import bench, require_cuda, tflops  # noqa: E402

import torch  # noqa: E402

import tilelang  # noqa: E402
from gemm import make_gemm as seed_gemm  # noqa: E402  (the seed program; gemm.py times the same one)


def parse_kv(s):
    k, _, v = s.partition("=")
    return k, {"true": True, "false": False}.get(v.lower(), v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192])
    ap.add_argument("--config", default="128,128,32,128,3", help="block_M,block_N,block_K,threads,stages")
    ap.add_argument("--pass-config", type=parse_kv, nargs="*", default=[], help="e.g. tl.disable_deep_ring=true")
    args = ap.parse_args()
    if not require_cuda("gemm_seed.py"):
        return 0
    cfg = tuple(int(x) for x in args.config.split(","))
    impl = "public" if "site-packages" in tilelang.__file__ or "tlsite" in tilelang.__file__ else "ours"
    torch.manual_seed(0)
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
        k = tilelang.compile(seed_gemm(n, n, n, *cfg), target="cuda", pass_configs=dict(args.pass_config))
        k(a, b, c)
        torch.cuda.synchronize()
        ref = a[:256].double() @ b[:, :256].double()
        err = ((c[:256, :256].double() - ref).abs().max() / ref.abs().max()).item()
        if not err < 1e-2:
            print(f"SEED {impl} n={n} cfg={cfg}: WRONG rel_err={err:.3e}", flush=True)
            continue
        ours = tflops(2.0 * n ** 3, bench(lambda: k(a, b, c)))
        cub = tflops(2.0 * n ** 3, bench(lambda: torch.matmul(a, b, out=c)))
        print(f"SEED {impl} n={n} cfg={cfg} tilelang {ours:.1f} TFLOP/s cuBLAS {cub:.1f} TFLOP/s "
              f"rel_err={err:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Import time of `tilelang`, and cold / warm compile time of the quickstart GEMM per target.

cold: a new process with an empty TILELANG_CACHE_DIR (C compiler / NVRTC runs, plus the
      one-time compiler probe); warm: a new process on that same cache (a hit: parse,
      passes, hash, dlopen / module load). Each number is the median of --runs processes.
Targets: "cpu", and "cuda -arch=sm_90a" (NVRTC from the pip wheels, no GPU needed) when the
CUDA backend and NVRTC are installed; otherwise that row says why it was skipped.

    python scripts/compile_times.py [--runs 3] [--size 1024]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("cpu", "cuda -arch=sm_90a")

CHILD = r"""
import sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import tilelang
t2 = time.perf_counter()
sys.path.insert(0, sys.argv[2])
from quickstart import matmul
n = int(sys.argv[3])
t3 = time.perf_counter()
kernel = tilelang.compile(matmul.get_tir(n, n, n, 128, 128, 32), out_idx=[-1], target=sys.argv[1])
t4 = time.perf_counter()
print("TIMES", t1 - t0, t2 - t1, t4 - t3)
"""


def cuda_skip_reason() -> str | None:
    """Why the CUDA row cannot run here, or None."""
    probe = ("import importlib.util, sys\n"
             "if importlib.util.find_spec('tilelang.backend.cuda.pipeline') is None: sys.exit('no CUDA backend')\n"
             "from tilelang.backend.cuda import nvrtc\n"
             "sys.exit(0 if nvrtc.nvrtc_available() else 'NVRTC not installed (pip install nvidia-cuda-nvrtc)')\n")
    res = subprocess.run([sys.executable, "-c", probe], env=_env(None), capture_output=True, text=True)
    return None if res.returncode == 0 else (res.stderr.strip().splitlines() or ["unavailable"])[-1]


def _env(cache):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TILELANG_DISABLE_CACHE", None)
    if cache is not None:
        env["TILELANG_CACHE_DIR"] = cache
    return env


def run_once(target: str, cache: str, size: int) -> tuple[float, float, float]:
    """(torch import, tilelang import, compile) seconds in a fresh process."""
    out = subprocess.run([sys.executable, "-c", CHILD, target, str(ROOT / "examples"), str(size)],
                         env=_env(cache), capture_output=True, text=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("TIMES")]
    if out.returncode or not line:
        raise SystemExit(f"compile for {target!r} failed:\n{out.stderr[-3000:]}")
    return tuple(float(x) for x in line[-1].split()[1:])


def measure(target: str, runs: int, size: int) -> dict:
    torch_s, imports, cold, warm = [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="tl-cache-") as cache:
            t, i, c = run_once(target, cache, size)
            _, i2, w = run_once(target, cache, size)
        torch_s.append(t)
        imports += [i, i2]
        cold.append(c)
        warm.append(w)
    med = statistics.median
    return {"torch": med(torch_s), "import": med(imports), "cold": med(cold), "warm": med(warm)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--size", type=int, default=1024, help="M = N = K of the quickstart GEMM")
    args = p.parse_args()
    print(f"quickstart GEMM {args.size}^3 (128x128x32 tiles), median of {args.runs} fresh processes each")
    skip_cuda = cuda_skip_reason()
    for target in TARGETS:
        if target.startswith("cuda") and skip_cuda:
            print(f"  {target:18s} skipped: {skip_cuda}")
            continue
        r = measure(target, args.runs, args.size)
        print(f"  {target:18s} import tilelang {r['import'] * 1e3:6.1f} ms (after torch, {r['torch']:.2f} s)   "
              f"cold compile {r['cold']:6.3f} s   warm {r['warm']:6.3f} s")


if __name__ == "__main__":
    main()

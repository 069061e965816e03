"""Import time, cold compile (empty cache, new process) and warm compile (cache hit, new process)
of the quickstart GEMM, for the CPU target and for "cuda -arch=sm_90a" (NVRTC, no GPU needed).

    python scripts/compile_times.py
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import tilelang
t2 = time.perf_counter()
sys.path.insert(0, sys.argv[2])
from quickstart import matmul
import tilelang.language as T
t3 = time.perf_counter()
k = tilelang.compile(matmul.__wrapped__(1024, 1024, 1024, 128, 128, 32), out_idx=[-1], target=sys.argv[1])
t4 = time.perf_counter()
print(f"{t2 - t1:.4f} {t4 - t3:.4f}")
"""


def run(target, cache):
    env = dict(os.environ, TILELANG_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", CHILD, target, str(ROOT / "examples")], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    imp, comp = map(float, out.stdout.split()[-2:])
    return imp, comp


for target in ("cpu", "cuda -arch=sm_90a"):
    with tempfile.TemporaryDirectory() as cache:
        imp, cold = run(target, cache)
        _, warm = run(target, cache)
    print(f"{target:18s} import tilelang {imp * 1e3:6.1f} ms   cold compile {cold:6.3f} s   warm {warm:6.3f} s")

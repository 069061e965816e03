"""`import tilelang` stays fast: no torch, numpy or CUDA bindings at import, and lazy submodules work."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import sys, time
t0 = time.perf_counter()
import tilelang
dt = time.perf_counter() - t0
heavy = [m for m in ("torch", "numpy", "cuda", "cuda.bindings", "tilelang.backend.cuda.driver") if m in sys.modules]
print(repr((dt, heavy)))
import tilelang.language as T
assert tilelang.TensorSupplyType.Normal and callable(tilelang.autotune) and tilelang.testing and tilelang.profiler
"""


def test_import_is_light_and_fast():
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    seconds, heavy = eval(res.stdout.strip().splitlines()[-1])  # noqa: S307 - our own probe's repr
    assert heavy == [], f"import tilelang pulled in {heavy}"
    assert seconds < 0.3, f"import tilelang took {seconds:.3f} s"

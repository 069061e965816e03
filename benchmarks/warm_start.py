"""Warm start: seconds from `import tilelang` to a callable quickstart GEMM in a new process
whose kernel is already in the disk cache.

    python benchmarks/warm_start.py [--runs 7] [--target cpu]

Each run is a fresh `python -c` child: `import torch` first (not counted), then the clock
starts, then `import tilelang`, `import tilelang.language as T`, the @tilelang.jit decorator
(examples/quickstart.py's factory) and `matmul(300, 260, 200, 128, 128, 32)`, which returns
the kernel ready to call. The first child fills the cache and is not counted. Printed: the
median and min of wall and CPU (process) time, and the split import / decorate / kernel,
for the kernel cache on and off (TILELANG_KERNEL_CACHE=0: the factory and passes run, the
compiled library still comes from the disk cache). Python writes no bytecode when
PYTHONDONTWRITEBYTECODE is set; then every import compiles from source, which this
script reports as a separate figure (without bytecode caches) since an installed package has them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r'''
import json, sys, time
import torch
w0, c0 = time.perf_counter(), time.process_time()
import tilelang
import tilelang.language as T
w1, c1 = time.perf_counter(), time.process_time()
sys.path.insert(0, {examples!r})
exec(compile(open({quickstart!r}).read().split("def main(")[0], {quickstart!r}, "exec"))
w2, c2 = time.perf_counter(), time.process_time()
k = matmul(300, 260, 200, 128, 128, 32)
w3, c3 = time.perf_counter(), time.process_time()
print(json.dumps(dict(wall=w3 - w0, cpu=c3 - c0, imp=w1 - w0, deco=w2 - w1, kernel=w3 - w2,
                      cached=getattr(k, "_prim_func", 1) is None, target=str(k.target))))
'''


def child(env: dict) -> dict:
    code = CHILD.format(examples=str(ROOT / "examples"), quickstart=str(ROOT / "examples" / "quickstart.py"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def series(env: dict, runs: int) -> dict:
    child(env)  # fills the caches (and the bytecode caches, where Python may write them)
    rs = [child(env) for _ in range(runs)]
    med = {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "imp", "deco", "kernel")}
    return {**med, "wall_min": min(r["wall"] for r in rs), "cached": rs[-1]["cached"], "target": rs[-1]["target"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--target", default="auto", help="TILELANG_DEFAULT_TARGET for the children")
    args = ap.parse_args()
    base = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    base["TILELANG_DEFAULT_TARGET"] = args.target
    cases = [("kernel cache on", {}), ("kernel cache off", {"TILELANG_KERNEL_CACHE": "0"})]
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set; the first figures below let Python write bytecode caches")
    for label, extra in cases:
        env = {**base, **extra}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        r = series(env, args.runs)
        print(f"{label:18s} ({r['target']}, from cache: {r['cached']}): wall {r['wall'] * 1e3:.0f} ms median, "
              f"{r['wall_min'] * 1e3:.0f} ms min; cpu {r['cpu'] * 1e3:.0f} ms; import {r['imp'] * 1e3:.0f} ms, "
              f"decorate {r['deco'] * 1e3:.1f} ms, kernel {r['kernel'] * 1e3:.0f} ms")
    env = {**base, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(Path("/tmp") / "tl-no-pyc")}
    r = series(env, max(3, args.runs // 2))
    print(f"{'no bytecode cache':18s} (cache on): wall {r['wall'] * 1e3:.0f} ms median; import {r['imp'] * 1e3:.0f} ms, "
          f"kernel {r['kernel'] * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

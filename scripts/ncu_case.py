"""Run one peer regression case with do_bench replaced by three plain calls, so a profiler
(ncu, nsys, compute-sanitizer) sees a handful of launches of the case's kernels and nothing else.

    python scripts/ncu_case.py FOLDER REGRESSION_FUNC      # e.g. deepseek_v32 regression_sparse_mla_fwd_pipelined
    ncu --set full -k regex:sparse_mla --launch-skip 1 --launch-count 1 python scripts/ncu_case.py ...

The implementation is whichever `tilelang` PYTHONPATH finds first (ours or the public wheel).
Examples come from $PEER/tilelang-examples (default .peer/tilelang-examples).
"""
import importlib
import os
import sys
from pathlib import Path

folder, func = sys.argv[1], sys.argv[2]
peer = Path(os.environ.get("PEER", Path(__file__).resolve().parents[1] / ".peer")) / "tilelang-examples"
os.chdir(peer / folder)
sys.path.insert(0, str(peer / folder))
import torch  # noqa: E402
import tilelang.profiler  # noqa: E402


def _three_calls(fn, *args, **kwargs):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return 1.0


tilelang.profiler.do_bench = _three_calls
mod = importlib.import_module(next(p.stem for p in Path(".").glob("regression_*.py")))
getattr(mod, func)()
print("done", folder, func, "with", tilelang.__file__)

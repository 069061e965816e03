"""`do_bench`: time a callable in milliseconds.

On CUDA the time comes from CUDA events around each call, with the L2 cache flushed
(a 256 MiB buffer is zeroed) before each call so kernels cannot profit from the previous
run's data; on CPU it is `time.perf_counter` around each call.

`warmup` and `rep` are time budgets in milliseconds (one estimate run decides how many
calls fit), unless `n_warmup` / `n_repeat` give call counts explicitly.

Example::

    ms = do_bench(lambda: torch.matmul(a, b), warmup=10, rep=50)
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

_MODES = ("mean", "median", "min", "max")
_L2_FLUSH_BYTES = 256 << 20
_MAX_CALLS = 100_000


def do_bench(fn: Callable, warmup: float = 25, rep: float = 100, n_warmup: int = 0, n_repeat: int = 0,
             return_mode: str = "mean", device: str = "auto", quantiles=None):
    """Milliseconds per call of `fn()` (mean by default; see `return_mode`).

    With `quantiles` (e.g. `[0.5, 0.2, 0.8]`) returns a list of those quantiles instead.
    `device`: "cuda" (CUDA events), "cpu" (perf_counter) or "auto" (cuda when torch has
    an initialised CUDA device, else cpu).
    """
    if return_mode not in _MODES:
        raise ValueError(f"do_bench: return_mode must be one of {_MODES}, got {return_mode!r}")
    if warmup < 0 or rep <= 0:
        raise ValueError(f"do_bench: warmup must be >= 0 and rep > 0 (milliseconds), got {warmup}, {rep}")
    use_cuda = _use_cuda(device)
    timer = _CudaTimer() if use_cuda else _CpuTimer()
    est = max(timer.time(fn), 1e-4)  # also the first (cold) call
    nw = n_warmup if n_warmup > 0 else min(_MAX_CALLS, int(warmup / est))
    nr = n_repeat if n_repeat > 0 else max(1, min(_MAX_CALLS, int(rep / est)))
    for _ in range(nw):
        fn()
    times = timer.run(fn, nr)
    if quantiles is not None:
        return [_quantile(times, q) for q in quantiles]
    return {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max}[return_mode](times)


def _quantile(times: list, q: float) -> float:
    s = sorted(times)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _use_cuda(device: str) -> bool:
    if device == "cpu":
        return False
    if device not in ("auto", "cuda"):
        raise ValueError(f"do_bench: device must be 'auto', 'cuda' or 'cpu', got {device!r}")
    import torch

    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("do_bench(device='cuda'): torch sees no CUDA device")
        return True
    # NOTE: is_initialized, not is_available: a CPU-only workload on a GPU machine stays on
    # perf_counter unless something already used CUDA.
    return torch.cuda.is_available() and torch.cuda.is_initialized()


class _CpuTimer:
    def time(self, fn) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    def run(self, fn, n: int) -> list:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out


class _CudaTimer:
    def __init__(self):
        import torch

        self.torch = torch
        self.flush = torch.empty(_L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def time(self, fn) -> float:
        return self.run(fn, 1)[0]

    def run(self, fn, n: int) -> list:
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        torch.cuda.synchronize()
        for s, e in zip(starts, ends):
            self.flush.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

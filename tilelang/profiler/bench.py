"""`do_bench`: milliseconds per call of a callable, with the public TileLang's arguments.

`warmup` and `rep` are time budgets in milliseconds (an estimate from a few calls decides
how many calls fit) unless `_n_warmup` / `_n_repeat` give call counts. On CUDA, the L2
cache is flushed (a `cache_size` MiB buffer is zeroed) before each timed call so a kernel
cannot profit from the previous run's data. Backends:

    "event"      CUDA events around each call (the default)
    "cupti"      the device time of the kernels themselves, from torch.profiler (CUPTI),
                 excluding the flush; where the profiler records no CUDA activity it falls
                 back to "event" with a warning
    "cudagraph"  n_repeat calls captured once in a CUDA graph, the replay timed
    "wall"       host perf_counter around each call (synchronizing when a device is given)

Where no CUDA is in use (CPU kernels), every backend times with perf_counter, as "wall".
"msprof" / "msprof_detail" (Ascend) raise ValueError.

    ms = do_bench(lambda: kernel(a, b), warmup=10, rep=50, backend="cupti")

Under a tool that slows the host side of each launch (compute-sanitizer), budgets in device
milliseconds can mean tens of thousands of calls: the environment variable
TILELANG_BENCH_MAX_CALLS=N caps every pass (estimate, warmup, timed) at N calls (at least one
timed call). scripts/sanitize.py sets it; the figures are then not measurements.
"""
from __future__ import annotations

import math
import statistics
import time
import warnings
from typing import Callable

from .. import env

_MODES = ("mean", "median", "min", "max")
_BACKENDS = ("event", "cupti", "cudagraph", "wall")
_MAX_CALLS = 100_000
_ESTIMATE_CALLS = 5
_FLUSH_TAG = "tilelang_do_bench_l2_flush"



def do_bench(fn: Callable, warmup: float = 25, rep: float = 100, _n_warmup: int = 0, _n_repeat: int = 0,
             quantiles: list | None = None, fast_flush: bool = True, backend: str = "event",
             return_mode: str = "mean", device=None, cache_size: int = 256,
             early_stop_baseline: float | None = None, *, n_warmup: int | None = None,
             n_repeat: int | None = None):
    """Milliseconds per call of `fn()` (`return_mode` over the timed calls, or the list of
    `quantiles`). `device`: None (CUDA when torch has an initialised CUDA device, else the
    host clock), "cpu", "cuda", "cuda:N", an int or a torch.device. `early_stop_baseline`:
    when the estimate already exceeds it (ms), return the estimate without the full run.
    `n_warmup` / `n_repeat` are accepted as spellings of `_n_warmup` / `_n_repeat`."""
    nw_fixed = _n_warmup if n_warmup is None else n_warmup
    nr_fixed = _n_repeat if n_repeat is None else n_repeat
    _check_args(warmup, rep, nw_fixed, nr_fixed, quantiles, backend, return_mode)
    cuda_index = _cuda_device(device)
    if backend == "wall" or cuda_index is None:
        timer = _WallTimer(cuda_index)
    else:
        timer = _CudaTimer(cuda_index, cache_size, fast_flush)
    fn()  # first (cold) call: compiles, allocates, loads the module
    timer.sync()
    cap = env.bench_max_calls()
    est = max(timer.estimate(fn, min(_ESTIMATE_CALLS, cap or _ESTIMATE_CALLS)), 1e-4)
    if early_stop_baseline is not None and est > early_stop_baseline:
        return est if quantiles is None else [est] * len(quantiles)
    nw = nw_fixed if nw_fixed > 0 else min(_MAX_CALLS, int(warmup / est))
    nr = nr_fixed if nr_fixed > 0 else max(1, min(_MAX_CALLS, int(rep / est)))
    if cap is not None:
        nw, nr = min(nw, cap), min(nr, cap)
    for _ in range(nw):
        fn()
    timer.sync()
    if backend == "cupti" and isinstance(timer, _CudaTimer):
        return timer.cupti(fn, nr, lambda: timer.events(fn, nr), quantiles, return_mode)
    times = timer.cudagraph(fn, nr) if backend == "cudagraph" and isinstance(timer, _CudaTimer) \
        else timer.events(fn, nr)
    if quantiles is not None:
        out = [_quantile(times, q) for q in quantiles]
        return out[0] if len(out) == 1 and backend == "cudagraph" else out
    return {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max}[return_mode](times)


def _check_args(warmup, rep, nw, nr, quantiles, backend, return_mode) -> None:
    if return_mode not in _MODES:
        raise ValueError(f"do_bench: return_mode must be one of {_MODES}, got {return_mode!r}")
    if backend in ("msprof", "msprof_detail"):
        raise ValueError(f"do_bench: backend {backend!r} times Ascend NPUs, which this TileLang does not support; "
                         f"use one of {_BACKENDS}")
    if backend not in _BACKENDS:
        raise ValueError(f"do_bench: backend must be one of {_BACKENDS}, got {backend!r}")
    if not (math.isfinite(warmup) and math.isfinite(rep)) or warmup < 0 or rep <= 0:
        raise ValueError(f"do_bench: warmup must be >= 0 and rep > 0 (milliseconds), got {warmup}, {rep}")
    if nw < 0 or nr < 0:
        raise ValueError(f"do_bench: call counts must be >= 0, got {nw}, {nr}")
    if quantiles is not None and any(not 0 <= q <= 1 for q in quantiles):
        raise ValueError(f"do_bench: quantiles must lie in [0, 1], got {quantiles}")


def _quantile(times: list, q: float) -> float:
    s = sorted(times)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _cuda_device(device) -> int | None:
    """The CUDA device index to time on, or None for the host clock."""
    import torch

    if device is None or device == "auto":
        # NOTE: is_initialized, not is_available: a CPU workload on a GPU machine stays on the host clock.
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return None
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        raise ValueError(f"do_bench: device must be a CUDA device or 'cpu', got {dev}")
    if not torch.cuda.is_available():
        raise RuntimeError(f"do_bench(device={device!r}): torch sees no CUDA device")
    return torch.cuda.current_device() if dev.index is None else dev.index


class _WallTimer:
    def __init__(self, cuda_index: int | None):
        self.cuda_index = cuda_index

    def sync(self) -> None:
        if self.cuda_index is not None:
            import torch

            torch.cuda.synchronize(self.cuda_index)

    def estimate(self, fn, n: int = _ESTIMATE_CALLS) -> float:
        return statistics.fmean(self.events(fn, n))

    def events(self, fn, n: int) -> list:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            self.sync()
            out.append((time.perf_counter() - t0) * 1e3)
        return out


class _CudaTimer:
    def __init__(self, index: int, cache_size: int, fast_flush: bool):
        import torch

        self.torch, self.index = torch, index
        nbytes = int(cache_size) << 20
        dtype = torch.int32 if fast_flush else torch.int8
        self.flush = torch.empty(nbytes // dtype.itemsize, dtype=dtype, device=torch.device("cuda", index))
        self.flush.zero_()

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.index)

    def estimate(self, fn, n: int = _ESTIMATE_CALLS) -> float:
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            self.flush.zero_()
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / n

    def events(self, fn, n: int) -> list:
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        self.sync()
        for s, e in zip(starts, ends):
            self.flush.zero_()
            s.record()
            fn()
            e.record()
        self.sync()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def cudagraph(self, fn, n: int, replays: int = 10) -> list:
        """Per-call ms of `n` calls captured in one graph, over `replays` replays (flush before each)."""
        torch = self.torch
        stream = torch.cuda.Stream(device=self.index)
        with torch.cuda.stream(stream):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                for _ in range(n):
                    fn()
            self.sync()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
            for s, e in zip(starts, ends):
                self.flush.zero_()
                s.record()
                graph.replay()
                e.record()
            self.sync()
        return [s.elapsed_time(e) / n for s, e in zip(starts, ends)]

    def cupti(self, fn, n: int, fallback, quantiles, return_mode):
        """Kernel device time per call (ms) summed from the profiler's CUDA events, flush excluded.
        As in the public TileLang, the profiler runs on a schedule of one skipped and one recorded
        step, each of n flushed calls: CUPTI's activity buffers are set up during the first pass and
        only the second one is counted."""
        torch = self.torch
        prof = torch.profiler
        with warnings.catch_warnings():  # "Profiler won't be using warmup": a skipped step is our warmup
            warnings.simplefilter("ignore", UserWarning)
            schedule = prof.schedule(wait=1, warmup=0, active=1, repeat=1)
        with prof.profile(activities=[prof.ProfilerActivity.CPU, prof.ProfilerActivity.CUDA], schedule=schedule) as p:
            for _ in range(2):
                for _ in range(n):
                    with prof.record_function(_FLUSH_TAG):
                        self.flush.zero_()
                    fn()
                self.sync()
                p.step()
        total = flush = 0.0
        seen = False
        for ev in p.events():
            if getattr(getattr(ev, "device_type", None), "name", "") != "CUDA":
                continue
            seen = True
            us = getattr(ev, "self_device_time_total", None)
            us = getattr(ev, "self_cuda_time_total", 0.0) if us is None else us  # torch < 2.4
            if not ev.is_user_annotation:
                total += us
            elif ev.key == _FLUSH_TAG:
                flush += us
        if not seen:
            warnings.warn("do_bench(backend='cupti'): torch.profiler recorded no CUDA activity (CUPTI unavailable?); "
                          "timing with CUDA events instead", RuntimeWarning, stacklevel=3)
            times = fallback()
            if quantiles is not None:
                return [_quantile(times, q) for q in quantiles]
            return {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max}[return_mode](times)
        ms = (total - flush) / n * 1e-3
        return ms if quantiles is None else [ms] * len(quantiles)

"""The perf-regression harness of `regression_*.py` files: `process_func` and `regression`.

A regression file defines functions named `regression_<case>` that each call
`process_func(bench, **kwargs)`, where `bench(**kwargs)` returns a latency (any positive
number; only ratios between two runs matter). `regression()` at the bottom of the file runs
every such function of the calling module in name order and prints the results:

    def regression_gemm():
        tilelang.testing.process_func(example_gemm.run_regression_perf, M=1024, N=1024)

    if __name__ == "__main__":
        tilelang.testing.regression()

Output (env.PERF_REGRESSION_FORMAT): `text` prints `name: latency` per result; `json` prints
one line `__TILELANG_PERF_RESULTS_JSON__=[{"name": .., "latency": .., "case": ..}, ...]`, which a
collecting parent process can find among whatever else the benchmarks print.
env.PERF_REGRESSION_ONLY restricts the run to matching cases.
"""
from __future__ import annotations

import fnmatch
import inspect
import json
import logging
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .. import env

__all__ = ["PerfResult", "process_func", "regression", "results", "RESULTS_JSON_PREFIX"]

RESULTS_JSON_PREFIX = "__TILELANG_PERF_RESULTS_JSON__="
_RETRIES = 5
_PREFIX = "regression_"


@dataclass(frozen=True)
class PerfResult:
    """One recorded latency: the result's name, its value, and the regression case that made it."""

    name: str
    latency: float
    case: str | None = None


_results: list[PerfResult] = []
_case: list[str | None] = [None]  # the regression_* function running now


def results() -> list[PerfResult]:
    """The results recorded since the last `regression()` started (a copy)."""
    return list(_results)


def _strip(name: str) -> str:
    return name[len(_PREFIX):] if name.startswith(_PREFIX) else name


def process_func(func: Callable[..., float], name: str | None = None, /, **kwargs: Any) -> None:
    """Call `func(**kwargs)` and record the latency it returns under `name` (default: func's module).

    A non-positive latency (a failed timing) is retried up to 5 times; if it stays non-positive
    a RuntimeWarning is issued and nothing is recorded.
    """
    result_name = _strip(getattr(func, "__module__", "<unknown>") if name is None else name)
    latency = float(func(**kwargs))
    tries = 0
    while latency <= 0.0 and tries < _RETRIES:
        latency = float(func(**kwargs))
        tries += 1
    if latency <= 0.0:
        warnings.warn(f"{result_name} has latency {latency} <= 0; check the profiling results.", RuntimeWarning,
                      stacklevel=2)
        return
    _results.append(PerfResult(result_name, latency, _case[0]))


def _selected(name: str, filters: Sequence[str]) -> bool:
    if not filters:
        return True
    for candidate in (name.lower(), _strip(name).lower()):
        for pattern in filters:
            p = pattern.lower()
            if fnmatch.fnmatch(candidate, p) or p in candidate:
                return True
    return False


def _emit() -> None:
    if env.perf_regression_format() == "json":
        items = []
        for r in _results:
            item: dict = {"name": r.name, "latency": r.latency}
            if r.case is not None:
                item["case"] = r.case
            items.append(item)
        print(RESULTS_JSON_PREFIX + json.dumps(items, separators=(",", ":")))
        return
    for r in _results:
        print(f"{r.name}: {r.latency}")


def regression(prefixes: Sequence[str] = (_PREFIX,), verbose: bool = True) -> None:
    """Run the caller module's functions whose names start with one of `prefixes`, then print."""
    caller = inspect.currentframe().f_back.f_globals  # type: ignore[union-attr]
    _results.clear()
    funcs = sorted((k, v) for k, v in list(caller.items())
                   if callable(v) and any(k.startswith(p) for p in prefixes))
    filters = env.perf_regression_only()
    funcs = [(k, v) for k, v in funcs if _selected(k, filters)]
    for i, (name, fn) in enumerate(funcs, 1):
        _case[0] = _strip(name)
        if verbose:
            print(f"  ├─ [{i}/{len(funcs)}] {_case[0]}", end="", flush=True)
        t0 = time.perf_counter()
        try:
            _run_quietly(fn)
        finally:
            _case[0] = None
        if verbose:
            print(f" ({time.perf_counter() - t0:.2f}s)", flush=True)
    _emit()


def _run_quietly(fn: Callable[[], Any]) -> None:
    """Benchmarks print warnings by the hundred: silence warnings and log records below ERROR."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            fn()
        finally:
            logging.disable(logging.NOTSET)

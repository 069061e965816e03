"""`AutoTuner`: compile a kernel factory once per config, check it, time it, keep the fastest.

    tuner = AutoTuner.from_kernel(kernel=matmul_factory, configs=[{"block_M": 64}, {"block_M": 128}])
    result = tuner.set_compile_args(out_idx=[-1], target="cpu").run(warmup=5, rep=20)
    result.kernel, result.config, result.latency        # the winner
    result.results                                      # every config: latency or why it was skipped

A config that fails to compile, fails the reference check, or runs past `timeout`
seconds (compile + check) is skipped and reported in `results`; only when every config
fails does `run` raise.

A config's "pass_configs" key is not a kernel parameter: its dict is laid over the compile
args' pass_configs for that config. `run(early_stop=True, early_stop_factor=f)` stops timing a
config as soon as its estimate exceeds f times the best latency so far (its latency is then
that estimate, and it cannot win).
"""
from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ..errors import TileLangError
from ..profiler.supply import TensorSupplyType
from .capture import get_autotune_inputs

logger = logging.getLogger("tilelang.autotuner")


@dataclass
class ConfigResult:
    """One config's outcome: its latency in ms, or the reason it was skipped."""

    config: dict
    latency: float | None = None
    error: str | None = None
    compile_seconds: float = 0.0


@dataclass
class AutotuneResult:
    """The fastest config, its kernel and latency (ms; None when nothing was tuned), and every
    config's outcome."""

    latency: float | None
    config: dict
    kernel: object
    ref_latency: float | None = None
    results: list = field(default_factory=list)

    @property
    def func(self):
        return self.kernel.prim_func

    @property
    def libcode(self) -> str:
        return self.kernel.get_kernel_source()


PASS_CONFIGS = "pass_configs"  # the config key that is not a kernel parameter


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Interrupt the block after `seconds` (main thread on POSIX only; elsewhere no limit).

    Why a signal: compiling runs the C compiler / NVRTC, which a thread cannot cancel; a
    SIGALRM raised in Python makes subprocess.run kill the compiler it waits on.
    """
    usable = (seconds and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class AutoTuner:
    """Tune `fn(**config) -> T.prim_func | JITKernel` over `configs` (a list of dicts)."""

    def __init__(self, fn: Callable, configs):
        self.fn = fn
        self.configs = config_list(configs)
        self.compile_args: dict = {}
        self.profile_args: dict = dict(supply_type=TensorSupplyType.Auto, ref_prog=None, supply_prog=None,
                                       rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01, skip_check=False,
                                       manual_check_prog=None, cache_input_tensors=False,
                                       dynamic_symbolic_constraints=None)
        self.inputs_fn: Callable | None = None  # kernel -> input list (eager mode uses the caller's tensors)
        self.fn_takes_pass_configs = False  # fn(pass_configs=..., **config) compiles with them itself

    @classmethod
    def from_kernel(cls, kernel: Callable, configs) -> "AutoTuner":
        return cls(kernel, configs)

    def set_compile_args(self, out_idx=None, target="auto", execution_backend="auto", target_host=None,
                         verbose=False, pass_configs=None, **_ignored) -> "AutoTuner":
        self.compile_args = dict(out_idx=out_idx, target=target, execution_backend=execution_backend,
                                 verbose=verbose, pass_configs=pass_configs)
        return self

    def set_profile_args(self, **kwargs) -> "AutoTuner":
        unknown = set(kwargs) - set(self.profile_args)
        if unknown:
            raise TypeError(f"set_profile_args: unknown arguments {sorted(unknown)}; "
                            f"expected some of {sorted(self.profile_args)}")
        self.profile_args.update(kwargs)
        return self

    # ------------------------------------------------------------ running
    def run(self, warmup: float = 25, rep: float = 100, timeout: float | None = 100, use_pipeline: bool = False,
            enable_grouped_compile: bool = False, group_compile_size: int = 2, benchmark_devices=None,
            benchmark_multi_gpu: bool = False, early_stop: bool = False,
            early_stop_factor: float = 2.0) -> AutotuneResult:
        """Tune every config. Configs always compile on a thread pool before timing (see
        _compile_all), so use_pipeline / enable_grouped_compile / group_compile_size change
        nothing; timing is on the current device (benchmark_devices / benchmark_multi_gpu
        are accepted for the public signature)."""
        if not self.configs:
            raise TileLangError("autotune: `configs` is empty; give at least one dict of parameter values")
        if early_stop and early_stop_factor < 1.0:
            raise ValueError(f"early_stop_factor must be >= 1.0, got {early_stop_factor}")
        results: list[ConfigResult] = []
        best: tuple | None = None
        ref_latency = None
        cached_inputs: dict = {}
        built = self._compile_all()
        for n, cfg in enumerate(self.configs):
            stop_at = best[0] * early_stop_factor if early_stop and best is not None else None
            r, kernel, ins = self._try_config(cfg, warmup, rep, timeout, cached_inputs, built.get(n), stop_at)
            results.append(r)
            if r.error is not None:
                logger.info("autotune: config %s skipped: %s", cfg, r.error)
                continue
            logger.info("autotune: config %s: %.4f ms", cfg, r.latency)
            if ref_latency is None and self.profile_args["ref_prog"] is not None:
                ref_latency = kernel.get_profiler().do_bench(self.profile_args["ref_prog"], warmup=warmup, rep=rep,
                                                             input_tensors=ins)
            if best is None or r.latency < best[0]:
                best = (r.latency, cfg, kernel)
        if best is None:
            lines = "\n".join(f"  {r.config}: {r.error.splitlines()[0]}" for r in results[:8])
            raise TileLangError(f"autotune: all {len(results)} configs failed:\n{lines}")
        kernel = best[2]
        # NOTE: public TileLang programs read these off the tuned kernel.
        kernel.config, kernel.latency, kernel.ref_latency = dict(best[1]), best[0], ref_latency
        return AutotuneResult(best[0], dict(best[1]), kernel, ref_latency, results)

    def _compile_all(self) -> dict:
        """Every config compiled on a thread pool (env.autotune_compile_workers threads; NVRTC and
        the C compiler run outside the GIL) before any is timed: {index: (kernel, seconds) or
        the exception}. Empty with one config or one worker: each then compiles in turn."""
        from concurrent.futures import ThreadPoolExecutor

        from .. import env

        workers = min(len(self.configs), env.autotune_compile_workers())
        if workers < 2:
            return {}

        def build(cfg):
            t0 = time.perf_counter()
            try:
                return self._compile(cfg), time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001 - re-raised (or recorded) where this config is tried
                return e

        with ThreadPoolExecutor(workers) as ex:
            return dict(enumerate(ex.map(build, self.configs)))

    def _try_config(self, cfg: dict, warmup, rep, timeout, cached_inputs: dict, built=None, stop_at=None):
        """Compile (unless `built` has it), check and time one config: (ConfigResult, kernel or
        None, inputs or None). `stop_at` (ms): time no further once the estimate exceeds it."""
        r = ConfigResult(dict(cfg))
        kernel = ins = None
        try:
            t0 = time.perf_counter()
            with _time_limit(timeout):
                if built is None:
                    kernel = self._compile(cfg)
                    r.compile_seconds = time.perf_counter() - t0
                elif isinstance(built, BaseException):
                    raise built
                else:
                    kernel, r.compile_seconds = built
                ins = self._inputs(kernel, cached_inputs)
                self._check(kernel, ins)
            r.latency = kernel.get_profiler().do_bench(kernel, warmup=warmup, rep=rep, input_tensors=ins,
                                                       early_stop_baseline=stop_at)
        except _Timeout:
            r.error = f"timed out after {timeout} s"
        except (TileLangError, AssertionError, TypeError, ValueError, RuntimeError) as e:
            r.error = f"{type(e).__name__}: {e}"
        return r, kernel, ins

    def _compile(self, cfg: dict):
        from ..ir.stmt import PrimFunc
        from ..jit import compile as tl_compile

        cfg = dict(cfg)
        pass_configs = cfg.pop(PASS_CONFIGS, None)
        if pass_configs is not None and self.fn_takes_pass_configs:
            return self.fn(pass_configs=pass_configs, **cfg)
        out = self.fn(**cfg)
        if isinstance(out, PrimFunc):
            args = dict(self.compile_args)
            if pass_configs is not None:
                args["pass_configs"] = {**(args.get("pass_configs") or {}), **pass_configs}
            return tl_compile(out, **args)
        if pass_configs is not None:
            raise TileLangError("autotune: a config's pass_configs need a kernel function that returns a T.prim_func")
        if not hasattr(out, "get_profiler"):
            raise TileLangError(f"autotune: the kernel function returned {type(out).__name__}; expected a "
                                "T.prim_func or a compiled kernel")
        return out

    def _inputs(self, kernel, cache: dict) -> list:
        ins = self.inputs_fn(kernel) if self.inputs_fn is not None else None
        if ins is not None:
            return ins
        captured = get_autotune_inputs()
        if captured is not None:  # `with set_autotune_inputs(...)`: wins over supply_prog / supply_type
            return captured
        pa = self.profile_args
        params = [p for i, p in enumerate(kernel.prim_func.params) if i not in kernel.out_idx]
        key = tuple((tuple(str(d) for d in getattr(p, "shape", ())), str(p.dtype)) for p in params)
        if pa["cache_input_tensors"] and key in cache:
            return cache[key]
        if pa["supply_prog"] is not None:
            ins = list(pa["supply_prog"](params))
        else:
            prof = kernel.get_profiler(pa["supply_type"], pa["dynamic_symbolic_constraints"])
            ins = prof._get_inputs()
        cache[key] = ins
        return ins

    def _check(self, kernel, ins: list) -> None:
        pa = self.profile_args
        if pa["skip_check"]:
            return
        prof = kernel.get_profiler(pa["supply_type"], pa["dynamic_symbolic_constraints"])
        if pa["manual_check_prog"] is not None:
            ref = pa["ref_prog"]
            outs = kernel(*ins)
            pa["manual_check_prog"](outs, ref(*ins) if ref is not None else None)
        elif pa["ref_prog"] is not None:
            prof.assert_allclose(pa["ref_prog"], input_tensors=[_clone(x) for x in ins], atol=pa["atol"],
                                 rtol=pa["rtol"], max_mismatched_ratio=pa["max_mismatched_ratio"])


def _clone(x):
    return x.clone() if hasattr(x, "clone") else x


def config_list(configs) -> list:
    if configs is None:
        return []
    if isinstance(configs, dict):  # {"block_M": [64, 128], "block_N": [64]} -> the product
        import itertools

        keys = list(configs)
        values = [v if isinstance(v, (list, tuple)) else [v] for v in configs.values()]
        return [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    out = []
    for c in configs:
        if not isinstance(c, dict):
            raise TileLangError(f"autotune: each config must be a dict of parameter values, got {c!r}")
        out.append(dict(c))
    return out

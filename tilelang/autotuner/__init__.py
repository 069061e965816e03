"""`@tilelang.autotune(configs=...)`: pick the fastest block sizes for a `@tilelang.jit` kernel.

Example::

    @tilelang.autotune(configs=[{"block_M": 64, "block_N": 64}, {"block_M": 128, "block_N": 64}],
                       warmup=5, rep=20)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=64, block_N=64):
        @T.prim_func
        def main(...): ...
        return main

    kernel = matmul(1024, 1024, 1024)    # compiles and times every config, returns the fastest
    kernel = matmul(1024, 1024, 1024, block_M=128, block_N=64)   # given explicitly: no tuning
    matmul.get_result(1024, 1024, 1024).results   # every config's latency or error

A config may carry "pass_configs": {...}, laid over the jit's pass_configs for that config.
`early_stop=True` stops timing a config whose estimate exceeds `early_stop_factor` times the
best so far. Tuning runs once per distinct argument tuple (less the `do_not_specialize`
parameters, whose values share one tuning); the winner is remembered. Parameters the
caller passes explicitly are never overridden by a config. With eager `@tilelang.jit`
kernels, calling with tensors tunes on those tensors and returns the result of the best.
Inside `with set_autotune_inputs(a, b, ...)` tuning uses those tensors as the inputs.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from ..errors import TileLangError
from ..profiler.supply import TensorSupplyType
from .capture import get_autotune_inputs, set_autotune_inputs
from .tuner import PASS_CONFIGS, AutoTuner, AutotuneResult, ConfigResult

__all__ = [
    "AutoTuneImpl",
    "AutoTuner",
    "AutotuneResult",
    "ConfigResult",
    "autotune",
    "get_autotune_inputs",
    "set_autotune_inputs",
]


class AutoTuneImpl:
    """What `@tilelang.autotune` returns: call it like the jit function it wraps."""

    def __init__(self, jit_impl, configs, warmup, rep, timeout, profile_args: dict, do_not_specialize=None,
                 early_stop: bool = False, early_stop_factor: float = 2.0):
        from ..jit import JITImpl, jit

        self.jit_impl = jit_impl if isinstance(jit_impl, JITImpl) else jit(jit_impl)
        self.configs = configs
        self.warmup, self.rep, self.timeout = warmup, rep, timeout
        self.profile_args = profile_args
        self.do_not_specialize = tuple(do_not_specialize or ())
        self.early_stop, self.early_stop_factor = early_stop, early_stop_factor
        self._results: dict = {}
        self._with_configs: dict = {}  # repr(pass_configs) -> a JITImpl compiling with them
        functools.update_wrapper(self, self.jit_impl.fn)

    def config_list(self, args, kwargs) -> list:
        from .tuner import config_list

        configs = self.configs
        if callable(configs):
            configs = _call_with_matching(configs, self.jit_impl.signature, args, kwargs)
        configs = config_list(configs)
        params = self.jit_impl.signature.parameters
        takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for cfg in configs:
            unknown = [k for k in cfg if k not in params and k != PASS_CONFIGS]
            if unknown and not takes_kwargs:
                raise TileLangError(f"autotune: config key(s) {unknown} are not parameters of "
                                    f"{self.jit_impl.fn.__name__}{self.jit_impl.signature}")
        # NOTE: what the caller passes explicitly wins; configs only fill the other parameters.
        given = set(self.jit_impl.signature.bind_partial(*args, **_py_kwargs(self.jit_impl, kwargs)).arguments)
        out = []
        for cfg in configs:
            eff = {k: v for k, v in cfg.items() if k not in given}
            if eff not in out:
                out.append(eff)
        return out

    def tune(self, *args, **kwargs) -> AutotuneResult:
        """Tune for these arguments (cached) and return the full `AutotuneResult`."""
        from ..jit import spec_key

        key = spec_key(args, kwargs)
        if self.do_not_specialize:
            bound = self.jit_impl.signature.bind_partial(*args, **_py_kwargs(self.jit_impl, kwargs))
            key = spec_key((), {k: v for k, v in bound.arguments.items() if k not in self.do_not_specialize})
        res = self._results.get(key)
        if res is not None:
            return res
        configs = self.config_list(args, kwargs)
        jit_impl = self.jit_impl
        if configs == [{}]:  # the caller fixed every tuned parameter: nothing to time
            kernel = jit_impl.compile(*args, **kwargs)
            kernel.config, kernel.latency, kernel.ref_latency = {}, None, None
            res = self._results[key] = AutotuneResult(None, {}, kernel)
            return res

        def compile_one(pass_configs=None, **cfg):
            impl = jit_impl if pass_configs is None else self._jit_with(pass_configs)
            return impl.compile(*args, **kwargs, **cfg)

        tuner = AutoTuner(compile_one, configs).set_profile_args(**self.profile_args)
        tuner.fn_takes_pass_configs = True
        if jit_impl.eager:
            tuner.inputs_fn = lambda kernel: _eager_tensors(jit_impl, kernel, args, kwargs)
        res = tuner.run(self.warmup, self.rep, self.timeout, early_stop=self.early_stop,
                        early_stop_factor=self.early_stop_factor)
        self._results[key] = res
        return res

    def _jit_with(self, pass_configs: dict):
        """The jit function compiling with `pass_configs` laid over its own (one per distinct dict)."""
        from ..jit import JITImpl

        key = repr(sorted(pass_configs.items(), key=lambda kv: str(kv[0])))
        impl = self._with_configs.get(key)
        if impl is None:
            options = dict(self.jit_impl.options)
            options["pass_configs"] = {**(options.get("pass_configs") or {}), **pass_configs}
            impl = self._with_configs[key] = JITImpl(self.jit_impl.fn, **options)
        return impl

    def get_result(self, *args, **kwargs) -> AutotuneResult:
        return self.tune(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """The best kernel for these arguments (tuning first if needed)."""
        return self.tune(*args, **kwargs).kernel

    def __call__(self, *args, **kwargs):
        # `f(..., __return_kernel=True)` (the public TileLang's spelling of f.compile(...)): the
        # tuned kernel itself, not run even for an eager function given its tensors
        return_kernel = kwargs.pop("__return_kernel", False)
        kernel = self.compile(*args, **kwargs)
        if return_kernel or not self.jit_impl.eager:
            return kernel
        ins = _eager_tensors(self.jit_impl, kernel, args, kwargs)
        if ins is None:
            raise TypeError(f"{self.jit_impl.fn.__name__}: calling the autotuned kernel needs its tensors "
                            f"{list(kernel.eager_inputs)}; use .compile(...) to get the kernel without them")
        return kernel(*ins)


def _py_kwargs(jit_impl, kwargs: dict) -> dict:
    return {k: v for k, v in kwargs.items() if k in jit_impl.signature.parameters}


def _eager_tensors(jit_impl, kernel, args, kwargs) -> list:
    """The caller's tensors for the kernel's inputs; None when some were not given (as in
    `kernel.compile(M=..., N=...)`): the tuner then makes random ones from the signature."""
    bound = jit_impl.signature.bind_partial(*args, **_py_kwargs(jit_impl, kwargs))
    if any(n not in bound.arguments for n in kernel.eager_inputs):
        return None
    return [bound.arguments[n] for n in kernel.eager_inputs]


def _call_with_matching(fn: Callable, signature, args, kwargs):
    """Call a configs generator with the jit function's arguments it names (or none)."""
    try:
        gen_sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn()
    bound = signature.bind_partial(*args, **kwargs)
    bound.apply_defaults()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in gen_sig.parameters.values()):
        return fn(**bound.arguments)
    return fn(**{k: v for k, v in bound.arguments.items() if k in gen_sig.parameters})


def autotune(func=None, *, configs, warmup: float = 25, rep: float = 100, timeout: float = 100,
             supply_type=TensorSupplyType.Auto, ref_prog: Callable | None = None,
             supply_prog: Callable | None = None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False,
             manual_check_prog: Callable | None = None, cache_input_tensors: bool = False,
             dynamic_symbolic_constraints: dict | None = None, do_not_specialize=None, early_stop: bool = False,
             early_stop_factor: float = 2.0):
    """Decorate a `@tilelang.jit` function (place it above) to tune over `configs`.

    configs: a list of dicts of parameter values, a dict of lists (their product), or a
    function of the jit function's arguments returning either. warmup/rep: timing budgets
    in ms per config. timeout: seconds allowed per config for compile + check. ref_prog:
    a torch reference; configs whose output differs (atol/rtol/max_mismatched_ratio) are
    skipped. See the module docstring for an example.
    """
    profile_args = {"supply_type": supply_type, "ref_prog": ref_prog, "supply_prog": supply_prog, "rtol": rtol,
                        "atol": atol, "max_mismatched_ratio": max_mismatched_ratio, "skip_check": skip_check,
                        "manual_check_prog": manual_check_prog, "cache_input_tensors": cache_input_tensors,
                        "dynamic_symbolic_constraints": dynamic_symbolic_constraints}

    if early_stop and early_stop_factor < 1.0:
        raise ValueError(f"early_stop_factor must be >= 1.0, got {early_stop_factor}")

    def wrap(f):
        return AutoTuneImpl(f, configs, warmup, rep, timeout, profile_args, do_not_specialize, early_stop,
                            early_stop_factor)

    return wrap if func is None else wrap(func)

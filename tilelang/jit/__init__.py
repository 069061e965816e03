"""`@tilelang.jit` (lazy factories and eager kernels) and `tilelang.compile`."""
from __future__ import annotations

import functools
import inspect
import warnings

from typing import TYPE_CHECKING

from ..errors import TileLangError, hide_internal_frames, user_facing
from .kernel import JITKernel

if TYPE_CHECKING:
    from ..ir.stmt import PrimFunc


@user_facing()
def compile(func: PrimFunc, out_idx=None, execution_backend="auto", target="auto", target_host=None,
            verbose=False, pass_configs=None, compile_flags=None) -> JITKernel:
    """Compile a `T.prim_func` for `target` ("auto": cuda when a GPU is usable, else cpu)."""
    return JITKernel(func, out_idx=out_idx, target=target, pass_configs=pass_configs, verbose=verbose,
                     execution_backend=execution_backend, compile_flags=compile_flags)


def spec_key(args, kwargs):
    def norm(v):
        if type(v).__module__.startswith("torch") and hasattr(v, "shape"):
            return ("tensor", tuple(v.shape), str(v.dtype), str(v.device))
        if isinstance(v, (list, tuple)):
            return tuple(norm(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        try:
            hash(v)
            return (type(v).__name__, v)  # 1, 1.0 and True are equal keys in a dict, not in a kernel
        except TypeError:
            return repr(v)
    return norm(tuple(args)), norm(dict(kwargs))


class JITImpl:
    """What `@tilelang.jit` returns; call it (or `.compile(...)`) to get kernels or results.

    Lazy mode (the function returns a T.prim_func): `f(*args)` and `f.compile(*args)` return
    the JITKernel for those arguments. Eager mode (the body is the kernel): `f(*tensors)` runs
    it; `f.compile(...)` takes tensors, `T.Tensor(shape, dtype)` specs or T.const values as
    keywords and returns the kernel. Either way kernels are cached per specialization.
    """

    def __init__(self, fn, out_idx=None, target="auto", pass_configs=None, verbose=False,
                 execution_backend="auto", compile_flags=None, target_host=None, debug_root_path=None,
                 **_ignored):
        from .mode import is_eager

        self.fn = self.func = self.orig_func = fn
        self.out_idx, self.target, self.target_host = out_idx, target, target_host
        self.pass_configs, self.verbose, self.compile_flags = pass_configs, verbose, compile_flags
        self.execution_backend, self.debug_root_path = execution_backend, debug_root_path
        self.options = dict(out_idx=out_idx, target=target, pass_configs=pass_configs, verbose=verbose,
                            execution_backend=execution_backend, compile_flags=compile_flags)
        self.eager = is_eager(fn)
        self.mode = "eager" if self.eager else "lazy"
        self.signature = inspect.signature(fn)
        self._cache: dict = {}
        self._matchers: dict = {}  # Python (non-tensor) args -> {T.const name: (param, "shape"|"stride", i, per byte)}
        if self.eager:
            from .eager import const_names, signature_scalars, tensor_params

            self._tensor_params = tensor_params(fn)
            self._const_names = const_names(fn)
            self._scalar_params = set(signature_scalars(fn))  # `n: T.int32`: kernel arguments
        functools.update_wrapper(self, fn)

    @property
    def func_source(self) -> str:
        return inspect.getsource(self.fn)

    def is_lazy_mode(self) -> bool:
        return not self.eager

    # -------------------------------------------------------------- lazy mode
    def _lazy_kernel(self, args, kwargs) -> JITKernel:
        try:  # f(64, block=32) and f(64, 32) are one specialization
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            key = spec_key((), bound.arguments)
        except TypeError:  # let the call below raise Python's own message
            key = spec_key(args, kwargs)
        k = self._cache.get(key)
        if k is None:
            k = self._disk_kernel(args, kwargs)
            self._debug_dump(k)
            self._cache[key] = k
        return k

    def _disk_kernel(self, args, kwargs) -> JITKernel:
        """The kernel from the kernel cache (no factory run, no passes) or compiled and saved there."""
        from ..backend.target import resolve
        from ..cache import kernel_cache

        try:
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            ckey = kernel_cache.kernel_key(self.fn, dict(bound.arguments), self.options, resolve(self.target))
        except (TypeError, TileLangError):  # a call Python or resolve() rejects: the factory call reports it
            ckey = None
        rec = kernel_cache.load(ckey) if ckey is not None else None
        if rec is not None:
            k = JITKernel.from_record(rec["kernel"], functools.partial(self.fn, *args, **kwargs), self.options)
            if k is not None:
                replay_warnings(rec["warnings"])
                if self.verbose:
                    print(f"[tilelang] loaded {k._name} for {k.target} from the kernel cache")
                return k
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                func = self.fn(*args, **kwargs)
                k = func if isinstance(func, JITKernel) else JITKernel(func, **self.options)
            finally:
                seen = [(w.category, str(w.message), w.filename, w.lineno) for w in caught]
        replay_warnings(seen)  # outside the recording: the caller's filters decide what shows
        if ckey is not None and not isinstance(func, JITKernel):
            kr = k.record()
            if kr is not None:
                kernel_cache.save(ckey, {"kernel": kr, "warnings": seen})
        return k

    # -------------------------------------------------------------- eager mode
    def _eager_spec(self, args, kwargs, need_all=False):
        """(Python values per parameter, T.const values, cache key) of an eager call."""
        from .eager import FIRST_PARSE_ERROR, check_tensor_args, infer_consts, tensor_shape

        if self.out_idx is not None:
            raise TileLangError(f"{self.fn.__name__}: out_idx is only for lazy @tilelang.jit factories; an eager "
                                "kernel declares its outputs with T.empty and returns them")
        params = self.signature.parameters
        consts = {k: v for k, v in kwargs.items() if k not in params}
        bound = self.signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params})
        bound.apply_defaults()
        values = dict(bound.arguments)
        for n in params:
            values.setdefault(n, None)
        for n in self._scalar_params:  # passed at each call, not compiled in: no part of the key
            values[n] = None
        try:
            check_tensor_args(self.fn, values, need_all=need_all, names=self._tensor_params)
        except TypeError as e:
            raise hide_internal_frames(e) from None
        tensors = {n: v for n, v in values.items() if tensor_shape(v) is not None}
        for n, v in values.items():  # a scalar parameter named like a T.const gives its value
            if n in self._const_names and n not in consts and isinstance(v, int) and not isinstance(v, bool):
                consts[n] = v
        matcher = self._matcher(values, tensors)
        consts = {**infer_consts(matcher, tensors), **consts}
        key = spec_key(tuple(values.items()), consts)
        if FIRST_PARSE_ERROR in matcher:  # named by the error of a T.const left without a value
            consts[FIRST_PARSE_ERROR] = matcher[FIRST_PARSE_ERROR]
        return values, consts, key

    def _matcher(self, values: dict, tensors: dict) -> dict:
        from .eager import const_matcher

        py = {n: v for n, v in values.items() if n not in tensors}
        key = spec_key((), py)
        m = self._matchers.get(key)
        if m is None:
            m = self._matchers[key] = const_matcher(self.fn, {**py, **{n: None for n in tensors}})
        return m

    def _eager_kernel(self, args, kwargs, need_all=False) -> JITKernel:
        from .eager import parse_eager

        values, consts, key = self._eager_spec(args, kwargs, need_all)
        k = self._cache.get(key)
        if k is None:
            func, out_idx = parse_eager(self.fn, values, consts)
            k = JITKernel(func, **self.options)  # out_idx: the func's tilelang_out_idx attr
            k.eager_inputs = [p.name for p in func.params[: len(func.params) - len(out_idx)]]
            self._debug_dump(k)
            self._cache[key] = k
        return k

    @user_facing()
    def compile(self, *args, **kwargs) -> JITKernel:
        """Compile for the given specialization (and, in eager mode, T.const values as keywords)."""
        if self.eager:
            return self._eager_kernel(args, kwargs)
        return self._lazy_kernel(args, kwargs)

    @user_facing()
    def __call__(self, *args, **kwargs):
        if not self.eager:
            return self._lazy_kernel(args, kwargs)
        k = self._eager_kernel(args, kwargs, need_all=True)
        bound = self.signature.bind_partial(*args, **{a: v for a, v in kwargs.items() if a in self.signature.parameters})
        tensors = [bound.arguments[n] for n in k.eager_inputs]
        return k(*tensors)

    @user_facing()
    def get_tir(self, *args, **kwargs):
        """The T.prim_func for these arguments, parsed but not compiled."""
        if not self.eager:
            return self.fn(*args, **kwargs)
        from .eager import parse_eager

        values, consts, _ = self._eager_spec(args, kwargs)
        return parse_eager(self.fn, values, consts)[0]

    @user_facing()
    def get_kernel_source(self, *args, **kwargs) -> str:
        """The generated source of the kernel `.compile(*args, **kwargs)` returns."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def par_compile(self, configs, num_workers: int | None = None, ignore_error: bool = False) -> list:
        """Compile one kernel per config (a dict of keyword arguments or a tuple of positional ones),
        on `num_workers` threads; with `ignore_error` a failing config gives None (and a warning)."""
        jobs = []
        for cfg in configs:
            if isinstance(cfg, dict):
                jobs.append(((), cfg))
            elif isinstance(cfg, tuple):
                jobs.append((cfg, {}))
            else:
                raise TypeError(f"par_compile: a config is a dict of keyword arguments or a tuple of positional "
                                f"ones, got {type(cfg).__name__}")
        return _run_parallel([functools.partial(self.compile, *a, **kw) for a, kw in jobs], num_workers,
                             ignore_error)

    def _debug_dump(self, k: JITKernel) -> None:
        if not self.debug_root_path:
            return
        import os

        os.makedirs(self.debug_root_path, exist_ok=True)
        name = self.fn.__name__
        with open(os.path.join(self.debug_root_path, f"tilelang_jit_kernel_{name}.c"), "w") as f:
            f.write(k.get_kernel_source())
        with open(os.path.join(self.debug_root_path, f"tilelang_jit_program_{name}.py"), "w") as f:
            f.write(str(k.prim_func) + "\n")


def replay_warnings(seen: list) -> None:
    """Emit (category, message, filename, lineno) warnings as they were first emitted."""
    for category, message, filename, lineno in seen:
        warnings.warn_explicit(message, category, filename, lineno)


def _run_parallel(thunks: list, num_workers: int | None, ignore_error: bool) -> list:
    import concurrent.futures
    import os
    import warnings

    if not thunks:
        return []
    workers = num_workers or min(len(thunks), os.cpu_count() or 1)
    out = [None] * len(thunks)
    with concurrent.futures.ThreadPoolExecutor(max(1, workers), "tl-par-compile") as pool:
        futures = {pool.submit(t): i for i, t in enumerate(thunks)}
        for fut in concurrent.futures.as_completed(futures):
            i = futures[fut]
            try:
                out[i] = fut.result()
            except Exception as e:  # noqa: BLE001 - reported per config when asked to
                if not ignore_error:
                    raise
                warnings.warn(f"par_compile: config {i} failed: {type(e).__name__}: {e}", stacklevel=3)
    return out


def par_compile(funcs, out_idx=None, execution_backend="auto", target="auto", target_host=None, verbose=False,
                pass_configs=None, compile_flags=None, num_workers: int | None = None,
                ignore_error: bool = False) -> list:
    """`tilelang.compile` over several prim_funcs on `num_workers` threads, results in order;
    with `ignore_error` a function that fails to compile gives None (and a warning)."""
    thunks = [functools.partial(compile, f, out_idx=out_idx, execution_backend=execution_backend, target=target,
                                verbose=verbose, pass_configs=pass_configs, compile_flags=compile_flags)
              for f in funcs]
    return _run_parallel(thunks, num_workers, ignore_error)


def jit(func=None, *, out_idx=None, target="auto", target_host=None, execution_backend="auto", verbose=False,
        pass_configs=None, debug_root_path=None, compile_flags=None):
    """Decorate a kernel factory (lazy: returns a T.prim_func) or an eager kernel body.

    Lazy example::

        @tilelang.jit(out_idx=[-1])
        def matmul(M, N, K, block_M, block_N, block_K):
            @T.prim_func
            def main(A: T.Tensor((M, K), "float16"), ...): ...
            return main

        kernel = matmul(1024, 1024, 1024, 128, 128, 32)   # compiled, cached per arguments
        c = kernel(a, b)
    """
    opts = dict(out_idx=out_idx, target=target, pass_configs=pass_configs, verbose=verbose,
                execution_backend=execution_backend, compile_flags=compile_flags, target_host=target_host,
                debug_root_path=debug_root_path)
    if func is None:
        return lambda f: JITImpl(f, **opts)
    return JITImpl(func, **opts)

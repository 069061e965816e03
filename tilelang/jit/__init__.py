"""`@tilelang.jit` (lazy factories and eager kernels) and `tilelang.compile`."""
from __future__ import annotations

import functools
import inspect

from ..errors import hide_internal_frames, user_facing
from ..ir.stmt import PrimFunc
from .kernel import JITKernel


@user_facing()
def compile(func: PrimFunc, out_idx=None, execution_backend="auto", target="auto", target_host=None,
            verbose=False, pass_configs=None, compile_flags=None) -> JITKernel:
    """Compile a `T.prim_func` for `target` ("auto": cuda when a GPU is usable, else cpu)."""
    return JITKernel(func, out_idx=out_idx, target=target, pass_configs=pass_configs, verbose=verbose,
                     execution_backend=execution_backend, compile_flags=compile_flags)


def _key(args, kwargs):
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
    """What `@tilelang.jit` returns; call it (or `.compile(...)`) to get kernels or results."""

    def __init__(self, fn, out_idx=None, target="auto", pass_configs=None, verbose=False,
                 execution_backend="auto", compile_flags=None, **_ignored):
        from .eager import is_eager

        self.fn = fn
        self.options = dict(out_idx=out_idx, target=target, pass_configs=pass_configs, verbose=verbose,
                            execution_backend=execution_backend, compile_flags=compile_flags)
        self.eager = is_eager(fn)
        self.signature = inspect.signature(fn)
        self._cache: dict = {}
        functools.update_wrapper(self, fn)

    # -------------------------------------------------------------- lazy mode
    def _lazy_kernel(self, args, kwargs) -> JITKernel:
        try:  # f(64, block=32) and f(64, 32) are one specialization
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            key = _key((), bound.arguments)
        except TypeError:  # let the call below raise Python's own message
            key = _key(args, kwargs)
        k = self._cache.get(key)
        if k is None:
            func = self.fn(*args, **kwargs)
            if isinstance(func, JITKernel):
                k = func
            else:
                k = JITKernel(func, **self.options)
            self._cache[key] = k
        return k

    # -------------------------------------------------------------- eager mode
    def _eager_kernel(self, args, kwargs, const_values=None, need_all=False) -> JITKernel:
        from .eager import check_tensor_args, infer_consts, parse_eager

        params = self.signature.parameters
        py_kwargs = {k: v for k, v in kwargs.items() if k in params}
        consts = {k: v for k, v in kwargs.items() if k not in params}
        consts.update(const_values or {})
        bound = self.signature.bind_partial(*args, **py_kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        for n in params:
            values.setdefault(n, None)
        try:
            check_tensor_args(self.fn, values, need_all=need_all)
        except TypeError as e:
            raise hide_internal_frames(e) from None
        tensors = {n: v for n, v in values.items() if type(v).__module__.startswith("torch") and hasattr(v, "shape")}
        consts = {**infer_consts(self.fn, tensors), **consts}
        key = _key(tuple(values.items()), consts)
        k = self._cache.get(key)
        if k is None:
            func, out_idx = parse_eager(self.fn, values, consts)
            opts = dict(self.options)
            opts["out_idx"] = out_idx
            k = JITKernel(func, **opts)
            k.eager_inputs = [p.name for p in func.params[: len(func.params) - len(out_idx)]]
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
        return self.fn(*args, **kwargs) if not self.eager else self._eager_kernel(args, kwargs).prim_func


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
                execution_backend=execution_backend, compile_flags=compile_flags)
    if func is None:
        return lambda f: JITImpl(f, **opts)
    return JITImpl(func, **opts)

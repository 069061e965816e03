"""The TileLang language: what users write as `import tilelang.language as T`.

Thin wrappers only: each function checks its arguments and appends IR to the
kernel being parsed; lowering lives in `transform/` and `backend/`.
"""
from .dtypes import *  # noqa: F401,F403  (T.float16, T.int, T.tfloat32, T.float16x4 ...)
from .dtypes import dtype  # noqa: F401
from ..frontend.parser import parse_prim_func as _parse_prim_func
from ..ir.stmt import PrimFunc  # noqa: F401
from .types import Tensor, Buffer, StridedTensor, TensorSpec  # noqa: F401
from .kernel import (Kernel, get_thread_binding, get_thread_bindings, get_block_binding,  # noqa: F401
                     get_block_bindings)
from .alloc import alloc_shared, alloc_fragment, alloc_local, alloc_var, alloc_barrier  # noqa: F401
from .alloc import alloc_global  # noqa: F401
from .loops import Parallel, Pipelined, serial, Serial, unroll, Unroll, grid, vectorized, Persistent  # noqa: F401
from .tile import (copy, fill, clear, gemm, reduce_sum, reduce_max, reduce_min, reduce_abssum,  # noqa: F401
                   reduce_absmax, cumsum, atomic_add, atomic_max, atomic_min, atomic_addx2, use_swizzle,
                   annotate_layout, annotate_padding, annotate_l2_hit_ratio, no_set_max_nreg,
                   disable_warp_group_reg_alloc, GemmWarpPolicy)
from .math import (exp, exp2, log, log2, log10, sqrt, rsqrt, tanh, sigmoid, sin, cos, erf, floor, ceil,  # noqa: F401
                   round, trunc, log1p, expm1, exp10, abs, max, min, pow, if_then_else, Select, cast, Cast,
                   infinity, max_value, min_value, ceildiv, floordiv, floormod, truncdiv, truncmod,
                   bitwise_and, bitwise_or, bitwise_xor, bitwise_not, shift_left, shift_right, And, Or, Not,
                   reinterpret, clamp, fast_exp, fast_exp2, fast_log, fast_log2)
from .debug import print, device_assert  # noqa: F401
from .macro import macro  # noqa: F401
from .eager import const, empty, dynamic, symbolic  # noqa: F401
from .thread import (thread_binding, launch_thread, sync_threads, sync_warp, sync_grid, shfl_xor,  # noqa: F401
                     shfl_down, shfl_up, shfl_sync, tvm_warp_shuffle, tvm_warp_shuffle_down, tvm_warp_shuffle_up,
                     any_sync, all_sync, ballot_sync, ballot, activemask, comm_reducer, attr, evaluate,
                     tvm_thread_allreduce, assume)
from .extern import call_extern, import_source, access_ptr, dp4a  # noqa: F401
from .views import ptr, make_tensor, reshape, view, SharedBuffer, FragmentBuffer, LocalBuffer, alloc_buffer  # noqa: F401
from .reducer import alloc_reducer, reducer_init, reducer_update, finalize_reducer, cummax  # noqa: F401
from .memory import atomic_addx4, atomic_load, atomic_store, im2col, index_to_coordinates  # noqa: F401
from .random import rng_init, rng_rand, rng_rand_float  # noqa: F401
from .loops import Parallel as _Parallel

handle = dtype("handle")  # addresses: T.access_ptr results, T.call_extern("handle", ...)


def parallel(start, stop=None, *, annotations=None):
    """TVM's lowercase spelling of a one-dimensional T.Parallel loop over [start, stop)."""
    if stop is None:
        return _Parallel(start)
    from .loops import ForSpec

    return ForSpec("parallel", (start,), (stop - start,))


class Ref:
    """`T.Ref` annotation (a reference to a scalar); accepted in @T.macro signatures."""


def prim_func(func=None, *, private=False, check_well_formed=False):
    """Turn a Python function into a TileLang kernel (a `PrimFunc`), parsed immediately.

    Example::

        @T.prim_func
        def add(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
            with T.Kernel(8, threads=128) as bx:
                for i in T.Parallel(128):
                    B[bx * 128 + i] = A[bx * 128 + i] + 1
    """
    import sys

    # The defining scope, for annotations that are only strings (`from __future__ import
    # annotations`) and name factory locals the body never mentions.
    caller = sys._getframe(1)
    outer = {**caller.f_globals, **caller.f_locals}
    if func is None:
        return lambda f: _parse_prim_func(f, outer)
    return _parse_prim_func(func, outer)


def Layout(shape, forward_fn):
    from ..layout import Layout as _L

    return _L.from_fn(shape, forward_fn)


def Fragment(shape, forward_fn=None, forward_thread_fn=None, replicate=1, forward_index_fn=None):
    from ..layout import Fragment as _F

    return _F.from_fn(shape, forward_fn, forward_thread_fn, replicate, forward_index_fn)


# The expert tier (Hopper barriers / TMA / wgmma, inline PTX, 2:4 sparse gemm) loads on first use:
# most programs never touch it, and its op classes cost a third of `import tilelang.language`.
_LAZY = {
    "ptx_ldmatrix": ".ptx",
    "ptx_mma": ".ptx",
    "gemm_sp": ".gemm_sp",
    "ws": ".hopper",
    "WarpSpecialize": ".hopper",
    "mbarrier_wait_parity": ".hopper",
    "mbarrier_arrive": ".hopper",
    "mbarrier_expect_tx": ".hopper",
    "mbarrier_arrive_expect_tx": ".hopper",
    "barrier_wait": ".hopper",
    "barrier_arrive": ".hopper",
    "tma_copy": ".hopper",
    "fence_proxy_async": ".hopper",
    "set_max_nreg": ".hopper",
    "inc_max_nreg": ".hopper",
    "dec_max_nreg": ".hopper",
    "wgmma_gemm": ".hopper",
    "wait_wgmma": ".hopper",
    "ptx_cp_async": ".hopper",
    "cp_async_barrier_noinc": ".hopper",
    "ptx_commit_group": ".hopper",
    "ptx_wait_group": ".hopper",
    "annotate_producer_reg_dealloc": ".hopper",
    "annotate_consumer_reg_alloc": ".hopper",
    "ClusterKernel": ".hopper",
    "alloc_cluster_barrier": ".hopper",
    "block_rank_in_cluster": ".hopper",
    "PersistentTileScheduler": ".hopper",
}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tilelang.language' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


# `from tilelang.language import *` still brings every name, the lazy ones included
__all__ = sorted({n for n in globals() if not n.startswith("_")} | set(_LAZY))

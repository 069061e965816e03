"""The TileLang language: what users write as `import tilelang.language as T`.

Thin wrappers only: each function checks its arguments and appends IR to the
kernel being parsed; lowering lives in `transform/` and `backend/`.

Every name loads its module on first use (PEP 562 `__getattr__`): a process that takes
its kernels from the kernel cache never runs a factory, so it never imports the IR
statements, the parser or the op classes (most of the import time), while a process
that parses a kernel imports what that kernel's `T.<name>`s need, as it always did.
`dir(T)`, `T.__all__` and `from tilelang.language import *` load everything.
"""
import importlib as _importlib
import sys as _sys
import types as _types

from ..dtypes import DType as dtype  # noqa: F401 - the object language/dtypes.py exports as T.dtype


def parallel(start, stop=None, *, annotations=None):
    """TVM's lowercase spelling of a one-dimensional T.Parallel loop over [start, stop)."""
    from .loops import ForSpec, Parallel

    if stop is None:
        return Parallel(start)
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
    from ..frontend.parser import parse_prim_func

    # The defining scope, for annotations that are only strings (`from __future__ import
    # annotations`) and name factory locals the body never mentions.
    caller = _sys._getframe(1)
    outer = {**caller.f_globals, **caller.f_locals}
    if func is None:
        return lambda f: parse_prim_func(f, outer)
    return parse_prim_func(func, outer)


def Layout(shape, forward_fn):
    from ..layout import Layout as _L

    return _L.from_fn(shape, forward_fn)


def Fragment(shape, forward_fn=None, forward_thread_fn=None, replicate=1, forward_index_fn=None):
    from ..layout import Fragment as _F

    return _F.from_fn(shape, forward_fn, forward_thread_fn, replicate, forward_index_fn)


# name -> the module that defines it, loaded on first use
_MODULES = {
    "types": "Tensor Buffer StridedTensor TensorSpec",
    "kernel": ("Kernel get_thread_binding get_thread_bindings get_block_binding "
        "get_block_bindings get_thread_extent get_thread_extents get_block_extent get_block_extents"),
    "alloc": "alloc_shared alloc_fragment alloc_local alloc_var alloc_barrier alloc_global",
    "loops": "Parallel Pipelined serial Serial unroll Unroll grid vectorized Persistent",
    "tile": ("copy async_copy transpose fill clear gemm reduce_sum reduce_max reduce_min reduce_abssum "
        "reduce_absmax reduce reduce_bitand reduce_bitor reduce_bitxor cumsum atomic_add atomic_max atomic_min atomic_or "
        "use_swizzle annotate_layout "
        "annotate_padding annotate_l2_hit_ratio no_set_max_nreg disable_warp_group_reg_alloc GemmWarpPolicy"),
    "math": ("exp exp2 log log2 log10 sqrt rsqrt tanh sigmoid sin cos erf floor ceil "
        "round trunc log1p expm1 exp10 abs max min pow if_then_else Select cast Cast infinity max_value "
        "min_value ceildiv floordiv floormod truncdiv truncmod bitwise_and bitwise_or bitwise_xor bitwise_not "
        "shift_left shift_right And Or Not reinterpret clamp fast_exp fast_exp2 fast_log fast_log2 "
        "acos acosh asin asinh atan atanh cosh sinh tan atan2 hypot copysign nextafter nearbyint fmod ldexp "
        "isnan isinf isfinite popcount clz __ffs __fns fabs likely cdiv align_up q_multiply_shift "
        "__exp __exp2 __log __log2 __log10 __exp10 __sin __cos __tan"),
    "math_ieee": ("ieee_add ieee_sub ieee_mul ieee_fmaf ieee_fdiv ieee_frcp ieee_fsqrt ieee_frsqrt fma fmul "
        "fast_rcp add2 sub2 mul2 fma2 max2 min2 abs2"),
    "debug": "print device_assert",
    "macro": "macro",
    "eager": "const empty dynamic symbolic",
    "thread": ("thread_binding launch_thread sync_threads sync_warp sync_grid shfl_xor "
        "shfl_down shfl_up shfl_sync tvm_warp_shuffle tvm_warp_shuffle_down tvm_warp_shuffle_up any_sync "
        "all_sync ballot_sync ballot activemask comm_reducer attr evaluate tvm_thread_allreduce assume"),
    "extern": "call_extern import_source access_ptr dp4a",
    "views": "ptr make_tensor reshape view SharedBuffer FragmentBuffer LocalBuffer alloc_buffer",
    "reducer": "alloc_reducer reducer_init reducer_update finalize_reducer cummax",
    "memory": "atomic_addx2 atomic_addx4 atomic_load atomic_store im2col c2d_im2col index_to_coordinates",
    "random": "rng_init rng_rand rng_rand_float",
    "annotations": ("annotate_min_blocks_per_sm annotate_restrict_buffers annotate_safe_value "
        "annotate_compile_flags annotate_pass_configs"),
    "control": "loop_break break_loop continue_loop thread_return",
    "logical": "any_of all_of",
    "vector": "extract_lane",
    "ldst": "__ldg ldg32 ldg64 ldg128 ldg256 stg32 stg64 stg128 stg256 lds32 lds64 lds128 sts32 sts64 sts128",
    "warp": ("get_lane_idx get_warp_idx get_warp_idx_sync get_warp_group_idx shuffle_elect syncthreads_count "
        "syncthreads_and syncthreads_or match_any_sync match_all_sync warp_reduce_sum warp_reduce_max "
        "warp_reduce_min warp_reduce_bitand warp_reduce_bitor named_barrier_arrive pdl_trigger pdl_sync"),
}
_HOME = {n: "." + m for m, names in _MODULES.items() for n in names.split()}
# TVMScript style (TIR statements, blocks, expression nodes); T.Select / T.Cast / T.And / T.Or / T.Not
# take TVM's arguments (condition, true_value, false_value, span), (dtype, value, annotations, span) ...
_TVM_STYLE = {
    ".tir": ("If Then Else While Assert let bind var handle boolean void Let meta_var likely match_buffer buffer "
             "buffer_decl decl_buffer allocate buffer_store func_attr func_name func_ret ret call_intrin "
             "call_pure_extern address_of type_annotation tvm_storage_sync inline"),
    ".blocks": "sblock init where axis reads writes sblock_attr sblock_alloc_buffer",
    "..tvm.tirx_nodes": ("PrimExpr IntImm FloatImm StringImm Var SizeVar Range Add Sub Mul Div Mod FloorDiv FloorMod "
                         "Min Max EQ NE LT LE GT GE And Or Not Select Cast BufferLoad Ramp Broadcast Shuffle Call "
                         "ramp broadcast"),
}
_HOME.update({n: m for m, names in _TVM_STYLE.items() for n in names.split()})
_HOME["PrimFunc"] = "..ir.stmt"
for _n in ("TensorCoreIntrinEmitter", "get_ldmatrix_offset", "get_mma_micro_size", "get_swizzle_layout",
           "make_mma_swizzle_layout", "mma_store_index_map"):
    _HOME[_n] = "..cuda.intrinsics"  # the mma.sync macro generator, as the public T namespace re-exports it
_HOME["TensorCoreIntrinEmitterWithLadderTransform"] = "..cuda.intrinsics.macro.ladder_macro_generator"
_HOME["dtype"] = ".dtypes"

# The expert tier (Hopper barriers / TMA / wgmma, inline PTX, 2:4 sparse gemm): no program that
# does not use it imports it, even when it is parsed.
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
    "ptx_arrive_barrier": ".hopper",
    "ptx_arrive_barrier_expect_tx": ".hopper",
    "ptx_wait_barrier": ".hopper",
    "ptx_cp_async_barrier": ".hopper",
    "ptx_fence_barrier_init": ".hopper",
    "tma_store_arrive": ".hopper",
    "tma_store_wait": ".hopper",
    "warpgroup_arrive": ".hopper",
    "warpgroup_commit_batch": ".hopper",
    "warpgroup_wait": ".hopper",
    "create_barriers": ".hopper_raw",
    "ptx_init_barrier_thread_count": ".hopper_raw",
    "create_tma_descriptor": ".hopper_raw",
    "tma_load": ".hopper_raw",
    "ptx_cp_async_bulk": ".hopper_raw",
    "alloc_descriptor": ".hopper_raw",
    "alloc_wgmma_desc": ".hopper_raw",
    "initialize_wgmma_descriptor": ".hopper_raw",
    "increase_descriptor_offset": ".hopper_raw",
    "ptx_wgmma_ss": ".hopper_raw",
    "ptx_wgmma_rs": ".hopper_raw",
    "warpgroup_fence_operand": ".hopper_raw",
    "annotate_producer_reg_dealloc": ".hopper",
    "annotate_consumer_reg_alloc": ".hopper",
    "ClusterKernel": ".cluster",
    "alloc_cluster_barrier": ".cluster",
    "block_rank_in_cluster": ".cluster",
    "cluster_arrive": ".cluster",
    "cluster_arrive_relaxed": ".cluster",
    "cluster_wait": ".cluster",
    "cluster_sync": ".cluster",
    "PersistentTileScheduler": ".tile_schedule",
    "BaseTileScheduler": ".tile_schedule",
    "meta_class": ".tile_schedule",
}
_HOME.update(_LAZY)

# names that are also submodules (T.macro, T.gemm_sp): the function, not the module, whoever
# imports the submodule first (the import system sets a package attribute per submodule)
_SHADOWED = frozenset(n for n, m in _HOME.items() if m == "." + n)


class _Language(_types.ModuleType):
    def __setattr__(self, name, value):
        if name in _SHADOWED and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Language


def __getattr__(name):
    if name == "__all__":
        _load_all()
        return globals()["__all__"]
    mod = _HOME.get(name)
    if mod is not None:
        value = getattr(_importlib.import_module(mod, __name__), name)
    else:  # the dtype names (T.float16, T.int, T.float16x4 ...) and their helpers
        dtypes = _importlib.import_module(".dtypes", __name__)
        if name not in dtypes.__all__:
            raise AttributeError(f"module 'tilelang.language' has no attribute {name!r}", name=name,
                                 obj=_sys.modules[__name__])
        value = getattr(dtypes, name)
    globals()[name] = value
    return value


def _load_all() -> None:
    """Bind every name (what the eager import did), and `__all__`."""
    g = globals()
    if "__all__" in g:
        return
    for name in _HOME:
        if name not in g or name in _SHADOWED:
            __getattr__(name)
    dtypes = _importlib.import_module(".dtypes", __name__)
    for name in dtypes.__all__:
        g.setdefault(name, getattr(dtypes, name))
    # every public name and, as before, the submodules of the names outside the expert tier
    expert = {m[1:] for m in _LAZY.values()} - set(_HOME)
    g["__all__"] = sorted(n for n in g if not n.startswith("_") and n not in expert)


def __dir__():
    _load_all()
    return sorted(globals())

"""Kernel-level annotations that are not tile ops: `T.annotate_min_blocks_per_sm`,
`T.annotate_restrict_buffers`, `T.annotate_safe_value`, `T.annotate_compile_flags`,
`T.annotate_pass_configs`. Each records an attribute of the PrimFunc being parsed
(`PrimFunc.attrs`), which the CUDA codegen (launch bounds, `__restrict__`) or the compile
(pass configs, NVRTC / C compiler flags) reads.

    @T.prim_func
    def k(x: T.Tensor((N,), "float32"), y: T.Tensor((N,), "float32")):
        T.annotate_restrict_buffers(x, y)        # x and y may alias: no __restrict__ on them
        with T.Kernel(N // 128, threads=128) as b:
            T.annotate_min_blocks_per_sm(2)      # __launch_bounds__(128, 2)
            ...
"""
from __future__ import annotations

from ..arith.simplify import const_value
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir.buffer import Buffer
from ..ir.expr import Expr, as_expr

MIN_BLOCKS = "tl.min_blocks_per_sm"
NON_RESTRICT = "tl.non_restrict_params"
COMPILE_FLAGS = "tilelang_compile_flags"  # the public TileLang's PrimFunc attr names
PASS_CONFIGS = "tilelang_pass_configs"
SAFE_VALUES = "tl.safe_value_map"  # ((tensor name, value), ...): T.annotate_safe_value, values other than 0


def _set(what: str, key: str, value) -> None:
    b = B.current(what)
    b.func_attrs = {**getattr(b, "func_attrs", {}), key: value}


def annotate_min_blocks_per_sm(n: int):
    """Ask for at least `n` resident blocks per SM: the CUDA kernel gets `__launch_bounds__(threads, n)`,
    so the compiler limits registers per thread accordingly (no effect on CPU)."""
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise DSLTypeError(f"T.annotate_min_blocks_per_sm(n): n must be a positive int, got {n!r}")
    _set("T.annotate_min_blocks_per_sm", MIN_BLOCKS, n)


def annotate_restrict_buffers(*buffers):
    """Mark tensor parameters that may alias each other (overlapping views of one tensor): the
    CUDA kernel declares them without `__restrict__`."""
    names = []
    for buf in buffers:
        if not isinstance(buf, Buffer) or buf.scope != "global":
            raise DSLTypeError(f"T.annotate_restrict_buffers expects tensor parameters, got {buf!r}")
        names.append(buf.name)
    if names:
        b = B.current("T.annotate_restrict_buffers")
        _set("T.annotate_restrict_buffers", NON_RESTRICT,
             tuple(getattr(b, "func_attrs", {}).get(NON_RESTRICT, ())) + tuple(names))


def annotate_safe_value(safe_value_map: dict):
    """The value out-of-range reads of a tensor give: `{A: v}` makes every element of A that a T.copy
    or a load in a T.Parallel loop reads outside A's shape read as `v` (0 without the annotation).
    Inside `with T.sblock(...):` it applies to that block's statements (an inner block's annotation
    wins inside it), elsewhere to the whole prim_func (transform/legalize_safe_memory.py). Example::

        T.annotate_safe_value({A: -T.infinity("float32")})   # a max over a padded tile ignores the padding
    """
    if not isinstance(safe_value_map, dict):
        raise DSLTypeError(f"T.annotate_safe_value: expected a dict {{tensor: value}}, got {safe_value_map!r}")
    b = B.current("T.annotate_safe_value")
    block = next((f for f in reversed(getattr(b, "tir_frames", [])) if hasattr(f, "safe_values")), None)
    have = dict(block.safe_values if block is not None else getattr(b, "func_attrs", {}).get(SAFE_VALUES, ()))
    for buf, v in safe_value_map.items():
        if not isinstance(buf, Buffer) or buf.scope != "global":
            raise DSLTypeError(f"T.annotate_safe_value: the keys must be tensor parameters (global buffers), got "
                               f"{getattr(buf, 'name', buf)!r}")
        e = as_expr(v)
        if getattr(e.dtype, "lanes", 1) != 1:
            raise DSLTypeError(f"T.annotate_safe_value: {buf.name} -> {v!r}: the value must be a scalar")
        c = const_value(e)
        have[buf.name] = c if c is not None else e
    if block is not None:  # the block's statements get it when the block closes (language/blocks.py)
        block.safe_values = have
        return
    _set("T.annotate_safe_value", SAFE_VALUES, tuple((k, v) for k, v in have.items() if not _is_zero(v)))


def _is_zero(v) -> bool:
    return not isinstance(v, Expr) and v == 0


def annotate_compile_flags(flags):
    """Device compile flags for this kernel (NVRTC on CUDA, the C compiler on CPU), added to the
    compile_flags given to tilelang.compile. Example: `T.annotate_compile_flags(["--use_fast_math"])`."""
    flags = [flags] if isinstance(flags, str) else list(flags)
    if not all(isinstance(f, str) for f in flags):
        raise DSLTypeError(f"T.annotate_compile_flags: expected a string or a list of strings, got {flags!r}")
    _set("T.annotate_compile_flags", COMPILE_FLAGS, tuple(" ".join(flags).split()))


def annotate_pass_configs(configs: dict):
    """Pass configs for this kernel; those given to tilelang.compile / @tilelang.jit override them.
    Example: `T.annotate_pass_configs({"tl.disable_warp_specialized": True})`."""
    if not isinstance(configs, dict):
        raise DSLTypeError(f"T.annotate_pass_configs: expected a dict, got {configs!r}")
    _set("T.annotate_pass_configs", PASS_CONFIGS, tuple(sorted((str(k), v) for k, v in configs.items())))

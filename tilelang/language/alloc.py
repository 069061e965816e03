"""Tile allocations: shared memory, fragments (registers), local arrays and scalar vars."""
from __future__ import annotations

from ..arith.simplify import const_int
from ..dtypes import as_dtype
from ..errors import NonConstantShapeError
from ..frontend import builder as B
from ..frontend.vector import VectorVar
from ..ir.buffer import Buffer
from ..ir.expr import as_expr, cast
from ..ir.stmt import Allocate


def _alloc(shape, dtype, scope, what, name=None, init=None) -> Buffer:
    b = B.current(what)
    if isinstance(shape, int) or not isinstance(shape, (tuple, list)):
        shape = (shape,)
    dims = []
    for s in shape:
        c = const_int(s)
        if c is None:
            raise NonConstantShapeError(f"{what}: tile shapes must be compile-time constants, got {s} in {tuple(shape)}; "
                                        "use Python ints (block sizes) rather than tensor dims")
        if c <= 0:
            raise NonConstantShapeError(f"{what}: tile dims must be positive, got {tuple(shape)}")
        dims.append(c)
    buf = Buffer(b.unique(name or _default_name(scope)), tuple(dims), dtype, scope)
    buf.auto_named = name is None  # the parser renames it after the variable it is assigned to
    b.emit(Allocate(buf, init))
    return buf


def _default_name(scope):
    return {"shared.dyn": "smem", "fragment": "frag", "local": "local", "local.var": "var"}.get(scope, "buf")


def alloc_shared(shape, dtype, scope="shared.dyn") -> Buffer:
    """A block-shared tile. Example: `A_s = T.alloc_shared((128, 32), "float16")`."""
    return _alloc(shape, dtype, "shared.dyn" if scope in ("shared", "shared.dyn") else scope, "T.alloc_shared")


def alloc_fragment(shape, dtype, scope="local.fragment") -> Buffer:
    """A block-level tile held in registers, spread over the block's threads by layout inference.

    Example: `C = T.alloc_fragment((128, 128), "float32")`.
    """
    return _alloc(shape, dtype, "fragment", "T.alloc_fragment")


def alloc_local(shape, dtype, scope="local") -> Buffer:
    """A per-thread array."""
    return _alloc(shape, dtype, "local", "T.alloc_local")


def alloc_var(dtype, init=None, scope="local.var", name=None) -> Buffer:
    """A per-thread mutable scalar; read it as `x` or `x[0]`, write `x = ...` or `x[0] = ...`.

    It starts at `init`, or at zero when no `init` is given. `T.alloc_var(dtype, "local.var")` (a string
    in init's place) names the scope, as the public TileLang allows.
    """
    if isinstance(init, str):
        init = None
    if as_dtype(dtype).lanes > 1:  # `v = T.alloc_var(T.float32x2)`: a mutable vector of lanes
        return VectorVar.allocate(_alloc, as_dtype(dtype), init, name)
    _check_literal(dtype, init)
    init = (cast(dtype, as_expr(0 if init is None else init)),)
    return _alloc((1,), dtype, "local.var", "T.alloc_var", name=name, init=init)


_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38}


def _check_literal(dtype, init) -> None:
    """A finite Python number past the largest value of a 16/32-bit float dtype is refused (it would
    silently become inf), as the public TileLang refuses such a literal."""
    import math

    from ..dtypes import as_dtype

    name = as_dtype(dtype).name
    if isinstance(init, (int, float)) and not isinstance(init, bool) and name in _FLOAT_MAX \
            and math.isfinite(init) and abs(init) > _FLOAT_MAX[name]:
        raise ValueError(f"T.alloc_var({name}, init={init!r}): literal value {init!r} exceeds maximum of {name} "
                         f"({_FLOAT_MAX[name]!r}); use a wider dtype, or T.infinity({name!r}) for inf")


def alloc_global(shape, dtype, scope="global") -> Buffer:
    """A global-memory workspace, allocated by the host for every call (torch.empty on the
    kernel's device, contents undefined) and shared by the kernels of the prim_func that
    follow it: the split-then-combine pattern. Declare it outside `with T.Kernel`; its dims
    may use the function's symbolic dims.

    Example::

        partial = T.alloc_global((batch, heads, num_split, dim), "float32")
        with T.Kernel(batch, heads, num_split) as (b, h, s):
            ...  # write partial[b, h, s, :]
        with T.Kernel(batch, heads) as (b, h):
            ...  # read partial[b, h, :, :]
    """
    from ..errors import DSLSyntaxError, DSLTypeError

    b = B.current("T.alloc_global")
    if scope != "global":
        raise DSLTypeError(f"T.alloc_global: scope must be 'global', got {scope!r}; use T.alloc_shared / "
                           "T.alloc_fragment / T.alloc_local for on-chip buffers")
    if b.kernel is not None:
        raise DSLSyntaxError("T.alloc_global declares a workspace shared by kernels; call it outside "
                             "`with T.Kernel(...)` (inside a kernel use T.alloc_shared or T.alloc_fragment)", b.span)
    if isinstance(shape, int) or not isinstance(shape, (tuple, list)):
        shape = (shape,)
    dims = []
    for s in shape:
        c = const_int(s)
        if c is not None and c <= 0:
            raise NonConstantShapeError(f"T.alloc_global: dims must be positive, got {tuple(shape)}")
        dims.append(c if c is not None else as_expr(s))
    buf = Buffer(b.unique("workspace"), tuple(dims), dtype, "global")
    buf.auto_named = True
    b.emit(Allocate(buf))
    return buf


def alloc_barrier(arrive_count) -> Buffer:
    """`n` mbarriers in shared memory: `T.alloc_barrier(128)` (one, used as mbar or mbar[0]) or
    `T.alloc_barrier([128, 128])` (used as mbars[i]); a phase of each completes after that many
    arrivals (T.barrier_arrive / T.mbarrier_arrive, one per thread that runs it). Allocate them
    at the top level of the kernel. See language/hopper.py for the ops that use them."""
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    vals = [const_int(c) for c in counts]
    if not vals or any(v is None or v <= 0 for v in vals):
        raise ValueError(f"T.alloc_barrier: arrive_count must be compile-time integers of at least 1, got {counts}")
    buf = _alloc((len(vals),), "uint64", "shared.dyn", "T.alloc_barrier", name="mbar")
    buf.barrier_counts = tuple(vals)
    return buf

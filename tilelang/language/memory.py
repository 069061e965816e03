"""Element-level memory operations: `T.atomic_addx2` / `T.atomic_addx4`, `T.atomic_load`, `T.atomic_store`,
`T.im2col` (a convolution's input patches as a matrix tile) and `T.index_to_coordinates`."""
from __future__ import annotations

from ..arith.simplify import simplify
from ..errors import DSLTypeError, DSLValueError
from ..frontend import builder as B
from ..frontend.vector import VectorValue, materialize_lane, region_positions
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from ..op.im2col import im2col_op
from .thread import EMITTED

_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")
_LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")  # a load cannot release
_STORE_ORDERS = ("relaxed", "release", "seq_cst")  # a store cannot acquire


def _element(x, what) -> E.BufferLoad:
    if isinstance(x, Buffer) and x.scope == "local.var":
        return x.as_load()
    if not isinstance(x, E.BufferLoad):
        raise DSLTypeError(f"{what}: expected a buffer element such as A[i], got {x!r}")
    return x


def _lane_elements(n: int, x, what) -> list:
    """The n elements an x2 / x4 operand names: x[..., j] (and the next n - 1 along the last dim),
    a region x[..., j:j + n], a vector of elements (x[T.Ramp(j, 1, n)]) or a whole buffer (from its start)."""
    if getattr(x, "is_tl_vector", False):
        if x.lanes != n:
            raise DSLTypeError(f"{what}: expected {n} lanes, got the {x.dtype} vector {x!r}")
        return list(x.values)
    if isinstance(x, BufferRegion):
        pos = region_positions(x, what)
        if len(pos) != n:
            raise DSLTypeError(f"{what}: the region {x!r} holds {len(pos)} elements, expected {n}")
        return [E.BufferLoad(x.buffer, p, x.buffer.dtype) for p in pos]
    if isinstance(x, Buffer) and x.scope != "local.var":  # a whole buffer: from its first element
        ld = E.BufferLoad(x, (E.const(0),) * x.ndim, x.dtype)
        if x.static_shape is not None and x.numel() < n:
            raise DSLTypeError(f"{what}: {x.name} has {x.numel()} elements, fewer than {n}")
    else:
        ld = _element(x, what)
    out = []
    for u in range(n):
        idx = list(ld.indices)
        idx[-1] = simplify(idx[-1] + u)
        out.append(E.BufferLoad(ld.buffer, tuple(idx), ld.dtype))
    return out


def _atomic_lanes(n: int, dst, value, return_prev):
    from .tile import atomic_add

    what = f"T.atomic_addx{n}"
    B.in_kernel(what)
    d = _lane_elements(n, dst, what)
    if not all(isinstance(x, E.BufferLoad) for x in d):
        raise DSLTypeError(f"{what}: dst must name buffer elements (A[i:i + {n}], A[i] or A[T.Ramp(i, 1, {n})]), "
                           f"got {dst!r}")
    v = _lane_elements(n, value, what)
    if not return_prev:
        for a, b in zip(d, v):
            atomic_add(a, b)
        return EMITTED
    # each element's previous value, read by its own atomic (per element, as the public TileLang's
    # wider-than-hardware forms are): one let per lane, so each atomic runs once, here
    b = B.current()
    prev = [materialize_lane(b, "prev", atomic_add(a, x, return_prev=True)) for a, x in zip(d, v)]
    return VectorValue(prev)


def atomic_addx2(dst, value, return_prev=False):
    """dst[..., j:j+2] += value[..., k:k+2] atomically, element by element (two adjacent values, such as
    a half2): `T.atomic_addx2(dQ[b, i, d * 2], acc[i, d * 2])`. dst and value are an element (the
    pair starting there), a 2-element region (`dQ[b, i, j:j + 2]`) or a T.Ramp-indexed pair; with
    `return_prev=True` the result is the previous pair as a vector value: `Prev[0:2] = T.atomic_addx2(
    Dst[0:2], Val[0:2], return_prev=True)`."""
    return _atomic_lanes(2, dst, value, return_prev)


def atomic_addx4(dst, value, return_prev=False):
    """dst[..., j:j+4] += value[..., k:k+4] atomically, element by element (four adjacent values);
    operands and `return_prev` as T.atomic_addx2.

    Example: `T.atomic_addx4(dKV[b, row, h, d * 4], acc_shared[i, d * 4])`.
    """
    return _atomic_lanes(4, dst, value, return_prev)


def _order(memory_order, what, allowed=_ORDERS):
    if memory_order not in allowed:
        raise DSLValueError(f"{what} does not support memory_order={memory_order!r}: expected one of "
                            f"{', '.join(allowed)}")
    return E.const(_ORDERS.index(memory_order))


def atomic_load(src, memory_order="seq_cst"):
    """Read one element with the given memory order: `flag = T.atomic_load(flags[i], "acquire")`."""
    B.in_kernel("T.atomic_load")
    ld = _element(src, "T.atomic_load")
    return E.Call("tl_atomic_load", (ld, _order(memory_order, "T.atomic_load", _LOAD_ORDERS)), ld.dtype)


def atomic_store(dst, src, memory_order="seq_cst"):
    """Write one element with the given memory order: `T.atomic_store(flags[i], 1, "release")`."""
    B.in_kernel("T.atomic_store")
    ld = _element(dst, "T.atomic_store")
    v = E.cast(ld.dtype, E.as_expr(src, ld.dtype))
    order = _order(memory_order, "T.atomic_store", _STORE_ORDERS)
    B.current().emit(S.Evaluate(E.Call("tl_atomic_store", (ld, v, order), ld.dtype)))
    return EMITTED


def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None, annotations=None):
    """Fill the tile `col` (rows: output pixels n*OH*OW, cols: kh*KW*C + kw*C + c) with block
    `(nhw_step, c_step)` of the im2col matrix of the NHWC image `img`; padding reads 0.

    Example: `T.im2col(data, data_shared, by, k_iter, KH, S, D, P)`.
    """
    B.in_kernel("T.im2col")
    if not isinstance(img, Buffer) or img.ndim != 4:
        raise DSLTypeError(f"T.im2col: img must be a 4-d NHWC tensor, got {img!r}")
    if not isinstance(col, Buffer) or col.ndim != 2:
        raise DSLTypeError(f"T.im2col: col must be a 2-d tile, got {col!r}")
    B.current().emit(im2col_op(img, col, E.as_expr(nhw_step), E.as_expr(c_step), kernel, stride, dilation, pad))
    return EMITTED


def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None, annotations=None):
    """The older name of T.im2col (same arguments and result); warns a DeprecationWarning."""
    import warnings

    warnings.warn("T.c2d_im2col is deprecated; use T.im2col (same arguments)", DeprecationWarning, stacklevel=2)
    return im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy, annotations)


def index_to_coordinates(index, shape):
    """Row-major coordinates of a flat index: `i, j = T.index_to_coordinates(t, (M, N))`."""
    coords = []
    for extent in reversed(tuple(shape)):
        coords.append(index % extent)
        index = index // extent
    return list(reversed(coords))

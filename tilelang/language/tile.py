"""Block-level tile operations: copy, gemm, fill/clear, reductions, cumsum, atomics."""
from __future__ import annotations

import enum

from .. import dtypes
from ..errors import DSLTypeError, DSLValueError, ShapeMismatchError, TileLangError
from ..frontend import builder as B
from ..ir.buffer import Buffer, BufferRegion
from ..ir.expr import (
    BufferLoad,
    Call,
    Expr,
    Var,
    as_expr,
    cast,
    const_value,
    logical_and,
    select,
)
from ..ir.stmt import BufferStore, Evaluate, For, IfThenElse
from ..op import hopper as H
from ..op import tile_ops as O
from ..op.reduce_rules import BIT_KINDS, KINDS, NAN_KINDS
from ..op.regions import (
    is_tile_arg,
    matrix_extents,
    pair_regions,
    same_extent,
    squeezed,
    to_region,
)

_builder = B  # T.gemm names its second operand B, as the public TileLang does


def _on_chip(prim: str, **operands) -> None:
    """Tile ops other than copy/fill/atomics read and write on-chip tiles (shared, fragment,
    local), as in the public TileLang: a global tensor must be copied into a tile first."""
    for nm, x in operands.items():
        buf = x.buffer if isinstance(x, (BufferRegion, BufferLoad)) else x
        if isinstance(buf, Buffer) and buf.scope == "global":
            raise DSLTypeError(f"{prim}: {nm} ({buf.name}) is a global tensor; {prim} works on shared or "
                               f"fragment tiles: T.copy it into a T.alloc_shared/T.alloc_fragment tile first")


def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None, loop_layout=None, *,
         prefer_instruction=None, annotations=None):
    """Copy a tile: `T.copy(A[by * 128, k * 32], A_shared)`.

    Each side is a buffer, a slice (`A[a:b, c:d]`) or a corner (`A[i, j]`, extent taken from
    the other side). Global elements outside the tensor read as zero and are never written.
    With two corners it copies one element: `T.copy(A[i], B[j])` is `B[j] = A[i]`.
    Unit dims are ignored. Sides with as many other dims but other extents copy over the extents of
    the side nearer the threads (fragment, then shared, then global; src on a tie), as in the public
    TileLang: `T.copy(A[:, 0:2], B[:, 0:3])` writes B[:, 0:2]; a destination smaller than its source
    there, or a differing number of non-unit dims (no broadcasting), is a ShapeMismatchError.
    `coalesced_width`, `eviction_policy`, `prefer_instruction` ("tma", "cp_async" or "sync") and
    `loop_layout` are lowering hints (the compiler picks its own); `annotations` may carry any of
    them and wins over the keyword, as in the public TileLang.
    """
    B.in_kernel("T.copy")
    ann = dict(annotations or {})
    disable_tma = ann.get("disable_tma", disable_tma)
    prefer = ann.get("prefer_instruction", prefer_instruction)
    if prefer is not None and str(prefer) not in ("tma", "cp_async", "sync"):
        raise DSLTypeError(f"T.copy: prefer_instruction must be 'tma', 'cp_async' or 'sync', got {prefer!r}")
    policy = ann.get("eviction_policy", eviction_policy)
    if policy is not None and not isinstance(policy, int) and policy not in ("evict_normal", "evict_first",
                                                                              "evict_last"):
        raise DSLTypeError(f"T.copy: eviction_policy must be 'evict_normal', 'evict_first' or 'evict_last', "
                           f"got {policy!r}")
    for name, x in (("src", src), ("dst", dst)):
        if not is_tile_arg(x):
            raise DSLTypeError(f"T.copy {name}: expected a buffer, slice or corner, got {type(x).__name__}: {x!r}")
    if isinstance(src, BufferLoad) and isinstance(dst, BufferLoad):
        # two single elements: a plain element store `dst[j] = src[i]` (cast to dst's dtype), as in the
        # public TileLang; with lowering hints it stays a (one-element) copy op that carries them
        if not ann and coalesced_width is None and loop_layout is None:
            B.current().emit(BufferStore(dst.buffer, dst.indices, cast(dst.buffer.dtype, src)))
        else:
            B.current().emit(O.Copy(to_region(src), to_region(dst), bool(disable_tma)))
        return
    s, d = pair_regions(src, dst, "T.copy")
    B.current().emit(O.Copy(s, d, bool(disable_tma)))


def async_copy(src, dst, *, coalesced_width=None, annotations=None, loop_layout=None):
    """Start a global -> shared tile copy with cp.async and commit it as one group; no wait.

    The program completes it itself: `T.ptx_wait_group(0)` (each thread's groups), then reads of
    dst after a barrier (the compiler puts `__syncthreads` before the first read of dst, as for
    T.copy). On the CPU backend the copy is done at once. `coalesced_width`, `annotations` and
    `loop_layout` are hints the compiler may ignore.

        T.async_copy(A[by * 64, k * 32], A_shared)
        ...                                   # independent work overlaps the copy
        T.ptx_wait_group(0)
        T.gemm(A_shared, B_shared, C_local)
    """
    B.in_kernel("T.async_copy")
    for name, x in (("src", src), ("dst", dst)):
        if not is_tile_arg(x):
            raise DSLTypeError(f"T.async_copy {name}: expected a buffer, slice or corner, got {type(x).__name__}: {x!r}")
    if isinstance(src, BufferLoad) and isinstance(dst, BufferLoad):  # two corners: one element, as T.copy
        s, d = to_region(src), to_region(dst)
    else:
        s, d = pair_regions(src, dst, "T.async_copy")
    if s.buffer.scope != "global" or d.buffer.scope not in ("shared", "shared.dyn"):
        raise DSLTypeError(f"T.async_copy copies global -> shared (cp.async); got {s.buffer.name} "
                           f"({s.buffer.scope}) -> {d.buffer.name} ({d.buffer.scope}): use T.copy")
    B.current().emit(O.Copy(s, d, True, no_wait=True))
    B.current().emit(H.CpAsyncCommit())


def transpose(src, dst, annotations=None):
    """dst[..., j, i] = src[..., i, j] for tiles (shared or fragment) and global tensors.

    src is (..., M, N), dst (..., N, M) with the same leading extents; each side is a buffer or a
    slice. Lowered as a T.Parallel loop over src (values cast to dst's dtype). On a global tensor
    a slice may reach past the tensor's edge, as in the public TileLang: src elements outside it
    read as 0 and dst elements outside it are not written. `annotations` are accepted and change
    nothing here.

        T.transpose(K_shared, Kt_shared)      # (64, 128) -> (128, 64)
        T.transpose(X[b, 0:64, 0:32], Y[b, 0:32, 0:64])   # global to global
    """
    B.in_kernel("T.transpose")
    regions = []
    for name, x in (("src", src), ("dst", dst)):
        if not is_tile_arg(x) or isinstance(x, BufferLoad):
            raise DSLTypeError(f"T.transpose {name}: expected a buffer or a slice, got {type(x).__name__}: {x!r}")
        r = to_region(x, None, "T.transpose")
        ext = [const_value(e) for e in r.extents]
        if len(ext) < 2 or any(e is None for e in ext):
            raise DSLTypeError(f"T.transpose {name}: expected a tile of 2 or more dims with constant extents, got "
                               f"{r.buffer.name} with extents {list(r.extents)}")
        regions.append((r, ext))
    (s, se), (d, de) = regions
    lead_s, lead_d = [e for e in se[:-2] if e != 1], [e for e in de[:-2] if e != 1]  # unit dims drop out
    if lead_s != lead_d or se[-2:] != de[-2:][::-1]:
        raise ShapeMismatchError(f"T.transpose: src {s.buffer.name} is {tuple(se)}, so dst must be "
                                 f"{tuple(se[:-2] + se[-2:][::-1])}; got {d.buffer.name} {tuple(de)}")
    ivs = [Var(f"tr{k}", dtypes.int32) for k in range(len(se))]
    si = [st + v for (st, _), v in zip(s.ranges, ivs)]
    lead = iter(v for v, e in zip(ivs[:-2], se[:-2]) if e != 1)
    dv = [next(lead) if e != 1 else 0 for e in de[:-2]] + ivs[-2:][::-1]
    di = [st + v for (st, _), v in zip(d.ranges, dv)]
    val = cast(d.buffer.dtype, BufferLoad(s.buffer, tuple(si), s.buffer.dtype))
    ok_s, ok_d = _transpose_guard(s, si), _transpose_guard(d, di)
    if ok_s is not None:
        val = select(ok_s, val, as_expr(0, d.buffer.dtype))
    body = BufferStore(d.buffer, tuple(di), val)
    if ok_d is not None:
        body = IfThenElse(ok_d, body)
    for v, e in reversed(list(zip(ivs, se))):
        body = For(v, as_expr(0), as_expr(e), "parallel", body)
    B.current().emit(body)


def _transpose_guard(r: BufferRegion, idx) -> Expr | None:
    """For a global tensor: the condition that `idx` (inside region r) lies in the tensor, per
    dimension only where the region's constant bounds do not already show it; None when no
    check is needed (on-chip tiles are indexed in range by construction)."""
    if r.buffer.scope != "global":
        return None
    conds = []
    for (start, ext), i, dim in zip(r.ranges, idx, r.buffer.shape):
        st, ex, n = const_value(start), const_value(ext), const_value(dim)
        if st is None or st < 0:
            conds.append(i >= 0)
        if st is None or ex is None or n is None or st + ex > n:
            conds.append(i < dim)
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = logical_and(out, c)
    return out


def fill(buffer, value, annotations=None):
    """Set every element of a tile (or a slice of one) to `value`: `T.fill(acc, 0)`.
    `annotations` (lowering hints) are accepted and change nothing here."""
    B.in_kernel("T.fill")
    r = to_region(buffer, None, "T.fill")
    if isinstance(buffer, BufferLoad):
        r = BufferRegion(buffer.buffer, tuple((i, 1) for i in buffer.indices))
    B.current().emit(O.Fill(r, cast(r.buffer.dtype, as_expr(value, r.buffer.dtype))))


def clear(buffer, annotations=None):
    """`T.fill(buffer, 0)`."""
    fill(buffer, 0)


class GemmWarpPolicy(enum.IntEnum):
    """How T.gemm splits a tile over warps on GPUs (a hint; results do not depend on it)."""

    Square = 0
    FullRow = 1
    FullCol = 2


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square, clear_accum=False, mbar=None,
         annotations=None, *, k_pack=1, wg_wait=0):
    """C += A @ B on tiles (`C = A @ B` with clear_accum=True); transposes per flag.

    A is (M, K) or (K, M) with transpose_A; B is (K, N) or (N, K) with transpose_B; C is (M, N).
    Example: `T.gemm(A_shared, B_shared, C_local)`. Argument names are the public TileLang's
    (`T.gemm(A=..., B=..., C=...)`), in its order; `mbar` (an mbarrier the sm_100 tensor-core path
    arrives on) and `annotations` are accepted and have no effect here; `k_pack` and `wg_wait` (keywords
    only: the public TileLang's older spelling) are kept.
    """
    _builder.in_kernel("T.gemm")
    ra, rb, rc = (to_region(x, None, "T.gemm") for x in (A, B, C))
    _on_chip("T.gemm", A=ra, B=rb, C=rc)
    a, b, c = matrix_extents(ra), matrix_extents(rb), matrix_extents(rc)
    for nm, e in (("A", a), ("B", b), ("C", c)):
        if len(e) != 2:
            raise ShapeMismatchError(f"T.gemm: {nm} must be a 2-d tile, got extents {tuple(e)}")
    m, ka = (a[1], a[0]) if transpose_A else (a[0], a[1])
    kb, n = (b[1], b[0]) if transpose_B else (b[0], b[1])
    if not same_extent(ka, kb):
        raise ShapeMismatchError(f"T.gemm: K of A ({ra.buffer.name}: {ka}) does not match K of B "
                                 f"({rb.buffer.name}: {kb}); check transpose_A/transpose_B")
    if not (same_extent(m, c[0]) and same_extent(n, c[1])):
        raise ShapeMismatchError(f"T.gemm: A@B is ({m}, {n}) but C ({rc.buffer.name}) is ({c[0]}, {c[1]})")
    pol = getattr(policy, "name", None) or (str(policy) if policy is not None else "Square")
    _builder.current().emit(O.Gemm(ra, rb, rc, bool(transpose_A), bool(transpose_B), bool(clear_accum), pol,
                            int(k_pack), int(wg_wait)))


def _reduce(kind, buffer, out, dim, clear, batch=1, nan_propagate=False, annotations=None):
    what = f"T.reduce_{kind}"
    B.in_kernel(what)
    if kind not in KINDS:
        raise DSLTypeError(f"T.reduce: reduce_type must be one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(buffer, Buffer) or not isinstance(out, Buffer):
        raise DSLTypeError(f"{what}: expected two buffers (src, dst), got {buffer!r}, {out!r}")
    _on_chip(what, buffer=buffer, out=out)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise DSLTypeError(f"{what}: batch must be an int >= 1 (output elements per all-reduce), got {batch!r}")
    ann = dict(annotations or {})
    nan_propagate = bool(nan_propagate or ann.get("nan_propagate", False))
    if nan_propagate and kind in NAN_KINDS and out.dtype.name not in ("float16", "bfloat16"):
        raise DSLTypeError(f"{what}(nan_propagate=True) needs a float16 or bfloat16 destination, got {out.name} "
                           f"of {out.dtype}")
    if kind in BIT_KINDS and not (out.dtype.is_int or out.dtype.is_bool):
        raise DSLTypeError(f"{what} needs an integer or bool destination, got {out.name} of {out.dtype}")
    nd = buffer.ndim
    if not -nd <= dim < nd:
        raise DSLTypeError(f"{what}: dim={dim} is out of range for the {nd}-d buffer {buffer.name}")
    dim %= nd
    expect = [s for i, s in enumerate(buffer.shape) if i != dim]
    got = list(out.shape)
    if squeezed(expect) != squeezed(got) and not (not expect and squeezed(got) == []):
        raise ShapeMismatchError(f"{what}: reducing {buffer.name}{tuple(buffer.shape)} over dim {dim} "
                                 f"gives {tuple(expect)}, but the destination {out.name} is {tuple(got)}")
    B.current().emit(O.Reduce(kind, buffer, out, dim, bool(clear), nan_propagate=nan_propagate and kind in NAN_KINDS))


def reduce(buffer, out, reduce_type, dim, clear, batch=1, annotations=None):
    """out = the `reduce_type` reduction of buffer over `dim`: one of sum, abssum, max, min,
    absmax, bitand, bitor, bitxor (folded into out when clear=False).

    `batch` (>= 1) is a hint for how many outputs share one GPU all-reduce; results do not depend
    on it. `annotations={"nan_propagate": True}` is reduce_max's nan_propagate.
    Example: `T.reduce(S, row_max, "max", dim=1, clear=True)`.
    """
    _reduce(reduce_type, buffer, out, dim, clear, batch, annotations=annotations)


def reduce_sum(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """out = sum of buffer over `dim` (added to out when clear=False).

    Example: `T.reduce_sum(acc, row_sum, dim=1)`; `batch` is a GPU all-reduce hint (>= 1).
    """
    _reduce("sum", buffer, out, dim, clear, batch, annotations=annotations)


def reduce_max(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    """out = max of buffer over `dim` (clear=True starts from -inf). With nan_propagate=True
    (float16 / bfloat16 destinations) a NaN anywhere in a line makes its result NaN."""
    _reduce("max", buffer, out, dim, clear, batch, nan_propagate, annotations)


def reduce_min(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    """out = min of buffer over `dim` (clear=True starts from +inf); nan_propagate as reduce_max."""
    _reduce("min", buffer, out, dim, clear, batch, nan_propagate, annotations)


def reduce_abssum(buffer, out, dim=-1, batch=1, annotations=None):
    """out = sum of |buffer| over `dim`."""
    _reduce("abssum", buffer, out, dim, True, batch, annotations=annotations)


def reduce_absmax(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    """out = max of |buffer| over `dim`; nan_propagate as reduce_max."""
    _reduce("absmax", buffer, out, dim, clear, batch, nan_propagate, annotations)


def reduce_bitand(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """out = bitwise and of an integer tile over `dim` (clear=True starts from all ones)."""
    _reduce("bitand", buffer, out, dim, clear, batch, annotations=annotations)


def reduce_bitor(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """out = bitwise or of an integer tile over `dim`. Example: `T.reduce_bitor(flags, any_flag, dim=1)`."""
    _reduce("bitor", buffer, out, dim, clear, batch, annotations=annotations)


def reduce_bitxor(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """out = bitwise xor of an integer tile over `dim`."""
    _reduce("bitxor", buffer, out, dim, clear, batch, annotations=annotations)


def cumsum(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive prefix sum of a tile along `dim` (in place when dst is None); `annotations`
    (lowering hints) change nothing here. Example: `T.cumsum(S, dim=1, reverse=True)`."""
    B.in_kernel("T.cumsum")
    B.current().emit(scan_op("T.cumsum", "sum", src, dst, dim, reverse))


def scan_op(what: str, kind: str, src, dst, dim, reverse) -> O.CumSum:
    """The O.CumSum of T.cumsum / T.cummax: src and dst are on-chip buffers or regions of them (`S[r0:r1, :]`,
    only that box is scanned) of equal shape; dst None scans in place; dim counts the buffers' dims."""
    dst = src if dst is None else dst
    if not isinstance(src, (Buffer, BufferRegion)) or not isinstance(dst, (Buffer, BufferRegion)):
        raise DSLTypeError(f"{what}: expected buffers or slices of them (S or S[a:b, :]), got {src!r}, {dst!r}")
    _on_chip(what, src=src, dst=dst)
    rs, rd = to_region(src), to_region(dst)
    sb, db = rs.buffer, rd.buffer
    es, ed = tuple(rs.extents), tuple(rd.extents)
    if len(es) != len(ed) or not all(same_extent(x, y) for x, y in zip(es, ed)):
        raise ShapeMismatchError(f"{what}: {sb.name} {es} and {db.name} {ed} differ in shape")
    if not -len(es) <= dim < len(es):
        raise DSLTypeError(f"{what}: dim={dim} is out of range for the {len(es)}-d buffer {sb.name}")
    dim %= len(es)
    whole = isinstance(src, Buffer) and isinstance(dst, Buffer)
    if whole:
        return O.CumSum(sb, db, dim, bool(reverse), kind=kind)
    return O.CumSum(sb, db, dim, bool(reverse), kind=kind, src_start=tuple(st for st, _ in rs.ranges),
                    dst_start=tuple(st for st, _ in rd.ranges), extents=es)


def _atomic(kind, dst, value, memory_order=None, return_prev=False):
    B.in_kernel(f"T.atomic_{kind}")
    b = B.current()
    if isinstance(dst, BufferLoad) and not isinstance(value, (Buffer, BufferRegion)):
        # one element: SIMT code, every thread that reaches it updates the element with its own
        # value (inside T.Parallel, each element's thread); the expression is the previous value
        at = Call(f"atomic_{kind}", (dst, cast(dst.buffer.dtype, as_expr(value, dst.buffer.dtype))), dst.buffer.dtype)
        if return_prev:
            return at
        b.emit(Evaluate(at))
        return None
    if return_prev:
        raise DSLTypeError(f"T.atomic_{kind}: return_prev=True needs one element as dst (such as "
                           f"counter[i]) and a scalar value, not a tile")
    if is_tile_arg(value):
        s, d = pair_regions(value, dst, f"T.atomic_{kind}")
        b.emit(O.AtomicTile(kind, d, s))
        return None
    r = to_region(dst, None, f"T.atomic_{kind}")
    b.emit(O.AtomicTile(kind, r, cast(r.buffer.dtype, as_expr(value, r.buffer.dtype))))
    return None


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False, annotations=None):
    """dst += value atomically.

    A tile form (`T.atomic_add(C[by*M, bx*N], C_local)`) adds each element once. An element form
    (`T.atomic_add(hist[b], 1)`) is SIMT code run by every thread that reaches it; with
    `return_prev=True` it is an expression giving the element's previous value:
    `pos = T.atomic_add(count[0], 1, return_prev=True)`. `use_tma` and `annotations` are
    lowering hints.
    """
    return _atomic("add", dst, value, memory_order, return_prev)


def atomic_max(dst, value, memory_order=None, return_prev=False, annotations=None):
    """dst = max(dst, value) atomically (tile or element form, as T.atomic_add)."""
    return _atomic("max", dst, value, memory_order, return_prev)


def atomic_min(dst, value, memory_order=None, return_prev=False, annotations=None):
    """dst = min(dst, value) atomically (tile or element form, as T.atomic_add)."""
    return _atomic("min", dst, value, memory_order, return_prev)


def atomic_or(dst, value, memory_order=None):
    """dst |= value atomically, on one integer element (SIMT code: every thread that reaches it
    ORs its own value in). Example: `T.atomic_or(flags[b], T.shift_left(1, tx % 32))`."""
    if not isinstance(dst, BufferLoad) or isinstance(value, (Buffer, BufferRegion)):
        raise DSLTypeError(f"T.atomic_or: dst must be one element such as flags[i], and value a scalar; got "
                           f"{dst!r}, {value!r}")
    if not dst.buffer.dtype.is_int:
        raise DSLTypeError(f"T.atomic_or needs an integer element, got {dst.buffer.name} of {dst.buffer.dtype}")
    return _atomic("or", dst, value, memory_order)


def use_swizzle(panel_size=8, order="row", enable=True):
    """Rasterize blocks in panels of `panel_size` for L2 reuse (does not change results)."""
    B.in_kernel("T.use_swizzle")
    B.current().emit(O.Swizzle(int(panel_size), str(order), bool(enable)))


def annotate_layout(layout_map: dict):
    """Pin buffer layouts: `T.annotate_layout({A_shared: layout})`."""
    B.in_kernel("T.annotate_layout")
    for buf, lay in layout_map.items():
        _check_shared_layout_injective(buf, lay)
    B.current().emit(O.AnnotateLayout(tuple(layout_map.items())))


def _check_shared_layout_injective(buf, lay):
    """A shared tile's layout gives every element its own place: a many-to-one map would make
    distinct elements share storage, so it is a ValueError naming two elements that collide."""
    from ..layout.layout import Layout

    if not isinstance(buf, Buffer) or buf.scope not in ("shared", "shared.dyn") or not isinstance(lay, Layout):
        return
    if not all(isinstance(s, int) for s in lay.shape):
        return
    if len(lay.shape) == 2 and tuple(lay.shape) == tuple(buf.shape) and _known_one_to_one(buf, lay):
        return  # (enumerating a 128 x 128 tile costs ~40 ms of compile time)
    try:
        hit = lay.first_collision()
    except TileLangError:  # a layout that cannot be enumerated here is left to the lowering
        return
    if hit is not None:
        a, b, phys = hit
        raise DSLValueError(f"T.annotate_layout: the layout of shared buffer `{buf.name}` must be injective "
                            f"(each element its own storage), but elements {a} and {b} both map to physical "
                            f"coordinates {phys}")


def _known_one_to_one(buf, lay) -> bool:
    """lay is row-major or make_swizzled_layout's swizzle of buf: one-to-one by construction."""
    from ..layout.layout import Layout
    from ..layout.swizzle import make_swizzled_layout

    try:
        return lay == Layout(tuple(lay.shape), lambda i, j: (i, j)) or lay == make_swizzled_layout(buf)
    except TileLangError:
        return False


def annotate_padding(padding_map):
    pass


def annotate_l2_hit_ratio(*args, **kwargs):
    pass


def no_set_max_nreg():
    pass


def disable_warp_group_reg_alloc():
    pass


__all__ = [n for n in dir() if not n.startswith("_")]
_ = (Expr, const_value)

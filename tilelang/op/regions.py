"""Turning T.copy / T.gemm / T.fill arguments (buffers, slices, corners) into regions."""
from __future__ import annotations

from ..arith.simplify import const_int, simplify
from ..errors import DSLTypeError, ShapeMismatchError
from ..ir.buffer import Buffer, BufferRegion
from ..ir.expr import BufferLoad, Expr, as_expr


def is_tile_arg(x) -> bool:
    return isinstance(x, (Buffer, BufferRegion, BufferLoad))


def to_region(x, like_extents=None, what="argument") -> BufferRegion:
    """Buffer -> whole region; region -> itself; corner load -> region sized like the other side."""
    if isinstance(x, Buffer):
        return x.region()
    if isinstance(x, BufferRegion):
        return x
    if isinstance(x, BufferLoad):
        if like_extents is None:
            return BufferRegion(x.buffer, tuple((i, 1) for i in x.indices))
        n = len(x.indices)
        ext = [e for e in like_extents if const_int(e) != 1]
        if len(ext) > n:
            raise ShapeMismatchError(
                f"{what}: corner {x.buffer.name}[...] has {n} indices but the other side is a "
                f"{len(ext)}-d tile; index every dimension of {x.buffer.name}")
        full = list(like_extents)[-n:] if len(like_extents) >= n else [1] * (n - len(like_extents)) + list(like_extents)
        # keep unit dims of the tile where they align; pad leading dims with 1
        if len([e for e in full if const_int(e) != 1]) != len(ext):
            full = [1] * (n - len(ext)) + ext
        return BufferRegion(x.buffer, tuple((i, e) for i, e in zip(x.indices, full)))
    raise DSLTypeError(f"{what}: expected a buffer, a slice of one (A[a:b, c:d]) or a corner (A[i, j]), "
                       f"got {type(x).__name__}: {x!r}")


def squeezed(extents) -> list:
    """Extents without unit dims, as ints where constant."""
    out = []
    for e in extents:
        c = const_int(e)
        if c == 1:
            continue
        out.append(c if c is not None else simplify(as_expr(e)))
    return out


def tile_coords(r: BufferRegion, buffer_coords) -> list:
    """Coordinates over r's non-unit extents (what region_indices takes) of the element of
    r.buffer at `buffer_coords` (one per buffer dim): the inverse of region_indices.

    A (1, N) fragment walked by its layout gives (0, j); the copy's other side, a global
    A[bx:bx+1, :], wants the one tile coordinate j:   (0, j) -> [j]  -> A[bx, j].
    """
    coords = list(buffer_coords)
    if len(coords) != len(r.ranges):
        raise ValueError(f"internal: {len(coords)} coordinates for the {len(r.ranges)}-d buffer {r.buffer.name}")
    return [simplify(as_expr(c) - start) for (start, ext), c in zip(r.ranges, coords) if const_int(ext) != 1]


def matrix_dims(r: BufferRegion) -> tuple[int, int]:
    """The two dims of a gemm operand that hold its rows and columns.

    The non-unit dims when there are two (`K[bz, k*64:(k+1)*64, by, :]` -> dims 1, 3);
    when a matrix dim is itself 1 (an (M, 1) tile), the neighbouring dim is kept.
    """
    nonunit = [d for d, e in enumerate(r.extents) if const_int(e) != 1]
    nd = len(r.extents)
    if len(nonunit) >= 2 or nd < 2:
        return tuple(nonunit[:2]) if len(nonunit) >= 2 else (0, 0)
    if not nonunit:
        return nd - 2, nd - 1
    d = nonunit[0]
    return (d - 1, d) if d == nd - 1 else (d, d + 1)


def matrix_indices(r: BufferRegion, row, col) -> tuple:
    """Buffer indices of element (row, col) of a gemm operand region (its matrix_dims)."""
    idx = list(r.starts)
    for d, v in zip(matrix_dims(r), (row, col)):
        idx[d] = simplify(as_expr(idx[d]) + v)
    return tuple(idx)


def matrix_coords(r: BufferRegion, coords) -> tuple:
    """(row, col) of a gemm operand region for coordinates over its non-unit extents (what
    tile_coords gives): a (1, N) C tile walked as [j] is row 0, column j."""
    nonunit = [d for d, e in enumerate(r.extents) if const_int(e) != 1]
    out = [as_expr(0), as_expr(0)]
    for k, d in enumerate(matrix_dims(r)):
        if d in nonunit:
            out[k] = coords[nonunit.index(d)]
    return tuple(out)


def matrix_extents(r: BufferRegion) -> list:
    """Extents of a gemm operand's row and column dims (see matrix_dims), or the squeezed
    extents when the region does not have exactly two matrix dims (an error for the caller)."""
    sq = squeezed(r.extents)
    if len(sq) > 2 or len(r.extents) < 2:
        return sq
    return [squeezed([r.extents[d]])[0] if const_int(r.extents[d]) != 1 else 1 for d in matrix_dims(r)]


def same_extent(a, b) -> bool:
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb is not None:
        return ca == cb
    return simplify(as_expr(a) - b) == as_expr(0) or str(simplify(as_expr(a) - b)) == "0"


def extents_of(x) -> tuple | None:
    if isinstance(x, Buffer):
        return x.shape
    if isinstance(x, BufferRegion):
        return x.extents
    return None


def pair_regions(src, dst, what="T.copy") -> tuple[BufferRegion, BufferRegion]:
    """Resolve a (src, dst) pair where either side may be a corner."""
    se, de = extents_of(src), extents_of(dst)
    if se is None and de is None:
        raise DSLTypeError(f"{what}: both sides are corners (A[i, j]); one side must be a buffer or a slice "
                           "so the tile's extent is known")
    s = to_region(src, de, what)
    d = to_region(dst, s.extents if se is not None else None, what) if de is None else to_region(dst)
    if de is not None and se is None:
        s = to_region(src, d.extents, what)
    a, b = squeezed(s.extents), squeezed(d.extents)
    if what == "T.copy" and len(a) == len(b) and not all(same_extent(x, y) for x, y in zip(a, b)):
        s, d = _copy_over_base_side(src, dst, s, d, a, b)
        a, b = squeezed(s.extents), squeezed(d.extents)
    if len(a) != len(b) or not all(same_extent(x, y) for x, y in zip(a, b)):
        raise ShapeMismatchError(
            f"{what}: source tile {s.buffer.name} has extents {tuple(a)} but destination {d.buffer.name} "
            f"has {tuple(b)}; the shapes must match (unit dims are ignored)")
    return s, d


def _scope_level(b) -> int:
    """How close to the threads a buffer lives: local / fragment 2, shared 1, global 0."""
    if b.scope == "fragment" or b.scope.startswith("local"):
        return 2
    if b.scope.startswith("shared"):
        return 1
    return 0


def _with_extents(r: BufferRegion, extents) -> BufferRegion:
    """r with its non-unit dims' extents replaced, in order, by `extents`."""
    it = iter(extents)
    ranges = tuple((st, next(it)) if const_int(ext) != 1 else (st, ext) for st, ext in r.ranges)
    return BufferRegion(r.buffer, ranges)


def _provably_less(x, y) -> bool:
    cx, cy = const_int(x), const_int(y)
    if cx is not None and cy is not None:
        return cx < cy
    diff = const_int(simplify(as_expr(y) - x))
    return diff is not None and diff > 0


def _copy_over_base_side(src, dst, s: BufferRegion, d: BufferRegion, a, b):
    """T.copy of two regions with as many non-unit dims but other extents, as in the public TileLang.

    The copy runs over one side's extents, the base: the side nearer the threads (local / fragment, then shared,
    then global), the source when both sit at the same level. Non-unit dims pair up in order and both sides are
    indexed from their own starts, so the other side is walked over the base's extents too:
    `T.copy(A[:, 0:2], B[:, 0:3])` writes B[:, 0:2]; `T.copy(g[0:n], S)` (S of 1024) reads g[0:1024], elements
    past g's bounds reading as zeros. A destination base provably smaller than the source along a dim would drop
    data and stays a mismatch (as it is an error in the public TileLang), as do two whole buffers of other
    constant shapes; an on-chip side walked past its buffer's shape is an error. Other pairs are returned unchanged."""
    if isinstance(src, Buffer) and isinstance(dst, Buffer) and \
            all(const_int(e) is not None for e in (*src.shape, *dst.shape)):
        return s, d
    base_is_src = _scope_level(s.buffer) >= _scope_level(d.buffer)
    if not base_is_src and any(_provably_less(y, x) for x, y in zip(a, b)):
        return s, d
    s, d = (s, _with_extents(d, a)) if base_is_src else (_with_extents(s, b), d)
    for r in (s, d):
        if r.buffer.scope == "global":
            continue
        for dim, ((st, ext), n) in enumerate(zip(r.ranges, r.buffer.shape)):
            lo, e, cn = const_int(st), const_int(ext), const_int(n)
            if lo is not None and e is not None and cn is not None and (lo < 0 or lo + e > cn):
                raise ShapeMismatchError(
                    f"T.copy: source {s.buffer.name} {tuple(a)} and destination {d.buffer.name} {tuple(b)} are "
                    f"copied over the extents of {(s if base_is_src else d).buffer.name}, so the region of "
                    f"{r.buffer.name} reaches [{lo}, {lo + e}) along dim {dim}, past its shape "
                    f"{tuple(r.buffer.shape)}")
    return s, d


def as_value(v, dtype) -> Expr:
    from ..ir.expr import cast

    return cast(dtype, as_expr(v, dtype))

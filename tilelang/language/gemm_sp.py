"""`T.gemm_sp`: GEMM with a 2:4 structured-sparse A given as kept values plus metadata."""
from __future__ import annotations

from ..errors import DSLTypeError, ShapeMismatchError
from ..frontend import builder as _builder
from ..op.gemm_sp import GROUP, GemmSp, e_factor
from ..op.regions import matrix_extents, same_extent, to_region
from .tile import GemmWarpPolicy


def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False, policy=GemmWarpPolicy.Square,
            clear_accum=False, wg_wait=0, annotations=None):
    """C += A @ B where A (M x K) is 2:4 sparse along K (1:2 for 32-bit dtypes).

    A_sparse (M, K/2) holds each group's kept values, E (M, K / e_factor) their positions: 4 bits
    per group, lowest first, bits [1:0] / [3:2] the positions of the two kept values.
    e_factor = (E bits / 4) * 4 (* 2 for 32-bit A); see tilelang.cuda.intrinsics.sparse_layout.
    transpose_A / transpose_E / transpose_B take (K/2, M), (K/e_factor, M), (N, K) tiles.

    Example::

        T.gemm_sp(A_shared, E_shared, B_shared, C_local)
    """
    _builder.in_kernel("T.gemm_sp")
    ra, re, rb, rc = (to_region(x, None, "T.gemm_sp") for x in (A_sparse, E, B, C))
    a, e, b, c = (matrix_extents(r) for r in (ra, re, rb, rc))
    for nm, ext in (("A_sparse", a), ("E", e), ("B", b), ("C", c)):
        if len(ext) != 2:
            raise ShapeMismatchError(f"T.gemm_sp: {nm} must be a 2-d tile, got extents {tuple(ext)}")
    if ra.buffer.dtype.bits not in GROUP:
        raise DSLTypeError(f"T.gemm_sp: A dtype {ra.buffer.dtype} is not supported (8-, 16- or 32-bit)")
    if not re.buffer.dtype.is_int:
        raise DSLTypeError(f"T.gemm_sp: metadata E must be an integer tile, got {re.buffer.dtype}")
    m, k_half = (a[1], a[0]) if transpose_A else (a[0], a[1])
    k = 2 * k_half
    kb, n = (b[1], b[0]) if transpose_B else (b[0], b[1])
    if not same_extent(k, kb):
        raise ShapeMismatchError(f"T.gemm_sp: K of A ({ra.buffer.name}: 2 x {k_half}) does not match K of B "
                                 f"({rb.buffer.name}: {kb})")
    if not (same_extent(m, c[0]) and same_extent(n, c[1])):
        raise ShapeMismatchError(f"T.gemm_sp: A@B is ({m}, {n}) but C ({rc.buffer.name}) is ({c[0]}, {c[1]})")
    ef = e_factor(ra.buffer.dtype, re.buffer.dtype)
    em, ek = (e[1], e[0]) if transpose_E else (e[0], e[1])
    if not (same_extent(em, m) and same_extent(ek * ef, k)):
        raise ShapeMismatchError(f"T.gemm_sp: metadata {re.buffer.name} is {tuple(e)}; for M={m}, K={k} and "
                                 f"{re.buffer.dtype} (one element per {ef} of K) it must be "
                                 f"{(k // ef, m) if transpose_E else (m, k // ef)}")
    pol = getattr(policy, "name", None) or (str(policy) if policy is not None else "Square")
    _builder.current().emit(GemmSp(ra, re, rb, rc, bool(transpose_A), bool(transpose_E), bool(transpose_B),
                            bool(clear_accum), pol))

"""T.im2col: one (block_M, block_K) tile of a 2-d convolution's im2col matrix.

Row m of block `nhw` is output pixel r = nhw*block_M + m = (n, oh, ow) (row-major over
N, OH, OW); column k of block `c` is q = c*block_K + k = (kh, kw, ch) (row-major over
KH, KW, C). The element is img[n, oh*stride + kh*dilation - pad, ow*stride + kw*dilation - pad, ch],
0 outside the image or past the matrix's last row / column.

Takes: the image, the tile and T.im2col's integer arguments. Gives: the op `T.im2col` emits,
`O.Im2Col` where runs of channels can move as 4-16 byte vectors (`im2col_vector`: a vector of
consecutive columns is consecutive channels of one pixel, so it is all inside the image or all
padding), otherwise `im2col_loop`, a T.Parallel loop both targets lower like user code; and
`im2col_source`, the element's validity and (clamped) image indices that both lowerings use.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..arith.divisibility import is_multiple
from ..errors import DSLTypeError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import BufferRegion


def _check(kernel, stride, dilation, pad):
    if not all(isinstance(v, int) for v in (kernel, stride, dilation, pad)):
        raise DSLTypeError("T.im2col: kernel, stride, dilation and pad must be Python ints")


def im2col_source(img, bm, bk, nhw, cblk, kernel, stride, dilation, pad, m, k):
    """(ok, indices): whether column k of row m is inside the image and the matrix, and the image
    indices to read it at (clamped into the image, so the unselected read stays in bounds)."""
    N, H, W, C = img.shape
    oh_n = (E.as_expr(H) + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    ow_n = (E.as_expr(W) + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    r, q = nhw * bm + m, cblk * bk + k
    n, oh, ow = r // (oh_n * ow_n), (r // ow_n) % oh_n, r % ow_n
    kh, kw, ch = q // (kernel * C), (q // C) % kernel, q % C
    ih, iw = oh * stride + kh * dilation - pad, ow * stride + kw * dilation - pad
    ok = E.logical_and(E.binop("<", r, E.as_expr(N) * oh_n * ow_n), E.binop("<", q, kernel * kernel * C))
    for lo_hi in ((ih, H), (iw, W)):
        ok = E.logical_and(ok, E.logical_and(E.binop(">=", lo_hi[0], 0), E.binop("<", lo_hi[0], lo_hi[1])))
    safe = [E.call("min", E.call("max", x, 0), E.as_expr(hi) - 1) for x, hi in ((n, N), (ih, H), (iw, W))]
    return ok, (safe[0], safe[1], safe[2], ch)


def im2col_vector(img, col) -> int:
    """Elements per vector (16, 8 or 4 bytes, widest first) an im2col copy into `col` can move, or 1.
    A vector of consecutive columns starting at a multiple of its width is consecutive channels of
    one pixel when the channel count and block_K are multiples of it."""
    C = img.shape[-1]
    bk = col.shape[-1]
    if img.dtype != col.dtype or img.dtype.bits < 8 or col.scope not in ("shared", "shared.dyn") \
            or not isinstance(bk, int):
        return 1
    for nbytes in (16, 8, 4):
        vec = nbytes // img.dtype.bytes
        if vec > 1 and bk % vec == 0 and is_multiple(C, vec):
            return vec
    return 1


def im2col_loop(img, col, nhw, cblk, kernel, stride, dilation, pad, kind="parallel") -> S.Stmt:
    _check(kernel, stride, dilation, pad)
    bm, bk = col.shape
    m, k = E.Var("m", dt.int32), E.Var("k", dt.int32)
    ok, idx = im2col_source(img, bm, bk, nhw, cblk, kernel, stride, dilation, pad, m, k)
    val = E.BufferLoad(img, idx, img.dtype)
    store = S.BufferStore(col, (m, k), E.cast(col.dtype, E.select(ok, val, E.const(0, img.dtype))))
    return S.For(m, E.as_expr(0), E.as_expr(bm), kind, S.For(k, E.as_expr(0), E.as_expr(bk), kind, store))


def im2col_op(img, col, nhw, cblk, kernel, stride, dilation, pad) -> S.Stmt:
    """What T.im2col emits (see the module docstring)."""
    from . import tile_ops as O

    _check(kernel, stride, dilation, pad)
    if im2col_vector(img, col) == 1:
        return im2col_loop(img, col, nhw, cblk, kernel, stride, dilation, pad)
    whole = lambda b: BufferRegion(b, tuple((E.as_expr(0), x) for x in b.shape))  # noqa: E731
    return O.Im2Col(whole(img), whole(col), nhw, cblk, kernel, stride, dilation, pad)

"""T.im2col: one (block_M, block_K) tile of a 2-d convolution's im2col matrix, as a
T.Parallel loop both targets lower like user code.

Row m of block `nhw` is output pixel r = nhw*block_M + m = (n, oh, ow) (row-major over
N, OH, OW); column k of block `c` is q = c*block_K + k = (kh, kw, ch) (row-major over
KH, KW, C). The element is img[n, oh*stride + kh*dilation - pad, ow*stride + kw*dilation - pad, ch],
0 outside the image or past the matrix's last row / column.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from ..ir import expr as E
from ..ir import stmt as S


def im2col_loop(img, col, nhw, cblk, kernel, stride, dilation, pad) -> S.Stmt:
    N, H, W, C = img.shape
    bm, bk = col.shape
    if not all(isinstance(v, int) for v in (kernel, stride, dilation, pad)):
        raise DSLTypeError("T.im2col: kernel, stride, dilation and pad must be Python ints")
    oh_n = (E.as_expr(H) + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    ow_n = (E.as_expr(W) + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    m, k = E.Var("m", dt.int32), E.Var("k", dt.int32)
    r, q = nhw * bm + m, cblk * bk + k
    n, oh, ow = r // (oh_n * ow_n), (r // ow_n) % oh_n, r % ow_n
    kh, kw, ch = q // (kernel * C), (q // C) % kernel, q % C
    ih, iw = oh * stride + kh * dilation - pad, ow * stride + kw * dilation - pad
    ok = E.logical_and(E.binop("<", r, E.as_expr(N) * oh_n * ow_n), E.binop("<", q, kernel * kernel * C))
    for lo_hi in ((ih, H), (iw, W)):
        ok = E.logical_and(ok, E.logical_and(E.binop(">=", lo_hi[0], 0), E.binop("<", lo_hi[0], lo_hi[1])))
    # NOTE: clamp the indices so the (unselected) load stays inside the image
    safe = [E.call("min", E.call("max", x, 0), E.as_expr(hi) - 1) for x, hi in ((n, N), (ih, H), (iw, W))]
    val = E.BufferLoad(img, (safe[0], safe[1], safe[2], ch), img.dtype)
    store = S.BufferStore(col, (m, k), E.cast(col.dtype, E.select(ok, val, E.const(0, img.dtype))))
    return S.For(m, E.as_expr(0), E.as_expr(bm), "parallel", S.For(k, E.as_expr(0), E.as_expr(bk), "parallel", store))

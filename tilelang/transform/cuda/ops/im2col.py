"""CUDA lowering of T.im2col (O.Im2Col) into a shared tile.

Takes: an Im2Col (made only where whole vectors of channels move at once, op/im2col.py).
Gives: the tile's vectors spread over the block's threads, each one `cp_async_zfill` of
`vec` consecutive channels of one pixel (zeros where the pixel is padding or past the
matrix). In a software pipeline (`async_group`) the pipeline commits and waits; elsewhere
the copy commits and waits itself.

    T.im2col(data, data_s, by, k, 3, 1, 1, 1)    ->   for v in unroll(1): e = (v*256 + tid)*8; m = e/32; c = e%32
    (data_s: 64x32 fp16, 256 threads)                     cp_async_zfill<16>(&data_s[m, c], &data[n, ih, iw, ch], ok)
"""
from __future__ import annotations

from .... import dtypes as dt
from ....arith.simplify import simplify
from ....ir import expr as E
from ....ir import stmt as S
from ....op import tile_ops as O
from ....op.im2col import im2col_source, im2col_vector
from ....op.registry import register_lowering
from ..raw import Raw
from .base import THREAD_LOOP


@register_lowering("cuda", O.Im2Col)
def lower_im2col(low, op: O.Im2Col):
    img, col = op.src.buffer, op.dst.buffer
    bm, bk = col.shape
    vec = im2col_vector(img, col)
    total = bm * bk
    per = low.T * vec
    v, e = E.Var("v", dt.int32), E.Var("e", dt.int32)
    m, k = E.Var("m", dt.int32), E.Var("k", dt.int32)
    ok, idx = im2col_source(img, bm, bk, op.nhw, op.cblk, op.kernel, op.stride, op.dilation, op.pad, m, k)
    dst = E.Call("address_of", (E.BufferLoad(col, (m, k), col.dtype),), dt.uint64)
    src = E.Call("address_of", (E.BufferLoad(img, tuple(simplify(i) for i in idx), img.dtype),), dt.uint64)
    nb = vec * img.dtype.bytes
    cp = Raw(f"tl::cp_async_zfill<{nb}>({{0}}, {{1}}, {{2}});", (dst, src, simplify(ok)),
             writes=() if op.async_group else (col,), span=op.span)
    coords = S.seq(S.LetStmt(m, e // bk), S.LetStmt(k, e % bk), cp)
    inner = S.seq(S.LetStmt(e, (v * low.T + low.tid) * vec),
                  coords if total % per == 0 else S.IfThenElse(E.binop("<", e, total), coords))
    loop = S.For(v, E.as_expr(0), E.as_expr(-(-total // per)), "unroll", inner, THREAD_LOOP)
    if op.async_group:
        return loop
    return S.seq(loop, Raw("tl::cp_async_commit(); tl::cp_async_wait<0>();"))

"""T.im2col as an im2col-mode TMA load of the warp-specialized producer (sm_90a).

Takes: an O.Im2Col at the top level of a T.Pipelined body (the convolution's input tile, one
(block_M, block_K) block of the im2col matrix of an NHWC image). Gives: `im2col_producers`, those
the producer thread can issue; `im2col_plan`, the TMA box (or why not); `im2col_desc`, the tensor
map (cuTensorMapEncodeIm2col on the device, host_tma.h's record under host emulation); and
`im2col_loads`, the producer's `tl::tma_load_im2col` calls.

The map's bounding box is the set of window corners: w in [-P, W - 1 + P - D*(K-1)] by stride
S (OW positions), the same for h. A load walks block_M consecutive corners from output pixel
(n, oh, ow) = row nhw*block_M (w fastest, then h, then the next image), reading each at the
filter tap's offset (kw*D, kh*D) and channels [c, c + block_K) -- zeros outside the image and
past the last image, as T.im2col reads. One load per iteration (per 64-channel panel) needs
C % block_K == 0 (a block of columns is one tap's run of channels) and columns inside the matrix
for every iteration. `small_tile` says where the cp.async pipeline is kept by default.

    for k in T.Pipelined(18, num_stages=3):           producer thread, iteration k (3x3, C=128, bk=64):
        T.im2col(data, d_s, by, k, 3, 1, 1, 1)   ->     tl::tma_load_im2col(&tmap_0, &tl_full[s], d_s_stages + s * 8192,
        T.copy(kflat[k * 64, bx * 256], k_s)               (k & 1) * 64, ow - 1, oh - 1, n, (k >> 1) % 3, k / 6)
        T.gemm(d_s, k_s, acc)                            (ow, oh, n: output pixel by * 128 of the 64 x 64 images)
"""
from __future__ import annotations

from dataclasses import dataclass

from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import collect, substitute
from ...op import tile_ops as O
from .raw import Raw
from .ws_epilogue import TmaDesc, strided_tma_unfit

MAX_PIXELS = 256  # rows of one im2col box (the driver allows 1024; the staged tiles here are at most 256 rows)
MAX_CORNER = 127  # |bounding-box corner| and filter offsets of a 4-d map (the driver's 4-d corner range)


@dataclass(frozen=True)
class Im2colMap:
    """An im2col tensor map's geometry beyond the tensor: corners and strides in (w, h) order."""

    lower: tuple  # the bounding box's corner offsets from the image's first pixel (-P, -P)
    upper: tuple  # ... and from its last pixel (P - D*(K-1), P - D*(K-1))
    strides: tuple  # traversal strides (S, S)
    channels: int  # channels per pixel (one box row)
    pixels: int  # pixels per column (box rows)


def im2col_producers(body: list) -> list:
    """The T.im2col ops at the top level of `body` the producer can issue at the iteration start:
    their tile is written by nothing else and their block indices use no value computed in the body."""
    local = {st.var for st in collect(S.seq(*body), lambda n: isinstance(n, (S.LetStmt, S.For)))}
    out = []
    for st in body:
        if not isinstance(st, O.Im2Col):
            continue
        x = st.dst.buffer
        others = collect(S.seq(*body), lambda n: n is not st and (
            (isinstance(n, S.BufferStore) and n.buffer is x) or
            (isinstance(n, (O.Copy, O.Fill, O.Im2Col)) and n.dst.buffer is x)))
        used = set(collect(st.nhw, lambda n: isinstance(n, E.Var))) | set(collect(st.cblk, lambda n: isinstance(n, E.Var)))
        if not others and not (used & local):
            out.append(st)
    return out


def im2col_plan(op: O.Im2Col, loop: S.For):
    """(box outer-first, swizzle, panels) for one im2col TMA load per iteration of `loop`, or (None, why).
    box = (block_M, channels per load); a 128-byte-panel tile (block_K * bytes a multiple of 128)
    takes one load per 64-channel panel."""
    img, col = op.src.buffer, op.dst.buffer
    bm, bk = (const_int(x) for x in col.shape)
    C, b = const_int(img.shape[-1]), img.dtype.bytes
    K, St, D, P = op.kernel, op.stride, op.dilation, op.pad
    if img.ndim != 4 or img.dtype != col.dtype or bm is None or bk is None:
        return None, "it is not a 2-d tile of a 4-d NHWC image of the same dtype"
    if img.strides is not None and (why := strided_tma_unfit(img)) is not None:
        return None, why
    if C is None or C % bk:
        return None, f"the channel count ({img.shape[-1]}) is not a constant multiple of block_K ({bk})"
    if bm > MAX_PIXELS:
        return None, f"block_M ({bm}) exceeds {MAX_PIXELS} pixels per load"
    if max(P, abs(P - D * (K - 1)), D * (K - 1)) > MAX_CORNER or not 1 <= St <= 8:
        return None, f"the padding, dilation or filter size reach past +-{MAX_CORNER} or the stride is not 1-8"
    lo, hi = _column_blocks(op.cblk, loop)
    if lo is None or lo < 0 or (hi + 1) * bk > K * K * C:
        return None, "its column block is not the loop counter over blocks inside the matrix"
    row = bk * b
    if row in (32, 64, 128):
        return ((bm, bk), row, 1), None
    if row % 128 == 0 and b == 2:
        return ((bm, 64), 128, row // 128), None
    return None, f"the tile's rows are {row} bytes (TMA here: 32, 64, 128 or whole 128-byte panels)"


MIN_ACC_PER_THREAD = 64  # accumulator elements per consumer thread below which a conv keeps cp.async


def small_tile(op: O.Im2Col, gemms: list, threads: int) -> bool:
    """Whether the gemms reading `op`'s tile accumulate fewer than MIN_ACC_PER_THREAD elements per
    thread. Such a block (the peer 64x128 conv at 256 threads: 32) runs its cp.async pipeline at a
    few dozen registers, several blocks per SM, and measured faster than the public build's TMA
    producer (1.18x); a warp-specialized block holds its SM alone. The 128x256 conv (128 per
    thread, 242 registers under cp.async: one block per SM either way) is where TMA pays."""
    readers = [g for g in gemms if op.dst.buffer.uid in (g.A.buffer.uid, g.B.buffer.uid)]
    return bool(readers) and max(g.C.buffer.numel() for g in readers) < MIN_ACC_PER_THREAD * threads


def _column_blocks(cblk, loop: S.For):
    """(first, last) column block over the loop's iterations where cblk is loop.var + const, else (None, None)."""
    v = loop.var
    if set(collect(cblk, lambda n: isinstance(n, E.Var))) - {v}:
        return None, None
    step = const_int(simplify(substitute(cblk, {v: v + 1}) - cblk))
    first = const_int(substitute(cblk, {v: loop.start}))
    last = const_int(substitute(cblk, {v: simplify(loop.start + loop.extent - 1)}))
    if step not in (0, 1) or first is None or last is None:
        return None, None
    return first, last


def im2col_desc(name: str, op: O.Im2Col, box: tuple, swizzle: int) -> TmaDesc:
    """The tensor map an im2col load of `op` reads, `box` from `im2col_plan`."""
    K, St, D, P = op.kernel, op.stride, op.dilation, op.pad
    geo = Im2colMap((-P, -P), (P - D * (K - 1),) * 2, (St, St), box[1], box[0])
    return TmaDesc(name, op.src.buffer, box, swizzle, geo)


def im2col_loads(op: O.Im2Col, desc: TmaDesc, bar: str, storage: str, stage, panels: int, kmap: dict) -> list:
    """The producer's loads of `op`'s tile into stage `stage` of `storage` (its (stages*rows, cols)
    storage), arming nothing (the caller arms `bar` for the tile's bytes). kmap: the loop variable's
    replacement (the serpentine walk)."""
    img, col = op.src.buffer, op.dst.buffer
    bm, bk = (const_int(x) for x in col.shape)
    _, H, W, C = img.shape
    K, St, D, P = op.kernel, op.stride, op.dilation, op.pad
    oh_n = (E.as_expr(H) + 2 * P - D * (K - 1) - 1) // St + 1
    ow_n = (E.as_expr(W) + 2 * P - D * (K - 1) - 1) // St + 1
    r0 = substitute(op.nhw, kmap) * bm
    q0 = substitute(op.cblk, kmap) * bk
    n, oh, ow = r0 // (oh_n * ow_n), (r0 // ow_n) % oh_n, r0 % ow_n
    kh, kw, ch = q0 // (K * C), (q0 // C) % K, q0 % C
    coords = [simplify(x) for x in (ch, ow * St - P, oh * St - P, n, kw * D, kh * D)]
    out = []
    for q in range(panels):
        c = [simplify(coords[0] + q * 64)] + coords[1:]
        out.append(Raw(f"tl::tma_load_im2col(&{desc.name}, &{bar}, {storage} + ({{0}}) * {col.numel()} + {q * bm * 64}, "
                       "{1}, {2}, {3}, {4}, (uint16_t)({5}), (uint16_t)({6}));", (stage, *c)))
    return out


def im2col_exprs(op: O.Im2Col) -> list:
    """The expressions an im2col load's coordinates read (for the producer's prefix)."""
    return [op.nhw, op.cblk]


"""The consumers' epilogue of a warp-specialized kernel: the accumulator's T.copy to global
memory through a shared staging tile and TMA stores, and (persistent plain GEMMs) the same
stores deferred into the next tile's k-loop. Used by warp_specialize.py.

Expects: the tile-level statements after the pipelined loop (the suffix) and the gemms of the loop.
Guarantees: the suffix's T.copy of an accumulator to a 16-bit global tile (rows x columns of a
2-5 d tensor, the columns its inner dim) becomes chunks of
`wait for the last TMA store's read; registers -> staging tile; tma_store`, or, deferred, a
packed register copy of the tile stored chunk by chunk during the next k-loop and after the
block's last tile; C is written nowhere else (TMA stores land asynchronously). Where 2+ consumer
warpgroups each own 64 whole rows of the tile (attention), each stages and stores its own rows
behind its own 128-thread named barriers (`wg_chunk`; off: tl.disable_ws_wg_epilogue). A user's own
staging (`T.copy(acc, O_s); T.copy(O_s, O[...])`, attention's epilogue) is taken as the one copy
(`fold_staged_store`): O_s was a plain row-major tile, whose fragment stores conflict 8 ways
in shared-memory banks (rows of 256 B), copied out by the threads.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ... import dtypes as dt
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, BufferRegion
from ...ir.visitor import buffers_used, collect
from ...op import tile_ops as O
from .lower_tile_ops import Raw

if TYPE_CHECKING:
    from .warp_specialize import WSPlan


@dataclass(frozen=True)
class TmaDesc:
    """A tensor map the host encodes per call: `buffer`'s tensor, `box` (outer-first), swizzle bytes;
    `im2col` (ws_im2col.Im2colMap) makes it an im2col-mode map, box = (pixels, channels); `raw`
    (op/hopper_raw.RawTmaDesc, T.create_tma_descriptor) one whose dims and strides the program gave."""

    name: str
    buffer: Buffer
    box: tuple
    swizzle: int
    im2col: object = None
    raw: object = None


def strided_tma_unfit(g: Buffer) -> str | None:
    """Why a T.StridedTensor `g` cannot be a TMA tensor map's global tensor (the map takes the tensor's
    own strides, which the call checked against the declared ones), or None; None for other tensors."""
    if g.strides is None:
        return None
    st = [const_int(s) if not isinstance(s, int) else s for s in g.strides]
    if st[-1] != 1:
        return f"{g.name}'s declared inner stride is {g.strides[-1]}, not 1"
    bad = [s for s, c in zip(g.strides[:-1], st[:-1]) if c is None or (c * g.dtype.bytes) % 16]
    if bad:
        return (f"{g.name}'s declared strides {tuple(g.strides)} are not all constant multiples of 16 bytes "
                "(TMA's global strides)")
    return None


def tma_store_epilogue(k: S.KernelLaunch, suffix: list, gemms: list, free: int, ndesc: int, warn,
                        max_rows: int = 256, same=(), wg: int = 0,
                       wg_bar: int | None = None):
    """(new suffix, staging tile, tensor map, Epilogue) or None: the epilogue's T.copy of a gemm accumulator
    to a fp16/bf16 global tile (rows x columns of a 2-5 d tensor, the columns its inner dim) becomes,
    per chunk of the tile's rows, a store of the chunk into a shared staging tile (64-column
    128B-swizzled panels) and TMA stores issued by thread 0 -- asynchronous, so the next tile's
    mainloop overlaps the global writes, and TMA drops the out-of-range part of ragged tiles.
    Chunks are as tall as the shared memory left allows.

        T.copy(C_l, C[by*128, bx*256])   ->   per chunk h: wait until the last TMA store has read C_s;
                                                 T.copy(C_l[h*64:(h+1)*64, :], C_s); tma_store(C_s -> C)

    max_rows: chunks at most this tall (defer_epilogue's register copy is stored 64 rows at a time).
    same: statements of k.body that are this copy (fold_staged_store's pair), not other writers of C.
    wg: the consumer warpgroups where each owns 64 whole rows of the accumulator (rows 64w..64w+63,
    a (wg, 1) wgmma grid), else 0: with the tile in one chunk of 64 * wg rows, each warpgroup then
    stages and stores its own rows (`wg_chunk`), with no barrier across warpgroups.
    wg_bar: the first of wg named barrier ids those use (barrier_ids.BarrierIds.wg_epilogue; None:
    wg_bar_base(wg))."""
    accs = {g.C.buffer.uid for g in gemms}
    hits = [i for i, st in enumerate(suffix) if isinstance(st, O.Copy) and st.src.buffer.uid in accs
            and st.dst.buffer.scope == "global"]
    if len(hits) != 1:
        return None
    i = hits[0]
    op = suffix[i]
    f, c = op.src.buffer, op.dst.buffer
    R, W = (const_int(x) for x in f.shape) if f.ndim == 2 else (None, None)
    full = f.ndim == 2 and all(const_int(s_) == 0 for s_ in op.src.starts) and \
        [const_int(e) for e in op.src.extents] == [R, W]
    ext = [const_int(e) for e in op.dst.extents]
    wide = [d for d, e in enumerate(ext) if e != 1]
    rdim = wide[0] if len(wide) == 2 and wide[1] == c.ndim - 1 else None
    if not full or not 2 <= c.ndim <= 5 or c.dtype.bytes != 2 or rdim is None or [ext[rdim], ext[-1]] != [R, W]:
        return None
    inner = const_int(c.shape[-1])
    if c.strides is not None:
        why = strided_tma_unfit(c)
        if why is not None:
            warn(f"epilogue T.copy {f.name} -> {c.name} stores from registers, not through TMA: {why}")
            return None
        inner = 8  # the declared strides are what the map takes, not the row length
    if inner is None or (inner * 2) % 16 or R > 256 or W % 64:
        return None
    # C must be written only here: TMA stores land asynchronously
    touched = [n for n in collect(k.body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore, O.Copy)))
               if n is not op and not any(n is x for x in same)
               and (getattr(n, "buffer", None) is c or (isinstance(n, O.Copy) and c in (n.src.buffer, n.dst.buffer)))]
    if touched:
        return None
    rows = R  # chunks of whole rows: every thread stores in every chunk
    while rows % 128 == 0 and (rows * W * 2 > free or rows > max_rows):  # down to 64-row chunks
        rows //= 2
    if rows * W * 2 > free:
        warn(f"epilogue T.copy {f.name} -> {c.name} stores from registers, not through TMA: a "
             f"{rows}x{W} staging tile needs {rows * W * 2} B of shared memory and {max(free, 0)} B are left")
        return None
    c_s = Buffer(f"{c.name}_tma", (rows, W), c.dtype, "shared.dyn")
    n = c.ndim
    desc = TmaDesc(f"tmap_{ndesc}", c, tuple(rows if d == rdim else 64 if d == n - 1 else 1 for d in range(n)), 128)
    starts = tuple(simplify(x) for x in op.dst.starts)

    def chunk(h, frag=f, starts=starts):
        """Rows [h * rows, (h + 1) * rows) of `frag` to C at `starts` (per dim of C), through C_s."""
        src = BufferRegion(frag, ((E.as_expr(h * rows), rows), (E.as_expr(0), W)))
        dst = BufferRegion(c_s, ((E.as_expr(0), rows), (E.as_expr(0), W)))

        def coords(q):  # innermost first; argument n - 1 - d is C's start in dim d
            return ", ".join(f"{{{n - 1 - d}}}" + (f" + {q * 64}" if d == n - 1 else f" + {h * rows}" if d == rdim
                                                   else "") for d in reversed(range(n)))
        stores = " ".join(f"tl::tma_store(&{desc.name}, {c_s.name} + {q * rows * 64}, {coords(q)});"
                          for q in range(W // 64))
        return [Raw("if (tid == 0) tl::tma_store_wait<0>();", reads=(c_s,)),  # the last stores have read C_s
                replace(op, src=src, dst=dst),
                Raw(f"if (tid == 0) {{{{ {stores} tl::tma_store_commit(); }}}}", tuple(reversed(starts)),
                    reads=(c_s,))]

    rowwise = all(g.policy == "FullRow" or g.A.buffer.scope == "fragment" for g in gemms if g.C.buffer.uid == f.uid)
    if wg >= 2 and rows == R == 64 * wg and rowwise:
        box = tuple(64 if d in (rdim, n - 1) else 1 for d in range(n))
        desc = replace(desc, box=box)
        c_s.wg_private = True  # ordered by the warpgroups' own barriers (thread_sync leaves it alone)
        out = wg_chunk(op, c_s, desc, rdim, wg, wg_bar)
        return suffix[:i] + out + suffix[i + 1:], c_s, desc, Epilogue(suffix, i, op, 1, chunk, wg)
    out = [st for h in range(R // rows) for st in chunk(h)]
    return suffix[:i] + out + suffix[i + 1:], c_s, desc, Epilogue(suffix, i, op, R // rows, chunk)


WG_BAR_BASE = 2  # named barrier ids of the warpgroups' epilogue: after ws_pingpong's BASE .. BASE + W - 1


def wg_bar_base(wg: int) -> int:
    """First named barrier id of the per-warpgroup epilogue of `wg` consumer warpgroups (ids 0: the
    block, 1: the consumers, 2 .. 2 + wg - 1: ws_pingpong's turns) where the program uses none of
    these ids itself (else barrier_ids.BarrierIds.wg_epilogue moves them)."""
    return WG_BAR_BASE + wg


def wg_chunk(op: O.Copy, c_s: Buffer, desc: TmaDesc, rdim: int, wg: int, base: int | None = None) -> list:
    """The accumulator's copy to C, each consumer warpgroup w storing rows [64w, 64w + 64) itself:
    its first thread (tid % 128 == 0, the one that issued its last stores) waits until those have
    read its part of the staging tile, a named barrier of its 128 threads, the registers -> staging
    copy (each thread writes only its own warpgroup's rows), fence.proxy.async and the barrier
    again, then that thread issues the 64-row TMA stores of its part. The warpgroups never wait
    for each other, and the next tile's k-loop starts while the stores drain.

        if (tid % 128 == 0) wait_group.read 0; bar.sync 4 + w, 128; stmatrix -> C_s rows of w;
        fence.proxy.async; bar.sync 4 + w, 128; if (tid % 128 == 0) { tma_store(C_s + w*64 rows); commit }"""
    f, c = op.src.buffer, op.dst.buffer
    n, W = c.ndim, const_int(f.shape[1])
    R = 64 * wg
    base = wg_bar_base(wg) if base is None else base
    bar = f"tl::warpgroup_bar_sync<{base}, {wg}>(tid >> 7);"
    starts = tuple(reversed([simplify(x) for x in op.dst.starts]))

    def coords(q):  # innermost first; argument n - 1 - d is C's start in dim d
        return ", ".join(f"{{{n - 1 - d}}}" + (f" + {q * 64}" if d == n - 1 else " + (tid >> 7) * 64" if d == rdim
                                               else "") for d in reversed(range(n)))
    stores = " ".join(f"tl::tma_store(&{desc.name}, {c_s.name} + {q * R * 64} + (tid >> 7) * {64 * 64}, {coords(q)});"
                      for q in range(W // 64))
    whole = BufferRegion(c_s, ((E.as_expr(0), R), (E.as_expr(0), W)))
    src = BufferRegion(f, ((E.as_expr(0), R), (E.as_expr(0), W)))
    return [Raw("if (tid % 128 == 0) tl::tma_store_wait<0>(); " + bar, reads=(c_s,)),
            replace(op, src=src, dst=whole),
            Raw("tl::fence_proxy_async(); " + bar),
            Raw(f"if (tid % 128 == 0) {{{{ {stores} tl::tma_store_commit(); }}}}", starts, reads=(c_s,))]


def fold_staged_store(prefix: list, suffix: list, gemms: list):
    """(prefix, suffix, the user's copy out) where the suffix stores a whole gemm accumulator
    through a shared tile of its own, `T.copy(acc, O_s)` then `T.copy(O_s, O[...])` with nothing
    between them touching acc or O_s: the pair becomes the one `T.copy(acc, O[...])`, in the
    second copy's place, and O_s's declaration (a top-level statement of `prefix`) is dropped.
    O_s must be read and written nowhere else, whole, in O's dtype (so the values are the same),
    and the copy out not marked disable_tma (the user asked for thread stores there).
    None otherwise. tma_store_epilogue then stages the tile itself, swizzled for its stores."""
    accs = {g.C.buffer.uid for g in gemms}
    for i, st in enumerate(suffix):
        if not (isinstance(st, O.Copy) and st.src.buffer.uid in accs and st.dst.buffer.scope in _SHARED):
            continue
        acc, o_s = st.src.buffer, st.dst.buffer
        j = next((j for j in range(i + 1, len(suffix)) if _uses(suffix[j], o_s) or _uses(suffix[j], acc)), None)
        out = suffix[j] if j is not None else None
        if not (isinstance(out, O.Copy) and out.src.buffer is o_s and out.dst.buffer.scope == "global"
                and not out.disable_tma and out.dst.buffer.dtype == o_s.dtype and _whole(st.src) and _whole(st.dst) and _whole(out.src)):
            continue
        kept = [p for p in prefix if not (isinstance(p, S.Allocate) and p.buffer is o_s)]
        others = kept + suffix[:i] + suffix[i + 1:j] + suffix[j + 1:]
        if len(kept) != len(prefix) - 1 or any(_uses(x, o_s) for x in others):
            continue
        return kept, suffix[:i] + suffix[i + 1:j] + [replace(out, src=st.src)] + suffix[j + 1:], out
    return None


_SHARED = ("shared", "shared.dyn")


def _uses(st, x) -> bool:
    return x.uid in {b.uid for b in buffers_used(st)}


def _whole(r: BufferRegion) -> bool:
    return all(const_int(a) == 0 for a in r.starts) and \
        all(const_int(e) is not None and const_int(e) == const_int(d) for e, d in zip(r.extents, r.buffer.shape))


@dataclass
class Epilogue:
    """Where `_tma_store_epilogue` put the TMA-store chunks: suffix[at] was the T.copy `op` of the
    accumulator; chunk(h, frag, starts) gives chunk h's statements (of `count`), C's corner at
    `starts` (one expression per dim of C)."""

    suffix: list
    at: int
    op: O.Copy
    count: int
    chunk: object
    wg: int = 0  # per-warpgroup stores (wg_chunk) by this many consumer warpgroups, else 0


DEFER_STRIDE = 2  # deferred chunk h is stored in k-iteration 2h of the next tile: the TMA has read chunk h - 1


def defer_fits(plan: WSPlan) -> bool:
    """Where the register copy of the output tile fits beside the next accumulator without
    spills, as measured with ptxas: two consumer warpgroups on a 128-row tile (128 accumulator
    registers per thread for a 128x256 tile, plus 64 for the packed copy), and no stream-K
    (its partial-sum code needs registers too). Elsewhere (one warpgroup, 256-row tiles, stream-K)
    ptxas spilled. CUDAArtifact still recompiles without the deferral if ptxas spills."""
    c = plan.gemms[0].C.buffer
    rows = const_int(c.shape[0])
    return plan.sk is None and ((plan.T == 256 and rows == 128) or (plan.T == 128 and c.numel() == 128 * 128))


def defer_epilogue(plan: WSPlan, epi: Epilogue, consumer_loop: S.Stmt):
    """The epilogue's TMA-store chunks moved into the next tile's k-loop (a persistent plain
    k-reduction): the tile's end converts the accumulator into a register copy (the output
    dtype) and notes the tile's corner; iteration start + 2h of the next tile's k-loop, with its
    wgmma batch in flight, stores chunk h of the copy through the staging tile. So no wait for a
    TMA store's read of the staging tile, and no staging store, stands between two k-loops.
    Returns (suffix, consumer loop, allocations, flush): flush stores what is still pending
    (after the block's last tile, and before a tile's copy is overwritten when a short k-loop
    left chunks of the previous one)."""
    f, c = epi.op.src.buffer, epi.op.dst.buffer
    hold = Buffer(f"{f.name}_out", f.shape, c.dtype, "fragment")
    nxt = Buffer("tl_out_next", (1,), dt.int32, "local.var")  # the next chunk to store; count: none pending
    names = ("row", "col") if c.ndim == 2 else tuple(str(d) for d in range(c.ndim))
    corner = [Buffer(f"tl_out_{x}", (1,), dt.int32, "local.var") for x in names]
    zero = (E.as_expr(0),)
    pending = E.BufferLoad(nxt, zero, dt.int32)
    starts = tuple(E.BufferLoad(b, zero, dt.int32) for b in corner)

    def store(h):
        return S.seq(*epi.chunk(h, hold, starts), S.BufferStore(nxt, zero, E.as_expr(h + 1)))

    def flush():
        return S.seq(*[S.IfThenElse(E.compare("==", pending, h), store(h)) for h in range(epi.count)])

    loop = plan.loop
    due = []
    for h in range(epi.count):
        at = simplify(loop.start + E.binop("min", E.as_expr(DEFER_STRIDE * h), loop.extent - 1))
        due.append(S.IfThenElse(E.logical_and(E.compare("==", pending, h), E.compare("==", loop.var, at)), store(h)))
    whole = BufferRegion(f, tuple((E.as_expr(0), x) for x in f.shape))
    keep = [flush(), replace(epi.op, src=whole, dst=BufferRegion(hold, whole.ranges)),
            *[S.BufferStore(b, zero, simplify(x)) for b, x in zip(corner, epi.op.dst.starts)],
            S.BufferStore(nxt, zero, E.as_expr(0))]
    suffix = epi.suffix[:epi.at] + keep + epi.suffix[epi.at + 1:]

    def add_due(st):
        if isinstance(st, S.For) and st.var is loop.var:
            return replace(st, body=S.seq(st.body, *due))
        if isinstance(st, S.SeqStmt):
            return S.SeqStmt(tuple(add_due(x) for x in st.stmts))
        return st

    hold.packed16 = True  # two values per register (codegen): 64 registers for a 128x256 tile
    allocs = [S.Allocate(hold), S.Allocate(nxt, (E.as_expr(epi.count),))] + [S.Allocate(b, zero) for b in corner]
    return suffix, add_due(consumer_loop), allocs, flush()



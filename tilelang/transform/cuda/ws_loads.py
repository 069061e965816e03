"""Which copies of a T.Pipelined loop the warp-specialized producer takes over, and as what TMA boxes.

`hoistable_copies` picks the loop body's global -> shared T.copy ops the producer thread can issue
at the top of an iteration; `tma_plan` says how one moves as TMA boxes (or why it cannot);
`hoist_staged_decls` moves the declarations of those tiles out of the loop body, where
warp_specialize gives them their stage storage; `prefix_loads` picks the copies before the loop
the producer issues first (attention's Q), once per block on barrier tl_pre, and
`take_prefix_loads` moves them there. manual_ws uses `tma_plan` for T.tma_copy.

    for ko in T.Pipelined(n, num_stages=2):            a_s = T.alloc_shared((128, 128))   # hoisted
        a_s = T.alloc_shared((128, 128))       ->      for ko in T.Pipelined(n, num_stages=2):
        T.copy(A[by*128, ko*128], a_s)                     T.copy(A[by*128, ko*128], a_s)  # producer: 2 boxes
        ...                                                ...                            # (64-column panels)
"""
from __future__ import annotations

from dataclasses import replace

from ... import dtypes as dt
from ...arith.divisibility import is_multiple
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import buffers_used, collect
from ...op import tile_ops as O
from .persistent import tile_space
from .raw import Raw
from .ws_epilogue import TmaDesc, strided_tma_unfit


def tma_plan(op: O.Copy, wide32: bool = False):
    """(box outer-first, swizzle, panels) for a TMA-able copy, or (None, reason). Rows longer than
    128 bytes move as 128-byte panels (box width `panel_width`): 16-bit tiles, and with `wide32`
    32-bit ones too (tf32 operands of mma.sync, whose template reads 32-column panels)."""
    g, s = op.src.buffer, op.dst.buffer
    if op.disable_tma:
        return None, "it asks for disable_tma=True"
    if g.dtype != s.dtype:
        return None, "it converts dtypes"
    if getattr(g, "device_bound", False):
        return None, (f"{g.name} is a T.make_tensor view whose address the kernel reads: no tensor map can be "
                      "encoded on the host for it")
    if g.strides is not None and (why := strided_tma_unfit(g)) is not None:
        return None, why
    if s.ndim == 1 and 2 <= g.ndim <= 5:
        return _row_plan(op)
    if not 2 <= g.ndim <= 5 or s.ndim != 2:
        return None, f"{g.name} is {g.ndim}-d and {s.name} {s.ndim}-d (TMA here: 2-5 d global, 2-d tile)"
    ext = [const_int(e) for e in op.src.extents]
    if any(e is None for e in ext) or [e for e in ext if e != 1] != [const_int(x) for x in s.shape]:
        return None, "the tile is not a plain box of the global tensor"
    if [i for i, e in enumerate(ext) if e != 1] != [g.ndim - 2, g.ndim - 1] and ext[-1] == 1:
        return None, "the tile's inner dim is not the tensor's inner dim"
    if const_int(op.src.extents[-1]) != const_int(s.shape[-1]):
        return None, "the tile's inner dim is not the tensor's inner dim"
    b = g.dtype.bytes
    if g.strides is None and not is_multiple(g.shape[-1] * b, 16):
        return None, f"{g.name}'s rows ({g.shape[-1]} elements) are not a multiple of 16 bytes"
    row = ext[-1] * b
    if any(e > 256 for e in ext[:-1]):  # the inner dim's box is at most 128 bytes (a panel) below
        return None, "a tile dim exceeds TMA's 256-element box limit"
    if row in (32, 64, 128):
        return (tuple(ext), row, 1), None
    if row % 128 == 0 and (b == 2 or b == 4 and wide32):
        box = list(ext)
        box[-1] = panel_width(g.dtype)
        return (tuple(box), 128, row // 128), None
    return None, f"the tile's rows are {row} bytes (TMA here: 32, 64, 128 or whole 128-byte panels)"


def panel_width(dtype) -> int:
    """Elements in one 128-byte panel row: 64 for 16-bit tiles, 32 for 32-bit ones."""
    return 128 // dtype.bytes


def _row_plan(op: O.Copy):
    """A 1-d tile (a row of per-row statistics: lse[b, h, k*64 : k*64 + 64]): one box row with no
    swizzle -- the tile is read by threads, never by wgmma. (box, 0, 1) or (None, reason)."""
    g, s = op.src.buffer, op.dst.buffer
    ext = [const_int(e) for e in op.src.extents]
    n, b = const_int(s.shape[0]), g.dtype.bytes
    if any(e is None for e in ext) or n is None or ext[:-1] != [1] * (g.ndim - 1) or ext[-1] != n:
        return None, f"the 1-d tile {s.name} is not a run of {g.name}'s inner dim"
    if (g.strides is None and not is_multiple(g.shape[-1] * b, 16)) or (n * b) % 16 or n > 256:
        return None, f"the 1-d tile {s.name} is {n * b} bytes or {g.name}'s rows are not a multiple of 16 bytes " \
                     "(TMA here: a multiple of 16 bytes, at most 256 elements)"
    return (tuple(ext), 0, 1), None


def hoistable_copies(body: list) -> list:
    """global -> shared copies of the loop body the producer can issue at the iteration start:
    their tiles are written nowhere else in the body and their offsets use no value computed in it."""
    local_vars = {st.var for st in collect(S.seq(*body), lambda n: isinstance(n, S.LetStmt))}
    local_vars |= {st.var for st in collect(S.seq(*body), lambda n: isinstance(n, S.For))}
    out = []
    for st in body:
        if not (isinstance(st, O.Copy) and st.src.buffer.scope == "global"
                and st.dst.buffer.scope in ("shared", "shared.dyn")):
            continue
        x = st.dst.buffer
        writers = [n for n in collect(S.seq(*body), lambda n: isinstance(n, (S.BufferStore, O.Copy, O.Fill)))
                   if n is not st and ((isinstance(n, S.BufferStore) and n.buffer is x)
                                       or (isinstance(n, O.Copy) and n.dst.buffer is x)
                                       or (isinstance(n, O.Fill) and n.dst.buffer is x))]
        used = set(collect(st.src, lambda n: isinstance(n, E.Var)))
        if not writers and not (used & local_vars):
            out.append(st)
    return out


def hoist_staged_decls(stmts: list, li: int, tiles: set):
    """(stmts, loop index, loop body) with the declarations of the staged `tiles` found at the top
    level of the pipelined loop's body (`a_s = T.alloc_shared(...)` under T.Pipelined), and the
    T.annotate_layout calls on them alone, moved just before the loop, where warp_specialize's `_rewrite` replaces
    them with the stage storage and the consumers' view: both live across iterations (the view is
    re-pointed at the top of each). None when such a declaration sits deeper in the body."""
    loop = stmts[li]
    body = list(loop.body.stmts) if isinstance(loop.body, S.SeqStmt) else [loop.body]
    decls = [b for b in body if isinstance(b, S.Allocate) and b.buffer.uid in tiles
             or isinstance(b, O.AnnotateLayout) and all(x.uid in tiles for x, _ in b.layouts)]
    body = [b for b in body if not any(b is d for d in decls)]
    if collect(S.seq(*body), lambda n: isinstance(n, S.Allocate) and n.buffer.uid in tiles):
        return None
    if not decls:
        return stmts, li, body
    loop = replace(loop, body=S.seq(*body))
    return stmts[:li] + decls + [loop] + stmts[li + 1:], li + len(decls), body


def plan_prefix_loads(plan) -> bool:
    """Set `plan.pre` (WSPlan) to its prefix_loads where the kernel runs a tile per block, first
    dropping the persistent tile loop where the tiles fit on the SMs and nothing (stream-K,
    clusters) needs it. Returns plan.persistent."""
    k = plan.k
    pre = prefix_loads(plan.stmts, plan.li, plan.body, plan.gemms, k.block_vars) if plan.guard is None else []
    tiles = const_int(tile_space(k)[0]) if plan.persistent else None
    if pre and plan.sk is None and plan.cluster is None and tiles is not None and tiles <= plan.num_sms:
        plan.persistent = plan.info.persistent = False
    plan.pre = [] if plan.persistent else pre
    return plan.persistent


def prefix_loads(stmts: list, li: int, body: list, gemms: list, block_vars) -> list:
    """(copy, (box, swizzle, panels)) for each top-level global -> shared T.copy before the
    pipelined loop stmts[li] that the producer thread can issue ahead of the ring (attention's
    Q tile): its tile is 2-d, written by nothing else and read only as an operand of the loop
    body's wgmma gemms (`body` without the producer's copies; `gemms`, which read the layout TMA
    writes), by no statement before or after the loop, and its corner reads only block
    variables and the prefix's lets. Then the consumers wait on one barrier instead of loading
    the tile themselves, behind the producer's queued K / V boxes."""
    prefix, rest = stmts[:li], stmts[li + 1:]
    known = set(block_vars) | {s.var for s in prefix if isinstance(s, S.LetStmt)}
    out = []
    for st in prefix:
        if not (isinstance(st, O.Copy) and st.src.buffer.scope == "global"
                and st.dst.buffer.scope in ("shared", "shared.dyn") and st.dst.buffer.ndim == 2):
            continue
        x = st.dst.buffer
        if collect(st.src, lambda n: isinstance(n, E.BufferLoad)) \
                or not set(collect(st.src, lambda n: isinstance(n, E.Var))) <= known:
            continue
        if any(s is not st and not (isinstance(s, S.Allocate) and s.buffer is x) and _uses(s, x)
               for s in prefix + rest):
            continue
        readers = [b for b in body if _uses(b, x)]
        if not readers or not all(_operand_only(b, x, gemms) for b in readers):
            continue
        plan, _ = tma_plan(st)
        if plan is not None and plan[1]:
            out.append((st, plan))
    return out


def _uses(st, x) -> bool:
    return x.uid in {b.uid for b in buffers_used(st)}


def _operand_only(st, x, gemms: list) -> bool:
    """st is one of `gemms` and reads x as its (K-major) A or its B, never as C."""
    return any(st is g for g in gemms) and st.C.buffer is not x and \
        ((st.A.buffer is x and not st.transpose_A) or st.B.buffer is x)


def take_prefix_loads(loads: list, prefix: list, info) -> tuple:
    """Hand `loads` (prefix_loads) to the producer: a tensor map each in `info.descs` (WSInfo), the
    tile noted in `info.panels` or `info.swizzled` as TMA writes it.
    Returns (the producer's statements, on barrier tl_pre; `prefix` without the copies and the
    tiles' declarations; the declarations, which both branches see, and tl_pre's; the consumers'
    wait)."""
    if not loads:
        return [], prefix, [], []
    tiles, mine = {p.dst.buffer.uid for p, _ in loads}, []
    for p, (box, swz, n) in loads:
        mine.append(TmaDesc(f"tmap_{len(info.descs)}", p.src.buffer, box, swz))
        info.descs.append(mine[-1])
        (info.panels if n > 1 else info.swizzled).add(p.dst.buffer.uid)
    decls = [s for s in prefix if isinstance(s, S.Allocate) and s.buffer.uid in tiles]
    rest = [s for s in prefix if not any(s is x for x in decls) and not any(s is p for p, _ in loads)]
    decls.append(S.Allocate(Buffer("tl_pre", (1,), dt.uint64, "shared.dyn")))
    return (_prefix_issue(loads, mine, "tl_pre[0]"), rest, decls,
            [Raw("tl::mbarrier_wait(&tl_pre[0], 0);")])


def _prefix_issue(loads: list, descs: list, bar: str) -> list:
    """The producer's statements loading `loads` (prefix_loads, with their tensor maps `descs`)
    into their tiles, all on barrier `bar` (one phase: the tiles are loaded once per block)."""
    nbytes = sum(p.dst.buffer.numel() * p.dst.buffer.dtype.bytes for p, _ in loads)
    out = [Raw(f"tl::mbarrier_arrive_expect_tx(&{bar}, {nbytes});")]
    for (p, (box, _, panels)), desc in zip(loads, descs):
        x = p.dst.buffer
        rows = const_int(x.shape[0])
        coords = [simplify(c) for c in reversed(p.src.starts)]  # innermost first
        for q in range(panels):
            c = [simplify(coords[0] + q * 64)] + coords[1:]
            out.append(Raw(f"tl::tma_load(&{desc.name}, &{bar}, {x.name} + {q * rows * 64}"
                           + "".join(f", {{{j}}}" for j in range(len(c))) + ");", tuple(c), writes=(x,)))
    return out

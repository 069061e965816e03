"""Producer/consumer warp specialization of a T.Pipelined loop on sm_90a: TMA + mbarriers.

Expects: tile-level IR of one kernel; the T.Pipelined loop at the kernel's top level starts
with global -> shared T.copy ops whose tiles TMA can move (2-5 d, 16-byte aligned rows,
inner tile of 32/64/128 bytes or whole 64-element panels), and every T.gemm reading those
tiles takes the wgmma path.
Guarantees: the block gets one extra warpgroup (the producer); its first thread streams
the tiles with cp.async.bulk.tensor into `num_stages` buffers, signalling `full[stage]`;
the user's threads (consumers) wait on `full`, compute, and release `empty[stage]`.
Shared tiles keep the layout TMA writes (the hardware swizzle, or 64-column panels), which
is the layout every codegen'd access and the wgmma descriptors use.

    for ko in T.Pipelined(n, num_stages=3):        producer (tid >= T, one thread):
        T.copy(A[by*128, ko*64], A_s)       ->       for ko: wait empty[s]; expect_tx full[s]; tma A, B
        T.copy(B[ko*64, bx*256], B_s)              consumers (tid < T):
        T.gemm(A_s, B_s, C)                          for ko: wait full[s]; A_s = stage s; gemm; arrive empty[s]
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ... import dtypes as dt
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import collect, substitute
from ...op import tile_ops as O
from ...op.regions import squeezed
from .layout_inference import wgmma_ok, wgmma_rs_ok
from .lower_tile_ops import Raw


@dataclass(frozen=True)
class TmaDesc:
    """A tensor map the host encodes per call: `buffer`'s tensor, `box` (outer-first), swizzle bytes."""

    name: str
    buffer: Buffer
    box: tuple
    swizzle: int


@dataclass
class WSInfo:
    consumer_threads: int
    descs: list = field(default_factory=list)
    swizzled: set = field(default_factory=set)  # uids of tiles in the hardware swizzle
    panels: set = field(default_factory=set)  # uids of tiles in 64-column panels


def _tma_plan(op: O.Copy):
    """(box outer-first, swizzle, panels) for a TMA-able copy, or (None, reason)."""
    g, s = op.src.buffer, op.dst.buffer
    if g.dtype != s.dtype:
        return None, "it converts dtypes"
    if not 2 <= g.ndim <= 5 or s.ndim != 2:
        return None, f"{g.name} is {g.ndim}-d and {s.name} {s.ndim}-d (TMA here: 2-5 d global, 2-d tile)"
    ext = [const_int(e) for e in op.src.extents]
    if any(e is None for e in ext) or [e for e in ext if e != 1] != [const_int(x) for x in s.shape]:
        return None, "the tile is not a plain box of the global tensor"
    if [i for i, e in enumerate(ext) if e != 1] != [g.ndim - 2, g.ndim - 1] and ext[-1] == 1:
        return None, "the tile's inner dim is not the tensor's inner dim"
    if const_int(op.src.extents[-1]) != const_int(s.shape[-1]):
        return None, "the tile's inner dim is not the tensor's inner dim"
    inner = const_int(g.shape[-1])
    b = g.dtype.bytes
    if inner is None or (inner * b) % 16:
        return None, f"{g.name}'s rows ({g.shape[-1]} elements) are not a multiple of 16 bytes"
    row = ext[-1] * b
    if any(e > 256 for e in ext):
        return None, "a tile dim exceeds TMA's 256-element box limit"
    if row in (32, 64, 128):
        return (tuple(ext), row, 1), None
    if row % 128 == 0 and b == 2:
        box = list(ext)
        box[-1] = 64
        return (tuple(box), 128, row // 128), None
    return None, f"the tile's rows are {row} bytes (TMA here: 32, 64, 128 or whole 128-byte panels)"


def _hoistable_copies(body: list) -> list:
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


def _top_pipelined(body):
    stmts = list(body.stmts) if isinstance(body, S.SeqStmt) else [body]
    loops = [i for i, s in enumerate(stmts) if isinstance(s, S.For) and s.kind == "pipelined"]
    return stmts, loops


def warp_specialize(k: S.KernelLaunch, warn, num_sms: int | None = None):
    """Returns (new kernel, WSInfo) or (k, None) when the kernel keeps the cp.async pipeline.

    num_sms: make the kernel persistent -- min(tiles, num_sms) blocks, each looping over the
    tiles (see `_persistent`); None keeps one block per tile."""
    T = k.threads[0] * k.threads[1] * k.threads[2]
    stmts, loops = _top_pipelined(k.body)
    if len(loops) != 1 or T % 128:
        return k, None
    li = loops[0]
    loop = stmts[li]
    stages = max(1, loop.annotation("num_stages", 0) or 1)
    body = list(loop.body.stmts) if isinstance(loop.body, S.SeqStmt) else [loop.body]
    producers = _hoistable_copies(body)
    body = [b for b in body if not any(b is p for p in producers)]
    if not producers:
        return k, None
    tiles = {p.dst.buffer.uid for p in producers}
    gemms = [g for g in collect(S.seq(*body), lambda n: isinstance(n, O.Gemm))
             if g.A.buffer.uid in tiles or g.B.buffer.uid in tiles]
    for g in gemms:
        grid, why = wgmma_ok(g, T)
        if grid is None and g.A.buffer.scope == "fragment":
            grid, why = wgmma_rs_ok(g, T)
        if grid is None:
            warn(f"no warp specialization (TMA pipeline): T.gemm {g.A.buffer.name} x {g.B.buffer.name} cannot use "
                 f"wgmma ({why})")
            return k, None
    plans = []
    for p in producers:
        plan, why = _tma_plan(p)
        if plan is None:
            warn(f"no warp specialization (TMA pipeline): T.copy {p.src.buffer.name} -> {p.dst.buffer.name}: {why}")
            return k, None
        plans.append(plan)
    if len({p.dst.buffer.uid for p in producers}) != len(producers):
        return k, None

    info = WSInfo(T)
    full = Buffer("tl_full", (stages,), dt.uint64, "shared.dyn")
    empty = Buffer("tl_empty", (stages,), dt.uint64, "shared.dyn")
    views, storages, tx_bytes = {}, {}, 0
    for p, (box, swz, panels) in zip(producers, plans):
        x = p.dst.buffer
        st = Buffer(x.name + "_stages", (stages * const_int(x.shape[0]), x.shape[1]), x.dtype, "shared.dyn")
        rv = Buffer(x.name, x.shape, x.dtype, "shared.dyn")
        rv.view_of = st
        storages[x.uid], views[x.uid] = st, rv
        (info.panels if panels > 1 else info.swizzled).add(rv.uid)
        tx_bytes += x.numel() * x.dtype.bytes
        desc = TmaDesc(f"tmap_{len(info.descs)}", p.src.buffer, box, swz)
        info.descs.append(desc)
        p.__dict__  # frozen dataclass: keep the pairing in a side list
    pairs = list(zip(producers, plans, info.descs))
    ko = loop.var
    stage = E.Var("tl_stage", dt.int32)
    it = E.Var("tl_it", dt.int32)
    # persistent: stage/phase counters run on across a block's tiles from a per-branch base
    persistent = num_sms is not None and len(k.block_vars) <= 3
    pbase = Buffer("tl_pbase", (1,), dt.int32, "local.var")
    cbase = Buffer("tl_cbase", (1,), dt.int32, "local.var")

    def it_value(base):
        return (E.BufferLoad(base, (E.as_expr(0),), dt.int32) + (ko - loop.start)) if persistent else ko - loop.start

    # ---- producer: one thread issues every load of a stage
    loads = []
    for p, (box, swz, panels), desc in pairs:
        x = p.dst.buffer
        st = storages[x.uid]
        coords = [simplify(c) for c in reversed(p.src.starts)]  # innermost first
        for q in range(panels):
            c = list(coords)
            c[0] = simplify(c[0] + q * 64)
            offset = f"({{0}}) * {x.numel()} + {q * const_int(x.shape[0]) * 64}"
            loads.append(Raw(f"tl::tma_load(&{desc.name}, &tl_full[{{0}}], {st.name} + {offset}"
                             + "".join(f", {{{i + 1}}}" for i in range(len(c))) + ");",
                             (stage,) + tuple(c)))
    prod_body = S.seq(
        S.LetStmt(it, it_value(pbase)),
        S.LetStmt(stage, it % stages),
        Raw(f"if ({{0}} >= {stages}) tl::mbarrier_wait(&tl_empty[{{1}}], (({{0}} / {stages}) - 1) & 1);",
            (it, stage)),
        Raw(f"tl::mbarrier_arrive_expect_tx(&tl_full[{{0}}], {tx_bytes});", (stage,)),
        *[substitute(ld, {}) for ld in loads])
    producer = S.For(ko, loop.start, loop.extent, "serial", prod_body, (), span=loop.span)

    # ---- consumers: wait for the stage, point the tile names at it, compute, release
    from .software_pipeline import _ReplaceBuffers

    # With one gemm on the staged tiles and >= 2 stages, keep its wgmma batch in flight across
    # iterations (wg_wait=1) and release the previous stage once that batch has retired.
    overlap = stages >= 2 and len(gemms) == 1 and all(g.wg_wait == 0 for g in gemms)
    body_ops = [replace(b, wg_wait=1) if overlap and isinstance(b, O.Gemm) and b in gemms else b for b in body]
    rest = _ReplaceBuffers(views).visit(S.seq(*body_ops))
    # one arrival per consumer warp (lane 0, after the warp's wgmma wait / its reads of the stage)
    if overlap:
        release = Raw(f"if ({{0}} > 0 && tid % 32 == 0) tl::mbarrier_arrive(&tl_empty[({{0}} - 1) % {stages}]);",
                      (it,))
    else:
        release = Raw("__syncwarp(); if (tid % 32 == 0) tl::mbarrier_arrive(&tl_empty[{0}]);", (stage,))
    cons_body = S.seq(
        S.LetStmt(it, it_value(cbase)),
        S.LetStmt(stage, it % stages),
        Raw(f"tl::mbarrier_wait(&tl_full[{{1}}], ({{0}} / {stages}) & 1);", (it, stage)),
        *[Raw(f"{views[x].name} = {storages[x].name} + ({{0}}) * {views[x].numel()};", (stage,)) for x in views],
        rest,
        release)
    consumer_loop = S.For(ko, loop.start, loop.extent, "serial", cons_body, (), span=loop.span)
    if overlap:
        consumer_loop = S.seq(consumer_loop, Raw("tl::warpgroup_wait<0>();"))

    prefix, suffix = stmts[:li], stmts[li + 1:]
    lets = [s for s in prefix if isinstance(s, S.LetStmt)]
    allocs = []
    cons_prefix = []
    for s in prefix:
        if isinstance(s, S.LetStmt):
            continue
        if isinstance(s, S.Allocate) and s.buffer.uid in storages:
            x = s.buffer
            allocs += [S.Allocate(storages[x.uid]), S.Allocate(views[x.uid])]
            continue
        cons_prefix.append(s)
    init = Raw("if (tid == 0) {{ "
               + " ".join(f"tl::mbarrier_init(&tl_full[{i}], 1); tl::mbarrier_init(&tl_empty[{i}], {T // 32});"
                          for i in range(stages))
               + " tl::fence_barrier_init(); }} tl::sync_all_threads();")
    regs_c = 240 if T == 128 else (232 if T == 256 else 160)
    tid = E.Var("tid", dt.int32)
    if persistent:
        grid, tile_loop = _persistent(k, num_sms)

        def advance(base):
            ld = E.BufferLoad(base, (E.as_expr(0),), dt.int32)
            return S.BufferStore(base, (E.as_expr(0),), ld + loop.extent)

        producer = S.seq(S.Allocate(pbase, (E.as_expr(0),)),
                         tile_loop(S.seq(*lets, producer, advance(pbase))))
        consumer_tiles = S.seq(S.Allocate(cbase, (E.as_expr(0),)),
                               tile_loop(S.seq(*lets, *cons_prefix, consumer_loop, advance(cbase), *suffix)))
        lets, k = [], replace(k, grid=grid)
    producer_branch = S.seq(Raw("tl::setmaxnreg_dec<40>();"),
                            S.IfThenElse(E.binop("==", tid, T), producer))
    if persistent:
        consumer_branch = S.seq(Raw(f"tl::setmaxnreg_inc<{regs_c}>();"), consumer_tiles)
    else:
        consumer_branch = S.seq(Raw(f"tl::setmaxnreg_inc<{regs_c}>();"), *cons_prefix, consumer_loop, *suffix)
    new_body = S.seq(S.Allocate(full), S.Allocate(empty), *allocs, *lets, init,
                     WSSplit(T, producer_branch, consumer_branch))
    return replace(k, body=new_body), info


def _persistent(k: S.KernelLaunch, num_sms: int):
    """(new grid, wrap) for a persistent kernel: min(tiles, num_sms) blocks on a 1-d grid, and
    `wrap(body)` runs body once per tile of the block -- tiles cta, cta + blocks, ... -- with the
    block variables rebound to the tile (through the T.use_swizzle panels when the kernel asks).
    On the 1-d grid the codegen's block variables are (blockIdx.x, 0, 0), so bx is the block."""
    ext = [E.as_expr(g) for g in k.grid]
    tiles = ext[0]
    for g in ext[1:]:
        tiles = tiles * g
    blocks = simplify(E.binop("min", tiles, num_sms))
    grid = (blocks,) + tuple(E.as_expr(1) for _ in ext[1:])
    swz = [op for op in collect(k.body, lambda n: isinstance(n, O.Swizzle)) if op.enable]
    panel = swz[0].panel_size if swz else None
    cta = E.Var("tl_cta", dt.int32)
    j = E.Var("tl_tile_iter", dt.int32)
    t = E.Var("tl_tile", dt.int32)
    bvars = list(k.block_vars)

    def coords():
        if len(bvars) == 1:
            return [t]
        gx, gy = ext[0], ext[1]
        rest, out_z = t, []
        if len(bvars) == 3:
            out_z = [t // (gx * gy)]
            rest = t % (gx * gy)
        if panel:
            p = panel
            pan = rest // (gx * p)
            inn = rest % (gx * p)
            rows = E.binop("min", E.as_expr(p), gy - pan * p)
            return [inn // rows, pan * p + inn % rows] + out_z
        return [rest % gx, rest // gx] + out_z

    values = [simplify(c) for c in coords()]

    def wrap(body):
        count = simplify((tiles - cta + blocks - 1) // blocks)
        inner = S.seq(S.LetStmt(t, cta + j * blocks),
                      *[S.LetStmt(v, x) for v, x in zip(bvars, values)], body)
        return S.seq(S.LetStmt(cta, bvars[0]), S.For(j, E.as_expr(0), count, "serial", inner, ()))

    return grid, wrap


@dataclass(frozen=True)
class WSSplit(S.Stmt):
    """`if (tid >= consumers) producer else consumer`; codegen prints it, passes see both branches."""

    consumers: int
    producer: S.Stmt
    consumer: S.Stmt
    span: object = field(default=None, compare=False, repr=False)


_ = squeezed

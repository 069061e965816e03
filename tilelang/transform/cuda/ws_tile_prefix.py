"""Persistent warp-specialized kernels: the producer loads every tile's prefix tiles (attention's Q)
by TMA into a two-deep buffer, so the next tile's load overlaps this tile's last iterations.

Takes: the prefix loads of a persistent kernel (ws_loads.prefix_loads: 2-d global -> shared
copies before the pipelined loop, read only as wgmma operands in it), the consumers' tile
prefix and the block's consumer thread count. Gives (`take_tile_prefix`): the statements the
producer thread runs at the top of each tile and those the consumers run around theirs.

    per tile (consumers):                           per tile n of the block (producer thread):
      cp.async Q -> Q_s; wait; bar.sync     ->        if n >= 2: wait tl_tpre_empty[n % 2]
      k-loop (reads Q_s); epilogue                    expect_tx tl_tpre[n % 2]; TMA Q -> Q_s_tiles[n % 2]
                                                    consumers: Q_s = Q_s_tiles + n % 2; wait tl_tpre[n % 2];
                                                      k-loop; epilogue; each warp arrives tl_tpre_empty[n % 2]

Without it a persistent kernel's consumers load such a tile themselves at every tile (cp.async,
wait, a proxy fence and a consumer barrier) with nothing beside it: at D64 (16 k-tiles of
128 per tile) that load is a few percent of a tile. The producer reaches tile n + 1 once it
has issued tile n's last K / V boxes, about a ring's depth of iterations before the consumers
finish tile n; buffer (n + 1) % 2 was released when tile n - 1 ended. The release follows the
consumers' epilogue, which waits for every wgmma of the tile (it reads the accumulators).
Only where shared memory holds the second buffer (`fits`); otherwise the consumers keep their
own load. Off: `tl.disable_persistent_prefix_tma`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import dtypes as dt
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from .raw import Raw
from .ws_epilogue import TmaDesc

DEPTH = 2  # tile buffers: the producer fills one while the consumers read the other
FULL, EMPTY = "tl_tpre", "tl_tpre_empty"


def extra_bytes(loads: list) -> int:
    """Shared memory the second buffer of each of `loads` (prefix_loads) takes."""
    return sum(p.dst.buffer.numel() * p.dst.buffer.dtype.bytes for p, _ in loads) * (DEPTH - 1)


@dataclass
class TilePrefix:
    """What `take_tile_prefix` gives warp_specialize._rewrite."""

    prefix: list  # the consumers' tile prefix without the loads and the tiles' declarations
    decls: list  # storage, view and barrier declarations (both branches see them)
    init: str  # the barriers' mbarrier_init text (thread 0, before the block barrier)
    producer_head: list = field(default_factory=list)  # before the producer's tile loop
    producer_tile: list = field(default_factory=list)  # at the top of each of its tiles
    consumer_head: list = field(default_factory=list)  # before the consumers' tile loop
    consumer_wait: list = field(default_factory=list)  # just before the consumers' k-loop
    consumer_tail: list = field(default_factory=list)  # after the consumers' epilogue
    views: dict = field(default_factory=dict)  # tile uid -> the window the consumers' gemms read


def take_tile_prefix(loads: list, prefix: list, info, consumers: int) -> TilePrefix:
    """Hand `loads` (prefix_loads) to the producer, once per tile, into DEPTH buffers: a tensor map
    each in `info.descs` (WSInfo), the consumers' window noted in `info.panels` / `info.swizzled`
    as TMA writes it. `consumers`: the consumer threads (one release arrival per warp)."""
    tiles = {p.dst.buffer.uid for p, _ in loads}
    pn = Buffer("tl_tpre_pn", (1,), dt.int32, "local.var")  # the block's tiles so far (producer)
    cn = Buffer("tl_tpre_cn", (1,), dt.int32, "local.var")  # (consumers)
    out = TilePrefix([s for s in prefix if not (isinstance(s, S.Allocate) and s.buffer.uid in tiles)
                      and not any(s is p for p, _ in loads)], [],
                     " ".join(f"tl::mbarrier_init(&{FULL}[{i}], 1); tl::mbarrier_init(&{EMPTY}[{i}], "
                              f"{consumers // 32});" for i in range(DEPTH)))
    out.decls += [S.Allocate(Buffer(FULL, (DEPTH,), dt.uint64, "shared.dyn")),
                  S.Allocate(Buffer(EMPTY, (DEPTH,), dt.uint64, "shared.dyn"))]
    p_n, c_n = (E.BufferLoad(b, (E.as_expr(0),), dt.int32) for b in (pn, cn))
    p_slot, c_slot = simplify(p_n % DEPTH), simplify(c_n % DEPTH)
    nbytes = sum(p.dst.buffer.numel() * p.dst.buffer.dtype.bytes for p, _ in loads)
    issue = [Raw(f"if ({{0}} >= {DEPTH}) tl::mbarrier_wait(&{EMPTY}[{{1}}], (({{0}} / {DEPTH}) - 1) & 1);",
                 (p_n, p_slot)),
             Raw(f"tl::mbarrier_arrive_expect_tx(&{FULL}[{{0}}], {nbytes});", (p_slot,))]
    point = []
    for p, (box, swz, panels) in loads:
        x = p.dst.buffer
        rows = const_int(x.shape[0])
        st = Buffer(x.name + "_tiles", (DEPTH * rows, x.shape[1]), x.dtype, "shared.dyn")
        rv = Buffer(x.name, x.shape, x.dtype, "shared.dyn")
        rv.view_of = st
        out.views[x.uid] = rv
        out.decls += [S.Allocate(st), S.Allocate(rv)]
        desc = TmaDesc(f"tmap_{len(info.descs)}", p.src.buffer, box, swz)
        info.descs.append(desc)
        (info.panels if panels > 1 else info.swizzled).add(rv.uid)
        coords = [simplify(c) for c in reversed(p.src.starts)]  # innermost first
        for q in range(panels):
            c = [simplify(coords[0] + q * 64)] + coords[1:]
            issue.append(Raw(f"tl::tma_load(&{desc.name}, &{FULL}[{{0}}], {st.name} + ({{0}}) * {x.numel()} + "
                             f"{q * rows * 64}" + "".join(f", {{{j + 1}}}" for j in range(len(c))) + ");",
                             (p_slot,) + tuple(c), writes=(st,)))
        point.append(Raw(f"{rv.name} = {st.name} + ({{0}}) * {x.numel()};", (c_slot,)))
    out.producer_head = [S.Allocate(pn, (E.as_expr(0),))]
    out.producer_tile = issue + [S.BufferStore(pn, (E.as_expr(0),), p_n + 1)]
    out.consumer_head = [S.Allocate(cn, (E.as_expr(0),))]
    out.consumer_wait = point + [Raw(f"tl::mbarrier_wait(&{FULL}[{{0}}], ({{1}} / {DEPTH}) & 1);", (c_slot, c_n))]
    out.consumer_tail = [Raw(f"__syncwarp(); if (tid % 32 == 0) tl::mbarrier_arrive(&{EMPTY}[{{0}}]);", (c_slot,)),
                         S.BufferStore(cn, (E.as_expr(0),), c_n + 1)]
    return out

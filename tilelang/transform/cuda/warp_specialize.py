"""Producer/consumer warp specialization of a T.Pipelined loop on sm_90a: TMA + mbarriers.

Expects: tile-level IR of one kernel; the T.Pipelined loop at the kernel's top level starts
with global -> shared T.copy ops whose tiles TMA can move (2-5 d, 16-byte aligned rows,
inner tile of 32/64/128 bytes or whole 64-element panels; see ws_loads.py), declared before the
loop or at the top of its body, and every T.gemm reading those tiles takes the wgmma path (or,
all of them, mma.sync on tf32 K-major tiles: gemm_paths.mma_ws_ok).
Guarantees: the block gets one extra warpgroup (the producer); its first thread streams
the tiles with cp.async.bulk.tensor into `num_stages` buffers, signalling `full[stage]`;
the user's threads (consumers) wait on `full`, compute, and release `empty[stage]`.
Shared tiles keep the layout TMA writes (the hardware swizzle, or 64-column panels), which
is the layout every codegen'd access and the wgmma descriptors use.

    for ko in T.Pipelined(n, num_stages=3):        producer (tid >= T, one thread):
        T.copy(A[by*128, ko*64], A_s)       ->       for ko: wait empty[s]; expect_tx full[s]; tma A, B
        T.copy(B[ko*64, bx*256], B_s)              consumers (tid < T):
        T.gemm(A_s, B_s, C)                          for ko: wait full[s]; A_s = stage s; gemm; arrive empty[s]

A persistent kernel whose loop is a plain k-reduction (`stream_k.plain_reduction`) walks k
backwards on every other tile of a block (the producer's k-coordinates only; the consumers
never see k). Consecutive waves then start on the k-slices the last wave read most recently,
which L2 still holds: at 4096^3 with 128x256x64 tiles this cut the DRAM traffic per GEMM from
about 214 MB (ncu) and measured ~2 % faster at the H200's power limit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ... import dtypes as dt
from ...arith.ranges import Ranges
from ...arith.simplify import const_int, simplify
from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import ReplaceBuffers, buffers_used, collect, substitute
from ...op import tile_ops as O
from .barrier_ids import BarrierIds
from .gemm_paths import mma_ws_ok, wgmma_ok, wgmma_rs_ok
from .lower_tile_ops import Raw
from .persistent import balanced_order, cluster_plan, persistent_tiles, tile_space, uneven_work
from .stream_k import (
    MAX_FANIN,
    StreamK,
    plain_reduction,
    stream_k_finish,
    stream_k_plan,
    stream_k_units,
)
from .ws_guard import producer_guard
from .ws_im2col import im2col_desc, im2col_exprs, im2col_loads, im2col_plan, im2col_producers, small_tile
from .ws_epilogue import TmaDesc, defer_epilogue, defer_fits, fold_staged_store, tma_store_epilogue
from .ws_loads import (hoist_staged_decls, hoistable_copies, panel_width, plan_prefix_loads, prefix_loads,
                       take_prefix_loads, tma_plan)
from .ws_overlap import chain_plan, overlapped_consumer
from .ws_dead_rows import dead_rows
from .ws_pingpong import AUTO_MIN_COLUMNS, pingpong_consumer, pingpong_plan, turn_head, turn_tail
from .ws_tile_prefix import extra_bytes, take_tile_prefix


@dataclass
class WSInfo:
    consumer_threads: int
    descs: list = field(default_factory=list)
    swizzled: set = field(default_factory=set)  # uids of tiles in the hardware swizzle
    panels: set = field(default_factory=set)  # uids of tiles in 64-column panels
    cluster: int = 1  # blocks per cluster (2: neighbouring tiles share multicast loads)
    persistent: bool = False  # a 1-d grid of blocks looping over tiles (they order tiles themselves)
    workspace: tuple = ()  # hidden global buffers the launcher allocates (stream-K partials and flags)
    deferred_epilogue: bool = False  # the output tile is stored during the next tile's k-loop
    mma_sync: bool = False  # the consumers' gemms take mma.sync (gemm_paths.mma_ws_ok), not wgmma
    consumer_regs: int = 0  # the consumers' setmaxnreg_inc (the producer warpgroup decreases to producer_regs)
    producer_regs: int = 0  # the producer warpgroup's setmaxnreg_dec (0: no setmaxnreg)
    pingpong: int = 0  # consumer warpgroups taking turns at their gemms (ws_pingpong.py), 0: none
    wg_epilogue: object = None  # the accumulator each consumer warpgroup stores its own rows of (ws_epilogue.wg_chunk)
    barriers: object = None  # the kernel's barrier_ids.BarrierIds: named barrier ids clear of the program's own
    tile_order: tuple = ()  # persistent.balanced_order's table: the codegen's __constant__ tl_tile_order
    dead_rows: object = None  # ws_dead_rows.DeadRows of the ping-pong loop (its row split is checked after layouts)


# the producer warpgroup issues TMA and waits on barriers: 24 registers a thread (setmaxnreg's
# least) hold it; a kernel that then spills or loses setmaxnreg is built again at
# PRODUCER_REGS_WIDE (backend/cuda/pipeline.py), the producer count of the earlier builds.
# `tl.ws_producer_regs` unset, an attention loop (two gemms) with one or two consumer warpgroups
# takes PRODUCER_REGS_WIDE from the start (default_producer_regs)
PRODUCER_THREADS, PRODUCER_REGS, PRODUCER_REGS_WIDE = 128, 24, 40


def default_producer_regs(T: int, n_gemms: int) -> int:
    """The producer's setmaxnreg_dec where `tl.ws_producer_regs` is unset, for T consumer threads
    whose loop holds n_gemms gemms. Attention (two gemms) with T <= 256 gets 40: the consumers keep
    232 registers (240 at 24), and on the H100 (2026-12-06, benchmarks/attention.py, 5 interleaved
    rounds) B8 H16 S4096 D128 at 128x128 / 256 threads ran 596.9 against 568.9 TFLOP/s, causal 545.5
    against 520.3. Three or more consumer warpgroups stay at 24: at 40 they drop to 152 registers and
    D128 at 192x128 spills (412.9 against 218.5 on the H200, 2026-12-06). GEMMs stay at 24."""
    return PRODUCER_REGS_WIDE if n_gemms == 2 and T <= 256 else PRODUCER_REGS


def consumer_registers(T: int, launch_regs: int | None = None, producer_regs: int = PRODUCER_REGS) -> int:
    """The consumers' setmaxnreg_inc for T consumer threads beside the 128-thread producer.

    setmaxnreg moves registers within the block's own pool (PTX ISA: per CTA): the producer's
    decrease to P (`producer_regs`) frees (R - P) x 128 of them, and an increase that asks the T
    consumers for more than that blocks forever. R is the per-thread allocation at launch:
    `launch_regs`, else the most `__launch_bounds__(T + 128, 1)` allows (96 at 640 threads, where
    the fp8 lighting indexer's 4 consumer warpgroups once asked for 112 with P = 40 and hung).
    With P = 24: 240 for one or two consumer warpgroups, 160 for three, 112 for four (P = 40:
    240, 232, 152, 104)."""
    n = T + PRODUCER_THREADS
    r = launch_regs if launch_regs else min(255, 65536 // n) // 8 * 8
    pool = (r * n - producer_regs * PRODUCER_THREADS) // T // 8 * 8
    return min(240, pool)


def top_pipelined(body):
    stmts = list(body.stmts) if isinstance(body, S.SeqStmt) else [body]
    loops = [i for i, s in enumerate(stmts) if isinstance(s, S.For) and s.kind == "pipelined"]
    return stmts, loops


def warp_specialize(k: S.KernelLaunch, warn, num_sms: int | None = None, clusters: bool = False,
                    stream_k: bool = True, timeline: bool = False, serpentine: bool = True,
                    defer_epilogue: bool = True, deep_ring: bool = True, rebalance_regs: bool = True,
                    chain: bool = False, fragment_guard: bool = True, fold_staging: bool = True,
                    im2col_tma: bool = True, im2col_small: bool = False, promoted_stream_k: bool = True,
                    mma_sync: bool = True, tile_snake: bool = True, pingpong: bool | None = False,
                    trip_cap: bool = True, tile_prefix: bool = True, chain_hold: bool = True,
                    wg_epilogue: bool = True, barriers=None, producer_regs: int | None = None,
                    tile_table: bool = False, skip_dead_rows: bool = False, stream_k_fanin: int = MAX_FANIN):
    """Returns (new kernel, WSInfo) or (k, None) when the kernel keeps the cp.async pipeline.

    num_sms: make the kernel persistent -- min(tiles, num_sms) blocks, each looping over the
    tiles (see `_persistent`); None keeps one block per tile.
    clusters: let a persistent kernel run as 2-block clusters whose blocks take neighbouring
    tiles and multicast the tile they share (see `persistent.cluster_plan`). Off by default: on the H200
    the 128x256x64 GEMMs ran 0-2 % slower clustered (L2 bandwidth is not what limits them).
    stream_k: a persistent GEMM without clusters shares its last partial wave's k-iterations
    among all blocks (see stream_k.py) where its loop allows; stream_k_fanin: the ranges a tile is
    cut into at the most (stream_k.MAX_FANIN; 0: no limit; `tl.stream_k_max_fanin`).
    timeline: a persistent kernel records, per block and tile (or stream-K unit), when its
    consumers start it, end its k-loop and end its epilogue (see TIMELINE).
    serpentine: a persistent plain k-reduction loads every other tile's k-slices last first
    (see the module docstring).
    defer_epilogue: a persistent plain k-reduction stores its output tile during the next
    tile's k-loop (see `_defer_epilogue`).
    deep_ring: the producer's ring may hold more stages than num_stages (see `ring_depth`).
    trip_cap: where each block runs one tile, the ring holds no more stages than the loop's most
    iterations (see `trip_bound`; off: `tl.disable_ring_trip_cap`).
    rebalance_regs: False leaves out setmaxnreg (for kernels that use fewer registers than the
    producer's decrease names, which ptxas rejects). producer_regs: the producer's decrease (None:
    default_producer_regs).
    chain: a loop of two chained gemms (attention: scores, then P @ V) keeps the next scores gemm
    in flight beside this one's output gemm (ws_overlap.py; `tl.enable_ws_overlap`).
    chain_hold: with `chain`, the wait for the output gemm stays after the next softmax in ptxas'
    schedule too (ws_overlap.py; off: `tl.disable_wgmma_wait_hold`).
    fragment_guard: a guarded body's condition may read a fragment filled from global memory
    before the loop (ws_guard.py; `tl.disable_ws_fragment_guard`).
    fold_staging: the user's own output staging pair becomes the TMA-store epilogue
    (ws_epilogue.fold_staged_store; off: `tl.disable_fold_staged_store`).
    im2col_tma: the producer loads a T.im2col tile through an im2col-mode tensor map (ws_im2col.py;
    off: `tl.disable_tma_im2col`, the loop keeps the cp.async pipeline); im2col_small: also where
    the accumulator is small (ws_im2col.small_tile; `tl.enable_tma_im2col_small_tiles`).
    promoted_stream_k: stream-K also takes promoted k-reductions (stream_k.promoted_reduction:
    fp8's second accumulator; off: `tl.disable_stream_k_promoted`).
    mma_sync: a gemm wgmma does not take but mma.sync does (tf32, gemm_paths.mma_ws_ok) runs in
    the consumers, its fp32 tiles streamed as 32-column panels (off: `tl.disable_ws_mma_sync`, the
    loop keeps the cp.async pipeline). On the H200 a 128-thread cp.async loop of mhc_pre's
    gemm_sqrsum (one block per 32 tokens, 48 KB a stage) spends its issue slots on 24 cp.async a
    thread per stage and waits at two block barriers per iteration; the producer issues 12 TMA
    boxes and the consumers only wait on mbarriers.
    tile_snake: a persistent kernel whose k-loop trip count depends on the block variables (causal
    attention) deals its tiles in serpentine rounds (persistent.persistent_tiles; off:
    `tl.disable_persistent_snake`).
    tile_table: such a kernel whose trip counts are all known at compile time reads its tiles
    from a table dealt as a dynamic scheduler would, longest first (persistent.balanced_order;
    `tl.enable_persistent_tile_table`; measured slower than serpentine rounds, see persistent.py).
    skip_dead_rows: in a ping-pong loop a consumer warpgroup whose rows all land past the end of the
    outputs runs only the loop's waits, turns and releases (ws_dead_rows.py; `tl.enable_ws_dead_rows`).
    pingpong: the consumer warpgroups of an attention loop take turns at the tensor cores, each
    one's softmax running beside the next one's gemms (ws_pingpong.py; `tl.enable_ws_pingpong`;
    not with `chain`, which takes the loop first). None: only loops whose output accumulator has
    ws_pingpong.AUTO_MIN_COLUMNS columns or more (the default).
    tile_prefix: a persistent kernel's producer loads each tile's prefix tiles (attention's Q) by
    TMA into two buffers, where shared memory allows (ws_tile_prefix.py; off:
    `tl.disable_persistent_prefix_tma`, the consumers load them at every tile)."""
    plan = _plan(k, warn, num_sms, clusters, stream_k, serpentine, deep_ring, fragment_guard,
                 (im2col_tma, im2col_small), promoted_stream_k, mma_sync, trip_cap, stream_k_fanin)
    if plan is None:
        return k, None
    plan.rebalance_regs = rebalance_regs
    plan.producer_regs = producer_regs if producer_regs is not None else \
        default_producer_regs(plan.T, len(plan.gemms))
    plan.info.barriers = barriers if barriers is not None else BarrierIds()
    plan.chain = chain
    plan.chain_hold = chain_hold
    plan.pingpong = False if chain else pingpong
    plan.skip_dead_rows = skip_dead_rows
    plan.fold_staging = fold_staging
    plan.wg_epilogue = wg_epilogue
    if not chain:
        plan.groups = _barrier_groups(plan)
    plan.defer_epilogue = plan.defer_epilogue and defer_epilogue
    if tile_prefix and plan.persistent and plan.sk is None and plan.cluster is None and plan.guard is None:
        plan.tile_pre = prefix_loads(plan.stmts, plan.li, plan.body, plan.gemms, k.block_vars)
    plan.snake = tile_snake and plan.persistent and plan.sk is None and uneven_work(
        plan.stmts[plan.li], [s for s in plan.stmts[:plan.li] if isinstance(s, S.LetStmt)], set(k.block_vars))
    if plan.snake and tile_table and plan.cluster is None and num_sms:
        plan.info.tile_order = balanced_order(
            k, plan.stmts[plan.li], [s for s in plan.stmts[:plan.li] if isinstance(s, S.LetStmt)], num_sms) or ()
    if timeline and plan.persistent:
        plan.timeline = Buffer(TIMELINE, (num_sms, TIMELINE_UNITS, 4), dt.int64, "global")
        plan.info.workspace = plan.info.workspace + (plan.timeline,)
    return _rewrite(plan, _producer_loop(plan), _consumer_loop(plan), warn), plan.info


@dataclass
class WSPlan:
    """What warp specialization decided for one kernel; `_rewrite` applies it."""

    k: S.KernelLaunch
    T: int  # consumer threads (the user's block)
    stmts: list  # the kernel's top-level statements; stmts[li] is the pipelined loop
    li: int
    stages: int
    body: list  # the loop body without the copies the producer takes over
    gemms: list  # gemms reading staged tiles
    pairs: list  # (copy, (box, swizzle, panels), TmaDesc) per producer copy
    info: WSInfo
    num_sms: int | None
    persistent: bool  # stage/phase counters run on across a block's tiles from a per-branch base
    rebalance_regs: bool = True  # setmaxnreg: the producer gives registers to the consumers
    producer_regs: int = PRODUCER_REGS  # the producer's setmaxnreg_dec
    storages: dict = field(default_factory=dict)  # tile uid -> multi-stage storage
    views: dict = field(default_factory=dict)  # tile uid -> the window onto the current stage
    tx_bytes: int = 0  # bytes landing in one stage
    cluster: tuple | None = None  # (grid axis, indices of multicast pairs), see persistent.cluster_plan
    sk: StreamK | None = None  # stream-K on the last wave; the loop then runs a unit's [k0, k1)
    timeline: Buffer | None = None  # tl.debug_timeline: consumer timestamps per block and unit
    ki: E.Expr | None = None  # the user's k-iterations per tile (with sk, the loop's extent is k1 - k0)
    serpentine: bool = False  # the producer walks k backwards on every other tile (tl_pdir = 1)
    snake: bool = False  # tiles of unequal work: blocks take them in serpentine rounds (persistent_tiles)
    pprefix: list = field(default_factory=list)  # prefix statements the producer runs too (_producer_prefix)
    defer_epilogue: bool = False  # the TMA-store epilogue runs during the next tile's k-loop
    fold_staging: bool = True  # T.copy(acc, O_s); T.copy(O_s, O[...]) -> the TMA-store epilogue
    wg_epilogue: bool = True  # each consumer warpgroup stores its own rows (ws_epilogue.wg_chunk)
    groups: list | None = None  # [(pair indices, first use, last use)]: a full/empty pair each (_barrier_groups)
    guard: E.Expr | None = None  # the loads and compute of an iteration run only where it holds (_guarded_copies)
    pre: list = field(default_factory=list)  # copies before the loop the producer issues first (prefix_loads)
    tile_pre: list = field(default_factory=list)  # the same, issued per tile of a persistent kernel (ws_tile_prefix)
    chain: bool = False  # two chained gemms stay in flight together where ws_overlap.chain_plan allows
    chain_hold: bool = True  # ws_overlap's wait for the output gemm is one ptxas keeps after the softmax
    pingpong: bool | None = False  # (None: by ws_pingpong.AUTO_MIN_COLUMNS) consumer warpgroups take turns at their gemms where ws_pingpong.pingpong_plan allows
    skip_dead_rows: bool = False  # ping-pong warpgroups whose rows no output keeps skip their work (ws_dead_rows)
    stage: E.Var = field(default_factory=lambda: E.Var("tl_stage", dt.int32))
    it: E.Var = field(default_factory=lambda: E.Var("tl_it", dt.int32))
    rank: E.Var = field(default_factory=lambda: E.Var("tl_rank", dt.int32))  # the block's rank in its cluster
    pbase: Buffer = field(default_factory=lambda: Buffer("tl_pbase", (1,), dt.int32, "local.var"))
    cbase: Buffer = field(default_factory=lambda: Buffer("tl_cbase", (1,), dt.int32, "local.var"))
    pdir: Buffer = field(default_factory=lambda: Buffer("tl_pdir", (1,), dt.int32, "local.var"))

    @property
    def loop(self) -> S.For:
        return self.stmts[self.li]

    def it_value(self, base: Buffer):
        ko = self.loop.var - self.loop.start
        return E.BufferLoad(base, (E.as_expr(0),), dt.int32) + ko if self.persistent else ko

    def point_view(self, uid, stage) -> Raw:
        """Point the window of staged tile `uid` at `stage` of its storage."""
        v, st = self.views[uid], self.storages[uid]
        return Raw(f"{v.name} = {st.name} + ({{0}}) * {v.numel()};", (stage,))

    def wait_full(self, it, stage, group: int = 0) -> Raw:
        """The consumers wait until iteration `it`'s loads (of barrier group `group`) have landed in `stage`."""
        return Raw(f"tl::mbarrier_wait(&tl_full{_sfx(group)}[{{1}}], ({{0}} / {self.stages}) & 1);", (it, stage))

    def release(self, stage, group: int = 0) -> Raw:
        """Each consumer warp releases `stage` (of barrier group `group`) to the producer, after its reads of it."""
        return Raw("__syncwarp(); " + self.arrive("{0}", group), (stage,))

    def arrive(self, slot: str, group: int = 0) -> str:
        """Format text releasing tl_empty[slot]: one arrival per consumer warp (lane 0, after the
        warp's wgmma wait / its reads of the stage); in a cluster lane r arrives on the barrier
        of the pair's block r, as both blocks write each stage."""
        if self.cluster is None:
            return f"if (tid % 32 == 0) tl::mbarrier_arrive(&tl_empty{_sfx(group)}[{slot}]);"
        return f"if (tid % 32 < 2) tl::mbarrier_arrive_cluster(&tl_empty[{slot}], tid % 32);"


def _plan(k: S.KernelLaunch, warn, num_sms, clusters, stream_k=False, serpentine=False,
          deep_ring=False, fragment_guard=False, im2col_tma=(False, False), promoted=False,
          mma_sync=False, trip_cap=False, fanin=MAX_FANIN) -> WSPlan | None:
    """The plan, or None (with a warning where wgmma or TMA is what is missing)."""
    T = k.threads[0] * k.threads[1] * k.threads[2]
    stmts, loops = top_pipelined(k.body)
    if len(loops) != 1 or T % 128:
        return None
    loop = stmts[loops[0]]
    body = list(loop.body.stmts) if isinstance(loop.body, S.SeqStmt) else [loop.body]
    producers = hoistable_copies(body)
    guard = None
    if not producers:
        guard, body, producers = _guarded_copies(body, k, stmts[:loops[0]], fragment_guard)
    if collect(S.seq(*body), lambda n: isinstance(n, O.Im2Col)):
        producers = _with_im2col(body, producers, guard, im2col_tma[0], warn)
        if producers is None:
            return None
    if not producers:
        copies = collect(S.seq(*body), lambda n: isinstance(n, O.Copy) and n.src.buffer.scope == "global"
                         and n.dst.buffer.scope in ("shared", "shared.dyn"))
        if copies:  # TMA could take them: say why the producer does not
            c = copies[0]
            warn(f"no warp specialization (TMA pipeline): T.copy {c.src.buffer.name} -> {c.dst.buffer.name} is not "
                 "one the producer can issue at the iteration start (it must sit at the top level of the T.Pipelined "
                 "body, or under one `if` around the whole body, its tile written by nothing else and its offsets "
                 "computed by nothing in the body); the loop runs as a cp.async pipeline")
        return None
    if len({p.dst.buffer.uid for p in producers}) != len(producers):
        return None
    tiles = {p.dst.buffer.uid for p in producers}
    gemms = [g for g in collect(S.seq(*body), lambda n: isinstance(n, O.Gemm))
             if g.A.buffer.uid in tiles or g.B.buffer.uid in tiles]
    on_mma = []
    for g in gemms:
        grid, why = wgmma_ok(g, T)
        if grid is None and g.A.buffer.scope == "fragment":
            grid, why = wgmma_rs_ok(g, T)
        if grid is None:
            mwhy = mma_ws_ok(g, T, tiles) if mma_sync else "tl.disable_ws_mma_sync is set"
            if mwhy is None:
                on_mma.append(g)
                continue
            warn(f"no warp specialization (TMA pipeline): T.gemm {g.A.buffer.name} x {g.B.buffer.name} cannot use "
                 f"wgmma ({why}) nor mma.sync beside a TMA producer ({mwhy})")
            return None
    if on_mma and len(on_mma) != len(gemms):
        warn("no warp specialization (TMA pipeline): the loop mixes wgmma and mma.sync gemms on its staged tiles")
        return None
    if not im2col_tma[1] and any(isinstance(p, O.Im2Col) and small_tile(p, gemms, T) for p in producers):
        warn("no warp specialization (TMA pipeline): the convolution's accumulator is under 64 elements per thread, "
             "where a cp.async pipeline keeps several blocks per SM (tl.enable_tma_im2col_small_tiles takes the "
             "TMA im2col producer anyway)")
        return None
    tma = []
    for p in producers:
        box, why = im2col_plan(p, loop) if isinstance(p, O.Im2Col) else tma_plan(p, wide32=bool(on_mma))
        if box is not None and box[1] and not isinstance(p, O.Im2Col) and math.prod(box[0][:-1]) % 8:
            # TMA swizzles by shared address: a box must start on its pattern (8 rows of the swizzle
            # width), and a stage of fewer rows would put the next stage's box off it
            box, why = None, f"its {math.prod(box[0][:-1])} rows are not a multiple of the 8 of a swizzle pattern"
        if box is None:
            what = "T.im2col" if isinstance(p, O.Im2Col) else "T.copy"
            warn(f"no warp specialization (TMA pipeline): {what} {p.src.buffer.name} -> {p.dst.buffer.name}: {why}")
            return None
        tma.append(box)
    hoisted = hoist_staged_decls(stmts, loops[0], tiles) if guard is None else (stmts, loops[0], body)
    if hoisted is None:
        warn("no warp specialization (TMA pipeline): a tile the producer loads is declared inside a nested "
             "statement of the T.Pipelined body; the loop runs as a cp.async pipeline")
        return None
    stmts, li, body = hoisted
    loops, loop = [li], stmts[li]
    persistent = num_sms is not None and len(k.block_vars) <= 3
    stages = max(1, loop.annotation("num_stages", 0) or 1)
    stages = ring_depth(stages, producers, gemms, k.body) if deep_ring else stages
    if trip_cap:
        rest = [b for b in body if not any(b is p for p in producers)]
        tiles = const_int(tile_space(k)[0])
        one_tile = not persistent or (tiles is not None and tiles <= num_sms)
        # (stream-K may deal one block k-ranges of several tiles: its rings stay as they are)
        sk = persistent and stream_k and not clusters and stream_k_plan(
            loop, rest, gemms, stmts[:loops[0]], k.block_vars, num_sms, tile_space(k)[0],
            stmts[loops[0] + 1:] if promoted else None, fanin) is not None
        n = trip_bound(k, stmts[:loops[0]], loop) if one_tile and not sk else None
        if n is not None and n < stages:
            stages = max(1, n)
    plan = WSPlan(k, T, stmts, loops[0], stages,
                 [b for b in body if not any(b is p for p in producers)], gemms, [],
                 WSInfo(T, persistent=persistent, mma_sync=bool(on_mma)), num_sms, persistent)
    _stage_tiles(plan, producers, tma)
    if guard is not None:  # the loads of an iteration are conditional: one tile per stage, no extras
        plan.guard = guard
        clusters = stream_k = serpentine = False
    if on_mma:  # (stream-K's partial sums and multicast have run with wgmma accumulators only)
        clusters = stream_k = False
    prefix_lets = [s for s in stmts[:loops[0]] if isinstance(s, S.LetStmt)]
    if any(not swz for _, swz, _ in tma):  # (multicast splits tiles by rows: not a row tile)
        clusters = False
    if persistent and clusters and num_sms >= 2:
        plan.cluster = cluster_plan(k, loop, prefix_lets, plan.pairs)
    if persistent and plan.cluster is None and stream_k:
        plan.sk = stream_k_plan(loop, plan.body, gemms, stmts[:loops[0]], k.block_vars, num_sms, tile_space(k)[0],
                                stmts[loops[0] + 1:] if promoted else None, fanin)
    persistent = plan_prefix_loads(plan)
    plain = persistent and guard is None and plain_reduction(loop, plan.body, gemms, stmts[:loops[0]], k.block_vars) is not None
    # not with clusters (opt-in): that combination has not run on a GPU yet
    plan.serpentine = plain and serpentine and plan.cluster is None
    plan.defer_epilogue = plain and plan.cluster is None
    if plan.sk is not None:
        plan.ki = loop.extent
        plan.stmts[loops[0]] = replace(loop, start=simplify(loop.start + plan.sk.k0), extent=plan.sk.k1 - plan.sk.k0)
        plan.info.workspace = plan.sk.buffers
    if plan.cluster is not None:
        plan.info.cluster = 2
        for i in plan.cluster[1]:
            p, (box, swz, panels), desc = plan.pairs[i]
            if panels % 2:  # each block loads half the rows of every panel
                half = TmaDesc(desc.name, desc.buffer, box[:-2] + (box[-2] // 2, box[-1]), desc.swizzle)
                plan.info.descs[plan.info.descs.index(desc)] = half
                plan.pairs[i] = (p, (box, swz, panels), half)
    plan.pprefix = _producer_prefix(plan)
    if plan.pprefix is None:
        warn("no warp specialization (TMA pipeline): the loop's bounds or tile coordinates read variables "
             "computed before it by code the producer thread cannot repeat (tile ops or non-scalar stores)")
        return None
    return plan


_SCALAR = ("local", "local.var")


def _with_im2col(body: list, producers: list, guard, enabled: bool, warn) -> list | None:
    """The producer's ops with the body's T.im2col tiles added (ws_im2col.py), in body order, or None
    (with a warning) where one cannot be a TMA load: the loop then keeps the cp.async pipeline."""
    why = None
    takes = im2col_producers(body) if guard is None else []
    if not enabled:
        why = "TMA im2col loads are off (tl.disable_tma_im2col)"
    elif len(takes) != len(collect(S.seq(*body), lambda n: isinstance(n, O.Im2Col))):
        why = "a T.im2col is not at the top level of the T.Pipelined body, its tile is written by something " \
              "else, or its block indices are computed in the body"
    if why is not None:
        warn(f"no warp specialization (TMA pipeline): {why}; the loop runs as a cp.async pipeline")
        return None
    mine = producers + takes
    return [b for b in body if any(b is p for p in mine)]


def _sfx(group: int) -> str:
    """Name suffix of barrier group `group`'s full / empty arrays (tl_full, tl_full1, ...)."""
    return str(group) if group else ""


def _barrier_groups(plan: WSPlan) -> list | None:
    """Tiles first read by different statements of the loop body get barriers of their own:
    [(pair indices, first reader, last reader)] in reading order, or None (one full/empty pair).
    Attention's K (read by the scores gemm) and V (read by P @ V, statements later): the scores
    gemm starts once K has landed, V streams in during the softmax, and K's stage goes back to
    the producer right after the scores gemm, so the next K loads during this P @ V even with
    num_stages=1. Not with clusters, stream-K or a guarded body (one barrier per stage there)."""
    if plan.cluster is not None or plan.sk is not None or plan.guard is not None:
        return None
    span = {}
    for i, (p, _, _) in enumerate(plan.pairs):
        at = [j for j, st in enumerate(plan.body) if p.dst.buffer.uid in {b.uid for b in buffers_used(st)}]
        if not at:
            return None
        span[i] = (at[0], at[-1])
    firsts = sorted({f for f, _ in span.values()})
    if len(firsts) < 2:
        return None
    out = []
    for f in firsts:
        members = [i for i, (a, _) in span.items() if a == f]
        out.append((members, f, max(span[i][1] for i in members)))
    return out


def _guarded_copies(body: list, k=None, prefix=(), fragment_guard=False) -> tuple:
    """(guard, body, copies) for a loop body that is one `if cond:` (no else) whose branch starts
    with copies the producer can issue (`if BlockMask[by, bx, k]: T.copy(...); T.gemm(...)`): the
    producer loads only where cond holds, the consumers keep `if cond:` around the rest of the
    branch. (None, body, []) otherwise. cond may read global memory, the loop and block
    variables and scalars computed before the loop, nothing computed in the body; with
    fragment_guard also a fragment a T.copy from global filled before the loop (ws_guard.py: the
    producer reads the global elements)."""
    if len(body) != 1 or not isinstance(body[0], S.IfThenElse) or body[0].else_case is not None:
        return None, body, []
    br = body[0]
    inner = list(br.then_case.stmts) if isinstance(br.then_case, S.SeqStmt) else [br.then_case]
    copies = hoistable_copies(inner)
    tiles = {c.dst.buffer.uid for c in copies}
    if not copies or collect(br.then_case, lambda n: isinstance(n, S.Allocate) and n.buffer.uid in tiles):
        return None, body, []
    cond = br.cond
    if any(ld.buffer.scope not in _SCALAR + ("global",) for ld in collect(cond, lambda n: isinstance(n, E.BufferLoad))):
        cond = producer_guard(cond, k, list(prefix)) if fragment_guard and k is not None else None
        if cond is None:
            return None, body, []
    rest = [b for b in inner if not any(b is c for c in copies)]
    return cond, [replace(br, then_case=S.seq(*rest))], copies


def _producer_prefix(plan: WSPlan) -> list | None:
    """The statements before the loop that compute the T.alloc_var values its bounds and the
    producer's tile coordinates read (`for i in T.serial(4): lo = T.min(lo, Starts[bx * 4 + i])`),
    with their allocations, in order: the producer thread runs them too. None when one of
    them is more than scalar code (a tile op, a store to a tile, a read of shared memory)."""
    loop = plan.loop
    exprs = [loop.start, loop.extent] + [c for p, _, _ in plan.pairs
                                         for c in (im2col_exprs(p) if isinstance(p, O.Im2Col) else p.src.starts)]
    if plan.guard is not None:
        exprs.append(plan.guard)

    def reads(node) -> set:
        return {ld.buffer.uid for ld in collect(node, lambda n: isinstance(n, E.BufferLoad))
                if ld.buffer.scope in _SCALAR}

    need = set().union(*(reads(e) for e in exprs))
    out = []
    for st in reversed(plan.stmts[:plan.li]):
        if not need:
            break
        if isinstance(st, S.LetStmt):
            continue
        if isinstance(st, S.Allocate):
            if st.buffer.uid in need:
                out.append(st)
                need |= reads(st)
            continue
        stores = collect(st, lambda n: isinstance(n, S.BufferStore))
        if not any(x.buffer.uid in need for x in stores):
            continue
        loads = collect(st, lambda n: isinstance(n, E.BufferLoad))
        if collect(st, lambda n: isinstance(n, S.TileOp) or (isinstance(n, S.For) and n.kind == "parallel")) \
                or any(x.buffer.scope not in _SCALAR for x in stores) \
                or any(x.buffer.scope not in _SCALAR + ("global",) for x in loads):
            return None
        out.append(st)
        need |= reads(st) | {x.buffer.uid for x in stores}
    return list(reversed(out))


RING_BYTES = 128 * 1024  # bytes of loads the ring holds where shared memory allows


def ring_depth(user: int, producers: list, gemms: list, body: S.Stmt) -> int:
    """Stages of the producer's ring for `T.Pipelined(num_stages=user)`.

    The user's num_stages = n means n - 1 loads in flight beside the stage being computed. A
    consumer that keeps one wgmma batch in flight (`_consumer_loop`'s overlap) holds two stages,
    so the ring needs n + 1 for the same lookahead. Small stages (128x128x32 fp16: 16 KB) are
    latency-bound -- a TMA load from L2 takes about a microsecond, in which one SM's wgmmas
    consume ~100 KB -- so the ring is deepened further to RING_BYTES where shared memory allows
    (beside the other shared tiles and a whole-tile staging buffer for a TMA-store epilogue).
    Deeper buffering changes no result, only how far the producer runs ahead; a ring that does
    not fit keeps the user's count. num_stages=1 or 0 (no lookahead asked for) gets at least a
    second stage where it fits, so iteration i + 1's loads land during iteration i's compute, and
    small stages the same RING_BYTES (split-K GEMM at 128x128x32 with num_stages=0: 8 stages): a
    warp-specialized block holds its SM alone (setmaxnreg sizes it to the whole register file), so
    the extra shared memory costs no occupancy (FlashAttention at 128x128 with 128 threads asks for 1)."""
    if user < 1:
        return user
    stage_bytes = sum(p.dst.buffer.numel() * p.dst.buffer.dtype.bytes for p in producers)
    staged = {p.dst.buffer.uid for p in producers}
    others = sum(a.buffer.numel() * a.buffer.dtype.bytes for a in collect(body, lambda n: isinstance(n, S.Allocate))
                 if a.buffer.scope in ("shared", "shared.dyn") and a.buffer.uid not in staged)
    epilogue = max((g.C.buffer.numel() * 2 for g in gemms if g.C.buffer.scope == "fragment"), default=0)
    free = SMEM_MAX - 2048 - others - epilogue
    overlap = len(gemms) == 1 and all(g.wg_wait == 0 for g in gemms)
    want = max(user + 1 if overlap or user == 1 else user, -(-RING_BYTES // stage_bytes))
    return max(user, min(want, free // stage_bytes))


def trip_bound(k: S.KernelLaunch, prefix: list, loop: S.For) -> int | None:
    """Most iterations `loop` runs in any block, or None where that cannot be bounded: the
    prefix's lets substituted into its extent, block variables over the grid, min / max split
    (Ranges.upper_split). A sliding-window backward's `range(by * 4, T.min(by * 4 + 8, 16))`
    runs at most 8 times; a ring of more stages than that holds stages no block ever fills
    (attention_sink's gqa bwd: 12 stages, 143 KB of shared memory and 97 mbarriers per block,
    where 8 stages and 65 mbarriers hold every load)."""
    values = {}
    for st in prefix:
        if isinstance(st, S.LetStmt) and st.var.dtype.is_int:
            values[st.var] = substitute(st.value, values) if values else st.value
    r = Ranges(minmax_calls=True)
    r.kernel(k)
    ext = substitute(E.as_expr(loop.extent), values) if values else E.as_expr(loop.extent)
    n = r.upper_split(ext)
    return None if n is None or n < 0 else n


def _stage_tiles(plan: WSPlan, producers: list, tma: list) -> None:
    """Multi-stage storage, a movable view and a tensor map for each tile the producer loads."""
    info = plan.info
    for p, (box, swz, panels) in zip(producers, tma):
        x = p.dst.buffer
        if len(x.shape) == 1:  # a row tile (ws_loads._row_plan): the stages side by side
            st = Buffer(x.name + "_stages", (plan.stages * const_int(x.shape[0]),), x.dtype, "shared.dyn")
        else:
            st = Buffer(x.name + "_stages", (plan.stages * const_int(x.shape[0]), x.shape[1]), x.dtype, "shared.dyn")
        rv = Buffer(x.name, x.shape, x.dtype, "shared.dyn")
        rv.view_of = st
        plan.storages[x.uid], plan.views[x.uid] = st, rv
        if swz:  # (a row tile keeps the plain layout TMA writes without a swizzle)
            # the storage too: plan_smem then starts it on a 1024-byte boundary, where every
            # swizzle pattern starts, however small it is
            (info.panels if panels > 1 else info.swizzled).update((rv.uid, st.uid))
        plan.tx_bytes += x.numel() * x.dtype.bytes
        name = f"tmap_{len(info.descs)}"
        info.descs.append(im2col_desc(name, p, box, swz) if isinstance(p, O.Im2Col)
                          else TmaDesc(name, p.src.buffer, box, swz))
        plan.pairs.append((p, (box, swz, panels), info.descs[-1]))


def _producer_loop(plan: WSPlan) -> S.For:
    """One thread: per iteration, wait until the stage is free, arm full[stage], issue the loads."""
    loop, stages, stage, it, cl = plan.loop, plan.stages, plan.stage, plan.it, plan.cluster
    kmap = {}
    if plan.serpentine:  # iteration ko loads the k-slice of start + extent - 1 - (ko - start) on odd tiles
        back = E.compare("!=", E.BufferLoad(plan.pdir, (E.as_expr(0),), dt.int32), 0)
        kmap = {loop.var: E.select(back, simplify(2 * loop.start + loop.extent - 1 - loop.var), loop.var)}
    groups = plan.groups or [(list(range(len(plan.pairs))), None, None)]
    group_of = {i: g for g, (members, _, _) in enumerate(groups) for i in members}
    loads = {}
    for i, (p, (box, swz, panels), desc) in enumerate(plan.pairs):
        full = f"tl_full{_sfx(group_of[i])}"
        x = p.dst.buffer
        st = plan.storages[x.uid]
        if isinstance(p, O.Im2Col):
            loads[i] = im2col_loads(p, desc, f"{full}[{{0}}]", st.name, stage, panels, kmap)
            continue
        rows = const_int(x.shape[0]) if len(x.shape) == 2 else 1
        coords = [simplify(substitute(c, kmap)) for c in reversed(p.src.starts)]  # innermost first
        pw = panel_width(x.dtype)
        width = pw if panels > 1 else const_int(x.shape[-1])
        if cl is None or i not in cl[1]:
            boxes = [(E.as_expr(q), E.as_expr(0)) for q in range(panels)]  # (panel, first row)
        elif panels % 2 == 0:  # block r of the pair loads panels r, r + 2, ...
            boxes = [(2 * q + plan.rank, E.as_expr(0)) for q in range(panels // 2)]
        else:
            boxes = [(E.as_expr(q), plan.rank * (rows // 2)) for q in range(panels)]
        call = "tl::tma_load" if cl is None or i not in cl[1] else "tl::tma_load_multicast"
        mask = "" if call == "tl::tma_load" else ", (uint16_t)3"
        for q, r in boxes:
            c = list(coords)
            c[0] = simplify(c[0] + q * pw)
            c[1] = simplify(c[1] + r)
            offset = simplify(q * (rows * pw) + r * width)
            loads.setdefault(i, []).append(
                Raw(f"{call}(&{desc.name}, &{full}[{{0}}], {st.name} + ({{0}}) * {x.numel()} + {{1}}"
                    + mask + "".join(f", {{{j + 2}}}" for j in range(len(c))) + ");", (stage, offset) + tuple(c)))
    issues = []
    for g, (members, _, _) in enumerate(groups):  # in the order the consumers first read them
        nbytes = sum(plan.pairs[i][0].dst.buffer.numel() * plan.pairs[i][0].dst.buffer.dtype.bytes for i in members)
        issue = S.seq(Raw(f"tl::mbarrier_arrive_expect_tx(&tl_full{_sfx(g)}[{{0}}], {nbytes});", (stage,)),
                      *[ld for i in members for ld in loads[i]])
        if plan.guard is not None:  # a skipped iteration still completes its stage's phase, with no bytes
            issue = S.IfThenElse(plan.guard, issue, Raw("tl::mbarrier_arrive(&tl_full[{0}]);", (stage,)))
        issues += [Raw(f"if ({{0}} >= {stages}) tl::mbarrier_wait(&tl_empty{_sfx(g)}[{{1}}], "
                       f"(({{0}} / {stages}) - 1) & 1);", (it, stage)), issue]
    prod_body = S.seq(
        S.LetStmt(it, plan.it_value(plan.pbase)),
        S.LetStmt(stage, it % stages),
        *issues)
    return S.For(loop.var, loop.start, loop.extent, "serial", prod_body, (), span=loop.span)


def _consumer_loop(plan: WSPlan) -> S.Stmt:
    """The user's threads: per iteration, wait for full[stage], point the tile names at it,
    compute, release empty. With one gemm on the staged tiles and >= 2 stages its wgmma batch
    stays in flight across iterations (wg_wait=1): iteration it releases the stage of it - 1,
    and the tile's last stage is released after the final wgmma wait."""
    loop, stages, stage, it, ko = plan.loop, plan.stages, plan.stage, plan.it, plan.loop.var
    chain = chain_plan(plan) if plan.chain and not plan.info.mma_sync else None
    if chain is not None:
        return overlapped_consumer(plan, chain)

    overlap = stages >= 2 and len(plan.gemms) == 1 and all(g.wg_wait == 0 for g in plan.gemms) \
        and not _batch_must_finish(plan) and plan.groups is None and not plan.info.mma_sync
    pp = None if plan.pingpong is False else \
        pingpong_plan(plan, AUTO_MIN_COLUMNS if plan.pingpong is None else 0)
    if pp is not None:
        plan.info.pingpong = pp.groups
        if plan.skip_dead_rows:
            pp = replace(pp, dead=dead_rows(plan, pp))
            plan.info.dead_rows = pp.dead
        return pingpong_consumer(plan, pp)
    if plan.groups is not None:  # each group waited for before its first reader, released after its last
        rb = ReplaceBuffers(plan.views)
        stmts = []
        for i, st in enumerate(plan.body):
            stmts += [plan.wait_full(it, stage, g) for g, (_, first, _) in enumerate(plan.groups) if first == i]
            stmts.append(rb.visit(st))
            stmts += [plan.release(stage, g) for g, (_, _, last) in enumerate(plan.groups) if last == i]
        cons_body = S.seq(S.LetStmt(it, plan.it_value(plan.cbase)), S.LetStmt(stage, it % stages),
                          *[plan.point_view(x, stage) for x in plan.views], *stmts)
        return S.For(ko, loop.start, loop.extent, "serial", cons_body, (), span=loop.span)
    body_ops = [replace(b, wg_wait=1) if overlap and isinstance(b, O.Gemm) and b in plan.gemms else b
                for b in plan.body]
    rest = ReplaceBuffers(plan.views).visit(S.seq(*body_ops))
    if overlap:
        release = Raw(f"if ({{0}} > {{1}}) {{{{ {plan.arrive(f'({{2}} - 1) % {stages}')} }}}}", (ko, loop.start, it))
    else:
        release = plan.release(stage)
    cons_body = S.seq(
        S.LetStmt(it, plan.it_value(plan.cbase)),
        S.LetStmt(stage, it % stages),
        plan.wait_full(it, stage),
        *[plan.point_view(x, stage) for x in plan.views],
        rest,
        release)
    consumer_loop = S.For(ko, loop.start, loop.extent, "serial", cons_body, (), span=loop.span)
    if not overlap:
        return consumer_loop
    last = loop.extent - 1
    if plan.persistent:
        last = E.BufferLoad(plan.cbase, (E.as_expr(0),), dt.int32) + last
    return S.seq(consumer_loop, Raw("tl::warpgroup_wait<0>();"),
                 Raw(f"if ({{0}} > 0) {{{{ {plan.arrive(f'({{1}}) % {stages}')} }}}}", (loop.extent, simplify(last))))


def _batch_must_finish(plan: WSPlan) -> bool:
    """An iteration needs its own wgmma batch complete (batches cannot stay in flight) when a gemm
    clears its accumulator, or when another statement of the loop body touches what a gemm uses
    outside the staged tiles: its C (or a T.reshape of it), or an A / B tile the consumers write
    (e.g. one they dequantize into), which the next iteration's writes would race."""
    if any(g.clear_accum for g in plan.gemms) or plan.guard is not None:
        return True  # (a guarded gemm may not run: its iteration cannot wait for the last batch)
    used = {g.C.buffer.uid for g in plan.gemms}
    used |= {b.uid for g in plan.gemms for b in (g.A.buffer, g.B.buffer)
             if b.scope in ("shared", "shared.dyn") and b.uid not in plan.views}
    for st in plan.body:
        if isinstance(st, O.Gemm) and st in plan.gemms:
            continue
        if any(getattr(x, "view_base", x).uid in used for x in buffers_used(st)):
            return True
    return False


def _rewrite(plan: WSPlan, producer: S.Stmt, consumer_loop: S.Stmt, warn) -> S.KernelLaunch:
    """The kernel: barriers and stage storage, then `if (tid >= T) producer else consumers`,
    the statements before the loop going to the consumers (LetStmts to both), those after it
    (the epilogue, through TMA stores where `_tma_store_epilogue` applies) to the consumers."""
    k, T, info, loop, storages, views = plan.k, plan.T, plan.info, plan.loop, plan.storages, plan.views
    prefix, suffix = plan.stmts[:plan.li], plan.stmts[plan.li + 1:]
    staged = sum(st.numel() * st.dtype.bytes for st in storages.values())
    others = sum(a.buffer.numel() * a.buffer.dtype.bytes for a in collect(k.body, lambda n: isinstance(n, S.Allocate))
                 if a.buffer.scope in ("shared", "shared.dyn") and a.buffer.uid not in storages)
    defer = plan.persistent and plan.defer_epilogue and defer_fits(plan)
    pre_issue, prefix, allocs, pre_wait = take_prefix_loads(plan.pre, prefix, info)
    free, rows = SMEM_MAX - 2048 - staged - others, 64 if defer else 256
    wg = T // 128 if plan.wg_epilogue and not defer and plan.sk is None and T % 128 == 0 \
        and not plan.info.mma_sync else 0
    wg_bar = None
    if wg >= 2:
        try:
            wg_bar = info.barriers.wg_epilogue(wg)
        except LoweringError:  # the program's own named barriers leave no room: the shared epilogue
            wg = 0
    folded = fold_staged_store(prefix, suffix, plan.gemms) if plan.fold_staging else None  # TMA's tile instead
    epi, fold_saved = None, 0
    if folded is not None:
        o_s = next(a.buffer for a in prefix if isinstance(a, S.Allocate) and not any(a is b for b in folded[0]))
        epi = tma_store_epilogue(k, folded[1], plan.gemms, free + o_s.numel() * o_s.dtype.bytes, len(info.descs),
                                 lambda m: None, rows, same=(folded[2],), wg=wg,
                                 wg_bar=wg_bar)
        if epi is not None:
            prefix = folded[0]
            fold_saved = o_s.numel() * o_s.dtype.bytes
    if epi is None:
        epi = tma_store_epilogue(k, suffix, plan.gemms, free, len(info.descs), warn, rows, wg=wg, wg_bar=wg_bar)
    store_wait, deferred = [], None
    if epi is not None:
        suffix, c_s, desc, where = epi
        info.descs.append(desc)
        info.panels.add(c_s.uid)
        store_wait = [Raw("if (tid == 0) tl::tma_store_wait_all();")]  # global writes done before exit
        if where.wg:  # every warpgroup's issuing thread waits for its own stores
            store_wait = [Raw("if (tid % 128 == 0) tl::tma_store_wait_all();")]
            info.wg_epilogue = where.op.src.buffer
        if defer:
            suffix, consumer_loop, hold_allocs, flush = defer_epilogue(plan, where, consumer_loop)
            info.deferred_epilogue = True
            deferred = (hold_allocs, flush)
            store_wait = [flush] + store_wait
    tp = None
    if plan.persistent and plan.tile_pre:  # where the second buffer fits beside the rest
        used = staged + others - fold_saved + (epi[1].numel() * epi[1].dtype.bytes if epi is not None else 0)
        if used + extra_bytes(plan.tile_pre) <= SMEM_MAX - 2048:
            tp = take_tile_prefix(plan.tile_pre, prefix, info, T)
            prefix, allocs = tp.prefix, allocs + tp.decls
            consumer_loop = ReplaceBuffers(tp.views).visit(consumer_loop)
    lets = [s for s in prefix if isinstance(s, S.LetStmt)]
    cons_prefix = []
    for s in prefix:
        if isinstance(s, S.LetStmt):
            continue
        if isinstance(s, S.Allocate) and s.buffer.uid in storages:
            allocs += [S.Allocate(storages[s.buffer.uid]), S.Allocate(views[s.buffer.uid])]
            continue
        cons_prefix.append(s)
    if epi is not None:
        allocs.append(S.Allocate(epi[1]))
    # empty[s] counts every consumer warp of every block that reads the stage
    sync = "tl::cluster_sync();" if plan.cluster is not None else "tl::sync_all_threads();"
    sfxs = [_sfx(g) for g in range(len(plan.groups or [None]))]
    init = Raw("if (tid == 0) {{ "
               + " ".join(f"tl::mbarrier_init(&tl_full{x}[{i}], 1); "
                          f"tl::mbarrier_init(&tl_empty{x}[{i}], {info.cluster * T // 32});"
                          for x in sfxs for i in range(plan.stages))
               + (" tl::mbarrier_init(&tl_pre[0], 1);" if plan.pre else "")
               + (" " + tp.init if tp is not None else "")
               + " tl::fence_barrier_init(); }} " + sync)
    if plan.rebalance_regs:
        regs_c = consumer_registers(T, producer_regs=plan.producer_regs)
        info.consumer_regs, info.producer_regs = regs_c, plan.producer_regs
        setmaxnreg = Raw(f"tl::setmaxnreg_inc<{regs_c}>();")
        dec = Raw(f"tl::setmaxnreg_dec<{plan.producer_regs}>();")
    else:  # ptxas refuses a decrease to more registers than the whole program uses
        setmaxnreg = dec = S.seq()
    turns = [turn_head(info.pingpong, info.barriers.turns(info.pingpong)),
             turn_tail(info.pingpong, info.barriers.turns(info.pingpong))] if info.pingpong else []
    if plan.persistent:
        if plan.sk is not None:
            tiles, coords = tile_space(k)
            grid, tile_loop = stream_k_units(plan.sk, tiles, plan.num_sms, plan.ki, list(k.block_vars), coords)
            grid = grid + tuple(E.as_expr(1) for _ in k.grid[1:])
            suffix = [stream_k_finish(plan.sk, plan.ki, suffix)]
            store_wait = [plan.sk.publish()] + store_wait
        else:
            grid, tile_loop = persistent_tiles(k, plan.num_sms, plan.cluster[0] if plan.cluster else None, plan.rank,
                                               plan.snake, plan.info.tile_order or None)

        def advance(base):
            ld = E.BufferLoad(base, (E.as_expr(0),), dt.int32)
            return S.BufferStore(base, (E.as_expr(0),), ld + loop.extent)

        per_tile = [advance(plan.pbase)]
        head = [S.Allocate(plan.pbase, (E.as_expr(0),))]
        if plan.serpentine:
            back = E.BufferLoad(plan.pdir, (E.as_expr(0),), dt.int32)
            per_tile.append(S.BufferStore(plan.pdir, (E.as_expr(0),), 1 - back))
            head.append(S.Allocate(plan.pdir, (E.as_expr(0),)))
        tp_p, tp_t = (tp.producer_head, tp.producer_tile) if tp is not None else ([], [])
        producer = S.seq(*head, *tp_p, tile_loop(S.seq(*lets, *plan.pprefix, *tp_t, producer, *per_tile)))
        sk_vars = [S.Allocate(plan.sk.pending, (E.as_expr(0),))] if plan.sk is not None else []
        if tp is not None:
            sk_vars += tp.consumer_head
        unit = S.seq(*lets, *cons_prefix, *(tp.consumer_wait if tp is not None else []), consumer_loop,
                     advance(plan.cbase), *suffix, *(tp.consumer_tail if tp is not None else []))
        if plan.timeline is not None:
            n = Buffer("tl_timeline_n", (1,), dt.int32, "local.var")
            sk_vars.append(S.Allocate(n, (E.as_expr(0),)))
            unit = _timed(unit, plan, n)
        if deferred is not None:
            sk_vars += deferred[0]
        consumer_branch = S.seq(setmaxnreg, S.Allocate(plan.cbase, (E.as_expr(0),)), *sk_vars, *turns[:1],
                                tile_loop(unit), *turns[1:], *store_wait)
        lets, k = [], replace(k, grid=grid)
    else:
        consumer_branch = S.seq(setmaxnreg, *turns[:1], *cons_prefix, *pre_wait, consumer_loop, *suffix, *turns[1:],
                                *store_wait)
        producer = S.seq(*pre_issue, *plan.pprefix, producer)
    producer_branch = S.seq(dec,
                            S.IfThenElse(E.binop("==", E.Var("tid", dt.int32), T), producer))
    # a block of a cluster leaves only once its partner has stopped writing into its shared memory
    fini = [Raw("tl::cluster_sync();")] if plan.cluster is not None else []
    bars = [S.Allocate(Buffer(f"tl_{kind}{x}", (plan.stages,), dt.uint64, "shared.dyn"))
            for x in sfxs for kind in ("full", "empty")]
    new_body = S.seq(*bars, *allocs, *lets, init,
                     WSSplit(T, producer_branch, consumer_branch), *fini)
    return replace(k, body=new_body)


SMEM_MAX = 232448  # bytes of dynamic shared memory one block may use on sm_90
# tl.debug_timeline: int64 [block, unit, 4] = globaltimer ns at the unit's start, at the end of
# its k-loop (accumulator complete) and at its end (epilogue done), and the tile's linear index
# in the unit's block variables (bx + gx * (by + gy * bz)); units past TIMELINE_UNITS are not kept.
TIMELINE = "tl_timeline"
TIMELINE_UNITS = 64


def _timed(unit: S.Stmt, plan: WSPlan, n: Buffer) -> S.Stmt:
    """unit with consumer thread 0's timestamps around it and after its k-loop."""
    k = plan.k
    cnt = E.BufferLoad(n, (E.as_expr(0),), dt.int32)
    tile = E.as_expr(0)
    for v, g in reversed(list(zip(k.block_vars, k.grid))):
        tile = tile * E.as_expr(g) + v
    slot = f"tl_timeline[((int64_t)blockIdx.x * {TIMELINE_UNITS} + {{0}}) * 4 + {{1}}]"

    def rec(i, value="tl::globaltimer()"):
        return Raw(f"if (tid == 0 && {{0}} < {TIMELINE_UNITS}) {slot.replace('{1}', str(i))} = {value};", (cnt,))

    stmts = list(unit.stmts) if isinstance(unit, S.SeqStmt) else [unit]
    at = next(i for i, st in enumerate(stmts) if isinstance(st, S.For) and st.var is plan.loop.var)
    while at + 1 < len(stmts) and isinstance(stmts[at + 1], Raw) and \
            ("warpgroup_wait" in stmts[at + 1].fmt or "tl_empty" in stmts[at + 1].fmt):
        at += 1  # the final wgmma wait and stage release belong to the k-loop
    tile_rec = Raw(f"if (tid == 0 && {{0}} < {TIMELINE_UNITS}) {slot.replace('{1}', '3')} = {{1}};", (cnt, tile))
    return S.seq(rec(0), tile_rec, *stmts[:at + 1], rec(1), *stmts[at + 1:], rec(2),
                 S.BufferStore(n, (E.as_expr(0),), cnt + 1))


@dataclass(frozen=True)
class WSSplit(S.Stmt):
    """`if (tid >= consumers) producer else consumer`; codegen prints it, passes see both branches."""

    consumers: int
    producer: S.Stmt
    consumer: S.Stmt
    span: object = field(default=None, compare=False, repr=False)


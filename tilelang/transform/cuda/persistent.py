"""Persistent tile scheduling for warp-specialized kernels: the tile space, the per-block tile
loop, and the 2-block cluster pairing.

Takes: a KernelLaunch (its grid, block variables and any enabled T.use_swizzle panel).
Gives: `tile_space` -- the number of tiles and the block variables' values for tile t (through
the swizzle panels); `persistent_tiles` -- a 1-d grid of min(tiles, SMs) blocks and a wrapper
running a body once per tile of the block; `cluster_plan` -- the grid axis along which
neighbouring tiles pair up in 2-block clusters and which TMA copies they multicast.

    grid (gx, gy), body(bx, by)        ->   grid (min(gx*gy, sms),)
                                            for j in 0 .. ceil((tiles - cta) / blocks):
                                                t = cta + j * blocks; bx, by = coords(t); body

Tiles of unequal work (a k-loop whose trip count depends on the block variables, as causal
attention's `min(n, bx + 1)`) are dealt in serpentine rounds (`snake=True`): on every odd round
block `cta` takes slot `blocks - 1 - cta`, so a block that drew a short tile in one round draws a
long one in the next. Round robin hands block c the tiles c, c + blocks, ..., whose bx repeat with
period gx / gcd(blocks, gx): at 132 blocks over a 16-tile bx axis, block 3 got bx 3, 7, 11, 15
(10 k-steps on average) and block 0 bx 0, 4, 8, 12 (7): the kernel ran at 0.84 of its mean load.
Rounds are still dealt in tile order, so the tiles in flight are the same as without it (and
share their heads' K/V in L2).

Where every tile's trip count is known at compile time (a static grid, no swizzle panels, a trip
count of block variables and constants), `balanced_order` (opt-in: `tl.enable_persistent_tile_table`)
deals the tiles as a dynamic scheduler would -- each to the block with the least work so far -- in
groups of neighbouring tiles (whole heads), longest first within a group, and the blocks read their
tiles from a `__constant__` table. On paper it evens the blocks out: causal attention B16 H16 S2048
D64 at 192 x 128 tiles (2816 tiles of 2..16 k-steps on 132 blocks, a tile costing its k-steps + 1)
has a mean load of 217 k-steps a block, the most loaded block 231 in serpentine rounds and 219 from
the table. On the H100 (2026-12-06, benchmarks/attention.py, 3 interleaved rounds, same call) it
ran slower: D64 347.0 against 369.3 TFLOP/s in serpentine rounds, B8 H16 S4096 D128 at 128 x 128
508.5 against 521.5 -- the rounds keep a head's tiles in flight together (its K/V read once from
HBM), which the table's mix of heads per block gives up. Hence off by default.
"""
from __future__ import annotations

from ... import dtypes as dt
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, collect, substitute
from ...op import tile_ops as O
from .raster import panel_raster


def cluster_plan(k: S.KernelLaunch, loop: S.For, prefix_lets: list, pairs: list):
    """(axis, shared) for 2-block clusters, or None: blocks 2c and 2c + 1 take neighbouring tiles
    along grid axis `axis`, and each copy pairs[i] for i in `shared` -- one whose tile does not
    depend on that axis -- is loaded half by each block and multicast to both. The axis sharing
    the most bytes wins; it needs an even, static extent and a k-loop both blocks run alike."""
    bvars = list(k.block_vars)
    if len(bvars) < 2:
        return None
    let_vars = {s.var for s in prefix_lets}
    loop_vars = {v for e in (loop.start, loop.extent) for v in collect(E.as_expr(e), lambda n: isinstance(n, E.Var))}
    best = None
    for axis in (0, 1):
        n = const_int(k.grid[axis])
        v = bvars[axis]
        if n is None or n % 2 or v in loop_vars or loop_vars & let_vars:
            continue
        shared, nbytes = [], 0
        for i, (p, (box, _, panels), _) in enumerate(pairs):
            used = set(collect(p.src, lambda n: isinstance(n, E.Var)))
            if v in used or used & let_vars or p.src.buffer.ndim > 3:
                continue
            if panels % 2 and box[-2] % 16:  # halves of rows must keep whole 8-row swizzle atoms
                continue
            shared.append(i)
            nbytes += p.dst.buffer.numel() * p.dst.buffer.dtype.bytes
        if shared and (best is None or nbytes > best[2]):
            best = (axis, shared, nbytes)
    return best[:2] if best else None


def tile_space(k: S.KernelLaunch, axis: int | None = None, rank: E.Var | None = None):
    """(tiles, coords): the number of tiles of the kernel's grid and coords(t), the block
    variables' values for tile t -- through the T.use_swizzle panels when the kernel asks.

    axis: the blocks run as 2-block clusters. The tile grid is walked in pairs of tiles
    neighbouring along `axis` (t counts pairs); tile r of a pair goes to the block of rank r."""
    ext = [E.as_expr(g) for g in k.grid]
    if axis is not None:
        ext[axis] = E.as_expr(const_int(ext[axis]) // 2)
    tiles = ext[0]
    for g in ext[1:]:
        tiles = tiles * g
    swz = [op for op in collect(k.body, lambda n: isinstance(n, O.Swizzle)) if op.enable]
    panel = swz[0].panel_size if swz else None
    if panel and axis == 1:
        panel = max(1, panel // 2)  # rows of pairs
    nvars = len(k.block_vars)

    def coords(t):
        if nvars == 1:
            values = [t]
        else:
            gx, gy = ext[0], ext[1]
            rest, out_z = t, []
            if nvars == 3:
                out_z = [t // (gx * gy)]
                rest = t % (gx * gy)
            values = (list(panel_raster(rest, gx, gy, panel)) if panel else [rest % gx, rest // gx]) + out_z
        if axis is not None:
            values[axis] = values[axis] * 2 + rank
        return [simplify(c) for c in values]

    return simplify(tiles), coords


def uneven_work(loop: S.For, prefix_lets: list, block_vars) -> bool:
    """Whether the trip count of `loop` (directly or through the LetStmts before it) depends on
    a block variable: tiles then differ in work (causal attention's `min(n, bx + 1)` k-steps)."""
    values = {s.var: s.value for s in prefix_lets}
    todo = [E.as_expr(loop.start), E.as_expr(loop.extent)]
    seen = set()
    while todo:
        for v in collect(todo.pop(), lambda n: isinstance(n, E.Var)):
            if v in block_vars:
                return True
            if v in values and v not in seen:
                seen.add(v)
                todo.append(E.as_expr(values[v]))
    return False


def trip_counts(k: S.KernelLaunch, loop: S.For, prefix_lets: list, limit: int = 1 << 16) -> tuple | None:
    """(trips, run): the k-loop's trip count on each tile t (tile_space's numbering, bx fastest)
    and the length of a run of tiles over the grid axes up to the last one the trip count
    depends on (a head, for causal attention: its bx tiles). Only where all are compile-time
    constants and differ: a static grid of at most `limit` tiles without swizzle panels, and a
    trip count of block variables, constants and the lets before the loop. None otherwise."""
    ext = [const_int(E.as_expr(g)) for g in k.grid]
    if any(n is None or n <= 0 for n in ext) or any(op.enable for op in collect(k.body, lambda n: isinstance(n, O.Swizzle))):
        return None
    tiles = 1
    for n in ext:
        tiles *= n
    if tiles > limit:
        return None
    values = {s.var: E.as_expr(s.value) for s in prefix_lets}
    trip = E.as_expr(loop.extent)
    for _ in range(len(values) + 1):  # the lets, innermost first, until none is left
        used = [v for v in collect(trip, lambda n: isinstance(n, E.Var)) if v in values]
        if not used:
            break
        trip = substitute(trip, {v: values[v] for v in used})
    bvars = list(k.block_vars)
    free = set(collect(trip, lambda n: isinstance(n, E.Var)))
    axes = [i for i, v in enumerate(bvars) if v in free]
    if free - set(bvars) or not axes:
        return None
    cache: dict = {}
    out = []
    for t in range(tiles):
        coord, rest = [], t
        for n in ext:
            coord.append(rest % n)
            rest //= n
        key = tuple(coord[i] for i in axes)
        if key not in cache:
            n = _const_value(substitute(trip, {bvars[i]: E.as_expr(c) for i, c in zip(axes, key)}))
            if n is None:
                return None
            cache[key] = max(n, 0)
        out.append(cache[key])
    if len(set(cache.values())) < 2:
        return None
    run = 1
    for n in ext[:max(axes) + 1]:
        run *= n
    return out, run


def _const_value(e) -> int | None:
    """The integer value of a load-free expression of constants, integer T.min / T.max calls
    (causal trip counts) included; None where it has none."""
    class _Fold(Mutator):
        def visit_Call(self, c):
            c = self.generic(c)
            if c.op in ("min", "max") and len(c.args) == 2:
                a, b = (const_int(simplify(x)) for x in c.args)
                if a is not None and b is not None:
                    return E.as_expr(min(a, b) if c.op == "min" else max(a, b))
            return c

    return const_int(simplify(_Fold().visit(E.as_expr(e))))


def _deal(order: list, trips: list, blocks: int, overhead: int) -> tuple:
    """(per-block tile lists, most loaded block's k-steps): each tile of `order` to the block with
    the least work so far (ties: the lowest block), a tile costing its trips + overhead."""
    import heapq

    heap = [(0, b) for b in range(blocks)]
    lists: list = [[] for _ in range(blocks)]
    for t in order:
        load, b = heapq.heappop(heap)
        lists[b].append(t)
        heapq.heappush(heap, (load + trips[t] + overhead, b))
    return lists, max(load for load, _ in heap)


def _grouped(trips: list, size: int) -> list:
    """The tiles in runs of `size`, the runs in tile order, each run longest first (ties: tile order)."""
    out = []
    for start in range(0, len(trips), size):
        out += sorted(range(start, min(len(trips), start + size)), key=lambda t: -trips[t])
    return out


def _snake_load(trips: list, blocks: int, overhead: int) -> int:
    """The most loaded block's k-steps in serpentine rounds (persistent_tiles' snake)."""
    loads = [0] * blocks
    for t, n in enumerate(trips):
        r, slot = divmod(t, blocks)
        loads[slot if r % 2 == 0 else blocks - 1 - slot] += n + overhead
    return max(loads)


# group sizes tried, in heads: the smallest group whose schedule is within 0.5 % of the best wins
# (the fewer heads in flight, the more of their K/V L2 holds)
_GROUPS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
TABLE_LIMIT = 16000  # entries of the __constant__ table (64 KB of constant memory in all)


def balanced_order(k: S.KernelLaunch, loop: S.For, prefix_lets: list, num_sms: int, overhead: int = 1):
    """The `__constant__` tile table of a persistent kernel whose tiles differ in work, or None
    (see the module docstring): blocks + 1 offsets into the table, then each block's tiles in
    turn (tile_space numbering), block b's from table[table[b]] to table[table[b + 1] - 1]. None
    where the trip counts are not all known at compile time, the table would pass TABLE_LIMIT
    entries, or it is no better than serpentine rounds."""
    found = trip_counts(k, loop, prefix_lets)
    if found is None:
        return None
    trips, run = found
    tiles = len(trips)
    blocks = min(tiles, num_sms)
    if tiles + blocks + 1 > TABLE_LIMIT or blocks < 2:
        return None
    tried = []
    for g in _GROUPS:
        lists, load = _deal(_grouped(trips, run * g), trips, blocks, overhead)
        tried.append((lists, load))
        if run * g >= tiles:
            break
    best = min(load for _, load in tried)
    lists, load = next(c for c in tried if c[1] * 1000 <= best * 1005)
    if load >= _snake_load(trips, blocks, overhead):
        return None
    table, at = [], blocks + 1
    for b in range(blocks):
        table.append(at)
        at += len(lists[b])
    table.append(at)
    for b in range(blocks):
        table += lists[b]
    assert sorted(table[blocks + 1:]) == list(range(tiles)), "the tile table must hold every tile once"
    return tuple(table)


def persistent_tiles(k: S.KernelLaunch, num_sms: int, axis: int | None = None, rank: E.Var | None = None,
                     snake: bool = False, order: tuple | None = None):
    """(new grid, wrap) for a persistent kernel: min(tiles, num_sms) blocks on a 1-d grid, and
    `wrap(body)` runs body once per tile of the block -- tiles cta, cta + blocks, ... -- with the
    block variables rebound to the tile (see `tile_space`). On the 1-d grid the codegen's block
    variables are (blockIdx.x, 0, 0), so bx is the block. axis: 2-block clusters (`tile_space`).
    snake: serpentine rounds -- on odd rounds j the block takes tile j * blocks + blocks - 1 - cta
    (for tiles of unequal work, see the module docstring); every tile still runs exactly once."""
    size = 1 if axis is None else 2
    tiles, coords = tile_space(k, axis, rank)
    blocks = simplify(E.binop("min", tiles, num_sms // size))  # clusters
    grid = (simplify(blocks * size),) + tuple(E.as_expr(1) for _ in k.grid[1:])
    cta = E.Var("tl_cta", dt.int32)
    j = E.Var("tl_tile_iter", dt.int32)
    t = E.Var("tl_tile", dt.int32)
    bvars = list(k.block_vars)

    def wrap(body):
        if order is not None:  # balanced_order's table: block cta's tiles are table[table[cta] .. table[cta + 1])
            nt = const_int(tiles)
            lo = E.Call("tl_tile_order", (cta,), dt.int32)
            count = E.Call("tl_tile_order", (cta + 1,), dt.int32) - lo
            # clamped to the tile range (a no-op on the table's values) so the range analysis bounds the
            # block variables as it does without the table and the loads keep their dropped guards
            first = E.binop("min", E.binop("max", E.Call("tl_tile_order", (lo + j,), dt.int32), E.as_expr(0)),
                            E.as_expr(nt - 1))
        elif snake:
            # rounds 0 .. full - 1 are whole; round `full` has `rest` tiles, slots 0 .. rest - 1,
            # and the block's slot in it is cta, or blocks - 1 - cta when `full` is odd
            full, rest = simplify(tiles // blocks), simplify(tiles % blocks)
            # (selects, not arithmetic on j % 2: the range analysis bounds both arms, so the
            # tile and its block variables keep their ranges and the loads their dropped guards)
            last = E.select(E.compare("==", simplify(full % 2), 1), blocks - 1 - cta, cta)
            count = simplify(E.select(E.compare("<", last, rest), full + 1, full))
            slot = E.select(E.compare("==", j % 2, 1), simplify(blocks - 1 - cta), cta)
            first = simplify(j * blocks + slot)
        else:
            count = simplify((tiles - cta + blocks - 1) // blocks)
            first = cta + j * blocks
        inner = S.seq(S.LetStmt(t, first),
                      *[S.LetStmt(v, x) for v, x in zip(bvars, coords(t))], body)
        head = [S.LetStmt(cta, bvars[0])]
        if axis is not None:
            head = [S.LetStmt(cta, bvars[0] // 2), S.LetStmt(rank, bvars[0] % 2)]
        return S.seq(*head, S.For(j, E.as_expr(0), count, "serial", inner, ()))

    return grid, wrap

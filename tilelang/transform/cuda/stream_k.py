"""Stream-K for the persistent warp-specialized GEMM: the last, partial wave shared by every block.

A persistent kernel with G blocks (one per SM) runs `tiles` output tiles of KI k-iterations each.
Whole tiles leave the last wave partial: at 8192^3 with 128x256 tiles, 2048 tiles are 15.5
waves and the last wave keeps 64 of 132 SMs idle. Here each block runs tiles // G whole tiles (cta,
cta + G, ...), and the R = tiles % G tiles left are cut along k: their R * KI iterations are
split into S equal contiguous ranges, one per block (S = G unless a range would drop below
MIN_ITERS iterations or a tile would be cut into more than MAX_FANIN ranges; never fewer ranges
than tiles; and none when the last wave is at least FULL_WAVE full). A range holds at most the end of one tile
and the start of the next, so each block has at most two stream-K units after its whole tiles,
run start-of-tile first:

    block b: whole tiles ... | start of tile t + 1 (k0 = 0, k1 < KI) -> partial sum to ws[b],
                             |                                         flags[b] = 1
                             | end of tile t (k0 > 0, k1 = KI) -> raise flags[b], wait
                               flags[first .. b - 1], add their ws, reset those flags, run
                               the user's epilogue

Start-of-tile first: every block's stream-K part starts near k = 0 and then jumps by the same
KI - range length, so the blocks read nearly the same k-slices of neighbouring tiles at once,
as whole tiles do (L2 serves them once). Only the block holding a tile's last iterations
finishes it, as its last unit, while the blocks holding the rest ran theirs as their first:
no block waits on a block that waits, and a block waits only on lower-numbered blocks (which
the hardware starts no later), so a grid larger than the SMs free at the moment still finishes.
A partial's flag is raised after the block's next k-loop (its stores drain meanwhile; the
release is then cheap) and before any wait. A block writes at most one partial per launch, so
ws has one slot per block and each flag is raised once and reset by its reader (left zero for
the next launch, also under CUDA graph replay). ws (132 x BM x BN floats: 17 MB for 128x256
tiles) and flags are hidden kernel arguments the launcher allocates per device and stream
(zeroed once).

On the H200, 128x256x64 tiles (traced with globaltimer): at 8192^3 the stream-K part ends 67 us
after its start where a whole tile takes 95 us; a partial costs about 1 us to store and 3.3 us
to add. At 4096^3 (116 of 132 blocks busy in the last wave) the idle blocks lose 12 % of a
46 us tile, 5.5 us, about what a store and an add cost: FULL_WAVE keeps such waves whole (an
estimate: only a first, slower version of stream-K was timed there, 8 % slower than whole tiles).

Applies to a kernel whose pipelined loop body is one T.gemm into an accumulator cleared before
the loop (T.clear), with a k-extent that does not depend on the tile; else the kernel keeps
whole tiles per block. Also to a promoted k-reduction (`promoted_reduction`, fp8's two-level
accumulation): the gemm's accumulator is added into a second one and cleared every few k-steps.
There a partial is the sum of both (the unpromoted rest folded in before it is stored), and the
unit ending a tile, which adds the partials, folds its own rest as the user's code after the loop
does (`tl.disable_stream_k_promoted` keeps such kernels on whole tiles):

    T.clear(loc); T.clear(acc)
    for k in T.Pipelined(KI):                       unit [k0, k1): the same loop over k0 .. k1 - 1
        T.gemm(A_s, B_s, loc)                         (promotions where (k + 1) % 2 == 0, as before)
        if (k + 1) % 2 == 0:                        k1 < KI: acc += loc; acc -> ws[block]
            acc += loc; T.clear(loc)                k1 = KI: acc += ws[first .. block - 1];
    (if KI % 2: acc += loc)  epilogue(acc)                   (if KI % 2: acc += loc); epilogue(acc)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import dtypes as dt
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import buffers_used, collect
from ...op import tile_ops as O
from .lower_tile_ops import AccStash, Raw

MIN_ITERS = 8  # k-iterations per stream-K range at the least: shorter ones cost more in partials than they save
FULL_WAVE = (3, 4)  # a last wave at least 3/4 full keeps whole tiles
# Ranges a tile is cut into at the most: the block ending a tile adds the other ranges' partials one
# after another. The seed GEMM at 8192^3 (128x128x32, 4 tiles left over 132 blocks, 256 k-steps a
# tile) cut each tile 32 ways (8 k-steps a range): the ending blocks then spent up to 46 us adding
# 31 partials (1.45 us each) after a 3-us k-loop, about what a whole tile takes (H100,
# tl.debug_timeline). A range of n k-steps costs n * t_step + (F - 1) * t_add with F = KI / n,
# least at F = sqrt(KI * t_step / t_add): 6 there (t_step 0.2 us).
MAX_FANIN = 6


@dataclass
class StreamK:
    """The accumulator cut along k and the hidden buffers; the unit variables `wrap` binds."""

    acc: Buffer
    ws: Buffer  # (blocks, BM * BN) of the accumulator's dtype: block b's partial sum, in AccStash's order
    flags: Buffer  # (blocks,) int32: 1 while ws[b] waits to be added
    fanin: int = MAX_FANIN  # ranges a tile is cut into at the most (0: no limit but MIN_ITERS)
    fold: S.Stmt | None = None  # acc += the gemm's accumulator, before a partial is stored (promoted)
    k0: E.Var = field(default_factory=lambda: E.Var("tl_k0", dt.int32))  # the unit's k-iterations, [k0, k1)
    k1: E.Var = field(default_factory=lambda: E.Var("tl_k1", dt.int32))
    first: E.Var = field(default_factory=lambda: E.Var("tl_sk_first", dt.int32))  # first block holding this tile
    cta: E.Var = field(default_factory=lambda: E.Var("tl_cta", dt.int32))
    # 1 from a partial's stores until its flag is raised
    pending: Buffer = field(default_factory=lambda: Buffer("tl_sk_pending", (1,), dt.int32, "local.var"))

    @property
    def buffers(self) -> tuple:
        return (self.ws, self.flags)

    def publish(self) -> S.Stmt:
        """Raise the block's flag if its partial is stored and not yet announced. Deferred to the
        end of the next unit's k-loop (or of the block's units): the stores drain meanwhile, and
        every partial is still announced before its block waits on any flag."""
        pend = E.BufferLoad(self.pending, (E.as_expr(0),), dt.int32)
        flag = E.call("address_of", E.BufferLoad(self.flags, (self.cta,), dt.int32), dtype=dt.uint64)
        return S.IfThenElse(E.compare("!=", pend, 0), S.seq(
            # the consumers' stores precede thread 0's release (gpu scope) through the barrier
            Raw("__syncthreads(); if (tid == 0) tl::flag_release({0}, 1);", (flag,)),
            S.BufferStore(self.pending, (E.as_expr(0),), E.as_expr(0))))


def ranges(tiles: int, ki: int, num_sms: int, fanin: int = MAX_FANIN) -> int:
    """How many stream-K ranges the tiles % num_sms tiles left after whole waves are cut into
    (as many as tiles: whole tiles, no stream-K). A last wave at least FULL_WAVE full keeps whole
    tiles: at 4096^3 (116 of 132) the partials would cost about what the idle blocks lose."""
    rem = tiles % num_sms
    if rem * FULL_WAVE[1] >= num_sms * FULL_WAVE[0]:
        return rem
    cap = min(num_sms, rem * fanin) if fanin > 0 else num_sms
    return max(rem, min(cap, rem * ki // MIN_ITERS))


def plain_reduction(loop: S.For, body: list, gemms: list, prefix: list, block_vars) -> Buffer | None:
    """The accumulator when the pipelined loop is a plain k-reduction -- its body one T.gemm (the
    copies the producer takes over aside) into a fragment cleared before the loop (T.clear), with
    a k-extent every tile shares -- else None. Such a loop gives the same sums for any order and
    any split of its k-iterations: stream-K cuts them, `warp_specialize` reverses them."""
    if len(gemms) != 1 or len(body) != 1 or body[0] is not gemms[0]:
        return None
    g = gemms[0]
    acc = g.C.buffer
    shape = [const_int(s) for s in acc.shape]
    if g.clear_accum or acc.scope != "fragment" or acc.dtype.name not in ("float32", "int32") or len(shape) != 2 \
            or None in shape:
        return None
    cleared = [s for s in prefix if isinstance(s, O.Fill) and s.dst.buffer is acc]
    if len(cleared) != 1 or E.const_value(cleared[0].value) != 0 or \
            any(c != 0 for c in (const_int(x) for x in cleared[0].dst.starts)) or \
            [const_int(x) for x in cleared[0].dst.extents] != shape:
        return None
    lets = {s.var for s in prefix if isinstance(s, S.LetStmt)}
    free = {v for e in (loop.start, loop.extent) for v in collect(E.as_expr(e), lambda n: isinstance(n, E.Var))}
    if free & (lets | set(block_vars)):  # every tile must have the same k-iterations
        return None
    return acc


def _whole(region, shape) -> bool:
    return all(const_int(x) == 0 for x in region.starts) and [const_int(x) for x in region.extents] == shape


def _clears(s, buf, shape) -> bool:
    """s is T.clear(buf) (a fill with 0 of the whole buffer)."""
    return isinstance(s, O.Fill) and s.dst.buffer is buf and E.const_value(s.value) == 0 and _whole(s.dst, shape)


def _fold_into(s, loc: Buffer, shape) -> Buffer | None:
    """acc when s is `for i, j in T.Parallel(*shape): acc[i, j] = acc[i, j] + loc[i, j]`
    (either operand order) with acc another buffer of loc's dtype, else None."""
    loops = []
    while isinstance(s, S.For) and s.kind == "parallel" and const_int(s.start) == 0:
        loops.append(s)
        s = s.body
    if not isinstance(s, S.BufferStore) or [const_int(f.extent) for f in loops] != shape:
        return None
    idx = tuple(f.var for f in loops)

    def at(e, buf):
        return isinstance(e, (E.BufferLoad, S.BufferStore)) and e.buffer is buf and len(e.indices) == len(idx) \
            and all(a is b for a, b in zip(e.indices, idx))

    acc, v = s.buffer, s.value
    if acc is loc or acc.dtype != loc.dtype or acc.scope != "fragment" or not at(s, acc) or \
            not isinstance(v, E.Binary) or v.op != "+":
        return None
    return acc if (at(v.a, acc) and at(v.b, loc)) or (at(v.a, loc) and at(v.b, acc)) else None


def _stmts(s) -> list:
    return list(s.stmts) if isinstance(s, S.SeqStmt) else [s]


def promoted_reduction(loop: S.For, body: list, gemms: list, prefix: list, suffix: list, block_vars):
    """(acc, loc) when the pipelined loop is a promoted k-reduction, else None: its body one
    T.gemm into `loc` (a float32 fragment) and then `if cond: acc += loc; T.clear(loc)` (cond
    reading neither), both cleared before the loop; after it, loc is only folded into acc
    (`acc += loc`, possibly under an `if`) before anything else reads acc. The sum acc + loc
    does not depend on where the promotions fall, so the k-iterations split as a plain
    reduction's do (stream-K), as long as every part folds its rest."""
    if len(gemms) != 1 or len(body) != 2 or body[0] is not gemms[0] or gemms[0].clear_accum:
        return None
    loc = gemms[0].C.buffer
    shape = [const_int(x) for x in loc.shape]
    if loc.scope != "fragment" or loc.dtype.name != "float32" or len(shape) != 2 or None in shape or \
            not _whole(gemms[0].C, shape):
        return None
    promo = body[1]
    then = _stmts(promo.then_case) if isinstance(promo, S.IfThenElse) and promo.else_case is None else []
    acc = _fold_into(then[0], loc, shape) if len(then) == 2 and _clears(then[1], loc, shape) else None
    if acc is None or {b.uid for b in buffers_used(promo.cond)} & {acc.uid, loc.uid}:
        return None
    if sum(_clears(s, loc, shape) for s in prefix) != 1 or sum(_clears(s, acc, shape) for s in prefix) != 1:
        return None
    reading = False  # acc read by something other than a fold of loc
    for s in suffix:
        used = {b.uid for b in buffers_used(s)}
        if loc.uid in used:
            if reading or not _folds(s, acc, loc, shape):
                return None
        elif acc.uid in used:
            reading = True
    return (acc, loc) if _same_k(loop, prefix, block_vars) else None


def _folds(s, acc: Buffer, loc: Buffer, shape) -> bool:
    """s is `acc += loc`, alone or under an `if` (no else) whose condition reads neither."""
    if isinstance(s, S.IfThenElse) and s.else_case is None and \
            not {b.uid for b in buffers_used(s.cond)} & {acc.uid, loc.uid}:
        s = s.then_case
    return len(_stmts(s)) == 1 and _fold_into(_stmts(s)[0], loc, shape) is acc


def _same_k(loop: S.For, prefix: list, block_vars) -> bool:
    """Every tile runs the same k-iterations: the loop's bounds read no block variable or let."""
    lets = {s.var for s in prefix if isinstance(s, S.LetStmt)}
    free = {v for e in (loop.start, loop.extent) for v in collect(E.as_expr(e), lambda n: isinstance(n, E.Var))}
    return not free & (lets | set(block_vars))


def fold_stmt(acc: Buffer, loc: Buffer) -> S.Stmt:
    """`for i, j in T.Parallel(*acc.shape): acc[i, j] = acc[i, j] + loc[i, j]` with fresh variables."""
    idx = tuple(E.Var(n, dt.int32) for n in ("tl_fold_i", "tl_fold_j"))
    st = S.BufferStore(acc, idx, E.BufferLoad(acc, idx, acc.dtype) + E.BufferLoad(loc, idx, loc.dtype))
    for v, n in reversed(list(zip(idx, acc.shape))):
        st = S.For(v, E.as_expr(0), E.as_expr(n), "parallel", st)
    return st


def stream_k_plan(loop: S.For, body: list, gemms: list, prefix: list, block_vars, num_sms: int, tiles,
                  suffix: list | None = None, fanin: int = MAX_FANIN):
    """A StreamK for the kernel, or None when its loop is not a plain k-reduction into a cleared
    accumulator nor (given the statements after the loop, `suffix`) a promoted one (then the
    persistent kernel keeps whole tiles), or when the shapes are static and the waves come out
    whole: no tiles left, or ranges of exactly one tile each. fanin: see MAX_FANIN."""
    acc, fold = plain_reduction(loop, body, gemms, prefix, block_vars), None
    if acc is None:
        pr = promoted_reduction(loop, body, gemms, prefix, suffix, block_vars) if suffix is not None else None
        if pr is None:
            return None
        acc, fold = pr[0], fold_stmt(*pr)
    n, ki = const_int(tiles), const_int(loop.extent)
    if n is not None and ki is not None and ranges(n, ki, num_sms, fanin) == n % num_sms:
        return None
    shape = [const_int(s) for s in acc.shape]
    ws = Buffer("tl_sk_ws", (num_sms, shape[0] * shape[1]), acc.dtype, "global")  # see AccStash
    flags = Buffer("tl_sk_flags", (num_sms,), dt.int32, "global")
    return StreamK(acc, ws, flags, fold=fold, fanin=fanin)


def stream_k_units(sk: StreamK, tiles, num_sms: int, ki, block_vars, coords):
    """(grid, wrap): wrap(body) runs body once per unit of the block -- its whole tiles, then
    its stream-K units -- with the block variables bound to the unit's tile (`coords(t)`), and
    sk.k0 / sk.k1 / sk.first bound. The grid is 1-d, so block_vars[0] is the block."""
    G = num_sms
    i64 = dt.int64
    cta, k0, k1, first = sk.cta, sk.k0, sk.k1, sk.first
    v = {n: E.Var(f"tl_sk_{n}", dt.int32) for n in ("rem", "whole", "total", "ranges", "s", "e", "n", "lt")}
    j = E.Var("tl_unit", dt.int32)
    kis = E.binop("max", ki, 1)

    def wide(x):
        return E.cast(i64, x)

    cap = E.binop("min", E.as_expr(G), v["rem"] * sk.fanin) if sk.fanin > 0 else E.as_expr(G)  # ranges()
    head = [
        S.LetStmt(cta, block_vars[0]),  # rebound per unit below
        S.LetStmt(v["rem"], simplify(tiles % G)),
        S.LetStmt(v["whole"], simplify(tiles // G)),
        S.LetStmt(v["total"], v["rem"] * ki),
        S.LetStmt(v["ranges"], E.select(  # ranges()
            E.compare(">=", v["rem"] * FULL_WAVE[1], G * FULL_WAVE[0]), v["rem"],
            E.binop("max", v["rem"], E.binop("min", cap, v["total"] // MIN_ITERS)))),
        S.LetStmt(v["s"], E.cast(dt.int32, wide(cta) * wide(v["total"]) // wide(E.binop("max", v["ranges"], 1)))),
        S.LetStmt(v["e"], E.cast(dt.int32, wide(cta + 1) * wide(v["total"]) // wide(E.binop("max", v["ranges"], 1)))),
        S.LetStmt(v["n"], E.select(E.compare("<", cta, v["ranges"]), (v["e"] - 1) // kis - v["s"] // kis + 1, 0)),
    ]
    in_sk = E.compare(">=", j, v["whole"])
    lt = v["lt"]
    tile = E.Var("tl_tile", dt.int32)
    # the block whose range holds iteration u: the largest b with b * total // ranges <= u
    owner = E.cast(dt.int32, (wide(lt * ki + 1) * wide(v["ranges"]) - 1) // wide(E.binop("max", v["total"], 1)))
    split = E.logical_and(in_sk, E.compare(">", k0, 0))  # (with k1 = KI: units with k1 < KI write partials)

    def wrap(body):
        inner = S.seq(
            S.LetStmt(lt, v["s"] // kis + (v["n"] - 1 - (j - v["whole"]))),  # the later tile first
            S.LetStmt(k0, E.select(in_sk, E.binop("max", v["s"] - lt * ki, 0), 0)),
            S.LetStmt(k1, E.select(in_sk, E.binop("min", v["e"] - lt * ki, ki), ki)),
            S.LetStmt(first, E.select(split, owner, cta)),
            S.LetStmt(tile, E.select(in_sk, v["whole"] * G + lt, cta + j * G)),
            *[S.LetStmt(bv, c) for bv, c in zip(block_vars, coords(tile))],
            body)
        return S.seq(*head, S.For(j, E.as_expr(0), v["whole"] + v["n"], "serial", inner, ()))

    return (E.as_expr(G),), wrap


def stream_k_finish(sk: StreamK, ki, suffix: list) -> S.Stmt:
    """After a unit's k-loop: a unit short of the tile's last iteration goes to the block's
    workspace slot and raises its flag; a unit ending the tile adds the partials of the blocks
    holding the rest (sk.first .. cta - 1), then runs the epilogue."""
    acc, ws, flags, cta = sk.acc, sk.ws, sk.flags, sk.cta

    def addr(buf, i):
        return E.call("address_of", E.BufferLoad(buf, (i,), buf.dtype), dtype=dt.uint64)

    partial = S.seq(sk.fold, AccStash(acc, ws, cta, add=False), S.BufferStore(sk.pending, (E.as_expr(0),), E.as_expr(1)))
    b = E.Var("tl_sk_from", dt.int32)
    fixup = S.For(b, sk.first, cta - sk.first, "serial", S.seq(
        Raw("if (tid < 32) tl::flag_wait_warp({0}); __syncthreads();", (addr(flags, b),)),
        AccStash(acc, ws, b, add=True),
        Raw("if (tid == 0) *{0} = 0;", (addr(flags, b),))))
    return S.seq(sk.publish(), S.IfThenElse(E.compare("<", sk.k1, ki), partial, S.seq(fixup, *suffix)))

"""Two chained gemms of a warp-specialized consumer kept in flight together (attention, sm_90a).

Takes: the consumers' k-loop of warp_specialize.py, at tile level, when its body is

    Pre  (writes only S: a mask fill or a clear)
    G0:  S = A0 @ K_k          (wgmma; K a staged tile, A0 written nowhere in the loop)
    Mid  (the softmax: row statistics and S; a cast of S into the register fragment P;
          a rescale of O by the row statistics)
    G1:  O += P @ V_k          (wgmma RS form; V another staged tile)

Gives: a prologue, a loop over k < n - 1 and an epilogue in which the tensor cores compute the
next tile's scores while the warps finish this one's output gemm and run the next softmax:

    prologue:  wait full[0]; Pre(0); G0(0); Soft(0); Cast(0)
    k < n - 1: wait full[k+1]; K = stage k+1; Pre(k+1); issue G0(k+1)
               V = stage k;    Resc(k);       issue G1(k)
               wgmma wait 1 (S of k+1 is final); Soft(k+1)
               wgmma wait 0 (O of k is final);  release stage k; Cast(k+1)
    epilogue:  V = stage n-1; Resc(n-1); G1(n-1); release stage n-1

The second wait is held (tl::warpgroup_wait_held, a never-taken branch before it): ptxas
otherwise places a wgmma wait by its own latency estimate of the batch, ~35 instructions after
P @ V's issue, and the whole softmax then stalls behind it (NVRTC 13.0, D64: every ex2 after the
wait; held: all 64 ex2 and the row sums between the two waits). Off: `tl.disable_wgmma_wait_hold`.
Held only where S, O and P take at most HOLD_MAX_REGS registers a consumer thread: the softmax
then runs with O and P pinned by the gemm in flight (D128 128x128: 160, ptxas spilled 260 bytes).

Mid is split into Soft (touches neither O nor P), Cast (writes only P) and Resc (writes only O,
reads neither S nor P); the new order (Soft, Cast, Resc) must not swap two statements that
conflict. The consumers hold two stages at once, so this needs a ring of >= 3 stages (with 2,
the load of stage k+2 could only start when stage k is released, just before it is needed).
Anything else keeps warp_specialize's loop (`chain_plan` returns None).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ... import dtypes as dt
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import BufferRegion
from ...ir.visitor import ReplaceBuffers, buffers_used, collect, substitute
from ...op import hopper as H
from ...op import tile_ops as O
from .raw import Raw

MIN_STAGES = 3
HOLD_MAX_REGS = 128  # S + O + P registers per consumer thread under which the held wait is used
_KNOWN_WRITES = (O.Copy, O.Fill, O.Reduce, O.CumSum)


@dataclass
class Chain:
    pre: list
    g0: O.Gemm
    soft: list
    cast: list
    resc: list
    g1: O.Gemm


def _touched(st) -> set:
    return {b.uid for b in buffers_used(st)}


def _writes(st) -> set | None:
    """uids st writes; None where st holds something this pass does not reason about."""
    if collect(st, lambda n: isinstance(n, (Raw, S.LetStmt, S.Allocate, O.Gemm, S.KernelLaunch))):
        return None
    out = {n.buffer.uid for n in collect(st, lambda n: isinstance(n, S.BufferStore))}
    for op in collect(st, lambda n: isinstance(n, S.TileOp)):
        if not isinstance(op, _KNOWN_WRITES):
            return None
        d = op.dst
        out.add(d.buffer.uid if isinstance(d, BufferRegion) else d.uid)
    return out


def _conflict(a, b) -> bool:
    wa, wb = _writes(a), _writes(b)
    return bool(wa & _touched(b)) or bool(wb & _touched(a))


def _written_fragments(stmts) -> tuple:
    """The register tiles `stmts` write: fenced before the wait that follows them, so that the
    softmax runs while the output gemm is in flight rather than after its wait."""
    out = {}
    for st in stmts:
        for n in collect(st, lambda n: isinstance(n, S.BufferStore) or isinstance(n, _KNOWN_WRITES)):
            b = n.buffer if isinstance(n, S.BufferStore) else n.dst.buffer if isinstance(n.dst, BufferRegion) else n.dst
            if b.scope == "fragment":
                out.setdefault(b.uid, b)
    return tuple(out.values())


def chain_plan(plan) -> Chain | None:
    """The chained-gemm form of `plan.body` (module docstring), or None."""
    if plan.stages < MIN_STAGES or len(plan.gemms) != 2 or plan.sk is not None or plan.cluster is not None \
            or plan.defer_epilogue or plan.timeline is not None or len(plan.views) != 2:
        return None
    n = const_int(plan.loop.extent)
    if n is not None and n < 1:
        return None
    body = list(plan.body)
    g0, g1 = plan.gemms
    if not body or body[-1] is not g1 or not any(b is g0 for b in body):
        return None
    i0 = next(i for i, b in enumerate(body) if b is g0)
    if g0.wg_wait != 0 or g1.wg_wait != 0 or g1.clear_accum:
        return None
    s, p, o = g0.C.buffer, g1.A.buffer, g1.C.buffer
    if not (s.scope == p.scope == o.scope == "fragment") or len({s.uid, p.uid, o.uid}) != 3:
        return None
    staged = set(plan.views)
    kx = [b.uid for b in (g0.A.buffer, g0.B.buffer) if b.uid in staged]
    vx = g1.B.buffer.uid
    a0 = g0.B.buffer if g0.A.buffer.uid in staged else g0.A.buffer
    if len(kx) != 1 or vx not in staged or kx[0] == vx or a0.uid in staged or g0.C.buffer.uid in staged:
        return None
    busy = {o.uid, p.uid} | staged
    others = body[:i0] + body[i0 + 1:-1]
    if any(_writes(st) is None or a0.uid in _writes(st) for st in others):
        return None
    pre = body[:i0]
    if any(not _writes(st) <= {s.uid} or _touched(st) & busy for st in pre):
        return None
    ranked = []  # (rank, statement): Soft 0, Cast 1, Resc 2
    for st in body[i0 + 1:-1]:
        w, t = _writes(st), _touched(st)
        if p.uid in w:
            if w != {p.uid} or t & ({o.uid} | staged):
                return None
            ranked.append((1, st))
        elif o.uid in t:
            if not w <= {o.uid} or t & ({s.uid, p.uid} | staged):
                return None
            ranked.append((2, st))
        elif t & busy:
            return None
        else:
            ranked.append((0, st))
    for i, (ri, a) in enumerate(ranked):
        for rj, b in ranked[i + 1:]:
            if ri > rj and _conflict(a, b):
                return None
    cast = [st for r, st in ranked if r == 1]
    if not cast:
        return None
    return Chain(pre, g0, [st for r, st in ranked if r == 0], cast, [st for r, st in ranked if r == 2], g1)


def chain_registers(ch: Chain, threads: int) -> int | None:
    """32-bit registers a consumer thread holds for S, O and P (16-bit P: two a register)."""
    total = 0
    for b in (ch.g0.C.buffer, ch.g1.C.buffer, ch.g1.A.buffer):
        n = 1
        for d in b.shape:
            d = const_int(d)
            if d is None:
                return None
            n *= d
        total += n * b.dtype.bytes // 4
    return total // threads


def hold_wait(plan, ch: Chain) -> bool:
    """Whether the output gemm's wait is held after the softmax (module docstring)."""
    regs = chain_registers(ch, plan.T)
    return plan.chain_hold and regs is not None and regs <= HOLD_MAX_REGS


def overlapped_consumer(plan, ch: Chain) -> S.Stmt:
    """The consumers' program for one tile (module docstring)."""
    loop, stages = plan.loop, plan.stages
    ko, start, n = loop.var, loop.start, loop.extent
    views = plan.views
    kx = next(b.uid for b in (ch.g0.A.buffer, ch.g0.B.buffer) if b.uid in views)
    vx = ch.g1.B.buffer.uid
    rb = ReplaceBuffers(views)

    def at(stmts, k):
        return [rb.visit(substitute(st, {ko: k})) for st in stmts]

    def stage_of(k, tag):
        it, stage = E.Var(f"tl_it{tag}", dt.int32), E.Var(f"tl_stage{tag}", dt.int32)
        lets = [S.LetStmt(it, simplify(substitute(plan.it_value(plan.cbase), {ko: k}))), S.LetStmt(stage, it % stages)]
        return lets, it, stage

    def issue(g, k):
        return rb.visit(substitute(replace(g, wg_wait=-1), {ko: k}))

    lets_p, it_p, st_p = stage_of(start, "_p")
    prologue = [*lets_p, plan.wait_full(it_p, st_p), plan.point_view(kx, st_p),
                *at(ch.pre + [ch.g0] + ch.soft + ch.cast, start)]
    nxt = ko + 1
    lets_n, it_n, st_n = stage_of(nxt, "_n")
    lets_c, _, st_c = stage_of(ko, "_c")
    body = S.seq(*lets_n, *lets_c, plan.wait_full(it_n, st_n), plan.point_view(kx, st_n),
                 *at(ch.pre, nxt), issue(ch.g0, nxt),
                 plan.point_view(vx, st_c), *at(ch.resc, ko), issue(ch.g1, ko),
                 H.WaitWgmma(1), *at(ch.soft, nxt),
                 H.WaitWgmma(0, fence_first=_written_fragments(ch.soft), hold=hold_wait(plan, ch)),
                 plan.release(st_c), *at(ch.cast, nxt))
    main = S.For(ko, start, simplify(n - 1), "serial", body, (), span=loop.span)
    last = simplify(start + n - 1)
    lets_e, _, st_e = stage_of(last, "_e")
    epilogue = [*lets_e, plan.point_view(vx, st_e), *at(ch.resc + [ch.g1], last), plan.release(st_e)]
    block = S.seq(*prologue, main, *epilogue)
    # one statement holding the whole k-loop (plan_smem plans around it as around a k-loop)
    return S.IfThenElse(E.compare(">", n, 0), block)

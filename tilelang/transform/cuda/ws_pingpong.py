"""Warpgroups of a warp-specialized attention consumer taking turns at the tensor cores (sm_90a).

Takes: warp_specialize's plan (`tl.enable_ws_pingpong`) for a consumer k-loop whose body is

    Pre  (statements before G0: a mask fill of S, or nothing)
    G0:  S = A0 @ K_k     (wgmma; K a staged tile)
    Mid  (the softmax and the rescale of O: register tiles only)
    G1:  O += P @ V_k     (wgmma, the last statement; V another staged tile)

run by W >= 2 consumer warpgroups that split both gemms by rows (wgmma grid W x 1), so each
warpgroup's softmax reads only its own rows. Staged tiles in separate full/empty groups
(warp_specialize._barrier_groups: K and V).

Gives: the same loop in which a warpgroup's turn -- its P @ V of tile k, then its scores gemm of
tile k + 1 -- is issued only after the previous warpgroup's turn (named barriers, round robin
0, 1, ..., W-1). A warpgroup's softmax then runs while the next warpgroup's gemms occupy the
tensor cores; without the turns the warpgroups drift into lockstep (they wait on the same
mbarriers) and the tensor cores idle during every softmax.

    for k:                                        wg = tid / 128
        wait full_K[k]; Pre(k)
        issue G0(k)                               (the turn of tile k - 1 ends here:)
        if k > start: pass the turn               bar.arrive  2 + (wg + 1) % W, 256
        wgmma wait 0 (S(k) and O(k - 1) final)
        release K[k]; if k > start: release V[k - 1]
        Mid(k); wait full_V[k]
        wait for the turn                         bar.sync    2 + wg, 256
        issue G1(k)                               (no wait: it runs on beside G0(k + 1))
    if n > 0: pass the turn; wgmma wait 0; release V[n - 1]

Every warpgroup waits for its turn once per iteration and passes it on once per iteration of
a tile; all warpgroups of a block run the same tiles with the same trip count (causal: it
varies per tile, not per warpgroup), so the turns never run short. Warpgroup W - 1 passes one
turn to warpgroup 0 as the consumers start (`turn_head`) and warpgroup 0 takes the one left
over when they finish (`turn_tail`): no barrier is left half-arrived when the block exits.
A warpgroup whose rows all land past the end of the outputs (ws_dead_rows.py) runs the same
loop without its statements: the waits, turns and releases only (opt-in); no consumers' block
barrier may sit in either branch, which `dead_rows_without_block_barrier` checks after the sync pass.
Named barrier 1 is the consumers' block barrier (codegen); the turns use 2 .. W + 1 (other ids
where the program uses these itself: barrier_ids.py). Nothing
in the loop may wait on barrier 1 (a warpgroup waiting for its turn would never arrive there):
Mid touches no shared memory, and `turns_without_block_barrier` checks the lowered loop.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...arith.simplify import const_int, simplify
from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import ReplaceBuffers, buffers_used, collect
from ...op import hopper as H
from ...op import tile_ops as O
from .gemm_paths import wgmma_ok, wgmma_rs_ok
from .raw import Raw

BASE = 2  # first named barrier id of the turns (0: __syncthreads, 1: the consumers' barrier)
WAIT, PASS = "tl::warpgroup_turn_wait", "tl::warpgroup_turn_pass"


@dataclass(frozen=True)
class PingPong:
    g0: int  # index in plan.body of the scores gemm
    g1: int  # index of the output gemm (the body's last statement)
    groups: int  # consumer warpgroups taking turns
    base: int = 2  # their named barrier ids base .. base + groups - 1 (barrier_ids.BarrierIds.turns)
    dead: object = None  # ws_dead_rows.DeadRows: a warpgroup whose rows no output keeps runs the loop without its work


AUTO_MIN_COLUMNS = 128  # `tl.enable_ws_pingpong` unset: two consumer warpgroups take turns where the
# output tile has this many columns; three or more take turns at any width (pingpong_plan)


def pingpong_plan(plan, min_columns: int = 0) -> PingPong | None:
    """The turns for `plan`'s consumer loop (module docstring), or None where they do not apply.
    min_columns: also None where two consumer warpgroups share an output gemm accumulator (attention's
    O) of fewer columns (the default's rule: on the H200, 2026-12-05, the turns gave D128 +2.8..6.8 %
    and causal +4.8..6.5 %, D64 at 128x128 -1..+2 %; on the H100, 2026-12-06, D64 at 128x128 -4.7 %
    and causal +4.6 %). Three or more warpgroups take turns at any width: D64 at 192x128 / 384
    threads ran 462.1 against 437.5 TFLOP/s, causal 366.9 against 350.8 (H100, 2026-12-06)."""
    W = plan.T // 128
    if W < 2 or plan.T % 128 or plan.groups is None or plan.info.mma_sync \
            or plan.defer_epilogue or len(plan.gemms) != 2:
        return None
    body = plan.body
    if len(collect(S.seq(*body), lambda n: isinstance(n, O.Gemm))) != 2:
        return None
    at = [next((i for i, b in enumerate(body) if b is g), None) for g in plan.gemms]
    if None in at or at[0] >= at[1] or at[1] != len(body) - 1:
        return None
    g0, g1 = body[at[0]], body[at[1]]
    cols = const_int(g1.C.buffer.shape[-1]) if g1.C.buffer.shape else None
    if min_columns and W == 2 and (cols is None or cols < min_columns):
        return None
    if any(g.wg_wait != 0 or not _row_split(g, plan.T, W) for g in (g0, g1)):
        return None
    in_flight = {g1.C.buffer.uid, g1.A.buffer.uid}  # G1(k - 1) runs on while Pre(k) and G0(k) are issued
    if g0.C.buffer.uid in in_flight or any(_uids(st) & in_flight for st in body[:at[0]]):
        return None
    for i, st in enumerate(body):  # shared memory between the gemms would need the consumers' barrier
        if i not in at and any(b.scope in ("shared", "shared.dyn") for b in buffers_used(st)):
            return None
    try:
        base = plan.info.barriers.turns(W)
    except LoweringError:  # the program's own named barriers leave no W free consecutive ids
        if min_columns:  # the default's choice: the loop without the turns
            return None
        raise
    return PingPong(at[0], at[1], W, base)


def _row_split(g: O.Gemm, T: int, W: int) -> bool:
    if g.A.buffer.scope == "fragment":
        return wgmma_rs_ok(g, T)[0] == W
    return wgmma_ok(g, T)[0] == (W, 1)


def _uids(st) -> set:
    return {b.uid for b in buffers_used(st)}


def turn_text(kind: str, W: int, base: int = BASE, wg: str = "tid >> 7") -> str:
    return f"{kind}<{base}, {W}>({wg});"


def turn_head(W: int, base: int = BASE) -> Raw:
    """Warpgroup W - 1 passes warpgroup 0 its first turn (once, as the consumers start)."""
    return Raw(f"if ((tid >> 7) == {W - 1}) {{{{ {turn_text(PASS, W, base)} }}}}")


def turn_tail(W: int, base: int = BASE) -> Raw:
    """Warpgroup 0 takes the turn warpgroup W - 1 passed last (once, as the consumers finish)."""
    return Raw(f"if ((tid >> 7) == 0) {{{{ {turn_text(WAIT, W, base)} }}}}")


def pingpong_consumer(plan, pp: PingPong) -> S.Stmt:
    """The consumers' k-loop of one tile with the turns (module docstring)."""
    loop, stages, it, stage, ko = plan.loop, plan.stages, plan.it, plan.stage, plan.loop.var
    groups, W = plan.groups, pp.groups
    rb = ReplaceBuffers(plan.views)
    later = [g for g, (_, _, last) in enumerate(groups) if last == pp.g1]  # released an iteration late
    first_iter = E.compare(">", ko, loop.start)

    def release_prev(g):
        return Raw(f"if ({{0}}) {{{{ {plan.arrive(f'({{1}} + {stages - 1}) % {stages}', g)} }}}}", (first_iter, it))

    def k_loop(work: bool, start, extent) -> S.For:
        """Iterations [start, start + extent); without `work` only their waits, turns and releases."""
        stmts = []
        for i, st in enumerate(plan.body):
            stmts += [plan.wait_full(it, stage, g) for g, (_, first, _) in enumerate(groups) if first == i]
            if i == pp.g1:
                stmts.append(Raw(turn_text(WAIT, W, pp.base)))
            if work:
                stmts.append(rb.visit(replace(st, wg_wait=-1) if i in (pp.g0, pp.g1) else st))
            if i == pp.g0:
                stmts += [Raw(f"if ({{0}}) {{{{ {turn_text(PASS, W, pp.base)} }}}}", (first_iter,))]
                stmts += [H.WaitWgmma(0)] if work else []
                stmts += [release_prev(g) for g in later]
            stmts += [plan.release(stage, g) for g, (_, _, last) in enumerate(groups) if last == i and i != pp.g1]
        views = [plan.point_view(x, stage) for x in plan.views] if work else []
        body = S.seq(S.LetStmt(it, plan.it_value(plan.cbase)), S.LetStmt(stage, it % stages), *views, *stmts)
        return S.For(ko, start, extent, "serial", body, (), span=loop.span)

    last = simplify(loop.extent - 1)
    if plan.persistent:
        last = E.BufferLoad(plan.cbase, (E.as_expr(0),), plan.it.dtype) + last
    n = const_int(simplify(loop.extent))

    def ran(st):  # (a constant trip count needs no test)
        return st if n is not None and n > 0 else S.IfThenElse(E.compare(">", loop.extent, 0), st)

    # the wait is unconditional: behind `if (extent > 0)` (a causal loop's trip count), ptxas saw a
    # path to the epilogue's reads of the accumulator with the last P @ V possibly in flight and
    # injected waits of its own (C7517; at 192x64, three warpgroups, also C7514: every wgmma serialized)
    def tail(work: bool):
        return [ran(Raw(turn_text(PASS, W, pp.base)))] + ([H.WaitWgmma(0)] if work else []) + \
            [ran(S.seq(*[Raw(plan.arrive(f"({{0}}) % {stages}", g), (simplify(last),)) for g in later]))]

    if pp.dead is None:
        return S.seq(k_loop(True, loop.start, loop.extent), *tail(True))
    # a dead warpgroup runs the loop of waits. Its index is broadcast from lane 0 (on `tid >> 7` ptxas took
    # the branch for a divergent path and serialized every wgmma, C7518), and the last wgmma wait stays
    # in the working branch (after the branches, C7515: every wgmma serialized)
    wg = E.Call("extern:tl::warpgroup_id", (), ko.dtype)
    return S.IfThenElse(pp.dead.live(wg), S.seq(k_loop(True, loop.start, loop.extent), *tail(True)),
                        S.seq(k_loop(False, loop.start, loop.extent), *tail(False)))


def turns_without_block_barrier(body: S.Stmt) -> bool:
    """False where a loop holding a turn wait also holds a consumers' block barrier (a deadlock:
    the warpgroup waiting for its turn never reaches the block barrier the others wait at)."""
    for loop in collect(body, lambda n: isinstance(n, S.For)):
        if not _waits_directly(loop.body):  # (the tile loop around the k-loop holds the epilogue's barriers)
            continue
        if _has_block_barrier(loop.body):
            return False
    return True


def dead_rows_without_block_barrier(body: S.Stmt) -> bool:
    """False where a branch on the warpgroup index (ws_dead_rows: the working loop and the loop of
    waits) holds a consumers' block barrier, which a warpgroup in the other branch never reaches."""
    for br in collect(body, lambda n: isinstance(n, S.IfThenElse) and _on_warpgroup_id(n.cond)):
        if _has_block_barrier(br):
            return False
    return True


def _has_block_barrier(st) -> bool:
    """st holds a barrier of the whole block or of all consumer warpgroups (not a warpgroup's own)."""
    raws = collect(st, lambda n: isinstance(n, Raw))
    return any("__syncthreads();" in r.fmt or "barrier_sync<" in r.fmt for r in raws)


def _on_warpgroup_id(cond) -> bool:
    def wg(n):
        return isinstance(n, E.Call) and n.op == "extern:tl::warpgroup_id"

    return bool(collect(cond, wg))


def _waits_directly(st) -> bool:
    """st holds a turn wait outside any loop nested in it."""
    if isinstance(st, Raw):
        return WAIT in st.fmt
    if isinstance(st, S.For):
        return False
    return any(_waits_directly(c) for c in _children(st))


def _children(st) -> list:
    if isinstance(st, S.SeqStmt):
        return list(st.stmts)
    if isinstance(st, S.IfThenElse):
        return [st.then_case] + ([st.else_case] if st.else_case is not None else [])
    body = getattr(st, "body", None)
    return [body] if isinstance(body, S.Stmt) else []

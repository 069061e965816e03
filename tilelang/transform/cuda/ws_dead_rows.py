"""Consumer warpgroups whose rows all fall past the end of the output skip their k-loop work (sm_90a).

Takes: a ping-pong consumer plan (ws_pingpong.PingPong: W consumer warpgroups splitting both
gemms by rows, warpgroup w owning rows [w * M / W, (w + 1) * M / W) of the M-row tiles) and the
kernel statements after its k-loop (the epilogue).

Gives: `dead_rows(plan, pp)`, a DeadRows whose `live(wg)` is a condition on the warpgroup index
that is false only where every row warpgroup wg computes in the k-loop reaches global memory at
rows past the end of the tensors the epilogue writes -- rows a T.copy drops. Attention's last
query block of a sequence that is not a multiple of block_M is the case: at S = 2048 and
block_M = 192 its third warpgroup's 64 rows start at 2048, and without this it ran the longest
k-loop of the causal kernel (16 tiles) for rows nobody keeps. A dead warpgroup still waits for
each stage, releases it and takes and passes its turns (ws_pingpong.pingpong_consumer builds
that loop without the statements of the body). Opt-in (`tl.enable_ws_dead_rows`): on the H100
(2026-12-06, D64 causal 192x128, 7 interleaved rounds) it measured 367.7 TFLOP/s against 369.1
without it, and a consumers' block barrier inside its branch hung D128 (now rebuilt without it,
ws_pingpong.dead_rows_without_block_barrier).

None where the epilogue is not only these forms, each over the M-row tiles the loop computes:
  - T.Parallel loops over rows i (outermost, 0 .. M) storing to fragments / shared tiles at row i
    and reading them only at row i (global reads allowed; no global stores, no tile ops);
  - T.copy of a whole M-row tile into another (fragment / shared);
  - T.copy of a whole M-row tile to a global region whose first non-unit dim has extent M: row r
    goes to row `off + r` of a dim of size n, dropped where `off + r >= n`.
and where the loop's other statements (the mask fill, the softmax) touch fragments and locals only.
The row split itself is a layout fact: `rows_owned` checks it after layout inference
(backend/cuda/pipeline.py builds again without this where it does not hold).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...arith.ranges import Ranges
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import buffers_used, collect
from ...op import tile_ops as O

LOCAL_SCOPES = ("fragment", "local", "local.var")


@dataclass(frozen=True)
class DeadRows:
    rows: int  # rows of the tile each consumer warpgroup owns
    outputs: tuple  # ((off, n), ...): row r of the tile lands at row off + r of a dim of size n
    tiles: frozenset  # uids of the M-row fragments the loop and the epilogue compute

    def live(self, wg) -> E.Expr:
        """Warpgroup wg has a row some output keeps."""
        cond = None
        for off, n in self.outputs:
            c = E.compare("<", simplify(off + self.rows * wg), n)
            cond = c if cond is None else E.logical_or(cond, c)
        return cond


def dead_rows(plan, pp) -> DeadRows | None:
    """The DeadRows of `plan`'s ping-pong loop (module docstring), or None."""
    if plan.guard is not None or plan.sk is not None:
        return None
    g1 = plan.body[pp.g1]
    M = const_int(g1.C.buffer.shape[0]) if g1.C.buffer.shape else None
    if M is None or M % pp.groups:
        return None
    for i, st in enumerate(plan.body):  # the statements a dead warpgroup leaves out
        if i in (pp.g0, pp.g1):
            continue
        if any(b.scope not in LOCAL_SCOPES for b in buffers_used(st)):
            return None
    tiles = {b.uid for i, st in enumerate(plan.body) for b in buffers_used(st)
             if b.scope == "fragment" and b.shape and const_int(b.shape[0]) == M}
    outputs = []
    for st in plan.stmts[plan.li + 1:]:
        if isinstance(st, O.Copy):
            out = _copy_rows(st, M)
            if out is None:
                return None
            if out is not True:
                outputs.append(out)
        elif isinstance(st, S.For):
            if not _row_loop(st, M):
                return None
        elif not isinstance(st, S.Evaluate) or collect(st, lambda n: isinstance(n, (E.BufferLoad, E.Call))):
            return None
        tiles |= {b.uid for b in buffers_used(st) if b.scope == "fragment"}
    if not outputs or not _some_dead(plan, M // pp.groups * (pp.groups - 1), outputs):
        return None
    return DeadRows(M // pp.groups, tuple(outputs), frozenset(tiles))


def _some_dead(plan, last_row: int, outputs) -> bool:
    """The last warpgroup's first row can land past the end of every output for some block (the grid's
    ranges do not prove it never does; tiles of S / block_M rows with no remainder have no dead one)."""
    r = Ranges()
    r.kernel(plan.k)
    for st in plan.stmts[:plan.li]:
        if isinstance(st, S.LetStmt):
            r.let(st.var, st.value)
    for off, n in outputs:
        hi, size = r.bounds(simplify(off + last_row)), const_int(n)
        if hi is not None and size is not None and hi[1] < size:
            return False
    return True


def _whole(region, M) -> bool:
    b = region.buffer
    return b.scope != "global" and bool(b.shape) and const_int(b.shape[0]) == M and all(
        const_int(s) == 0 and const_int(simplify(e - d)) == 0 for (s, e), d in zip(region.ranges, b.shape))


def _copy_rows(c: O.Copy, M: int):
    """True for a whole-tile copy between on-chip M-row tiles, (off, n) for one to global, else None."""
    if not _whole(c.src, M):
        return None
    dst = c.dst
    if dst.buffer.scope != "global":
        return True if _whole(dst, M) else None
    wide = [(d, s) for d, (s, e) in enumerate(dst.ranges) if const_int(e) != 1]
    if not wide or const_int(dst.ranges[wide[0][0]][1]) != M:
        return None
    d, off = wide[0]
    return off, dst.buffer.shape[d]


def _row_loop(loop: S.For, M: int) -> bool:
    """A loop nest over rows i whose stores and on-chip reads are all at row i (module docstring)."""
    if const_int(loop.start) != 0 or const_int(loop.extent) != M:
        return False
    i = loop.var
    ok_stmt = (S.For, S.SeqStmt, S.BufferStore, S.LetStmt, S.IfThenElse)
    if collect(loop, lambda n: isinstance(n, S.Stmt) and not isinstance(n, ok_stmt)):
        return False

    def at_row(idx) -> bool:
        return bool(idx) and isinstance(idx[0], E.Var) and idx[0] is i

    for st in collect(loop, lambda n: isinstance(n, S.BufferStore)):
        if st.buffer.scope == "global" or not st.buffer.shape or const_int(st.buffer.shape[0]) != M \
                or not at_row(st.indices):
            return False
    for ld in collect(loop, lambda n: isinstance(n, E.BufferLoad)):
        if ld.buffer.scope != "global" and not at_row(ld.indices):
            return False
    return True


def rows_owned(info, tiles, W: int, M: int) -> bool:
    """Each fragment in `tiles` keeps row r in consumer warpgroup r // (M / W) only (the split
    dead_rows assumes), by the layouts layout inference chose."""
    rows = M // W
    for uid in tiles:
        reg = info.regs.get(uid)
        lay = info.reg_layouts.get(reg.uid) if reg is not None else None
        if lay is None or not hasattr(lay, "coords"):
            return False
        for tid in range(W * 128):
            for slot in range(lay.nlocal):
                row = lay.coords(tid, slot)[0]
                if not isinstance(row, int) or row // rows != tid // 128:
                    return False
    return True
